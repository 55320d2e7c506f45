#!/usr/bin/env python3
"""Runs the GPU benchmark pairs of bench/gpu/ (each workload once in Purple, then once in
python-torch, repeated while the time budget allows) and writes a Markdown table of medians.

usage: python3 bench/gpu/run.py --purple PATH --python PATH [--device cuda] [--seconds 180]
                               [--out results.md] [--log raw.log] [--corpus FILE] [--reps 3]
                               [--only NAME,NAME] [--quick]

  --purple   the purple binary (a CUDA build for --device cuda)
  --python   the interpreter whose torch is the other side (e.g. /opt/torch/.venv/bin/python3)
  --device   cuda (default), cuda:N or cpu
  --seconds  (or --budget) the time budget of the whole run (default 180). No program starts
             after it; one that runs on is killed 45 s after it, so run.py ends by budget + 50 s.
             The first repetition starts every main workload while there is time; the two extra
             ones (mlp-host, chargpt-gpt10m-bf16-sdpa) only where the budget has room for their
             estimate. Later repetitions (up to --reps in all) run each workload whose last pair
             took less than the time left, so the cheap workloads get more samples. On an H200,
             python-torch's side of one repetition takes about 65 s for the main workloads and
             about 90 s for all (mostly process start-up and CUDA initialisation); Purple's side
             comes on top.
  --out      the Markdown report (default bench/gpu/results-<device>-<time>.md), rewritten after
             every pair, so a run cut short still leaves one
  --log      the raw log: every command, exit status, time, stdout and stderr (default: the
             report's path with -raw.log in place of .md)
  --corpus   the char-GPT text file; default: gen-corpus.py writes one into the temporary
             directory
  --only     a comma-separated subset of: mlp cnn dispatch memloop chargpt-small chargpt-gpt10m
             mlp-host chargpt-gpt10m-bf16-sdpa
  --quick    tiny sizes and one repetition, to check everything end to end on a CPU
  --timeout  seconds one program may run before it is killed (default 150; 300 for --quick)

Standard library only. A program that is missing, fails, times out or prints no RESULT line is
recorded under "Failures" and the run goes on; the report is always written and the exit status is
0 unless the arguments are wrong.
Every program prints "RESULT name value extra" lines (value: seconds, microseconds or tokens/s;
extra: a loss or checksum, shown in the check column), "MEM name bytes|n/a", "WORK name: ...";
char-gpt "LOSS name ..." and memloop "INFO name ..." lines go into the report's notes.
"""
import argparse
import datetime
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def workloads(device, corpus, quick):
    """(key, script, arguments for both sides, extra) in running order. Extra workloads run in the
    first repetition only while the budget has room for ESTIMATE seconds (both sides, measured on
    an H200 with python-torch 2.11 and doubled); the others always run once."""
    def gpt(preset, *extra):
        return ["--device", device, "--corpus", corpus, "--preset", preset] + list(extra)

    if quick:
        small = ["--max-iters", "8", "--warmup-steps", "2", "--eval-iters", "2"]
        big = ["--block-size", "32", "--batch-size", "2", "--max-iters", "3", "--warmup-steps", "1", "--eval-iters", "1"]
        return [
            ("mlp", "mlp", [device, "2000", "device", "fp32", "amp"], None),
            ("cnn", "cnn", [device, "5", "fp32", "amp", "bf16"], None),
            ("dispatch", "dispatch", [device, "2000"], None),
            ("memloop", "memloop", [device, "20", "512"], None),
            ("chargpt-small", "char-gpt", gpt("small", *small), None),
            ("chargpt-gpt10m", "char-gpt", gpt("gpt10m", *big), None),
            ("mlp-host", "mlp", [device, "2000", "host", "fp32"], 30),
            ("chargpt-gpt10m-bf16-sdpa", "char-gpt", gpt("gpt10m", "--amp", "1", "--sdpa", "1", *big), 30),
        ]
    return [
        ("mlp", "mlp", [device, "60000", "device", "fp32", "amp"], None),
        ("cnn", "cnn", [device, "300", "fp32", "amp", "bf16"], None),
        ("dispatch", "dispatch", [device, "100000"], None),
        ("memloop", "memloop", [device, "2000", "4096"], None),
        ("chargpt-small", "char-gpt", gpt("small", "--max-seconds", "4", "--warmup-steps", "10", "--eval-iters", "4"),
         None),
        ("chargpt-gpt10m", "char-gpt", gpt("gpt10m", "--max-seconds", "4", "--warmup-steps", "3", "--eval-iters", "2"),
         None),
        ("mlp-host", "mlp", [device, "60000", "host", "fp32"], 25),
        ("chargpt-gpt10m-bf16-sdpa", "char-gpt", gpt("gpt10m", "--amp", "1", "--sdpa", "1", "--max-seconds", "4",
                                                     "--warmup-steps", "3", "--eval-iters", "2"), 35),
    ]


