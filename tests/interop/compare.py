#!/usr/bin/env python3
"""Runs each interop test twice -- NAME.purple with Purple, NAME.py with python3-torch -- and
compares their output line by line. Tokens that parse as numbers are compared with a relative and
an absolute tolerance (both sides use LibTorch, but float32 kernels may differ in the last bits);
other tokens must match exactly.

usage: compare.py PURPLE [NAME ...]     (default: every NAME.purple beside this script)
Exit status 0 when every test matches."""
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable   # CTest runs this with the python3 that has torch (tests/CMakeLists.txt)
RTOL, ATOL = 1e-4, 1e-5


def number(tok):
    t = tok.strip()
    special = {"+inf.0": math.inf, "-inf.0": -math.inf, "+nan.0": math.nan, "-nan.0": math.nan,
               "inf": math.inf, "-inf": -math.inf, "nan": math.nan, "True": 1.0, "False": 0.0,
               "#t": 1.0, "#f": 0.0}
    if t in special:
        return special[t]
    try:
        return float(t)
    except ValueError:
        return None


def tokens_match(a, b):
    if a == b:
        return True
    x, y = number(a), number(b)
    if x is None or y is None:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= ATOL + RTOL * abs(y)


def run(cmd):
    p = subprocess.run(cmd, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def compare(purple, name):
    rc1, out1, err1 = run([purple, os.path.join(HERE, name + ".purple")])
    rc2, out2, err2 = run([PYTHON, os.path.join(HERE, name + ".py")])
    problems = []
    if rc1 != 0:
        problems.append("purple exited with %d: %s" % (rc1, err1.strip()[-2000:]))
    if rc2 != 0:
        problems.append("python exited with %d: %s" % (rc2, err2.strip()[-2000:]))
    l1, l2 = out1.strip().splitlines(), out2.strip().splitlines()
    if len(l1) != len(l2):
        problems.append("line counts differ: purple %d, python %d" % (len(l1), len(l2)))
    for i, (a, b) in enumerate(zip(l1, l2)):
        ta, tb = a.split(), b.split()
        if len(ta) != len(tb) or not all(tokens_match(x, y) for x, y in zip(ta, tb)):
            problems.append("line %d differs:\n  purple: %s\n  python: %s" % (i + 1, a[:400], b[:400]))
    return problems, len(l1)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    purple = os.path.abspath(sys.argv[1])
    names = sys.argv[2:] or sorted(f[:-7] for f in os.listdir(HERE) if f.endswith(".purple"))
    failed = 0
    for name in names:
        problems, n = compare(purple, name)
        if problems:
            failed += 1
            print("FAIL %s" % name)
            for p in problems[:20]:
                print("  " + p)
        else:
            print("ok   %s (%d lines)" % (name, n))
    print("%d of %d interop tests passed" % (len(names) - failed, len(names)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
