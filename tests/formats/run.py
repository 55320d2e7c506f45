#!/usr/bin/env python3
"""Interop tests for builtins/formats: files cross between python3-torch and Purple both ways.

For each NAME: `python3 NAME.py gen DIR` writes files into DIR and prints the values Purple must
find in them; `purple NAME.purple DIR` loads those files, prints what it found, and writes files
of its own; `python3 NAME.py check DIR` loads what Purple wrote and exits non-zero on any
mismatch. Printed lines are compared token by token: numbers must be EXACTLY equal (both sides
print float64 values of the same bits), other tokens identical; lines whose label starts with
~ (losses and weights after training steps) compare numbers to float32 tolerance.

usage: run.py PURPLE NAME"""
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable   # the python3 CTest runs this with: the one whose torch Purple is checked against


def num(tok):
    try:
        return float(tok.replace("+inf.0", "inf").replace("-inf.0", "-inf").replace("+nan.0", "nan"))
    except ValueError:
        return None


def same(a, b, tolerant=False):
    if a == b:
        return True
    x, y = num(a), num(b)
    if x is None or y is None:
        return False
    if tolerant:   # training across implementations: float32 kernels may differ in the last bits
        return abs(x - y) <= 1e-6 + 1e-4 * abs(x)
    return (math.isnan(x) and math.isnan(y)) or x == y


def run(cmd):
    p = subprocess.run(cmd, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def main():
    purple, name = os.path.abspath(sys.argv[1]), sys.argv[2]
    work = tempfile.mkdtemp(prefix="purple-formats-" + name + "-")
    try:
        rc, expected, err = run([PYTHON, os.path.join(HERE, name + ".py"), "gen", work])
        if rc:
            print("python gen failed:\n" + err[-3000:])
            return 1
        rc, got, err = run([purple, os.path.join(HERE, name + ".purple"), work])
        if rc:
            print("purple failed (exit %d):\n%s\n%s" % (rc, got[-2000:], err[-3000:]))
            return 1
        e, g = expected.strip().splitlines(), got.strip().splitlines()
        problems = []
        if len(e) != len(g):
            problems.append("line counts differ: python %d, purple %d" % (len(e), len(g)))
        for i, (a, b) in enumerate(zip(e, g)):
            ta, tb = a.split(), b.split()
            tolerant = a.startswith("~")
            if len(ta) != len(tb) or not all(same(x, y, tolerant) for x, y in zip(ta, tb)):
                problems.append("line %d differs:\n  python: %s\n  purple: %s" % (i + 1, a[:300], b[:300]))
        for p in problems[:20]:
            print(p)
        rc, out, err = run([PYTHON, os.path.join(HERE, name + ".py"), "check", work])
        print(out, end="")
        if rc:
            print("python check failed:\n" + err[-3000:])
            problems.append("check")
        print("%s: %d lines compared, %s" % (name, len(e), "FAILED" if problems else "ok"))
        return 1 if problems else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