# name prefix -> (unit, which way is better); the ratio is always Purple / Python
UNITS = [
    ("mlp-epoch", "s per epoch", "lower"),
    ("cnn-step", "s per step", "lower"),
    ("dispatch", "µs per iteration", "lower"),
    ("-loop", "s per loop", "lower"),
    ("chargpt", "tokens/s", "higher"),
]


def unit_of(name, kind):
    if kind == "MEM":
        return "peak bytes allocated", "lower"
    for key, unit, better in UNITS:
        if key in name:
            return unit, better
    return "", ""


class Log:
    def __init__(self, path):
        self.path = path
        try:
            self.f = open(path, "w", encoding="utf-8", errors="replace")
        except OSError as e:
            print("run.py: cannot write the log %s (%s); logging to stderr" % (path, e), file=sys.stderr)
            self.f = sys.stderr

    def write(self, text):
        try:
            self.f.write(text)
            self.f.flush()
        except (OSError, ValueError):
            pass


def run_program(argv, timeout, env, log):
    """Runs ARGV; returns (rc or None, seconds, stdout, stderr, note). Never raises."""
    t0 = time.time()
    log.write("\n$ %s\n" % " ".join(argv))
    try:
        p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
    except OSError as e:
        log.write("could not start: %s\n" % e)
        return None, time.time() - t0, "", "", "could not start: %s" % e
    note = ""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        note = "killed after %d s" % timeout
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            out, err = p.communicate(timeout=30)
        except Exception:   # noqa: BLE001 - whatever happens, the run goes on
            out, err = b"", b""
    except Exception as e:  # noqa: BLE001
        note = "error while running: %s" % e
        out, err = b"", b""
    dt = time.time() - t0
    out = (out or b"").decode("utf-8", "replace")
    err = (err or b"").decode("utf-8", "replace")
    log.write("exit status %s after %.1f s%s\n--- stdout\n%s--- stderr\n%s--- end\n"
              % (p.returncode, dt, (" (" + note + ")") if note else "", out, err))
    return p.returncode, dt, out, err, note


def parse_lines(text):
    """RESULT/MEM/LOSS/WORK lines -> list of (kind, name, value, extra)."""
    found = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] in ("RESULT", "MEM") and len(parts) >= 3:
            value = parts[2]
            try:
                value = float(value)
            except ValueError:
                value = None   # "n/a"
            found.append((parts[0], parts[1], value, " ".join(parts[3:])))
        elif parts[0] in ("LOSS", "INFO") and len(parts) >= 3:
            found.append((parts[0], parts[1], None, " ".join(parts[2:])))
        elif parts[0] == "WORK" and len(parts) >= 2:
            found.append(("WORK", parts[1].rstrip(":"), None, line[len("WORK "):]))
    return found


def tail(text, lines=6):
    return " | ".join(text.strip().splitlines()[-lines:])


def capture(argv, timeout=60):
    try:
        r = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return r.stdout.decode("utf-8", "replace").strip()
    except Exception as e:  # noqa: BLE001
        return "(%s: %s)" % (argv[0], e)


