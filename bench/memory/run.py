#!/usr/bin/env python3
"""When do a program's tensors die? Issue 47's goals, measured side by side with python3-torch.

Each workload runs under `purple --memory-stats` (which prints, after the program and a full
collection, how many tensor bytes died early, when their last reference died, and how many the
collector freed) and beside its python3-torch twin; both under /usr/bin/time for wall time and
peak RSS, one after the other, REPS times, interleaved. The table gives, per workload:

  - the share of tensor bytes freed early (goal >= 95%),
  - tensor collections per 20 steps (goal <= 1),
  - peak RSS, Purple / Python (goal <= 1.0),
  - the loss each side printed (its RESULT line), which must agree.

    /usr/bin/python3 bench/memory/run.py [--purple build/purple] [--reps N] [--only a,b] [--out FILE]
                                         [--before OTHER-PURPLE]

--before runs an earlier build of Purple on the same workloads too, for its losses and counters
(the losses must not change). Results go to stdout and, with --out, to a Markdown file.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name, steps (for collections per 20 steps), Purple command, Python command
CHAR_GPT = ["--preset", "small", "--max-iters", "100", "--eval-interval", "1000", "--eval-iters", "2",
            "--sample-tokens", "10", "--threads", "1"]
WORKLOADS = [
    ("char-gpt-small", 100, ["examples/char-gpt.purple"] + CHAR_GPT, ["bench/flagship/char-gpt.py"] + CHAR_GPT),
    ("transformer-helpers", 100, ["bench/examples/transformer-helpers.purple", "--threads", "1"],
     ["bench/examples/transformer-helpers.py", "--threads", "1"]),
    ("mnist-cnn", 210, ["bench/examples/mnist-cnn.purple", "--threads", "1"],
     ["bench/examples/mnist-cnn.py", "--threads", "1"]),
    ("vae", 548, ["bench/examples/vae.purple", "--threads", "1"], ["bench/examples/vae.py", "--threads", "1"]),
    ("lstm-sine", 20, ["bench/examples/lstm-sine.purple", "--threads", "1", "--steps", "1"],
     ["bench/examples/lstm-sine.py", "--threads", "1", "--steps", "1"]),
    ("siamese", 25, ["bench/examples/siamese.purple", "--threads", "1"],
     ["bench/examples/siamese.py", "--threads", "1"]),
]
# Steps: training steps plus evaluation batches (mnist-cnn: 200 + 10; vae: 469 + 79; siamese:
# 20 + 5; lstm-sine: one LBFGS step of up to 20 closure evaluations); char-gpt and the
# transformer: their training steps.

MEMORY = re.compile(r"tensor memory: (\d+) freed early \(([\d.]+) MB\), (\d+) by the collector \(([\d.]+) MB\): "
                    r"([\d.]+)% of the bytes early; (\d+) tensor collections; peak ([\d.]+) MB")
RESULT = re.compile(r"^RESULT \S+ [\d.e+-]+ (\S+)", re.M)
FINAL_LOSS = re.compile(r"end at step \d+ after [\d.]+ s: val loss ([\d.]+)")
TIME = re.compile(r"TIME ([\d.]+) ([\d.]+) (\d+)")


def run(cmd, env=None):
    """Runs CMD under /usr/bin/time; returns (stdout+stderr, wall seconds, sys seconds, peak RSS KB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        full = ["/usr/bin/time", "-o", t.name, "-f", "TIME %e %S %M"] + cmd
        p = subprocess.run(full, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        m = TIME.search(open(t.name).read())
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:])
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode})")
    return p.stdout, float(m.group(1)), float(m.group(2)), int(m.group(3))


def check_of(output):
    m = RESULT.search(output) or FINAL_LOSS.search(output)
    return m.group(1) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--purple", default=os.path.join(ROOT, "build", "purple"))
    ap.add_argument("--before", default=None)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = []
    for name, steps, pcmd, ycmd in WORKLOADS:
        if only and name not in only:
            continue
        samples = {"purple": [], "python": [], "before": []}
        stats = before_stats = None
        checks = {}
        for rep in range(args.reps):
            out, wall, sys_s, rss = run([args.purple, "--memory-stats"] + pcmd, env)
            stats = MEMORY.search(out)
            if not stats:
                raise SystemExit(f"{name}: no tensor memory line in Purple's output")
            samples["purple"].append((wall, sys_s, rss))
            checks["purple"] = check_of(out)
            out, wall, sys_s, rss = run([args.python] + ycmd, env)
            samples["python"].append((wall, sys_s, rss))
            checks["python"] = check_of(out)
            if args.before:
                out, wall, sys_s, rss = run([args.before] + pcmd, env)
                samples["before"].append((wall, sys_s, rss))
                checks["before"] = check_of(out)
        med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in samples.items() if v}
        early = float(stats.group(5))
        collections = int(stats.group(6))
        rows.append((name, steps, early, collections, float(stats.group(2)), float(stats.group(4)), med, checks))
        print(f"{name}: {early:.2f}% early, {collections} collections in {steps} steps, "
              f"RSS {med['purple'][2] / 1024:.0f} MB vs {med['python'][2] / 1024:.0f} MB, "
              f"wall {med['purple'][0]:.1f} s vs {med['python'][0]:.1f} s, checks {checks}", flush=True)
    lines = [
        "| workload | bytes freed early | tensor collections / 20 steps | peak RSS Purple / Python | wall Purple / Python | "
        "sys Purple / Python | loss Purple | loss Python" + (" | loss before" if args.before else "") + " |",
        "|---|--:|--:|--:|--:|--:|--:|--:|" + ("--:|" if args.before else ""),
    ]
    for name, steps, early, coll, early_mb, late_mb, med, checks in rows:
        p, y = med["purple"], med["python"]
        lines.append(
            f"| {name} | {early:.2f}% ({early_mb:.0f} of {early_mb + late_mb:.0f} MB) | {coll * 20 / steps:.2f} ({coll} in {steps}) | "
            f"{p[2] / y[2]:.2f} ({p[2] / 1024:.0f} / {y[2] / 1024:.0f} MB) | {p[0] / y[0]:.2f} ({p[0]:.1f} / {y[0]:.1f} s) | "
            f"{p[1] / max(y[1], 0.01):.2f} ({p[1]:.2f} / {y[1]:.2f} s) | {checks.get('purple')} | {checks.get('python')}"
            + (f" | {checks.get('before')}" if args.before else "") + " |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# bench/memory/run.py, {time.strftime('%Y-%m-%d %H:%M')}\n\n")
            f.write(f"`{' '.join(sys.argv)}`; load average before: {os.getloadavg()[0]:.1f}\n\n{table}\n")


if __name__ == "__main__":
    main()
