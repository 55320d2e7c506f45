"""Two builds of Purple side by side, on the interpreter workloads and tiny-tensor dispatch:
the check that a change which should not change speed (a refactor, a move of files) did not.

    python3 bench/compare.py BEFORE_DIR AFTER_DIR [--reps N] [--quick]

Each DIR holds a `purple` binary and the `libpurple.so.0` it runs with (copy them out of build/
before the change: `mkdir /tmp/before && cp -a build/purple build/libpurple.so* /tmp/before`).
The two run alternately, REPS times each, with LD_LIBRARY_PATH set to their own directory, so
machine load falls on both alike; the table gives each side's median of the timed region that
the workload reports (its RESULT line) and AFTER / BEFORE."""
import argparse
import os
import statistics
import subprocess
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))

FULL = [("interp/interp.purple", ["fib", "30"]), ("interp/interp.purple", ["tak", "50"]),
        ("interp/interp.purple", ["list", "1000000"]), ("interp/interp.purple", ["closure", "1000"]),
        ("interp/interp.purple", ["symbol-hash", "200000"]), ("dispatch/dispatch.purple", ["500000", "1", "both"])]
QUICK = [("interp/interp.purple", ["fib", "25"]), ("interp/interp.purple", ["tak", "10"]),
         ("interp/interp.purple", ["list", "100000"]), ("interp/interp.purple", ["closure", "200"]),
         ("interp/interp.purple", ["symbol-hash", "20000"]), ("dispatch/dispatch.purple", ["50000", "1", "both"])]


def run(build_dir, script, args):
    env = dict(os.environ, LD_LIBRARY_PATH=build_dir, OMP_NUM_THREADS="1")
    out = subprocess.run([os.path.join(build_dir, "purple"), os.path.join(BENCH, script)] + args,
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit("%s %s %s failed:\n%s" % (build_dir, script, " ".join(args), out.stderr[-2000:]))
    results = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts[:1] == ["RESULT"]:
            results[parts[1]] = float(parts[2])
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="small sizes")
    args = ap.parse_args()
    sides = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    samples = {}
    for rep in range(args.reps):
        for script, wargs in (QUICK if args.quick else FULL):
            order = ("before", "after") if rep % 2 == 0 else ("after", "before")
            for side in order:
                for name, seconds in run(sides[side], script, wargs).items():
                    samples.setdefault(name, {}).setdefault(side, []).append(seconds)
        print("repetition %d of %d done" % (rep + 1, args.reps), file=sys.stderr)
    print("| workload | before (s, median) | after (s, median) | after / before |")
    print("|---|---|---|---|")
    for name, by in samples.items():
        b, a = statistics.median(by["before"]), statistics.median(by["after"])
        print("| %s | %.4f | %.4f | %.3f |" % (name, b, a, a / b if b else float("nan")))
    print("\n%d alternating repetitions; load average at the end: %s" % (args.reps, os.getloadavg()))


if __name__ == "__main__":
    main()
