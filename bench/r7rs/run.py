#!/usr/bin/python3
"""The r7rs-benchmarks suite (github.com/ecraven/r7rs-benchmarks), run side by side on Purple,
chibi-scheme and Guile 3 (compiled with `guild compile -O3`, as the suite's own script does).

The suite's sources are not part of this repository: give the path of a local copy.

    python3 bench/r7rs/run.py --suite ~/src/r7rs-benchmarks [--chibi PATH] [--reps N]
                              [--only fib,tak] [--size full|quick|original] [--out FILE.md]

Each program is assembled as the suite's `bench` script does (prelude, program, common.scm,
postlude, common-postlude.scm) and reads its input from stdin. The inputs are scaled (the SIZES
table below): the suite's own counts are sized for native compilers and would take hours in
interpreters; every scaled input keeps the program's own correctness check, with expected
results computed by Guile where the parameters changed. `--size original` runs the suite's inputs.

What is measured for each run: the timed region the program reports ("Elapsed time", wall
clock, start-up excluded), and the CPU time of the whole process minus that of the same system
running an empty program (start-up and exit), from wait4. A run counts only when the program
printed its result line and not "INCORRECT" / "ERROR".

The suite's `inputs/bib` (used by cat, tail and wc) is stored in Git LFS upstream and may be
missing from a copy; then a deterministic text of the same size is generated and wc's expected
counts are computed from it.

Used by bench/runner.py (`bash bench/run.sh --r7rs PATH`), or on its own.
"""
import argparse
import datetime
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ORDER = ("browse deriv destruc diviter divrec puzzle triangl tak takl ntakl cpstak ctak "
         "fib fibc fibfp sum sumfp fft mbrot mbrotZ nucleic pi pnpoly ray simplex "
         "ack array1 string sum1 cat tail wc read1 "
         "compiler conform dynamic earley graphs lattice matrix maze mazefun nqueens paraffins parsing "
         "peval primes quicksort scheme slatex chudnovsky nboyer sboyer gcbench mperm equal bv2string").split()

# Scaled inputs. An int replaces the iteration count (the first datum of the input; M for mperm);
# a string replaces the whole input (parameters and the expected result, computed with Guile).
# "full": about 1-3 s a program in chibi-scheme on a 2 GHz Xeon; "quick": about 10x less.
SIZES = {
    "full": {
        "browse": 10, "deriv": 100000, "destruc": 20, "diviter": 10000, "divrec": 10000,
        "puzzle": 5, "triangl": 1, "tak": "150\n18\n12\n6\n7\n",
        "takl": "8\n(18 17 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1)\n(12 11 10 9 8 7 6 5 4 3 2 1)\n(6 5 4 3 2 1)\n7\n",
        "ntakl": "15\n(18 17 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1)\n(12 11 10 9 8 7 6 5 4 3 2 1)\n(6 5 4 3 2 1)\n7\n",
        "cpstak": "20\n18\n12\n6\n7\n", "ctak": "1\n18\n12\n6\n7\n",
        "fib": "2\n30\n832040\n", "fibc": "3\n20\n6765\n", "fibfp": "3\n27.0\n196418.0\n",
        "sum": 1000, "sumfp": 2, "fft": 1, "mbrot": 4, "mbrotZ": 3, "nucleic": 1, "pi": 1,
        "pnpoly": 100000, "ray": 1, "simplex": 10000, "ack": "1\n3\n9\n4093\n", "array1": 1,
        "string": 5, "sum1": 3, "cat": 1, "tail": 4, "wc": 1, "read1": 150,
        "compiler": 6, "conform": 2, "dynamic": 4, "earley": "1\n10\n4862\n", "graphs": "5\n5\n596\n",
        "lattice": "200\n33\n10\n", "matrix": 6, "maze": 40, "mazefun": 30, "nqueens": "10\n9\n352\n",
        "paraffins": "5\n19\n148284\n", "parsing": 10, "peval": 4, "primes": 60, "quicksort": 6,
        "scheme": 1000, "slatex": 2, "chudnovsky": 1000, "nboyer": "1\n1\n591777\n",
        "sboyer": "1\n1\n591777\n", "gcbench": "1\n14\n0\n", "mperm": "1\n9\n2\n1\n0\n", "equal": 1,
        "bv2string": 1,
    },
}


