#!/usr/bin/env python3
"""(serve-kernel) makes a running program a Jupyter kernel, as IPython's embed_kernel does: a
client connects with the connection file it wrote (as `jupyter console --existing FILE` does),
its cells run in the program (its globals change), output streams back, errors, completion and
inspection work, and a shutdown ends the kernel while the program goes on and ends normally,
removing the file (docs/attach.md).

usage: kernel.py PURPLE     (purple-kernel sits beside it)"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402
from jupyter_client import BlockingKernelClient  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernel"))
import messages  # noqa: E402
from messages import of_type  # noqa: E402

purple = os.path.abspath(sys.argv[1])
tmp = tempfile.mkdtemp(prefix="purple-serve-kernel-")
connection = os.path.join(tmp, "kernel-job.json")
script = os.path.join(tmp, "job.purple")
with open(script, "w") as f:
    f.write(f"""(define x 41)
(define (helper-of-the-program n) (* n 2))
(serve-kernel :connection-file "{connection}")
(display (list 'after-kernel x (helper-of-the-program 1)))
(newline)
""")
program = subprocess.Popen([purple, script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=dict(os.environ, TMPDIR=tmp))
atexit.register(lambda: (program.poll() is None and program.kill(), shutil.rmtree(tmp, ignore_errors=True)))
deadline = time.time() + 120
while time.time() < deadline and program.poll() is None and not os.path.exists(connection):
    time.sleep(0.1)
check("serve-kernel writes the connection file", os.path.exists(connection), program.stderr.read() if program.poll() is not None else "")
check("... of mode 0600 (its key lets a client run code)", os.stat(connection).st_mode & 0o777 == 0o600, oct(os.stat(connection).st_mode))

kc = BlockingKernelClient(connection_file=connection)
kc.load_connection_file()
kc.start_channels()
kc.wait_for_ready(timeout=60)


def run(code, timeout=60):
    return messages.run(kc, code, timeout)


reply, msgs = run('(set! x (+ x 1))\n(display "streamed from the program")\n(helper-of-the-program x)')
results = of_type(msgs, "execute_result")
streams = "".join(c["text"] for c in of_type(msgs, "stream") if c["name"] == "stdout")
check("a cell runs in the program, with its globals and procedures",
      reply["status"] == "ok" and len(results) == 1 and results[0]["data"]["text/plain"] == "84", str(msgs))
check("its output streams to the client", "streamed from the program" in streams, streams)
reply, msgs = run("(define y 1)")
check("a cell whose last form has no value shows none", reply["status"] == "ok" and not of_type(msgs, "execute_result"))
reply, msgs = run("(car 5)")
check("an error reply with Purple's message", reply["status"] == "error" and "car" in reply["evalue"], str(reply))
kc.complete("(helper-of-the", 14)
completion = kc.get_shell_msg(timeout=30)["content"]
check("completion knows the program's names", "helper-of-the-program" in completion.get("matches", []), str(completion))
kc.inspect("tensor-matmul", 5)
inspect = kc.get_shell_msg(timeout=30)["content"]
check("inspection shows documentation", inspect.get("found") and "matrix" in inspect["data"]["text/plain"].lower(), str(inspect))
def consoled_quit():
    """Whether the console's quit ended the kernel (the program then leaves serve-kernel)."""
    try:
        program.wait(timeout=30)
        return True
    except subprocess.TimeoutExpired:
        return False


# jupyter console --existing FILE, typed into a tmux terminal as a person would.
quit_sent = False
console = shutil.which("jupyter-console")
if not shutil.which("tmux") or not console:
    print("SKIP: jupyter console --existing: needs tmux and jupyter-console")
else:
    server = f"purple-existing-{os.getpid()}"
    console_python = open(console).readline()[2:].strip()
    console_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernel", "console.py")
    env = dict(os.environ, HOME=tmp, JUPYTER_RUNTIME_DIR=os.path.join(tmp, "runtime"), IPYTHONDIR=os.path.join(tmp, "ipython"),
               JUPYTER_CONFIG_DIR=os.path.join(tmp, "config"))

    def tmux(*args):
        return subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True, env=env)

    def screen_shows(pattern, seconds=60):
        end = time.time() + seconds
        while time.time() < end:
            if pattern in tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "console").stdout:
                return True
            time.sleep(0.3)
        return False

    tmux("new-session", "-d", "-s", "console", "-x", "160", "-y", "50",
         f"{console_python} {console_py} --existing {connection}; sleep 30")
    check("jupyter console --existing FILE connects", screen_shows("In [1]:", 120),
          tmux("capture-pane", "-p", "-t", "console").stdout)
    tmux("send-keys", "-t", "console", "(list 'from-console (helper-of-the-program 21))", "Enter")
    check("... and its cells run in the program", screen_shows("(from-console 42)"),
          tmux("capture-pane", "-p", "-t", "console").stdout)
    tmux("send-keys", "-t", "console", "quit", "Enter")
    quit_sent = True
    check("`quit` there shuts the kernel down", screen_shows("Shutting down kernel"),
          tmux("capture-pane", "-p", "-t", "console").stdout)
    tmux("kill-server")

if not (quit_sent and consoled_quit()):
    kc.shutdown()
kc.stop_channels()
try:
    out, err = program.communicate(timeout=60)
except subprocess.TimeoutExpired:
    program.kill()
    out, err = program.communicate()
check("after the kernel's shutdown the program goes on and ends normally", program.returncode == 0, err)
check("... with what the cells changed", b"(after-kernel 42 2)" in out, out)
check("... and the connection file is removed", not os.path.exists(connection))
check("... and so is the kernel's private socket", not any(n.startswith("purple-kernel-") for n in os.listdir(tmp)), os.listdir(tmp))
finish()
