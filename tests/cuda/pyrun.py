#!/usr/bin/env python3
"""Runs one CUDA cross-check between Python's torch and Purple, in three steps, in a fresh
temporary folder DIR:

  python NAME.py gen DIR      Python writes files (tensors saved on the GPU, TorchScript ...)
  purple NAME.purple DIR      Purple reads them, checks them, and writes files of its own
  python NAME.py check DIR    Python reads what Purple wrote and checks it

The Python is the one running this script (CMake passes PURPLE_TEST_PYTHON, else python3).
Any step that exits 77 means "skipped" (no GPU, no torch), and so does this script. The device
is PURPLE_CUDA_TEST_DEVICE (default "cuda"), read by both sides.

usage: pyrun.py PURPLE NAME"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def step(title, cmd):
    print("---- %s: %s" % (title, " ".join(cmd)), flush=True)
    try:
        p = subprocess.run(cmd, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=240,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired as e:
        out = e.output or ""
        print(out.decode(errors="replace") if isinstance(out, bytes) else out)
        print("FAILED: %s timed out after 240 s" % title)
        return 1
    print(p.stdout, end="" if p.stdout.endswith("\n") or not p.stdout else "\n", flush=True)
    if p.returncode < 0:
        print("FAILED: %s was killed by signal %d" % (title, -p.returncode))
    elif p.returncode not in (0, SKIP):
        print("FAILED: %s exited with status %d" % (title, p.returncode))
    return p.returncode


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    purple, name = os.path.abspath(sys.argv[1]), sys.argv[2]
    print("python: %s (%s)" % (sys.executable, sys.version.split()[0]))
    work = tempfile.mkdtemp(prefix="purple-cuda-" + name + "-")
    try:
        for title, cmd in (("python gen", [sys.executable, os.path.join(HERE, name + ".py"), "gen", work]),
                           ("purple", [purple, os.path.join(HERE, name + ".purple"), work]),
                           ("python check", [sys.executable, os.path.join(HERE, name + ".py"), "check", work])):
            rc = step(title, cmd)
            if rc == SKIP:
                print("skipped (the %s step exited 77)" % title)
                return SKIP
            if rc != 0:
                return 1
        print("%s: ok" % name)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