def quick_sizes():
    q = {}
    for name, s in SIZES["full"].items():
        q[name] = max(1, s // 10) if isinstance(s, int) else s
    q.update({"tak": "15\n18\n12\n6\n7\n", "cpstak": "2\n18\n12\n6\n7\n", "ctak": "1\n12\n8\n4\n5\n",
              "fib": "1\n25\n75025\n", "fibc": "1\n15\n610\n", "fibfp": "1\n22.0\n17711.0\n",
              "ack": "1\n3\n7\n1021\n", "earley": "1\n8\n429\n", "graphs": "1\n4\n44\n",
              "nqueens": "1\n7\n40\n", "paraffins": "1\n16\n10359\n", "gcbench": "1\n10\n0\n",
              "nboyer": "1\n0\n95024\n", "sboyer": "1\n0\n95024\n", "lattice": "20\n33\n10\n"})
    return q


SIZES["quick"] = quick_sizes()


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def scaled_input(text, size):
    if size is None:
        return text
    if isinstance(size, str):
        return size
    # the first datum that is a number (mperm's input starts with comments)
    return re.sub(r"^((?:\s|;[^\n]*\n)*)\d+", lambda m: m.group(1) + str(size), text, count=1)


# ---- the bib file ---------------------------------------------------------------------------

def make_bib(path):
    """A deterministic stand-in for the suite's inputs/bib (4.4 MB of BibTeX)."""
    words = ("the of and a to in is for on that with as by an be are this from at or which "
             "programming language scheme lisp compiler garbage collection continuation closure "
             "type system semantics interpreter macro hygiene evaluation procedure recursion "
             "journal proceedings conference symposium acm sigplan notices volume pages year").split()
    out, state, size = [], 12345, 0
    entry = 0
    while size < 4460000:
        entry += 1
        lines = ["@article{key%d," % entry]
        for field in ("author", "title", "journal", "year", "pages"):
            n = 3 + state % 9
            ws = []
            for _ in range(n):
                state = (state * 1103515245 + 12345) % 2147483648
                ws.append(words[(state >> 8) % len(words)])
            lines.append("  %s = {%s}," % (field, " ".join(ws)))
        lines.append("}")
        lines.append("")
        block = "\n".join(lines) + "\n"
        out.append(block)
        size += len(block)
    text = "".join(out)
    with open(path, "w") as f:
        f.write(text)
    return text


def wc_counts(text):
    nl = nw = 0
    inword = False
    for ch in text:
        if ch == " ":
            inword = False
        elif ch == "\n":
            nl += 1
            inword = False
        else:
            if not inword:
                nw += 1
            inword = True
    return nl, nw, len(text)


# ---- systems --------------------------------------------------------------------------------

class System:
    def __init__(self, key, name, prelude, postlude):
        self.key, self.name, self.prelude, self.postlude = key, name, prelude, postlude

    def prepare(self, program, workdir):
        """Compiles PROGRAM when the system compiles; returns the argv that runs it."""
        raise NotImplementedError

    def env(self):
        return dict(os.environ)


class Purple(System):
    def __init__(self, suite, binary):
        super().__init__("purple", "Purple", os.path.join(HERE, "purple-prelude.scm"), None)
        self.binary = binary

    def prepare(self, program, workdir):
        return [self.binary, program]

    def version(self):
        return sh([self.binary, "--version"]).stdout.strip()


class Chibi(System):
    def __init__(self, suite, binary):
        super().__init__("chibi", "chibi-scheme", os.path.join(suite, "src", "Chibi-prelude.scm"),
                         os.path.join(suite, "src", "Chibi-postlude.scm"))
        self.binary = binary
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(binary)))
        self.libdir = os.path.join(prefix, "lib")
        self.modpath = ":".join(p for p in (os.path.join(prefix, "share", "chibi"), os.path.join(prefix, "lib", "chibi"),
                                            os.path.join(os.path.dirname(binary), "lib")) if os.path.isdir(p))

    def env(self):
        e = dict(os.environ)
        e["LD_LIBRARY_PATH"] = self.libdir + (":" + e["LD_LIBRARY_PATH"] if e.get("LD_LIBRARY_PATH") else "")
        if self.modpath:
            e["CHIBI_MODULE_PATH"] = self.modpath
        return e

    def prepare(self, program, workdir):
        return [self.binary, "-m", "scheme.load", "-e", '(load "%s")' % program]

    def version(self):
        r = sh([self.binary, "-V"], env=self.env())
        return (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr) else "?"


