#!/usr/bin/env python3
"""A kernel whose client dies without a shutdown request ends by itself, as ipykernel does: a
Python process starts purple-kernel through jupyter_client (which names itself in
JPY_PARENT_PID), reports the kernel's pid, and is killed with SIGKILL; the kernel must be gone
within 10 seconds.

usage: orphan.py PURPLE"""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402

purple = os.path.abspath(sys.argv[1])
tmp = tempfile.mkdtemp(prefix="purple-kernel-orphan-")
subprocess.run([purple, "--install-kernel", "--prefix", tmp], check=True, stdout=subprocess.DEVNULL)
env = dict(os.environ, JUPYTER_PATH=os.path.join(tmp, "share", "jupyter"), JUPYTER_RUNTIME_DIR=os.path.join(tmp, "runtime"))

client = r'''
import sys, time
from jupyter_client import KernelManager
km = KernelManager(kernel_name="purple")
km.start_kernel()
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=120)
print("KERNEL-PID", km.provisioner.pid if getattr(km, "provisioner", None) else km.kernel.pid, flush=True)
time.sleep(600)
'''
proc = subprocess.Popen([sys.executable, "-c", client], env=env, stdout=subprocess.PIPE, text=True)
# The kernel shares the client's stdout, and xeus 5 (Debian 13) greets on it: the pid is the
# line that says so.
line = ""
for line in proc.stdout:
    if line.startswith("KERNEL-PID "):
        break
pid_text = line.split()[-1] if line.startswith("KERNEL-PID ") else ""
check("the client started a kernel", pid_text.isdigit(), repr(line))
kernel_pid = int(pid_text) if pid_text.isdigit() else 0


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"   # a zombie has ended
    except FileNotFoundError:
        return False


check("the kernel runs while its client lives", kernel_pid and running(kernel_pid), str(kernel_pid))
time.sleep(2)
check("... and still after 2 s", kernel_pid and running(kernel_pid), str(kernel_pid))
proc.send_signal(signal.SIGKILL)
proc.wait()
deadline = time.time() + 10
while time.time() < deadline and kernel_pid and running(kernel_pid):
    time.sleep(0.2)
gone = not (kernel_pid and running(kernel_pid))
check("the kernel ends within 10 s of its client's SIGKILL", gone, f"pid {kernel_pid} still running")
if not gone:
    os.kill(kernel_pid, signal.SIGKILL)
finish()
