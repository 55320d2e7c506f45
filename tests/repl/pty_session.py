#!/usr/bin/env python3
"""Drives the interactive `purple` REPL through a pseudo-terminal, as a person at a keyboard:
Ctrl-C on an empty line, on a half-typed line and on an unfinished multi-line form clears it and
shows a fresh prompt; Ctrl-C during an endless loop interrupts it; the session goes on after each;
Ctrl-D inside a line does not leave, Ctrl-D on an empty line does.

usage: pty_session.py PURPLE"""
import os
import pty
import re
import select
import sys
import tempfile
import time

purple = sys.argv[1]
home = tempfile.mkdtemp()
pid, fd = pty.fork()
if pid == 0:
    os.environ["HOME"] = home
    os.environ["TERM"] = "xterm"
    os.execv(purple, [purple])

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pty_terminal import Terminal  # noqa: E402

terminal = Terminal(fd)
read_until = terminal.read_until
failures = []


def step(name, keys, expect, timeout=20.0):
    os.write(fd, keys)
    got = read_until(expect, timeout)
    if got is None:
        failures.append(name)
        tail = terminal.transcript[-600:].decode(errors="replace")
        print(f"FAIL: {name}: expected /{expect}/; last output:\n{tail!r}")
    else:
        print(f"ok: {name}")
    return got


PROMPT = r"purple> $"
if read_until(PROMPT) is None:
    print("FAIL: no prompt", terminal.transcript)
    sys.exit(1)
step("a value", b"(+ 1 2)\r", r"\r\n3\r\n" + PROMPT)
step("Ctrl-C on an empty line", b"\x03", r"\^C\r?\n" + PROMPT)
step("Ctrl-C on a half-typed line", b"(define x 1", r"\(define x 1")
step("... prints ^C, a newline and a new prompt", b"\x03", r"\^C\r?\n" + PROMPT)
step("the line was dropped", b"x\r", r"unbound variable: x.*\n.*" + PROMPT)
step("an unfinished form continues", b"(+ 1\r", r"\r\n\.\.\.")
step("Ctrl-C drops the unfinished form", b"2\x03", r"\^C\r?\n" + PROMPT)
step("the next input starts afresh", b"(+ 40 2)\r", r"\r\n42\r\n" + PROMPT)
step("an endless loop starts", b"(let loop () (loop))\r", r"\(let loop \(\) \(loop\)\)\r\n")
time.sleep(0.5)
step("Ctrl-C interrupts it", b"\x03", r"interrupted(.|\n)*" + PROMPT)
step("the session goes on", b"(* 6 7)\r", r"\r\n42\r\n" + PROMPT)
# Ctrl-C during a loop of big tensor operations: noticed at the next primitive call, not 1024
# closure calls later (a loop of 2000x2000 products once ran on for minutes). The timeout is
# generous: the test is that it stops and the session lives.
step("a 1000x1000 matrix", b"(define m (tensor-ones 1000 1000))\r", PROMPT)
step("a loop of matrix products starts", b"(let loop ((i 0)) (tensor-matmul m m) (loop (+ i 1)))\r",
     r"\(loop \(\+ i 1\)\)\)\r\n")
time.sleep(1.0)
step("Ctrl-C interrupts the tensor loop", b"\x03", r"interrupted(.|\n)*" + PROMPT, timeout=60)
step("the session goes on after it", b"(* 6 7)\r", r"\r\n42\r\n" + PROMPT)
# The README's error examples, typed as the README shows them, print exactly what it shows.
readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
examples = []
with open(readme) as f:
    lines = f.read().split("\n")
for k, line in enumerate(lines):
    if line.startswith("purple> ") and k + 1 < len(lines) and lines[k + 1].startswith("Error:"):
        shown = []
        for later in lines[k + 1:]:
            if later.startswith("purple> ") or later.startswith("```"):
                break
            shown.append(later)
        examples.append((line[len("purple> "):], shown))
if not examples:
    failures.append("README error examples")
    print("FAIL: no error examples found in README.md")
for code, shown in examples:
    expect = r"\r\n" + r"\r\n".join(re.escape(x) for x in shown) + r"\r\n" + PROMPT
    step(f"README example {code}", code.encode() + b"\r", expect)
step("Ctrl-D inside a line does not leave", b"(- 5 1\x04", r"\(- 5 1")
step("... and the line can be finished", b")\r", r"\r\n4\r\n" + PROMPT)
# The prompt is printed before libedit puts the terminal back in raw mode; a ^D typed in that
# window reaches the tty in canonical mode, where it is an end-of-file marker that the switch to
# raw mode can drop (seen once under heavy load). Give the REPL time to reach its read.
time.sleep(0.5)
os.write(fd, b"\x04")
deadline = time.time() + 20
status = None
while time.time() < deadline:
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        break
    try:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            os.read(fd, 4096)
    except OSError:
        pass
if status is None:
    failures.append("Ctrl-D on an empty line leaves")
    print("FAIL: Ctrl-D on an empty line did not end the REPL")
    os.kill(pid, 9)
elif os.WEXITSTATUS(status) != 0:
    failures.append("exit status")
    print(f"FAIL: the REPL exited with {os.WEXITSTATUS(status)}")
else:
    print("ok: Ctrl-D on an empty line leaves, status 0")
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
