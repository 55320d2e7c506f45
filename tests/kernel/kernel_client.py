#!/usr/bin/env python3
"""Drives purple-kernel with python3-jupyter-client, as a notebook does: kernel_info, execute
with streamed output (stdout and stderr arrive while the cell still runs), results, errors with
the Purple message and backtrace, rich display (HTML tables, PNG plots, updatable displays, a
user record's own representation), complete, inspect, is_complete, interrupt during an endless
loop and during training (the kernel lives on), restart (state is gone) and shutdown.

usage: kernel_client.py PURPLE     (the purple command; purple-kernel sits beside it)"""
import base64
import os
import subprocess
import sys
import tempfile
import time

purple = os.path.abspath(sys.argv[1])
tmp = tempfile.mkdtemp(prefix="purple-kernel-test-")
subprocess.run([purple, "--install-kernel", "--prefix", tmp], check=True, stdout=subprocess.DEVNULL)
os.environ["JUPYTER_PATH"] = os.path.join(tmp, "share", "jupyter")
os.environ.setdefault("JUPYTER_RUNTIME_DIR", os.path.join(tmp, "runtime"))

from jupyter_client import KernelManager  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import messages  # noqa: E402


km = KernelManager(kernel_name="purple")
km.start_kernel(cwd=tmp)
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=120)


def collect(msg_id, timeout=120, on_message=None):
    return messages.collect(kc, msg_id, timeout, on_message)


def run(code, timeout=120):
    return messages.run(kc, code, timeout)


of_type = messages.of_type


def stream_text(msgs, name):
    return "".join(c["text"] for c in of_type(msgs, "stream") if c["name"] == name)


# ---- kernel_info ----------------------------------------------------------------------------
kc.kernel_info()
info = kc.get_shell_msg(timeout=30)["content"]
lang = info.get("language_info", {})
check("kernel_info: Scheme language info", lang.get("name") == "scheme" and lang.get("codemirror_mode") == "scheme"
      and lang.get("pygments_lexer") == "scheme" and lang.get("file_extension") == ".purple", str(info))
check("kernel_info: implementation and banner", info.get("implementation") == "purple" and "Purple" in info.get("banner", ""), str(info))

# ---- execute ----------------------------------------------------------------------------------
reply, msgs = run("(define (my-square x) (* x x))\n(my-square 12)")
results = of_type(msgs, "execute_result")
check("execute: ok and execute_result", reply["status"] == "ok" and results and results[0]["data"]["text/plain"] == "144",
      f"{reply} {results}")
check("execute: execution_count", isinstance(reply.get("execution_count"), int) and reply["execution_count"] >= 1, str(reply))
reply, msgs = run("(define unused 1)")
check("execute: a definition gives no result", reply["status"] == "ok" and not of_type(msgs, "execute_result"), str(msgs))

# stdout and stderr are streamed while the cell runs: the cell waits for a file that this test
# creates only once the first line has arrived.
go = os.path.join(tmp, "go")
code = f"""(display "first line") (newline)
(display "to stderr" (current-error-port)) (newline (current-error-port))
(let loop () (unless (file-exists? "{go}") (loop)))
(display "after the wait") (newline)
'done"""
msg_id = kc.execute(code)
seen = {"first": False, "err": False}


def on_msg(m):
    if m["msg_type"] == "stream":
        if "first line" in m["content"]["text"] and m["content"]["name"] == "stdout":
            seen["first"] = True
        if "to stderr" in m["content"]["text"] and m["content"]["name"] == "stderr":
            seen["err"] = True
        if seen["first"] and not os.path.exists(go):
            open(go, "w").close()


msgs = collect(msg_id, timeout=60, on_message=on_msg)
check("execute: stdout streamed while the cell runs", seen["first"] and os.path.exists(go), str(msgs[:4]))
check("execute: stderr streamed as stderr", seen["err"], str(msgs))
check("execute: output after the wait and the result",
      "after the wait" in stream_text(msgs, "stdout") and of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "done",
      str(msgs))
kc.get_shell_msg(timeout=30)

# ---- errors ----------------------------------------------------------------------------------
reply, msgs = run("(define (head xs) (car xs))\n(display \"before\")\n(head '())")
errors = of_type(msgs, "error")
check("error: reply status and ename", reply["status"] == "error" and reply.get("ename") == "type-error", str(reply))
check("error: Purple message", "car: argument 1 must be a pair" in reply.get("evalue", ""), str(reply))
trace = "\n".join(errors[0]["traceback"]) if errors else ""
check("error: error message on iopub with backtrace naming the cell and line",
      errors and "in car at In[" in trace and ":1:19" in trace, trace)
