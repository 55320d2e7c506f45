#!/usr/bin/python3
"""Side-by-side benchmarks: Purple against LibTorch C++, python3-torch, CPython and Guile.

Run through bench/run.sh (which installs guile-3.0 and `time` when missing). This script:
  1. builds what it needs: Purple (the normal build in build/, unless another build is running:
     then it waits for it), the C++ LibTorch programs (g++ against Debian's libtorch) and Guile's
     compiled cache;
  2. runs every workload REPS times, interleaved: each repetition runs every workload once in
     each language, so slow drift in machine load hits all sides alike;
  3. reports medians and ratios (Purple / other) against the goals of issue 7, writes
     bench/results/<date>.md (with the machine, versions and load) and replaces the README's
     benchmark section (between <!-- bench:begin --> and <!-- bench:end -->).

Every benchmark program prints "WORK name: what it did" and "RESULT name seconds checksum" for
its timed region (start-up excluded); the runner parses those lines and checks that the sides
agree on the checksum (the same work was done).

Options: --quick (small sizes, 1 repetition, results in <date>-quick.md, README untouched unless
--readme), --reps N, --threads A,B (LibTorch/OpenMP threads on every side: the training
workloads run at each count, the others at the first; default 1,nproc), --only a,b (workload
groups: dispatch mlp cnn counts examples interp startup; `counts` is bench/train/counts.py: page
faults and mmap/munmap/... calls per training step at each thread count; `examples` runs every
bench/examples/NAME.purple that has a NAME.py beside it, both sides with --threads T at each thread
count, and compares the whole process's wall time and peak RSS), --no-build, --readme/--no-readme,
--r7rs PATH (also the r7rs-benchmarks suite from a local copy at PATH, on Purple, chibi-scheme and
Guile 3 -O3, by bench/r7rs/run.py: results in <date>-r7rs.md).
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
BUILD = os.path.join(ROOT, "build")
PURPLE = os.path.join(BUILD, "purple")
BB = os.path.join(BENCH, "build")          # bench's own build outputs (ignored by git)
PY = "/usr/bin/python3"                    # Debian's, with python3-torch (the pyenv one has no torch)
GUILE = shutil.which("guile") or "/usr/bin/guile"
TIME = "/usr/bin/time"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ---------------------------------------------------------------------------------------------
# build

def build_purple(args):
    if args.no_build:
        return "skipped (--no-build)"
    waited = 0
    while True:
        r = sh(["pgrep", "-af", "cmake --build"])
        others = [l for l in r.stdout.splitlines() if l.strip()]
        if not others:
            break
        if waited == 0:
            log("bench: another build is running; waiting for it:\n  " + "\n  ".join(others))
        if waited >= args.build_wait:
            log("bench: still running after %d s; using the existing build/purple" % waited)
            return "not rebuilt (another build was running)"
        time.sleep(10)
        waited += 10
    log("bench: cmake --build %s -j2" % BUILD)
    r = subprocess.run(["cmake", "--build", BUILD, "-j2", "--target", "purple_cli"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        log(r.stdout[-3000:])
        if os.path.exists(PURPLE):
            log("bench: the build FAILED; measuring the existing build/purple")
            return "build FAILED; measured the existing binary"
        sys.exit("bench: the build failed and there is no build/purple")
    return "built"


def snapshot_purple():
    """Copies build/purple and its libpurple.so into bench/build/snapshot, so that another
    engineer's rebuild during the run cannot change (or lock) the binary being measured.
    The copy runs with LD_LIBRARY_PATH pointing at it (it takes precedence over the RUNPATH)."""
    global PURPLE
    snap = os.path.join(BB, "snapshot")
    os.makedirs(snap, exist_ok=True)
    for attempt in range(30):
        try:
            shutil.copy2(PURPLE, os.path.join(snap, "purple"))
            shutil.copy2(os.path.realpath(os.path.join(BUILD, "libpurple.so.0")), os.path.join(snap, "libpurple.so.0"))
            break
        except OSError as e:
            log("bench: copying the build failed (%s); retrying" % e)
            time.sleep(5)
    else:
        sys.exit("bench: could not copy build/purple")
    PURPLE = os.path.join(snap, "purple")
    return snap


def build_cxx():
    os.makedirs(BB, exist_ok=True)
    src = os.path.join(BENCH, "dispatch", "dispatch.cpp")
    exe = os.path.join(BB, "dispatch")
    if os.path.exists(exe) and os.path.getmtime(exe) > os.path.getmtime(src):
        return exe
    log("bench: g++ -O2 dispatch.cpp (LibTorch C++)")
    r = sh(["g++", "-O2", "-std=c++17", "-DNDEBUG", src, "-o", exe, "-ltorch_cpu", "-lc10"])
    if r.returncode != 0:
        log(r.stderr[-3000:])
        sys.exit("bench: could not build the C++ dispatch benchmark")
    return exe


def guile_env(compiled):
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = os.path.join(BB, "guile-cache" if compiled else "guile-nocache")
    return env


def build_guile():
    # Compile interp.scm into Guile's cache once, so timed runs of "Guile (compiled)" load bytecode.
    if os.path.exists(GUILE):
        sh([GUILE, os.path.join(BENCH, "interp", "interp.scm"), "fib", "5"], env=guile_env(True))


# ---------------------------------------------------------------------------------------------
# the workloads

class Case:
    """One program run: IMPL (a column) runs ARGV; GROUP names the workload group."""

    def __init__(self, group, impl, argv, env=None, rss=False, repeat=1, wall=None, suffix="", rss_metric="rss",
                 kernel_metric=None):
        self.group, self.impl, self.argv, self.env = group, impl, argv, env
        self.suffix = suffix    # appended to the metrics it reports ("@2t": at 2 threads)
        self.rss = rss          # wrap in /usr/bin/time (peak RSS, system time, minor page faults)
        self.rss_metric = rss_metric   # the metric the peak RSS goes under (+ suffix)
        # with rss: the prefix of the metrics the whole process's system time (PREFIX-sys) and
        # minor page faults (PREFIX-faults) go under (+ suffix); None: not recorded
        self.kernel_metric = kernel_metric
        self.repeat = repeat    # for wall-clock cases: runs per repetition
        self.wall = wall        # name of a wall-clock metric (start-up): the whole process is timed


def thread_env(t):
    return {k: str(t) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


EXAMPLES_DIR = os.path.join(BENCH, "examples")


def examples():
    """The names of bench/examples/NAME.purple that have a NAME.py beside them, sorted."""
    if not os.path.isdir(EXAMPLES_DIR):
        return []
    return sorted(f[:-len(".purple")] for f in os.listdir(EXAMPLES_DIR)
                  if f.endswith(".purple") and os.path.exists(os.path.join(EXAMPLES_DIR, f[:-len(".purple")] + ".py")))


def example_args(name, quick):
    """The arguments both sides of example NAME get besides --threads: those on its .purple file's
    `QUICK-ARGS:` comment line with --quick (a smaller size), else those on its `BENCH-ARGS:` line
    (a size that keeps the full run within minutes, where the example's own default takes longer),
    else none (the example's own)."""
    key = "QUICK-ARGS:" if quick else "BENCH-ARGS:"
    for line in open(os.path.join(EXAMPLES_DIR, name + ".purple")):
        if key in line:
            return line.split(key, 1)[1].split()
    return []


def example_cases(args):
    """Each example at every thread count, Purple and python3-torch side by side: the whole
    process's wall time (metric example-NAME@Tt) and peak RSS (example-NAME-rss@Tt); the timed
    region the program reports goes under its own RESULT name (NAME@Tt)."""
    out = []
    chosen = examples()
    if args.examples:
        wanted = args.examples.split(",")
        unknown = [w for w in wanted if w not in chosen]
        if unknown:
            sys.exit("bench: no example pair named %s in bench/examples" % ", ".join(unknown))
        chosen = [n for n in chosen if n in wanted]
    for name in chosen:
        extra = example_args(name, args.quick)
        for tn in args.thread_counts:
            sfx, e = "@%dt" % tn, thread_env(tn)
            argv = ["--threads", str(tn)] + extra
            for impl, cmd in (("purple", [PURPLE, os.path.join(EXAMPLES_DIR, name + ".purple")]),
                              ("python", [PY, os.path.join(EXAMPLES_DIR, name + ".py")])):
                out.append(Case("example-" + name, impl, cmd + argv, env=e, rss=True, suffix=sfx,
                                wall="example-%s%s" % (name, sfx), rss_metric="example-%s-rss" % name,
                                kernel_metric="example-%s" % name))
    return out


def example_goals(name):
    """The goals on example NAME's `BENCH-GOALS:` comment line beyond wall time and peak RSS
    (both always <= 1.0), as {"sys": "1.2"}: a row of the whole process's system time against
    python3-torch's with that goal. Every example's system time and page faults are in the
    results file's own section either way."""
    for line in open(os.path.join(EXAMPLES_DIR, name + ".purple")):
        if "BENCH-GOALS:" in line:
            words = line.split("BENCH-GOALS:", 1)[1].split()
            return dict(zip(words[::2], words[1::2]))
    return {}


def cases(args, sizes, cxx):
    t = str(args.threads)
    p = lambda *a: [PURPLE] + [os.path.join(BENCH, x) if x.endswith((".purple",)) else x for x in a]
    py = lambda *a: [PY] + [os.path.join(BENCH, x) if x.endswith(".py") else x for x in a]
    out = []
    if "dispatch" in args.only:
        n = str(sizes["dispatch"])
        out += [Case("dispatch", "purple", p("dispatch/dispatch.purple", n, t)),
                Case("dispatch", "c++", [cxx, n, t]),
                Case("dispatch", "python", py("dispatch/dispatch.py", n, t))]
    for tn in args.thread_counts:
        # Each training workload at every thread count (1 and nproc by default), as its own metrics.
        t, e, sfx = str(tn), thread_env(tn), "@%dt" % tn
        if "mlp" in args.only:
            lim = [str(sizes["mlp"])] if sizes["mlp"] else []
            out += [Case("mlp", "purple", p("train/mlp.purple", t, *lim), rss=True, env=e, suffix=sfx),
                    Case("mlp", "python", py("train/mlp.py", t, "index", *lim), rss=True, env=e, suffix=sfx),
                    Case("mlp", "python-test", py("train/mlp.py", t, "index+test", *lim), rss=True, env=e,
                         suffix=sfx),
                    Case("mlp", "python-dataloader", py("train/mlp.py", t, "dataloader", *lim), rss=True, env=e,
                         suffix=sfx)]
        if "cnn" in args.only:
            s = str(sizes["cnn"])
            out += [Case("cnn", "purple", p("train/cnn.purple", t, s), env=e, suffix=sfx),
                    Case("cnn", "python", py("train/cnn.py", t, s), env=e, suffix=sfx)]
    if "examples" in args.only:
        out += example_cases(args)
    if "interp" in args.only:
        scm = os.path.join(BENCH, "interp", "interp.scm")
        for w, size in sizes["interp"].items():
            s = [str(size)]
            out += [Case("interp", "purple", p("interp/interp.purple", w, *s)),
                    Case("interp", "cpython", py("interp/interp.py", w, *s))]
            if os.path.exists(GUILE):
                out += [Case("interp", "guile-eval", [GUILE, "--no-auto-compile", scm, w] + s,
                             env=guile_env(False)),
                        Case("interp", "guile", [GUILE, scm, w] + s, env=guile_env(True))]
    if "startup" in args.only:
        k = sizes["startup"]
        out += [Case("startup", "purple", [PURPLE, "-e", "1"], repeat=k, wall="startup"),
                Case("startup", "python", [PY, "-c", "import torch"], repeat=k, wall="startup")]
    return out


RESULT = re.compile(r"^RESULT (\S+) (\S+) ?(.*)$")


def run_case(case, env, samples, works, checks, errors):
    """Runs CASE once (or case.repeat times) and records what it printed."""
    for _ in range(case.repeat):
        e = dict(env)
        if case.env:
            e.update(case.env)
        argv = case.argv
        rssfile = None
        if case.rss and os.path.exists(TIME):
            fd, rssfile = tempfile.mkstemp(prefix="bench-rss-")
            os.close(fd)
            argv = [TIME, "-o", rssfile, "-f", "%M %S %R"] + argv
        t0 = time.perf_counter()
        try:
            r = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=900, cwd=ROOT)
        except subprocess.TimeoutExpired:
            errors.setdefault((case.group, case.impl), "timed out")
            return
        except OSError as ex:
            errors.setdefault((case.group, case.impl), "could not run: %s" % ex)
            return
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            lines = [l.strip() for l in (r.stderr + r.stdout).splitlines() if l.strip()]
            key = [l for l in lines if re.search(r"[Ee]rror|what\(\)|ASSERT|Assert|Traceback", l)]
            msg = "exit status %d: %s" % (r.returncode, " / ".join(key[:2]) if key else (lines[-1] if lines else ""))
            errors.setdefault((case.group, case.impl), msg[:300])
            log("bench: FAILED %s: %s" % (" ".join(case.argv), msg))
            return
        if case.wall:
            samples.setdefault((case.wall, case.impl), []).append(wall)
            works.setdefault((case.wall, case.impl), "the whole process `%s %s`, wall clock" % (
                os.path.basename(case.argv[0]), " ".join(case.argv[1:])))
        for line in r.stdout.splitlines():
            m = RESULT.match(line)
            if m:
                name, secs, check = m.group(1) + case.suffix, float(m.group(2)), m.group(3).strip()
                samples.setdefault((name, case.impl), []).append(secs)
                checks.setdefault((name, case.impl), check)
            elif line.startswith("WORK "):
                name = line[5:].split(":", 1)[0] + case.suffix
                works.setdefault((name, case.impl), line[5:].split(":", 1)[1].strip())
            elif line.startswith("CPU "):
                f = line.split()
                samples.setdefault((f[1] + case.suffix + "@cpu", case.impl), []).append(float(f[2]))
            elif line.startswith("RSS "):
                samples.setdefault(("rss-inproc" + case.suffix, case.impl), []).append(float(line.split()[1]))
        if rssfile:
            try:
                kb, sys_s, faults = map(float, open(rssfile).read().strip().splitlines()[-1].split())
                samples.setdefault((case.rss_metric + case.suffix, case.impl), []).append(kb * 1024)
                if case.kernel_metric:
                    samples.setdefault((case.kernel_metric + "-sys" + case.suffix, case.impl), []).append(sys_s)
                    samples.setdefault((case.kernel_metric + "-faults" + case.suffix, case.impl), []).append(faults)
            except ValueError:
                pass
            os.unlink(rssfile)


# ---------------------------------------------------------------------------------------------
# report

IMPL_NAMES = {
    "purple": "Purple", "c++": "LibTorch C++", "python": "python3-torch",
    "python-dataloader": "python3-torch (DataLoader)", "python-test": "python3-torch (test set loaded too)", "cpython": "CPython 3.11",
    "guile-eval": "Guile 3 (interpreted)", "guile": "Guile 3 (compiled)",
}

# (metric, label, unit, scale, [(other impl, goal, stretch)]); the training rows are
# expanded per thread count (training_rows).
TRAINING_ROWS = [
    ("mlp-epoch", "Fashion-MNIST MLP epoch, {t} thread(s)", "s", 1,
     [("python", "1.0", None), ("python-test", "1.0", None), ("python-dataloader", None, None)]),
    ("rss", "peak RSS, MLP epoch process, {t} thread(s)", "MB", 1 / 1e6,
     [("python", "1.0", None), ("python-test", "1.0", None), ("python-dataloader", None, None)]),
    ("cnn-step", "small CNN training step (batch 64), {t} thread(s)", "ms", 1e3, [("python", "1.0", None)]),
]
ROWS = [
    ("add", "dispatch: `(tensor-add x 1)`, 2 elements", "µs/iter", "per-iter",
     [("c++", "1.10", None), ("python", "0.8", None)]),
    ("matmul-relu", "dispatch: 4×4 matmul + relu", "µs/iter", "per-iter",
     [("c++", "1.10", None), ("python", "0.8", None)]),
    "training",
    "examples",
    # fib: issue 17's goal (issue 7's was 1.0, stretch 0.7); the other interpreter rows: issue 30's 0.8
    ("fib", "fib {fib}", "s", 1, [("cpython", "0.5", None), ("guile-eval", None, None), ("guile", None, None)]),
    ("tak", "tak 18 12 6 ×{tak}", "s", 1, [("cpython", "0.8", None), ("guile-eval", None, None), ("guile", None, None)]),
    ("list", "build + sum a {list}-element list ×5", "s", 1, [("cpython", "0.8", None), ("guile-eval", None, None), ("guile", None, None)]),
    ("closure", "closure-heavy map ×{closure}", "s", 1, [("cpython", "0.8", None), ("guile-eval", None, None), ("guile", None, None)]),
    ("symbol-hash", "hash table of {symbol-hash} symbol keys", "s", 1, [("cpython", "0.8", None), ("guile-eval", None, None), ("guile", None, None)]),
    ("startup", "start-up: `purple -e 1` vs `python3 -c \"import torch\"`", "s", 1, [("python", "0.5", None)]),
]


def all_rows(thread_counts):
    rows = []
    for r in ROWS:
        if r == "training":
            for t in thread_counts:
                rows += [("%s@%dt" % (m, t), label.replace("{t}", str(t)), u, sc, o) for m, label, u, sc, o in TRAINING_ROWS]
        elif r == "examples":
            # pytorch/examples ported (bench/examples): the whole process, loading and start-up included
            for name in examples():
                goals = example_goals(name)
                for t in thread_counts:
                    rows += [("example-%s@%dt" % (name, t), "example %s, %d thread(s): wall time" % (name, t), "s", 1,
                              [("python", "1.0", None)]),
                             ("example-%s-rss@%dt" % (name, t), "example %s, %d thread(s): peak RSS" % (name, t), "MB",
                              1 / 1e6, [("python", "1.0", None)])]
                    if "sys" in goals:
                        rows.append(("example-%s-sys@%dt" % (name, t), "example %s, %d thread(s): system time" % (name, t),
                                     "s", 1, [("python", goals["sys"], None)]))
        else:
            rows.append(r)
    return rows


def fmt(x):
    if x is None:
        return "—"
    a = abs(x)
    if a >= 100:
        return "%.0f" % x
    if a >= 10:
        return "%.1f" % x
    if a >= 1:
        return "%.2f" % x
    return "%.3f" % x


def same_check(a, b):
    if a is None or b is None:
        return None
    try:
        fa, fb = float(a), float(b)
        return abs(fa - fb) <= 1e-3 * max(1.0, abs(fa), abs(fb))
    except ValueError:
        return a == b


def build_table(samples, checks, errors, sizes, quick, thread_counts):
    lines = ["| workload | unit | Purple | vs | other | Purple ÷ other | goal | result |",
             "|---|---|--:|---|--:|--:|---|---|"]
    summary = []
    for metric, label, unit, scale, others in all_rows(thread_counts):
        label = label.format(**sizes["interp"])
        ps = samples.get((metric, "purple"))
        if metric in ("add", "matmul-relu"):
            sc = 1e6 / sizes["dispatch"]
        else:
            sc = scale
        pm = statistics.median(ps) * sc if ps else None
        first = True
        for impl, goal, stretch in others:
            os_ = samples.get((metric, impl))
            if os_ is None and ps is None:
                continue
            om = statistics.median(os_) * sc if os_ else None
            ratio = pm / om if (pm is not None and om) else None
            goaltxt = "—" if goal is None else ("≤ " + goal + (" (stretch " + stretch + ")" if stretch else ""))
            if goal is None:
                res = ""
            elif ratio is None:
                res = "no data"
            elif stretch is not None and ratio <= float(stretch):
                res = "**pass** (stretch too)"
            elif ratio <= float(goal):
                res = "**pass**"
            else:
                res = "FAIL"
            if goal is not None:
                summary.append((label, IMPL_NAMES[impl], ratio, goal, res))
            err = errors.get((metric_group(metric), impl))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label if first else "", unit if first else "",
                (fmt(pm) if pm is not None else ("failed¹" if (metric_group(metric), "purple") in errors else "—")) if first else "",
                IMPL_NAMES[impl], fmt(om) if om is not None else ("failed¹" if err else "—"),
                ("%.2f" % ratio) if ratio is not None else "—", goaltxt, res))
            first = False
    return lines, summary


