# A group of one Purple rank and one python3-torch rank, both ways round: Purple serves the store
# as rank 0 and Python joins it, then Python is rank 0 and Purple joins. Then Purple ranks started
# by Python's torchrun. Usage:
#   python3 python-peer.py PURPLE
import os, socket, subprocess, sys

purple = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

status = 0
for purple_rank in (0, 1):
    # USE_LIBUV=0: torch 2.4+ asks for a libuv TCP store by default, and Debian's build has none
    # (1.13 ignores the variable).
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2", USE_LIBUV="0")
    for k in ("TORCHELASTIC_USE_AGENT_STORE", "PURPLE_RUN_FAILURE_FILE"):
        env.pop(k, None)
    p = subprocess.Popen([purple, os.path.join(here, "python-peer.purple")],
                         env=dict(env, RANK=str(purple_rank), LOCAL_RANK="0"))
    q = subprocess.Popen([sys.executable, os.path.join(here, "python-peer-rank.py")],
                         env=dict(env, RANK=str(1 - purple_rank), LOCAL_RANK="0"))
    try:
        rp, rq = p.wait(timeout=120), q.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill(); q.kill()
        print("FAIL: the mixed group hung (Purple rank %d)" % purple_rank)
        sys.exit(1)
    print("Purple as rank %d: purple exit %d, python exit %d" % (purple_rank, rp, rq))
    status = status or rp or rq
# torchrun starting Purple ranks: its agent serves the store (TORCHELASTIC_USE_AGENT_STORE)
env = {k: v for k, v in os.environ.items() if k not in ("TORCHELASTIC_USE_AGENT_STORE", "PURPLE_RUN_FAILURE_FILE")}
# torchrun is `python3 -m torch.distributed.run`. From torch 2.4 its static rendezvous asks for a
# libuv TCP store whatever USE_LIBUV says, and Debian's torch has no libuv: there the agent's store
# is made without it (the same protocol; Purple's ranks connect to it as clients either way).
TORCHRUN = """
import sys, torch.distributed.elastic.rendezvous.static_tcp_rendezvous as s
made = s.TCPStore
s.TCPStore = lambda *a, **k: made(*a, **dict(k, use_libuv=False))
from torch.distributed.run import main
sys.argv[0] = "torchrun"
sys.exit(main())
"""
import torch
needs_shim = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 4)
torchrun = [sys.executable, "-c", TORCHRUN] if needs_shim else ["/usr/bin/torchrun"]
try:
    r = subprocess.run(torchrun + ["--nproc_per_node", "2", "--master_port", str(free_port()),
                        # Debian's torchrun 1.13 on Python >= 3.11 fails on its default "--redirects 0 --tee 0"
                        # (enum.Flag no longer iterates the zero member): redirect stdout and tee it back
                        "--redirects", "1", "--tee", "1", "--no_python",
                        purple, os.path.join(here, "groups.purple")], env=env, timeout=180, capture_output=True, text=True)
    ok = r.returncode == 0 and r.stdout.count(" 0 failed") == 2
    print("torchrun --no_python with 2 Purple ranks:", "ok" if ok else "FAILED")
    if not ok:
        print(r.stdout[-3000:], r.stderr[-3000:])
        status = 1
except subprocess.TimeoutExpired:
    print("FAIL: torchrun with Purple ranks hung")
    status = 1
sys.exit(1 if status else 0)