check("error: output before the error kept", "before" in stream_text(msgs, "stdout"), str(msgs))
reply, msgs = run("(+ 1")
check("error: a read error", reply["status"] == "error" and reply.get("ename") == "read-error", str(reply))
reply, msgs = run("(+ 2 2)")
check("error: the kernel goes on", of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "4", str(msgs))
# A cell is read whole before it runs, as IPython parses one: a syntax error on line 3 runs
# nothing of lines 1 and 2.
reply, msgs = run('(define counter 1)\n(display "ran")\n(+ 1 ))')
check("error: a syntax error on line 3 is reported", reply["status"] == "error" and reply.get("ename") == "read-error"
      and ":3:" in reply.get("evalue", ""), str(reply))
check("error: ... and lines 1-2 did not run", "ran" not in stream_text(msgs, "stdout"), str(msgs))
reply, msgs = run("counter")
check("error: a bare unbound variable names its cell, line and column",
      reply.get("ename") == "unbound-variable" and ":1:1: unbound variable: counter" in reply.get("evalue", ""), str(reply))

# ---- rich display ----------------------------------------------------------------------------
reply, msgs = run("(tensor-arange 12 :dtype 'float32)")
data = of_type(msgs, "execute_result")[0]["data"]
check("display: a tensor as text and an HTML table", "text/plain" in data and "<table" in data.get("text/html", ""), str(data))
reply, msgs = run("(tensor-randn 500 500)")
html = of_type(msgs, "execute_result")[0]["data"].get("text/html", "")
check("display: a large tensor's table is abbreviated", html.count("<tr>") < 20 and "&vellip;" in html, str(len(html)))
reply, msgs = run("(show (html \"<b>bold</b>\")) (show (markdown \"*it*\")) 'shown")
shown = of_type(msgs, "display_data")
check("display: show sends display_data", len(shown) == 2 and shown[0]["data"].get("text/html") == "<b>bold</b>"
      and shown[1]["data"].get("text/markdown") == "*it*", str(shown))
reply, msgs = run("(image (tensor-rand 3 16 16))")
data = of_type(msgs, "execute_result")[0]["data"] if of_type(msgs, "execute_result") else {}
png = base64.b64decode(data.get("image/png", "")) if data else b""
check("display: an image tensor as a PNG picture", png[:8] == b"\x89PNG\r\n\x1a\n", str(data)[:200])
reply, msgs = run("(plot (list 1 4 9 16 25) :title \"squares\")")
data = of_type(msgs, "execute_result")[0]["data"] if of_type(msgs, "execute_result") else {}
png = base64.b64decode(data.get("image/png", "")) if data else b""
check("display: a plot inline as image/png", reply["status"] == "ok" and png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000,
      f"{reply} {str(data)[:200]}")
reply, msgs = run('(show "first" :id "status") (update-display "second" "status") (update-display "third" "status")')
shown = of_type(msgs, "display_data")
updates = of_type(msgs, "update_display_data")
check("display: show :id then update-display updates in place",
      len(shown) == 1 and shown[0]["transient"].get("display_id") == "status" and len(updates) == 2
      and updates[-1]["data"]["text/plain"] == '"third"' and updates[-1]["transient"].get("display_id") == "status",
      f"{shown} {updates}")
reply, msgs = run("""(define-record-type point (make-point x y) point? (x point-x) (y point-y))
(define-representation point?
  (lambda (p) (list (list "text/html" (string-append "<i>point " (number->string (point-x p)) "," (number->string (point-y p)) "</i>")))))
(make-point 3 4)""")
data = of_type(msgs, "execute_result")[0]["data"] if of_type(msgs, "execute_result") else {}
check("display: a user record chooses its own representation",
      data.get("text/html") == "<i>point 3,4</i>" and "text/plain" in data, str(data))