def cpu_table(samples, sizes, thread_counts):
    """The same comparisons on processor time (all threads of the process) of the timed region."""
    lines = ["| workload | unit | Purple CPU | vs | other CPU | Purple ÷ other (CPU) | Purple ÷ other (wall) |",
             "|---|---|--:|---|--:|--:|--:|"]
    for metric, label, unit, scale, others in all_rows(thread_counts):
        ps = samples.get((metric + "@cpu", "purple"))
        if not ps:
            continue
        sc = 1e6 / sizes["dispatch"] if metric in ("add", "matmul-relu") else scale
        pm = statistics.median(ps) * sc
        pw = samples.get((metric, "purple"))
        first = True
        for impl, _, _ in others:
            os_ = samples.get((metric + "@cpu", impl))
            ow = samples.get((metric, impl))
            if not os_:
                continue
            om = statistics.median(os_) * sc
            wall = "%.2f" % (statistics.median(pw) / statistics.median(ow)) if pw and ow else "—"
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                label.format(**sizes["interp"]) if first else "", unit if first else "",
                fmt(pm) if first else "", IMPL_NAMES[impl], fmt(om),
                "%.2f" % (pm / om) if om else "—", wall))
            first = False
    return lines


def kernel_table(samples, thread_counts):
    """Each example's whole process: system time and minor page faults (from /usr/bin/time),
    medians, Purple against python3-torch."""
    lines = ["| example | threads | Purple sys (s) | python3-torch sys (s) | ÷ | Purple minor faults | "
             "python3-torch minor faults | ÷ |", "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for name in examples():
        for t in thread_counts:
            cells = []
            for kind, form in (("sys", "%.2f"), ("faults", "%.0f")):
                p = samples.get(("example-%s-%s@%dt" % (name, kind, t), "purple"))
                o = samples.get(("example-%s-%s@%dt" % (name, kind, t), "python"))
                pm = statistics.median(p) if p else None
                om = statistics.median(o) if o else None
                cells += [form % pm if pm is not None else "—", form % om if om is not None else "—",
                          "%.2f" % (pm / om) if pm is not None and om else "—"]
            if cells.count("—") < len(cells):
                lines.append("| %s | %d | %s |" % (name, t, " | ".join(cells)))
    return lines if len(lines) > 2 else []


def goal_line(summary):
    met = [s for s in summary if s[4].startswith("**pass")]
    missed = ["%s vs %s (%s, goal ≤ %s)" % (s[0].replace("`", ""), s[1],
                                           "%.2f" % s[2] if s[2] is not None else "no data", s[3])
              for s in summary if not s[4].startswith("**pass")]
    return "**Goals met: %d of %d.**%s" % (len(met), len(summary),
                                           (" Missed: " + "; ".join(missed) + ".") if missed else "")


def metric_group(metric):
    metric = metric.split("@")[0]
    if metric.startswith("example-"):
        for tail in ("-rss", "-sys", "-faults"):
            if metric.endswith(tail):
                return metric[:-len(tail)]
        return metric
    return {"add": "dispatch", "matmul-relu": "dispatch", "mlp-epoch": "mlp", "rss": "mlp",
            "cnn-step": "cnn", "startup": "startup"}.get(metric, "interp")


def machine_info():
    cpu, fam, model = "?", "?", "?"
    for line in open("/proc/cpuinfo"):
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "model name" and cpu == "?":
            cpu = v
        elif k == "cpu family" and fam == "?":
            fam = v
        elif k == "model" and model == "?":
            model = v
    cpu = "%s (family %s, model %s)" % (cpu, fam, model)
    mem = "?"
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal"):
            mem = "%.1f GiB" % (int(line.split()[1]) / 1024 / 1024)
    return {"cores": str(os.cpu_count()), "cpu": cpu, "memory": mem,
            "kernel": os.uname().release}


def versions():
    v = {}
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(PURPLE))
    r = sh([PURPLE, "--version"], env=env)
    git = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    v["Purple"] = "%s, git %s%s" % (r.stdout.strip(), git, " + uncommitted changes" if dirty else "")
    v["LibTorch"] = sh(["dpkg-query", "-W", "-f", "${Version}", "libtorch1.13"]).stdout.strip() + " (Debian libtorch1.13)"
    v["Python"] = sh([PY, "--version"]).stdout.strip()
    v["torch"] = sh([PY, "-c", "import torch, numpy; print(torch.__version__, '(python3-torch', end=''); "
                          "print('), numpy', numpy.__version__)"]).stdout.strip()
    g = sh([GUILE, "--version"]).stdout.splitlines() if os.path.exists(GUILE) else ["not installed"]
    v["Guile"] = g[0] if g else "?"
    v["g++"] = sh(["g++", "--version"]).stdout.splitlines()[0]
    blas = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    v["BLAS"] = blas
    return v