class Guile(System):
    def __init__(self, suite, binary, cache):
        super().__init__("guile", "Guile 3 -O3", os.path.join(suite, "src", "Guile-prelude.scm"), None)
        self.binary = binary
        # `guild compile -O3 FILE` (guild is in guile-3.0-dev; the same compiler module is in guile-3.0)
        self.compile = [binary, "-c", '(apply (@ (scripts compile) compile) (cdr (command-line)))', "-O3"]
        self.cache = cache

    def env(self):
        e = dict(os.environ)
        e["XDG_CACHE_HOME"] = self.cache
        e["GC_INITIAL_HEAP_SIZE"] = "100000000"   # as the suite's bench script runs Guile
        e.pop("GUILE_AUTO_COMPILE", None)
        return e

    def prepare(self, program, workdir):
        r = sh(self.compile + [program], env=self.env(), cwd=workdir)
        if r.returncode != 0:
            raise RuntimeError("guild compile failed: " + (r.stderr or r.stdout)[-400:])
        return [self.binary, program]

    def version(self):
        return sh([self.binary, "--version"]).stdout.splitlines()[0]


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def run_timed(argv, stdin_path, cwd, env, timeout):
    """Runs ARGV with wait4, so the child's own CPU time is known exactly."""
    t0 = time.perf_counter()
    stdin = open(stdin_path)
    outpath = os.path.join(cwd, ".out")
    out = open(outpath, "w")
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.dup2(stdin.fileno(), 0)
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    stdin.close()
    out.close()
    deadline = t0 + timeout
    timed_out = False
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            break
        if time.perf_counter() > deadline:
            os.kill(pid, 9)
            _, status, ru = os.wait4(pid, 0)
            timed_out = True
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    text = open(outpath, errors="replace").read()
    if timed_out:
        text += "\nTIMEOUT"
    elif status != 0:
        text += "\nEXIT STATUS %d" % status
    return text, ru.ru_utime + ru.ru_stime, wall


ELAPSED = re.compile(r"Elapsed time: (\S+) seconds")


def assemble(system, suite, name, workdir):
    parts = [system.prelude, os.path.join(suite, "src", name + ".scm"), os.path.join(suite, "src", "common.scm"),
             system.postlude, os.path.join(suite, "src", "common-postlude.scm")]
    text = "".join(open(p).read() for p in parts if p and os.path.exists(p))
    path = os.path.join(workdir, "%s-%s.scm" % (name, system.key))
    with open(path, "w") as f:
        f.write(text)
    return path


def setup_workdir(suite, workdir):
    """The programs open inputs/... and write outputs/... relative to the current directory."""
    inputs = os.path.join(workdir, "inputs")
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(os.path.join(workdir, "outputs"), exist_ok=True)
    src = os.path.join(suite, "inputs")
    for f in os.listdir(src):
        link = os.path.join(inputs, f)
        target = os.path.join(src, f)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
    bib = os.path.join(inputs, "bib")
    note = None
    if not os.path.exists(bib) or os.path.getsize(bib) < 1000:   # absent, or a Git LFS pointer
        if os.path.lexists(bib):
            os.unlink(bib)
        text = make_bib(bib)
        note = "the suite's inputs/bib was missing (Git LFS); a generated text of %d bytes stood in for it" % len(text)
    # wc's expected counts, from the file that is there
    with open(bib, encoding="latin-1") as f:
        return note, wc_counts(f.read())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", required=True, help="path of a local copy of ecraven/r7rs-benchmarks")
    ap.add_argument("--purple", default=os.path.join(ROOT, "build", "purple"))
    ap.add_argument("--chibi", default=shutil.which("chibi-scheme"), help="chibi-scheme binary")
    ap.add_argument("--guile", default=shutil.which("guile"))
    ap.add_argument("--systems", default="purple,chibi,guile")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--size", default="full", choices=["full", "quick", "original"])
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "bench", "build", "r7rs"))
    ap.add_argument("--out", help="write the markdown report here")
    args = ap.parse_args(argv)
    report = run(args)
    text = "\n".join(report["markdown"])
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return report


