#!/usr/bin/python3
"""What a change costs the kernel: build/purple against an earlier build (a copy of its purple and
libpurple.so.0 in BASELINE_DIR) and python3-torch, on whole training programs, interleaved (each
repetition runs every workload once on every side, the sides in a rotating order). For each
process, from /usr/bin/time: wall, user and system time, minor page faults and peak RSS; prints
medians, after ÷ before and after ÷ python3-torch. Page faults are exact counts; times are
blurred by whatever else the machine runs.

    /usr/bin/python3 bench/profile/ab-kernel.py BASELINE_DIR [--reps 3] [--only resnet-folder,cnn]
        [--threads 1]

Made for issue 47's allocator change (interp/memory/cpu_allocator.cpp): the workloads are the
loops the allocator serves, bench/train's and bench/examples' (lstm-sine at its BENCH-ARGS size).
"""
import argparse
import os
import statistics
import subprocess
import tempfile

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
PY = "/usr/bin/python3"
TIME = "/usr/bin/time"

# name: (Purple's program and arguments, python3-torch's), relative to bench/; {t} is the thread count
WORKLOADS = {
    "resnet-folder": (["examples/resnet-folder.purple", "--threads", "{t}"], ["examples/resnet-folder.py", "--threads", "{t}"]),
    "mnist-cnn": (["examples/mnist-cnn.purple", "--threads", "{t}"], ["examples/mnist-cnn.py", "--threads", "{t}"]),
    "lstm-sine": (["examples/lstm-sine.purple", "--threads", "{t}", "--steps", "1"],
                  ["examples/lstm-sine.py", "--threads", "{t}", "--steps", "1"]),
    "siamese": (["examples/siamese.purple", "--threads", "{t}"], ["examples/siamese.py", "--threads", "{t}"]),
    "vae": (["examples/vae.purple", "--threads", "{t}"], ["examples/vae.py", "--threads", "{t}"]),
    "cnn": (["train/cnn.purple", "{t}", "200"], ["train/cnn.py", "{t}", "200"]),
    "mlp": (["train/mlp.purple", "{t}"], ["train/mlp.py", "{t}", "index"]),
}
FIELDS = [("wall", "wall (s)", "%.2f"), ("user", "user (s)", "%.2f"), ("sys", "sys (s)", "%.2f"),
          ("faults", "minor faults", "%.0f"), ("rss", "peak RSS (MB)", "%.0f")]


def measure(argv, env):
    fd, out = tempfile.mkstemp(prefix="ab-kernel-")
    os.close(fd)
    try:
        r = subprocess.run([TIME, "-o", out, "-f", "%e %U %S %R %M"] + argv, cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise SystemExit("ab-kernel: %s failed: %s" % (" ".join(argv), r.stderr[-500:]))
        wall, user, sys_s, faults, kb = map(float, open(out).read().split("\n")[-2].split())
        return {"wall": wall, "user": user, "sys": sys_s, "faults": faults, "rss": kb / 1024}
    finally:
        os.unlink(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline", help="folder with the earlier build's purple and libpurple.so.0")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    names = args.only.split(",")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    env.pop("PURPLE_GC_STRESS", None)
    base_env = dict(env, LD_LIBRARY_PATH=os.path.abspath(args.baseline))
    fill = lambda xs: [x.replace("{t}", str(args.threads)) for x in xs]
    sides = lambda purple, python: [
        ("before", [os.path.join(os.path.abspath(args.baseline), "purple")] + purple, base_env),
        ("after", [os.path.join(ROOT, "build", "purple")] + purple, env),
        ("python3-torch", [PY] + python, env)]
    samples = {}
    for rep in range(args.reps):
        for name in names:
            purple, python = WORKLOADS[name]
            runs = sides([os.path.join(BENCH, a) if a.endswith(".purple") else a for a in fill(purple)],
                         [os.path.join(BENCH, a) if a.endswith(".py") else a for a in fill(python)])
            k = rep % len(runs)
            for side, argv, e in runs[k:] + runs[:k]:
                m = measure(argv, e)
                print("rep %d %s %s: %s" % (rep + 1, name, side, " ".join("%s %s" % (f, form % m[f]) for f, _, form in FIELDS)),
                      flush=True)
                for f in m:
                    samples.setdefault((name, side, f), []).append(m[f])
    print()
    print("Medians of %d interleaved run(s), %d thread(s):" % (args.reps, args.threads))
    print()
    print("| workload | measure | before | after | python3-torch | after ÷ before | after ÷ python3-torch |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for name in names:
        for f, label, form in FIELDS:
            b, a, p = (statistics.median(samples[(name, s, f)]) for s in ("before", "after", "python3-torch"))
            ratio = lambda x, y: "%.2f" % (x / y) if y else "—"
            print("| %s | %s | %s | %s | %s | %s | %s |" % (name, label, form % b, form % a, form % p, ratio(a, b), ratio(a, p)))


if __name__ == "__main__":
    main()
