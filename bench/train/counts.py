#!/usr/bin/python3
"""Memory traffic and thread activity per training step, Purple against python3-torch.

Deterministic counts, not timings: page faults, mmap/munmap/brk/madvise calls, futex calls,
context switches, signals delivered and TLB flushes, from the kernel's counters and tracepoints
(`perf stat`). Each workload runs twice, for S1 and S2 steps, with everything else the same;
(count(S2) - count(S1)) / (S2 - S1) is what one step costs after warm-up, with loading, start-up
and exit cancelled out.

    /usr/bin/python3 bench/train/counts.py [--threads 1,2] [--steps 100,300] [--only mlp,cnn]

Used by bench/runner.py (group `counts`), which puts the table in the results file.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
PY = "/usr/bin/python3"

EVENTS = [
    ("page-faults", "page faults"),
    ("syscalls:sys_enter_mmap", "mmap"),
    ("syscalls:sys_enter_munmap", "munmap"),
    ("syscalls:sys_enter_brk", "brk"),
    ("syscalls:sys_enter_madvise", "madvise"),
    ("syscalls:sys_enter_futex", "futex"),
    ("context-switches", "context switches"),
    ("signal:signal_deliver", "signals"),
    ("tlb:tlb_flush", "TLB flushes"),
]


def available_events(perf):
    """The events this kernel lets perf count (tracepoints need permission)."""
    ok = []
    for ev, label in EVENTS:
        r = subprocess.run([perf, "stat", "-x,", "-e", ev, "true"], capture_output=True, text=True)
        if r.returncode == 0 and "not supported" not in r.stderr and "<not" not in r.stderr:
            ok.append((ev, label))
    return ok


def perf_counts(perf, events, argv, env):
    fd, out = tempfile.mkstemp(prefix="bench-perf-")
    os.close(fd)
    try:
        r = subprocess.run([perf, "stat", "-x,", "-o", out, "-e", ",".join(e for e, _ in events)] + argv,
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
        if r.returncode != 0:
            raise RuntimeError("exit %d: %s" % (r.returncode, (r.stderr or r.stdout)[-300:]))
        counts = {}
        for line in open(out):
            f = line.strip().split(",")
            if len(f) >= 3 and not line.startswith("#"):
                try:
                    counts[f[2]] = float(f[0])
                except ValueError:
                    counts[f[2]] = None
        rss = None
        for line in r.stdout.splitlines():
            if line.startswith("RSS "):
                rss = float(line.split()[1])
        return counts, rss
    finally:
        os.unlink(out)


def workloads(purple, only):
    """(name, side, argv(threads, steps)) for every workload."""
    p = lambda *a: [purple] + [os.path.join(BENCH, x) if x.endswith(".purple") else x for x in a]
    py = lambda *a: [PY] + [os.path.join(BENCH, x) if x.endswith(".py") else x for x in a]
    out = []
    if "mlp" in only:
        out.append(("MLP step (data loader, batch 64)", "Purple", lambda t, s: p("train/mlp.purple", t, "0", s)))
        out.append(("MLP step (data loader, batch 64)", "python3-torch", lambda t, s: py("train/mlp.py", t, "index", "0", s)))
        out.append(("MLP step (data loader, batch 64)", "python3-torch (DataLoader)",
                    lambda t, s: py("train/mlp.py", t, "dataloader", "0", s)))
    if "cnn" in only:
        out.append(("CNN step (batch 64)", "Purple", lambda t, s: p("train/cnn.purple", t, s)))
        out.append(("CNN step (batch 64)", "python3-torch", lambda t, s: py("train/cnn.py", t, s)))
    return out


def measure(purple, threads, steps, only, env=None, log=lambda *a: None):
    perf = shutil.which("perf")
    if not perf:
        return None, "perf is not installed (apt-get install linux-perf): no counts"
    events = available_events(perf)
    if not events:
        return None, "perf may not count events here (perf_event_paranoid?): no counts"
    s1, s2 = steps
    rows = []
    base_env = dict(env or os.environ)
    for t in threads:
        e = dict(base_env)
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            e[k] = str(t)
        for name, side, argv in workloads(purple, only):
            log("counts: %s / %s, %d thread(s), %d and %d steps" % (name, side, t, s1, s2))
            try:
                c1, _ = perf_counts(perf, events, argv(str(t), str(s1)), e)
                c2, rss = perf_counts(perf, events, argv(str(t), str(s2)), e)
            except (RuntimeError, subprocess.TimeoutExpired) as ex:
                rows.append((name, side, t, None, str(ex)))
                continue
            per = {}
            for ev, _ in events:
                a, b = c1.get(ev), c2.get(ev)
                per[ev] = (b - a) / (s2 - s1) if a is not None and b is not None else None
            rows.append((name, side, t, per, None))
    return (events, rows), None


def table(result):
    events, rows = result
    head = "| workload | side | threads | " + " | ".join(label for _, label in events) + " |"
    lines = [head, "|---|---|--:|" + "--:|" * len(events)]
    for name, side, t, per, err in rows:
        if per is None:
            lines.append("| %s | %s | %d | failed: %s |" % (name, side, t, err))
            continue
        cells = []
        for ev, _ in events:
            v = per[ev]
            cells.append("—" if v is None else ("%.1f" % v if abs(v) < 100 else "%.0f" % v))
        lines.append("| %s | %s | %d | %s |" % (name, side, t, " | ".join(cells)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--purple", default=os.path.join(ROOT, "build", "purple"))
    ap.add_argument("--threads", default="1,%d" % (os.cpu_count() or 1))
    ap.add_argument("--steps", default="100,300")
    ap.add_argument("--only", default="mlp,cnn")
    args = ap.parse_args()
    threads = sorted({int(x) for x in args.threads.split(",")})
    steps = tuple(int(x) for x in args.steps.split(","))
    result, err = measure(args.purple, threads, steps, set(args.only.split(",")),
                          log=lambda *a: print(*a, file=sys.stderr, flush=True))
    if err:
        sys.exit("counts: " + err)
    print("Per training step after warm-up: (count at %d steps − count at %d steps) / %d." % (steps[1], steps[0], steps[1] - steps[0]))
    print()
    print("\n".join(table(result)))


if __name__ == "__main__":
    main()