def run(args):
    suite = os.path.abspath(os.path.expanduser(args.suite))
    if not os.path.isfile(os.path.join(suite, "src", "common.scm")):
        sys.exit("r7rs: %s does not look like r7rs-benchmarks (no src/common.scm)" % suite)
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    bibnote, wc = setup_workdir(suite, workdir)
    wanted = [s for s in args.systems.split(",") if s]
    systems = []
    for key in wanted:
        if key == "purple":
            systems.append(Purple(suite, args.purple))
        elif key == "chibi":
            if args.chibi and os.path.exists(args.chibi):
                systems.append(Chibi(suite, args.chibi))
            else:
                log("r7rs: no chibi-scheme (give --chibi PATH); its column is left out")
        elif key == "guile":
            if args.guile and os.path.exists(args.guile):
                systems.append(Guile(suite, args.guile, os.path.join(workdir, "guile-cache")))
            else:
                log("r7rs: no guile; its column is left out")
    names = [n for n in ORDER if not args.only or n in args.only.split(",")]
    sizes = SIZES.get(args.size, {})
    # inputs
    for n in names:
        text = open(os.path.join(suite, "inputs", n + ".input")).read()
        text = scaled_input(text, sizes.get(n))
        if n == "wc" and wc is not None:
            text = re.sub(r"\(\s*\d+\s+\d+\s+\d+\s*\)", "(%d %d %d)" % wc, text)
        with open(os.path.join(workdir, n + ".in"), "w") as f:
            f.write(text)
    # empty programs: each system's start-up and exit, subtracted from its CPU times
    empty_in = os.path.join(workdir, "empty.in")
    open(empty_in, "w").close()
    baseline = {}
    programs = {}
    for s in systems:
        prog = os.path.join(workdir, "empty-%s.scm" % s.key)
        with open(prog, "w") as f:
            f.write((open(s.prelude).read() if s.prelude else "") + "\n(display \"ok\")\n(newline)\n")
        argv = s.prepare(prog, workdir)
        cpus = []
        for _ in range(3):
            _, cpu, _ = run_timed(argv, empty_in, workdir, s.env(), 120)
            cpus.append(cpu)
        baseline[s.key] = statistics.median(cpus)
        for n in names:
            path = assemble(s, suite, n, workdir)
            try:
                programs[(s.key, n)] = s.prepare(path, workdir)
            except RuntimeError as e:
                programs[(s.key, n)] = e
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    started = datetime.datetime.utcnow()
    wall, cpu, status = {}, {}, {}
    for rep in range(args.reps):
        for n in names:
            k = rep % len(systems) if systems else 0
            for s in systems[k:] + systems[:k]:
                p = programs[(s.key, n)]
                if isinstance(p, Exception):
                    status[(s.key, n)] = "compile error"
                    continue
                if status.get((s.key, n), "ok") != "ok":
                    continue   # failed once: not run again
                out, c, w = run_timed(p, os.path.join(workdir, n + ".in"), workdir, s.env(), args.timeout)
                m = ELAPSED.search(out)
                if "TIMEOUT" in out:
                    status[(s.key, n)] = "timeout (%d s)" % args.timeout
                elif not m or "INCORRECT" in out or "ERROR" in out:
                    tail = " / ".join(l.strip() for l in out.strip().splitlines()[-3:])
                    status[(s.key, n)] = "failed: " + tail[-200:]
                else:
                    wall.setdefault((s.key, n), []).append(float(m.group(1)))
                    cpu.setdefault((s.key, n), []).append(max(0.0, c - baseline[s.key]))
                log("r7rs: rep %d/%d %-10s %-6s %s" % (rep + 1, args.reps, n, s.key,
                                                     ("%.3f s" % float(m.group(1))) if m and status.get((s.key, n), "ok") == "ok" else status.get((s.key, n))))
    load1 = " ".join(open("/proc/loadavg").read().split()[:3])
    return report(args, suite, systems, names, wall, cpu, status, baseline, load0, load1, started, bibnote)