def write_results(args, sizes, samples, checks, works, errors, info, vers, load0, load1, build_state, started,
                  counts_md=None):
    date = started.strftime("%Y-%m-%d")
    os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
    name = date + ("-quick" if args.quick else "") + ".md"
    path = os.path.join(BENCH, "results", name)
    table, summary = build_table(samples, checks, errors, sizes, args.quick, args.thread_counts)
    md = []
    md.append("# Benchmarks, %s%s" % (started.strftime("%Y-%m-%d %H:%M UTC"), " (quick run: small sizes)" if args.quick else ""))
    md.append("")
    md.append("Command: `%s` · medians of %d run(s) per cell, interleaved "
              "(every repetition runs every workload on every side) · LibTorch/OpenMP threads on every side: "
              "training at %s, the rest at %d · flush-denormal on every side." % (
                  " ".join(["bash bench/run.sh"] + args.argv), args.reps,
                  " and ".join(map(str, args.thread_counts)), args.threads))
    md.append("")
    md.extend(table)
    md.append("")
    md.append(goal_line(summary))
    md.append("")
    if errors:
        md.append("¹ A run failed; the message is under Failures below.")
        md.append("")
    md.append("Ratios are Purple ÷ other: below 1 means Purple is faster (or smaller). Times are of the "
              "timed region each program reports (start-up excluded), except start-up (the whole process, "
              "wall clock), the examples' rows (the whole process, start-up and loading included) and peak RSS "
              "(`/usr/bin/time -f %M` on the whole MLP or example process, loading included).")
    md.append("")
    md.append("**Machine:** %s cores, %s, %s memory, Linux %s. **Load average** (1/5/15 min): %s at the start, "
              "%s at the end%s." % (info["cores"], info["cpu"], info["memory"], info["kernel"],
                                     load0, load1,
                                     " — the machine was shared, so timings are noisy" if float(load0.split()[0]) > 1.0 or float(load1.split()[0]) > 1.0 else ""))
    md.append("")
    md.append("**Versions:** " + "; ".join("%s: %s" % kv for kv in vers.items()) + ". Purple build: %s." % build_state)
    md.append("")
    md.append("## Processor time")
    md.append("")
    md.append("The same timed regions measured in CPU time (all threads of the process: Purple's GC marker "
              "and data-loader threads count). CPU time is less disturbed than wall time when other work "
              "shares the machine; the goals above are judged on wall time.")
    md.append("")
    md.extend(cpu_table(samples, sizes, args.thread_counts))
    md.append("")
    kernel = kernel_table(samples, args.thread_counts)
    if kernel:
        md.append("## The examples' system time and page faults")
        md.append("")
        md.append("The whole process of each example (start-up and loading included), from `/usr/bin/time`: "
                  "system (kernel) time and minor page faults, medians. Page faults are counted exactly, so "
                  "machine load does not blur them as it does times.")
        md.append("")
        md.extend(kernel)
        md.append("")
    if counts_md:
        md.append("## Memory traffic and thread activity per training step")
        md.append("")
        md.extend(counts_md)
        md.append("")
    md.append("## Same work on each side")
    md.append("")
    md.append("What each program reported doing (its `WORK` line), and whether the checksums agree:")
    md.append("")
    md.append("| metric | side | work | checksum |")
    md.append("|---|---|---|---|")
    metrics = []
    for (m, impl) in works:
        if m not in metrics:
            metrics.append(m)
    for m in metrics:
        ref = checks.get((m, "purple"))
        for impl in IMPL_NAMES:
            if (m, impl) not in works:
                continue
            c = checks.get((m, impl))
            agree = same_check(ref, c)
            mark = "" if c is None else (" ✓" if agree else (" (Purple: %s)" % ref if impl != "purple" else ""))
            if m == "mlp-epoch" and c is not None:
                # The mean training loss: the shuffling orders differ, so it agrees only roughly.
                close = ref is not None and abs(float(c) - float(ref)) < 0.05
                mark = " (mean loss; shuffles differ)" if impl == "purple" else (" ≈" if close else " (differs)")
            md.append("| %s | %s | %s | %s%s |" % (m, IMPL_NAMES[impl], works[(m, impl)].replace("|", "\\|"),
                                                    c if c is not None else "", mark))
    md.append("")
    if errors:
        md.append("## Failures")
        md.append("")
        for (g, impl), msg in errors.items():
            md.append("- %s / %s: `%s`" % (g, IMPL_NAMES.get(impl, impl), msg))
        md.append("")
    md.append("## All samples")
    md.append("")
    md.append("| metric | side | samples (s; bytes for RSS) |")
    md.append("|---|---|---|")
    for (m, impl), xs in samples.items():
        md.append("| %s | %s | %s |" % (m, IMPL_NAMES.get(impl, impl), ", ".join("%.4g" % x for x in xs)))
    md.append("")
    md.append("Sizes: " + ", ".join("%s=%s" % kv for kv in sizes.items()) + ".")
    md.append("")
    open(path, "w").write("\n".join(md))
    return path, table, summary, info, vers


