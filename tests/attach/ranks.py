#!/usr/bin/env python3
"""`purple-run --listen-dir DIR` gives each rank DIR/rank-N.sock; `purple --attach DIR --all -e`
evaluates on every rank at once (so a collective in it meets all of them) and prints the answers
by rank; the job then ends normally and its sockets are gone (docs/attach.md).

usage: ranks.py PURPLE-RUN PURPLE"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402

run, purple = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="purple-ranks-")
listen = os.path.join(tmp, "job")
job = subprocess.Popen([run, "--nproc-per-node", "2", "--listen-dir", listen, os.path.join(here, "ranks.purple")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
sockets = [os.path.join(listen, f"rank-{r}.sock") for r in range(2)]
atexit.register(lambda: (job.poll() is None and job.kill(), shutil.rmtree(tmp, ignore_errors=True)))
deadline = time.time() + 120
while time.time() < deadline and job.poll() is None and not all(os.path.exists(s) for s in sockets):
    time.sleep(0.1)
check("each rank serves DIR/rank-N.sock", all(os.path.exists(s) for s in sockets), os.listdir(tmp))


def attach(*args):
    r = subprocess.run([purple, "--attach", *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


rc, out, err = attach(listen, "--all", "-e", "(list 'rank (my-rank))")
check("--all: every rank answers, by rank", rc == 0 and out == "[rank0]: (rank 0)\n[rank1]: (rank 1)\n", f"{out!r} {err!r}")
rc, out, err = attach(listen, "--all", "-e", "(tensor->list (dist-all-reduce (tensor-ones 2)))")
check("--all: a collective meets every rank", rc == 0 and out == "[rank0]: (2.0 2.0)\n[rank1]: (2.0 2.0)\n", f"{out!r} {err!r}")
rc, out, err = attach(listen, "--all", "-e", "(if (= (my-rank) 1) (car '()) 'fine)")
check("--all: a rank's error is printed under its rank, exit 1",
      rc == 1 and out == "[rank0]: fine\n" and "[rank1]: Error: car" in err, f"{rc} {out!r} {err!r}")
rc, out, err = attach(sockets[1], "-e", "(my-rank)")
check("one rank through its own socket", rc == 0 and out == "1\n", f"{out!r} {err!r}")
rc, out, err = attach(listen, "-e", "1")
check("a directory without --all: told how", rc == 2 and "--all" in err, err)
rc, out, err = attach(listen, "--all", "-e", "(set! stop? #t)")
try:
    out, err = job.communicate(timeout=120)
except subprocess.TimeoutExpired:
    job.kill()
    out, err = job.communicate()
check("the job ends normally", job.returncode == 0, err)
check("... every rank saw the change", b"(rank 0 ends)" in out and b"(rank 1 ends)" in out, out)
check("... and its sockets are gone", not any(os.path.exists(s) for s in sockets))
finish()