def gmean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def report(args, suite, systems, names, wall, cpu, status, baseline, load0, load1, started, bibnote):
    med = lambda d, k: statistics.median(d[k]) if k in d else None
    keys = [s.key for s in systems]
    md = []
    others = [s for s in systems if s.key != "purple"]
    md.append("Suite: %s (%s), sizes: `%s`, %d repetition(s), medians; load average %s at the start, %s at the end."
              % (os.path.basename(suite), sh(["git", "-C", suite, "rev-parse", "--short", "HEAD"]).stdout.strip() or "no git",
                 args.size, args.reps, load0, load1))
    md.append("")
    md.append("Systems: " + "; ".join("%s (%s)" % (s.name, s.version()) for s in systems) + ".")
    if bibnote:
        md.append("")
        md.append("Note: " + bibnote + ".")
    md.append("")
    head = "| benchmark | " + " | ".join("%s (s)" % s.name for s in systems)
    head += " | " + " | ".join("%s CPU (s)" % s.name for s in systems)
    head += "".join(" | Purple ÷ %s" % s.name for s in others) + " |"
    md.append(head)
    md.append("|---|" + "--:|" * (2 * len(systems) + len(others)))
    ratios = {s.key: [] for s in others}
    cpu_ratios = {s.key: [] for s in others}
    slower = {s.key: [] for s in others}
    for n in names:
        row = ["| %s" % n]
        for s in systems:
            v = med(wall, (s.key, n))
            row.append(("%.3f" % v) if v is not None else status.get((s.key, n), "—").split(":")[0])
        for s in systems:
            v = med(cpu, (s.key, n))
            row.append(("%.3f" % v) if v is not None else "—")
        p = med(wall, ("purple", n))
        pc = med(cpu, ("purple", n))
        for s in others:
            o = med(wall, (s.key, n))
            oc = med(cpu, (s.key, n))
            if p is not None and o:
                r = p / o
                ratios[s.key].append(r)
                if r > 1.0:
                    slower[s.key].append("%s %.2f" % (n, r))
                row.append("%.2f" % r)
            else:
                row.append("—")
            if pc and oc:
                cpu_ratios[s.key].append(pc / oc)
        md.append(" | ".join(row) + " |")
    md.append("")
    ok = {s.key: sum(1 for n in names if (s.key, n) in wall) for s in systems}
    md.append("Programs that ran correctly: " + ", ".join("%s %d of %d" % (s.name, ok[s.key], len(names)) for s in systems) + ".")
    md.append("")
    for s in others:
        g, gc = gmean(ratios[s.key]), gmean(cpu_ratios[s.key])
        md.append("Purple ÷ %s, geometric mean over the %d programs both ran: **%s** (wall, timed region); %s (CPU time minus start-up). Slower than %s: %s."
                  % (s.name, len(ratios[s.key]), "%.2f" % g if g else "—", "%.2f" % gc if gc else "—", s.name,
                     ", ".join(slower[s.key]) if slower[s.key] else "none"))
    failures = [(k, n, v) for (k, n), v in status.items() if v != "ok"]
    if failures:
        md.append("")
        md.append("Failures: " + "; ".join("%s/%s: `%s`" % (k, n, v) for k, n, v in failures) + ".")
    md.append("")
    md.append("Start-up CPU subtracted (empty program): " + ", ".join("%s %.3f s" % (s.name, baseline[s.key]) for s in systems) + ".")
    return {"markdown": md, "wall": wall, "cpu": cpu, "status": status, "ratios": ratios}


if __name__ == "__main__":
    main()