def fmt_value(v, kind, unit):
    if v is None:
        return "n/a"
    if kind == "MEM":
        return "%.0f (%.1f MiB)" % (v, v / 2 ** 20)
    if unit == "tokens/s":
        return "%.0f" % v
    return "%.4g" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--purple", default=os.path.join(ROOT, "build", "purple"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seconds", "--budget", dest="budget", type=float, default=180.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--log")
    ap.add_argument("--corpus")
    ap.add_argument("--only")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--timeout", type=float)
    a = ap.parse_args()

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.abspath(a.out or os.path.join(HERE, "results-%s-%s.md" % (a.device.replace(":", ""), stamp)))
    outdir = os.path.dirname(out)
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError:
        pass
    log = Log(os.path.abspath(a.log or os.path.splitext(out)[0] + "-raw.log"))
    reps = 1 if a.quick else max(1, a.reps)
    timeout = a.timeout or (300 if a.quick else 150)
    purple = os.path.abspath(a.purple) if os.sep in a.purple else a.purple
    python = a.python
    started = time.time()
    st = State()

    corpus = a.corpus
    if not corpus:
        corpus = os.path.join(tempfile.gettempdir(), "purple-gpu-bench-corpus.txt")
        rc, _, o, e, note = run_program([sys.executable, os.path.join(HERE, "gen-corpus.py"), corpus], 120,
                                        os.environ.copy(), log)
        if rc != 0:
            st.failures.append(("corpus", "gen-corpus.py", 0, "exit %s %s %s" % (rc, note, tail(o + e))))
    corpus = os.path.abspath(corpus)

    chosen = workloads(a.device, corpus, a.quick)
    if a.only:
        want = [w.strip() for w in a.only.split(",") if w.strip()]
        unknown = [w for w in want if w not in [c[0] for c in chosen]]
        if unknown:
            ap.error("unknown workload(s) %s; choose from %s" % (", ".join(unknown), " ".join(c[0] for c in chosen)))
        chosen = [w for w in chosen if w[0] in want]

    env = os.environ.copy()
    env["PYTHONUNBUFFERED"] = "1"
    if not a.device.startswith("cuda"):
        # LibTorch 1.13's oneDNN dies with SIGILL in its AMX bfloat16 kernels on some CPUs;
        # Purple applies this cap itself, python-torch needs it in the environment
        env.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")

    log.write("run.py %s\nstarted %s, budget %.0f s, device %s, purple %s, python %s, corpus %s\n"
              % (" ".join(sys.argv[1:]), stamp, a.budget, a.device, purple, python, corpus))
    machine = machine_info(a.device, python, purple, corpus, log.path)

    def report():
        write_report(out, a, stamp, time.time() - started, chosen, st, machine)

    grace = 45.0         # a program started within the budget may run this long past it
    pair_cost = {}       # workload -> seconds its last pair took
    for rep in range(1, reps + 1):
        ran = 0
        for key, script, args, estimate in chosen:
            elapsed = time.time() - started
            need = pair_cost.get(key, 0) if rep > 1 else (estimate or 0)
            if elapsed + need > a.budget or elapsed >= a.budget:
                if rep == 1:
                    st.skipped.append(key)
                    print("[%6.1f s] rep 1 %-26s skipped: %d s of the budget left, it needs about %d s"
                          % (elapsed, key, max(0, a.budget - elapsed), need), flush=True)
                continue
            cost = 0.0
            for side, argv in (("purple", [purple, os.path.join(HERE, script + ".purple")] + args),
                               ("python", [python, os.path.join(HERE, script + ".py")] + args)):
                limit = max(10.0, min(timeout, a.budget + grace - (time.time() - started)))
                rc, dt, o, e, note = run_program(argv, limit, env, log)
                cost += dt
                try:
                    status = st.record(key, side, rep, rc, o, e, note)
                except Exception as ex:  # noqa: BLE001 - whatever happens, the run goes on
                    status = "FAILED: run.py could not read the output: %r" % (ex,)
                    st.failures.append((key, side, rep, status))
                print("[%6.1f s] rep %d %-26s %-6s %s (%.1f s)" % (time.time() - started, rep, key, side, status, dt),
                      flush=True)
            pair_cost[key] = cost
            ran += 1
            report()
        if ran == 0:
            break

    report()
    print("report: %s\nraw log: %s\n%d program runs in %.0f s, %d failure(s)"
          % (out, log.path, st.runs, time.time() - started, len(st.failures)), flush=True)
    return 0


class State:
    """Everything the programs printed, by side."""

    def __init__(self):
        self.samples = {}    # (kind, name) -> {"purple": [(value, extra)], "python": [...], "workload": key}
        self.order = []      # first-seen order of (kind, name)
        self.work = {}       # (side, name) -> WORK text
        self.losses = {}     # (side, name) -> [LOSS text]
        self.info = {}       # (side, name) -> [INFO text]
        self.failures = []   # (workload, side, rep, reason)
        self.skipped = []    # extra workloads the budget left out
        self.runs = 0

    def record(self, key, side, rep, rc, out, err, note):
        """Files one program's output; returns a status word for the progress line."""
        self.runs += 1
        found = parse_lines(out)
        results = [f for f in found if f[0] in ("RESULT", "MEM")]
        for kind, name, value, extra in found:
            if kind == "WORK":
                self.work.setdefault((side, name), extra)
            elif kind == "LOSS":
                self.losses.setdefault((side, name), []).append(extra)
            elif kind == "INFO":
                self.info.setdefault((side, name), []).append(extra)
            else:
                if (kind, name) not in self.samples:
                    self.samples[(kind, name)] = {"purple": [], "python": [], "workload": key}
                    self.order.append((kind, name))
                self.samples[(kind, name)][side].append((value, extra))
        if rc == 0 and results:
            return "ok"
        reason = note or ("exit status %s" % rc if rc != 0 else "no RESULT line")
        self.failures.append((key, side, rep, "%s; %s" % (reason, tail(err + "\n" + out))))
        return "FAILED: %s; %s" % (reason, tail(err or out, 2))