def update_readme(path, table, summary, info, vers, load0, args, started):
    readme = os.path.join(ROOT, "README.md")
    text = open(readme).read()
    rel = os.path.relpath(path, ROOT)
    block = ["<!-- bench:begin -->", "## Benchmarks", "",
             "`bash bench/run.sh` builds what it needs, runs every workload side by side against LibTorch C++, "
             "python3-torch, CPython 3.11 and Guile 3 (5 interleaved repetitions; `--quick` for a smoke run), and "
             "writes a dated table to `bench/results/`. Ratios are Purple ÷ other (lower is better for Purple); "
             "goals are from issue 7. No timing is asserted in the test suite.", "",
             "Latest run (%s; %s cores, %s, %s; load average %s; training at %s thread(s), the rest at %d, "
             "on every side; full details, the work each side did and the page faults and mmap/munmap calls "
             "per training step: [%s](%s)):" % (
                 started.strftime("%Y-%m-%d"), info["cores"], info["cpu"], info["memory"], load0,
                 " and ".join(map(str, args.thread_counts)), args.threads, rel, rel), ""]
    block += table
    block += ["", goal_line(summary), "", "Profiles of where Purple falls short: `bench/results/*-profile.md`.", "<!-- bench:end -->"]
    new = "\n".join(block)
    if "<!-- bench:begin -->" in text and "<!-- bench:end -->" in text:
        text = re.sub(r"<!-- bench:begin -->.*?<!-- bench:end -->", lambda m: new, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    open(readme, "w").write(text)


def measure_counts(args, env):
    """bench/train/counts.py at every thread count: deterministic per-step counts (page faults,
    mmap/munmap/brk/madvise, futex calls, ...), which machine load does not blur as it does timings."""
    sys.path.insert(0, os.path.join(BENCH, "train"))
    import counts
    steps = (20, 60) if args.quick else (100, 300)
    result, err = counts.measure(PURPLE, args.thread_counts, steps, {"mlp", "cnn"}, env=env, log=log)
    if err:
        return ["Not measured: " + err + "."]
    return ["Per training step after warm-up: (count at %d steps − count at %d steps) / %d, from `perf stat` "
            "(`bench/train/counts.py --threads %s --steps %d,%d`)." % (
                steps[1], steps[0], steps[1] - steps[0], ",".join(map(str, args.thread_counts)), *steps),
            ""] + counts.table(result)


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 repetition")
    ap.add_argument("--reps", type=int, help="repetitions (default 5; 1 with --quick)")
    ap.add_argument("--threads", default="1,%d" % (os.cpu_count() or 1),
                    help="LibTorch/OpenMP threads on every side: training runs at each, the rest at the "
                         "first (default 1,nproc)")
    ap.add_argument("--only", default="dispatch,mlp,cnn,counts,examples,interp,startup", help="workload groups to run")
    ap.add_argument("--examples", default="", help="with the examples group: only these pairs (NAME,NAME...)")
    ap.add_argument("--no-build", action="store_true", help="measure the existing build/purple")
    ap.add_argument("--build-wait", type=int, default=300, help="seconds to wait for another build")
    ap.add_argument("--r7rs", metavar="PATH", help="also run r7rs-benchmarks from this local copy (bench/r7rs/run.py)")
    ap.add_argument("--readme", dest="readme", action="store_true", default=None)
    ap.add_argument("--no-readme", dest="readme", action="store_false")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    args.only = set(args.only.split(","))
    args.thread_counts = []
    for x in args.threads.split(","):
        if int(x) not in args.thread_counts:
            args.thread_counts.append(int(x))
    args.threads = args.thread_counts[0]
    if args.reps is None:
        args.reps = 1 if args.quick else 5
    if args.readme is None:
        args.readme = not args.quick
    started = datetime.datetime.utcnow()

    if args.quick:
        sizes = {"dispatch": 50000, "mlp": 6400, "cnn": 5, "startup": 2,
                 "interp": {"fib": 25, "tak": 10, "list": 100000, "closure": 200, "symbol-hash": 20000}}
    else:
        sizes = {"dispatch": 500000, "mlp": 0, "cnn": 50, "startup": 5,
                 "interp": {"fib": 30, "tak": 50, "list": 1000000, "closure": 1000, "symbol-hash": 200000}}

    build_state = build_purple(args)
    snap = snapshot_purple()
    cxx = build_cxx()
    build_guile()

    env = dict(os.environ)
    env.update(thread_env(args.threads))
    env.pop("PURPLE_GC_STRESS", None)
    env["LD_LIBRARY_PATH"] = snap + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")

    info, vers = machine_info(), versions()   # before the runs: the git state of the measured build
    load0 = open("/proc/loadavg").read().split()[:3]
    load0 = " ".join(load0)
    log("bench: load average %s; %d repetition(s)" % (load0, args.reps))
    all_cases = cases(args, sizes, cxx)
    samples, works, checks, errors = {}, {}, {}, {}
    for rep in range(args.reps):
        # Rotate the order of the sides within each group from one repetition to the next.
        groups = []
        for c in all_cases:
            key = (c.group, c.argv[-2:] if c.group == "interp" else (c.suffix if c.group.startswith("example-") else None))
            if not groups or groups[-1][0] != key:
                groups.append((key, []))
            groups[-1][1].append(c)
        for _, cs in groups:
            k = rep % len(cs)
            for c in cs[k:] + cs[:k]:
                log("bench: rep %d/%d: %s %s" % (rep + 1, args.reps, c.impl, " ".join(os.path.basename(a) for a in c.argv[:3])))
                run_case(c, env, samples, works, checks, errors)
    counts_md = None
    if "counts" in args.only:
        counts_md = measure_counts(args, env)
    load1 = " ".join(open("/proc/loadavg").read().split()[:3])

    path, table, summary, info, vers = write_results(args, sizes, samples, checks, works, errors, info, vers,
                                                     load0, load1, build_state, started, counts_md)
    if args.readme:
        update_readme(path, table, summary, info, vers, load0, args, started)
    if args.r7rs:
        r7 = os.path.join(BENCH, "results", started.strftime("%Y-%m-%d") + ("-quick" if args.quick else "") + "-r7rs.md")
        log("bench: r7rs-benchmarks from %s -> %s" % (args.r7rs, os.path.relpath(r7, ROOT)))
        subprocess.run([PY, os.path.join(BENCH, "r7rs", "run.py"), "--suite", args.r7rs, "--purple", PURPLE,
                        "--reps", str(min(args.reps, 3)), "--size", "quick" if args.quick else "full", "--out", r7],
                       env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    print("\n".join(table))
    print()
    print("uptime:", sh(["uptime"]).stdout.strip())
    print("results: %s%s" % (os.path.relpath(path, ROOT), " (README updated)" if args.readme else ""))


if __name__ == "__main__":
    main()