# ---- complete, inspect, is_complete ------------------------------------------------------------
msg_id = kc.complete("(tensor-matm", 12)
c = kc.get_shell_msg(timeout=30)["content"]
check("complete: tensor-matm", "tensor-matmul" in c["matches"] and c["cursor_start"] == 1 and c["cursor_end"] == 12, str(c))
kc.complete("(list (my-squa", 14)
c = kc.get_shell_msg(timeout=30)["content"]
check("complete: a name defined in an earlier cell", c["matches"] == ["my-square"] and c["cursor_start"] == 7, str(c))
kc.complete("(λ (my-squa", 11)   # cursor positions count code points, not bytes
c = kc.get_shell_msg(timeout=30)["content"]
check("complete: cursor positions in code points", c["matches"] == ["my-square"] and c["cursor_start"] == 4, str(c))
kc.inspect("(tensor-matmul a b)", 5)
c = kc.get_shell_msg(timeout=30)["content"]
check("inspect: the docstring", c["found"] and "(tensor-matmul" in c["data"]["text/plain"]
      and "matrix product" in c["data"]["text/plain"], str(c))
kc.inspect("(no-such-procedure-here 1)", 5)
c = kc.get_shell_msg(timeout=30)["content"]
check("inspect: not found", c["status"] == "ok" and not c["found"], str(c))
for code, status in [("(define (f x)\n  (let ((y 1))", "incomplete"), ("(+ 1 2)", "complete"), (")", "invalid"),
                     ("\"unterminated", "incomplete")]:
    kc.is_complete(code)
    c = kc.get_shell_msg(timeout=30)["content"]
    check(f"is_complete: {code!r} is {status}", c["status"] == status, str(c))
kc.is_complete("(define (f x)\n  (let ((y 1))")
c = kc.get_shell_msg(timeout=30)["content"]
check("is_complete: indent for two open lists", c.get("indent") == "    ", str(c))

# ---- interrupt ---------------------------------------------------------------------------------
def interrupt_during(code, name):
    msg_id = kc.execute(code)
    busy_since = None
    deadline = time.time() + 60
    while time.time() < deadline and busy_since is None:
        m = kc.get_iopub_msg(timeout=5)
        if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status" \
                and m["content"]["execution_state"] == "busy":
            busy_since = time.time()
    time.sleep(1.0)
    km.interrupt_kernel()
    msgs = collect(msg_id, timeout=60)
    reply = kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=60)
    check(f"interrupt: {name} stops with an interrupt error",
          reply["content"]["status"] == "error" and reply["content"].get("ename") == "interrupt", str(reply["content"]))
    return msgs


msgs = interrupt_during("(define (spin i) (spin (+ i 1)))\n(spin 0)", "an endless loop")
trace = "\n".join(e["traceback"][i] for e in of_type(msgs, "error") for i in range(len(e["traceback"])))
check("interrupt: the error says where it stopped", "in spin at In[" in trace, trace)
reply, msgs = run("(my-square 7)")
check("interrupt: the next execute in the same kernel works",
      of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "49" and km.is_alive(), str(msgs))
interrupt_during("""(define model (sequential (linear 8 32) (relu) (linear 32 2)))
(define opt (sgd (parameters model) :lr 0.01))
(define xs (tensor-randn 4096 8))
(define ys (tensor-randint 0 2 (list 4096)))
(fit model opt cross-entropy (data-loader (tensor-dataset xs ys) :batch-size 16) :epochs 100000)""", "training with fit")
reply, msgs = run("(tensor-shape (forward model (tensor-randn 3 8)))")
check("interrupt: after training, the model is still there",
      of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "(3 2)", str(msgs))

# ---- widgets: the version comm a notebook opens is answered and closed, not logged as unknown --
comm_id = "purple-test-widget-version"
kc.session.send(kc.shell_channel.socket, kc.session.msg("comm_open", {
    "comm_id": comm_id, "target_name": "jupyter.widget.version", "data": {}}))
closed = False
deadline = time.time() + 20
while time.time() < deadline and not closed:
    try:
        m = kc.get_iopub_msg(timeout=1)
    except Exception:
        continue
    closed = m["msg_type"] == "comm_close" and m["content"].get("comm_id") == comm_id
check("widgets: the jupyter.widget.version comm is closed politely", closed, "no comm_close")

# ---- restart and shutdown ----------------------------------------------------------------------
km.restart_kernel(now=False)
kc.wait_for_ready(timeout=120)
reply, msgs = run("(guard (e (#t 'gone)) my-square)")
check("restart: a fresh interpreter", of_type(msgs, "execute_result")[0]["data"]["text/plain"] == "gone", str(msgs))
pid = km.provisioner.pid if hasattr(km, "provisioner") and km.provisioner else None
kc.shutdown()
deadline = time.time() + 30
while time.time() < deadline and km.is_alive():
    time.sleep(0.2)
check("shutdown: the kernel process ends", not km.is_alive(), "still alive")
kc.stop_channels()
if km.is_alive():
    km.shutdown_kernel(now=True)
finish()