def machine_info(device, python, purple, corpus, log_path):
    info = ["host: %s, %s, %d CPUs, load average %s" % (platform.node(), platform.platform(), os.cpu_count() or 0,
                                                        " ".join("%.2f" % x for x in os.getloadavg()))]
    if device.startswith("cuda"):
        info.append("GPU: %s" % capture(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                         "--format=csv,noheader"]).replace("\n", "; "))
    info.append("python-torch: %s" % capture([python, "-c", "import sys, torch; print(sys.version.split()[0], "
                                                            "'torch', torch.__version__, 'cuda', torch.version.cuda, "
                                                            "'cudnn', torch.backends.cudnn.version())"]
                                             ).replace("\n", "; "))
    info.append("purple: %s" % purple)
    info.append("corpus: %s (%s bytes)" % (corpus, os.path.getsize(corpus) if os.path.exists(corpus) else "missing"))
    info.append("raw log: %s" % log_path)
    return info


def median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def write_report(out, a, stamp, total, chosen, st, machine):
    lines = []
    w = lines.append
    w("# Purple against python-torch on %s%s" % (a.device, " (--quick)" if a.quick else ""))
    w("")
    w("Run %s by `bench/gpu/run.py %s`: %d program runs in %.0f s (budget %.0f s). Each workload runs once in "
      "Purple, then once in python-torch, repeated while the budget allows; the table gives medians. "
      "Ratio = Purple ÷ Python: below 1 means Purple is faster for times, above 1 for tokens/s."
      % (stamp, " ".join(sys.argv[1:]), st.runs, total, a.budget))
    w("")
    w("| workload | unit | Purple | Python | Purple ÷ Python | better | samples P/Py | check: Purple / Python |")
    w("|---|---|---|---|---|---|---|---|")
    for kind, name in st.order:
        s = st.samples[(kind, name)]
        unit, better = unit_of(name, kind)
        mp, my = median(v for v, _ in s["purple"]), median(v for v, _ in s["python"])
        ratio = "%.2f" % (mp / my) if mp is not None and my not in (None, 0) else "—"
        check = "%s / %s" % (s["purple"][-1][1] if s["purple"] else "—", s["python"][-1][1] if s["python"] else "—")
        w("| %s%s | %s | %s | %s | %s | %s | %d/%d | %s |"
          % (name, " (MEM)" if kind == "MEM" else "", unit, fmt_value(mp, kind, unit), fmt_value(my, kind, unit),
             ratio, better, len(s["purple"]), len(s["python"]), check))
    for c in chosen:
        if not any(st.samples[x]["workload"] == c[0] for x in st.order):
            what = "skipped (budget)" if c[0] in st.skipped else "no result"
            w("| %s | | %s | %s | — | | 0/0 | |" % (c[0], what, what))
    w("")
    w("The check column holds each side's last extra field: the mean or final training loss (mlp, cnn), a "
      "checksum (dispatch, loop) or the number of timed steps (chargpt). Same-seed fp32 losses should agree "
      "closely; autocast runs may differ in the last digits.")
    for title, table in (("Char-GPT validation loss before and after the timed steps, and the last training loss:",
                          st.losses),
                         ("Allocator and collector counters (memory loop: after the loop; char-GPT: the whole run):", st.info)):
        if not table:
            continue
        w("")
        w(title)
        w("")
        for (side, name), vals in sorted(table.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            w("- %s %s: %s" % (name, side, "; ".join(vals)))
    w("")
    w("## Failures")
    w("")
    if st.failures:
        for key, side, rep, reason in st.failures:
            w("- %s, %s, repetition %d: %s" % (key, side, rep, reason.replace("|", "\\|")))
    else:
        w("None.")
    w("")
    w("## Samples")
    w("")
    for kind, name in st.order:
        s = st.samples[(kind, name)]
        w("- %s %s: Purple %s; Python %s" % (kind, name, [v for v, _ in s["purple"]], [v for v, _ in s["python"]]))
    w("")
    w("## What each program did")
    w("")
    for (side, name), text in sorted(st.work.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        w("- %s: %s" % (side, text))
    w("")
    w("## Machine")
    w("")
    for item in machine:
        w("- " + item)
    w("")
    text = "\n".join(lines)
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print("run.py: cannot write %s (%s); the report follows\n%s" % (out, e, text), flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report, never a traceback without a word
        print("run.py: unexpected error: %r" % (e,), file=sys.stderr)
        raise
