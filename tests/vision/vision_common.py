"""Shared by the (purple vision) tests: where the library is, a temporary folder, running Purple,
and comparing arrays. Each test is a Python script that computes the reference with Debian's
python3-torchvision and runs a Purple script beside it (tests/vision/*.purple) on the same files."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what)


def temp_dir():
    d = tempfile.mkdtemp(prefix="purple-vision-", dir=os.environ.get("TMPDIR"))
    atexit.register(shutil.rmtree, d, True)   # weights files are large (ViT-B/16: 330 MB)
    return d


def run_purple(purple, script, *args, timeout=1200):
    """Runs tests/vision/SCRIPT with ARGS; the script imports (purple vision), built into purple."""
    p = subprocess.run([purple, os.path.join(HERE, script)] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    if p.returncode != 0:
        print(p.stdout[-4000:])
        print(p.stderr[-4000:])
        raise SystemExit("purple %s exited with %d" % (script, p.returncode))
    return p.stdout


def close(name, got, want, atol):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        check(False, "%s: shape %s, torchvision %s" % (name, got.shape, want.shape))
        return
    if got.dtype != want.dtype:
        check(False, "%s: dtype %s, torchvision %s" % (name, got.dtype, want.dtype))
        return
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
    check(diff <= atol, "%s: max difference %g > %g" % (name, diff, atol))
    print("%-40s max |purple - torchvision| = %.3g" % (name, diff))


def finish():
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("all checks passed")
