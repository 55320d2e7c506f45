#!/usr/bin/env python3
"""A REPL into a running program (docs/attach.md, issue 51): a busy looping script runs with
--listen; through `purple --attach -e` its globals are read and set and the procedure its loop
calls is redefined; garbage is sent to the socket; a client stuck in an endless form is killed,
another is stopped with Ctrl-C; another user tries to connect. The program must live on through
all of it and end normally with the changes applied, leaving no socket behind. Also: the
interactive attached REPL through a pseudo-terminal (values, completion of the program's names,
Ctrl-C, Ctrl-D), --listen with --sandbox, stale sockets, and the socket removed on error exits
and SIGTERM.

usage: attach.py PURPLE"""
import atexit
import os
import pty
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402
from pty_terminal import Terminal  # noqa: E402

purple = os.path.abspath(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="purple-attach-")
os.chmod(tmp, 0o755)
sock = os.path.join(tmp, "job.sock")
MAGIC = b"PURPLE-ATTACH/1\n"
children = []


@atexit.register
def cleanup():
    """Whatever happened: no program of this test left running, no socket or folder left."""
    for p in children:
        if p.poll() is None:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def start(args, **kw):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    children.append(p)
    return p


def wait_for_socket(path, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def attach(expr, path=sock, timeout=60):
    r = subprocess.run([purple, "--attach", path, "-e", expr], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def number(expr):
    rc, out, err = attach(expr)
    try:
        return int(out.strip())
    except ValueError:
        raise AssertionError(f"{expr}: rc {rc}, out {out!r}, err {err!r}")


def leave(pid, fd, seconds=30):
    """Ctrl-D on an empty line, then the REPL's exit status (None when it did not end). The pause
    first: a ^D typed while libedit switches the terminal back to raw mode can be lost (as
    tests/repl/pty_session.py says)."""
    time.sleep(0.5)
    os.write(fd, b"\x04")
    deadline = time.time() + seconds
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        try:
            if select.select([fd], [], [], 0.1)[0]:
                os.read(fd, 4096)
        except OSError:
            pass
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def frame(kind, *fields):
    body = bytes([ord(kind)]) + b"".join(struct.pack(">I", len(f)) + f for f in fields)
    return struct.pack(">I", len(body)) + body


def talk(payload, read_for=3.0):
    """Connects, sends PAYLOAD, returns what came back until the server closed or READ_FOR passed."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(payload)
    got = b""
    deadline = time.time() + read_for
    s.settimeout(0.2)
    closed = False
    while time.time() < deadline:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            closed = True
            break
        if not data:
            closed = True
            break
        got += data
    s.close()
    return got, closed


# ---- the program --------------------------------------------------------------------------------
program = start([purple, "--listen", sock, os.path.join(here, "looping.purple")])
check("the program serves its socket", wait_for_socket(sock, program))
st = os.stat(sock)
check("the socket is a socket of mode 0600", stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
      oct(st.st_mode))

# ---- globals read, set, a procedure redefined ---------------------------------------------------
first = number("turns")
time.sleep(0.3)
second = number("turns")
check("a global is read while the loop runs", 0 < first < second, f"{first} then {second}")
rc, out, err = attach('(set! marker "changed by a client")')
check("a global is set", rc == 0 and out == "", f"rc {rc} out {out!r} err {err!r}")
rc, out, err = attach("marker")
check("... and reads back as the REPL writes it", rc == 0 and out == '"changed by a client"\n', repr(out))
rc, out, err = attach("(define (step n) (* n 1000))")
check("the procedure the loop calls is redefined", rc == 0, err)
a = number("total")
time.sleep(0.3)
b = number("total")
check("... and the loop calls the new one", b > a and (b - a) % 1000 == 0, f"total {a} then {b}")

# ---- what a client sees ----------------------------------------------------------------------------
rc, out, err = attach('(begin (display "to the client") (newline) (values 7 (list 1 "two")))')
check("output and values go to the client", rc == 0 and out == 'to the client\n7\n(1 "two")\n', repr(out))
rc, out, err = attach("(car 5)")
check("an error is printed and exits 1", rc == 1 and "car: argument 1 must be a pair" in err, f"rc {rc} err {err!r}")
check("... with the client's position, not the program's frames",
      "<command line>:1:1" in err and "looping.purple" not in err, err)
rc, out, err = attach("(+ 1")
check("a read error is an error, and runs nothing", rc == 1 and "Error" in err, err)
rc, out, err = attach("(exit 3)")
check("(exit) does not end the program", rc == 1 and "cannot end the program" in err, err)
rc, out, err = attach("(show (list 'shown 1))")
check("(show x) shows on the client", rc == 0 and "(shown 1)" in out, repr(out))

# ---- garbage --------------------------------------------------------------------------------------
got, closed = talk(os.urandom(4096))
check("random bytes: a refusal and a closed connection", closed and got.startswith(b"purple: "), got[:80])
got, closed = talk(b"GET / HTTP/1.0\r\n\r\n")
check("an HTTP request: refused", closed and b"attach protocol" in got, got[:80])
got, closed = talk(MAGIC + frame("Q", b"1"))
check("an unknown frame type: a protocol error, then closed", closed and b"unknown request type" in got, got[-80:])
got, closed = talk(MAGIC + b"\xff\xff\xff\xff" + b"E")
check("an oversized frame: refused, then closed", closed and b"bytes (at most" in got, got[-120:])
got, closed = talk(MAGIC + frame("E", b"1"))
check("a frame missing its fields: a protocol error", closed and b"malformed request" in got, got[-80:])
got, closed = talk(MAGIC + frame("E", b"1", b"\x00\xff\xfe(\x80 \x01", b"<bytes>", b"0") + frame("E", b"2", b"(+ 1 2)", b"<x>", b"0"))
check("binary code: an error reply, and the connection goes on",
      not closed and b"read-error" in got and b"\x00\x00\x00\x013" in got, got[-200:])
got, closed = talk(MAGIC + b"\x00\x00\x01\x00E\x00", read_for=0.5)
check("half a frame then a hang-up: nothing breaks", True)
idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
idle.connect(sock)   # says nothing: must not hold anyone up
rc, out, err = attach("(+ 1 2)")
check("after the garbage the program answers", rc == 0 and out == "3\n", f"{rc} {out!r} {err!r}")
idle.close()

# ---- a client stuck in an endless form, killed -------------------------------------------------
stuck = start([purple, "--attach", sock, "-e", '(begin (display "looping") (newline) (let loop () (loop)))'])
ready, _, _ = select.select([stuck.stdout], [], [], 60)
line = stuck.stdout.readline() if ready else b""
check("the endless form runs in the program", line == b"looping\n", line)
stuck.kill()
stuck.wait()
a = number("turns")
time.sleep(0.3)
b = number("turns")
check("killing its client stops the endless form; the loop goes on", a < b, f"{a} then {b}")

# ---- Ctrl-C in the client ------------------------------------------------------------------------
stuck = start([purple, "--attach", sock, "-e", '(begin (display "looping") (newline) (let loop () (loop)))'])
ready, _, _ = select.select([stuck.stdout], [], [], 60)
line = stuck.stdout.readline() if ready else b""
stuck.send_signal(signal.SIGINT)
try:
    _, err = stuck.communicate(timeout=30)
except subprocess.TimeoutExpired:
    stuck.kill()
    err = b"(no exit)"
check("Ctrl-C in the client interrupts its form", line == b"looping\n" and stuck.returncode == 1 and b"interrupted" in err,
      f"rc {stuck.returncode} err {err!r}")
check("... not the program", program.poll() is None and number("turns") > b)

# ---- the interactive attached REPL ----------------------------------------------------------------
attach("(define my-unusual-global-name 5)")
pid, fd = pty.fork()
if pid == 0:
    os.environ["HOME"] = tmp
    os.environ["TERM"] = "xterm"
    os.execv(purple, [purple, "--attach", sock])
read_until = Terminal(fd).read_until
check("the attached REPL names the program", read_until(r"Attached to .*looping\.purple.*\n(.|\n)*purple> $") is not None)
os.write(fd, b"(* 6 7)\r")
check("it evaluates in the program", read_until(r"42\r?\n.*purple> $") is not None)
os.write(fd, b"my-unusual-glo\t")
check("Tab completes the program's own names", read_until(r"bal-name") is not None)   # libedit adds what was missing
os.write(fd, b"\r")
check("... which evaluate there", read_until(r"\n5\r?\n") is not None)
os.write(fd, b"(let loop () (loop))\r")
time.sleep(1.0)
os.write(fd, b"\x03")
check("Ctrl-C interrupts the form, and the REPL goes on", read_until(r"interrupted(.|\n)*purple> $") is not None)
status = leave(pid, fd)
check("Ctrl-D leaves; the program goes on",
      status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and program.poll() is None)
os.close(fd)

# ---- another user ----------------------------------------------------------------------------------
# As uid 65534 (nobody), through setpriv: first plainly (the socket's mode stops it), then with
# CAP_DAC_OVERRIDE, which passes file modes as root does, so that the server's own check of its
# peer (SO_PEERCRED) is what refuses.
CONNECT_AS_NOBODY = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect:", e.strerror)
    sys.exit(0)
s.settimeout(10)
print("server said:", s.recv(4096).decode(errors="replace").strip())
"""


def as_nobody(*args, caps=False):
    cmd = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    if caps:
        cmd += ["--inh-caps", "+dac_override", "--ambient-caps", "+dac_override"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)


if os.geteuid() != 0 or not shutil.which("setpriv"):
    print("SKIP: another user's connections: needs root and setpriv to act as another uid")
else:
    r = as_nobody("/usr/bin/python3", "-c", CONNECT_AS_NOBODY, sock)
    check("another user cannot connect (the socket is 0600)", "connect: Permission denied" in r.stdout, r.stdout + r.stderr)
    r = as_nobody("/usr/bin/python3", "-c", CONNECT_AS_NOBODY, sock, caps=True)
    if "connect:" in r.stdout or r.returncode != 0:
        print("SKIP: the SO_PEERCRED check: setpriv cannot give uid 65534 CAP_DAC_OVERRIDE here:", r.stdout + r.stderr)
    else:
        check("another user past the file mode is refused by the server (SO_PEERCRED)",
              "server said: purple: refused: this program serves only its own user" in r.stdout, r.stdout)
    # The client's side: root's purple --attach will not talk to a program of user nobody.
    theirs = os.path.join(tmp, "nobody")
    os.mkdir(theirs)
    os.chmod(theirs, 0o777)
    if as_nobody(purple, "-e", "1").returncode != 0:
        print("SKIP: a program of another user: uid 65534 cannot run", purple, "(a private directory above it)")
    else:
        their_sock = os.path.join(theirs, "job.sock")
        other = start(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                       purple, "--listen", their_sock, "-e", "(serve-repl-wait 120)"],
                      env=dict(os.environ, HOME=theirs, TMPDIR=theirs))
        if wait_for_socket(their_sock, other):
            rc, out, err = attach("(+ 1 2)", path=their_sock)
            check("purple --attach will not send its code to another user's program",
                  rc == 1 and "runs as uid 65534, not as you" in err, err)
            other.send_signal(signal.SIGTERM)
            other.wait(timeout=30)
            check("SIGTERM ends that program and removes its socket", not os.path.exists(their_sock))
        else:
            check("a program of user nobody serves a socket", False, other.stderr.read())

# ---- the end ---------------------------------------------------------------------------------------
check("the program lived through all of it", program.poll() is None)
rc, out, err = attach("(set! stop? #t)")
try:
    out, err = program.communicate(timeout=60)
except subprocess.TimeoutExpired:
    program.kill()
    out, err = program.communicate()
check("the program ends normally", program.returncode == 0, err.decode(errors="replace"))
check("... with the changes applied", b"(final step 1000 marker changed by a client turns-positive #t)" in out, out)
check("... and no client's output in its own", b"to the client" not in out and b"looping" not in out, out)
check("... leaving no socket behind", not os.path.exists(sock))

# ---- --sandbox, errors, stale sockets -----------------------------------------------------------
boxed_sock = os.path.join(tmp, "boxed.sock")
boxed = start([purple, "--sandbox", "--listen", boxed_sock, "-e",
               "(define done #f) (let loop () (serve-repl-wait 0.05) (unless done (loop)))"])
if wait_for_socket(boxed_sock, boxed):
    rc, out, err = attach('(open-output-file "escaped.txt")', path=boxed_sock)
    check("--listen --sandbox: clients' forms are sandboxed too", rc == 1 and "file access is disabled" in err, err)
    rc, out, err = attach(f'(serve-repl "{tmp}/again.sock")', path=boxed_sock)
    check("... and cannot serve another socket", rc == 1 and "disabled" in err, err)
    attach("(set! done #t)", path=boxed_sock)
    boxed.wait(timeout=60)
    check("... the sandboxed program ends, its socket gone", boxed.returncode == 0 and not os.path.exists(boxed_sock))
else:
    check("--listen --sandbox serves", False, boxed.stderr.read())

# A REPL started with --listen runs clients' forms while it waits at its prompt.
idle_sock = os.path.join(tmp, "idle.sock")
pid, fd = pty.fork()
if pid == 0:
    os.environ["HOME"] = tmp
    os.environ["TERM"] = "xterm"
    os.execv(purple, [purple, "--listen", idle_sock])
repl = Terminal(fd)
check("purple --listen SOCKET starts a REPL", repl.read_until(r"purple> $", 60) is not None)
rc, out, err = attach("(define from-a-client 'yes) (+ 40 2)", path=idle_sock)
check("... which serves clients while at its prompt", rc == 0 and out == "42\n", f"{rc} {out!r} {err!r}")
os.write(fd, b"from-a-client\r")
check("... in its own interpreter", repl.read_until(r"\nyes\r?\n") is not None)
status = leave(pid, fd)
os.close(fd)
check("... and removes its socket when it ends", status is not None and not os.path.exists(idle_sock))

failing_sock = os.path.join(tmp, "failing.sock")
r = subprocess.run([purple, "--listen", failing_sock, "-e", "(car 1)"], capture_output=True, timeout=120)
check("a program that fails removes its socket", r.returncode == 1 and not os.path.exists(failing_sock), r.stderr)

stale_sock = os.path.join(tmp, "stale.sock")
killed = start([purple, "--listen", stale_sock, "-e", "(serve-repl-wait 120)"])
if wait_for_socket(stale_sock, killed):
    killed.kill()
    killed.wait()
    rc, out, err = attach("1", path=stale_sock)
    check("a socket whose program was killed: the client says it ended", rc == 1 and "has ended" in err, err)
    r = subprocess.run([purple, "--listen", stale_sock, "-e", "(+ 1 1)"], capture_output=True, timeout=120)
    check("... and a new program replaces the stale socket", r.returncode == 0 and r.stdout == b"2\n", r.stderr)
    check("... and removes it when it ends", not os.path.exists(stale_sock))
rc, out, err = attach("1", path=os.path.join(tmp, "none.sock"))
check("no such socket: a clear error", rc == 1 and "no such socket" in err, err)

finish()
