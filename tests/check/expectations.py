"""`purple check` on programs with known mistakes (tests/check/bad/) and on correct ones
(tests/check/good/): every line marked `; expect: TEXT` gets a report containing TEXT, no other
line gets one, the exit status is 1 for bad programs and 0 for good ones, and nothing runs: each
bad program's first form would write check-ran-this.txt into the working folder. The programs in
tests/check/memory/ go through `purple check --memory` the same way (its exit status is 0).
Usage: python3 expectations.py PURPLE"""
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
failures = 0


def fail(message):
    global failures
    failures += 1
    print("FAIL:", message)


def run(purple, path, cwd, memory=False):
    # tests/check/lib/ is the library path (-I) of the programs that import user libraries
    return subprocess.run([purple, "check"] + (["--memory"] if memory else []) + ["-I", os.path.join(here, "lib"), path],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def main():
    purple = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("bad", "good", "memory"):
            folder = os.path.join(here, kind)
            for name in sorted(n for n in os.listdir(folder) if n.endswith(".purple")):
                path = os.path.join(folder, name)
                lines = open(path).read().split("\n")
                expected = {}
                for number, line in enumerate(lines, 1):
                    m = re.search(r";\s*expect:\s*(.*)$", line)
                    if m:
                        expected[number] = m.group(1).strip()
                if name == "reader-error.purple":
                    expected = {3: "unexpected end of input in list"}
                r = run(purple, path, tmp, memory=kind == "memory")
                reports = {}
                for out in r.stdout.splitlines():
                    m = re.match(re.escape(path) + r":(\d+):(\d+): (.*)$", out)
                    if not m:
                        fail(f"{name}: a report not in file:line:column: form: {out!r}")
                        continue
                    reports.setdefault(int(m.group(1)), []).append(m.group(3))
                for number, text in expected.items():
                    if not any(text in msg for msg in reports.get(number, [])):
                        fail(f"{name}:{number}: expected a report with {text!r}, got {reports.get(number)}")
                for number, msgs in reports.items():
                    if number not in expected:
                        fail(f"{name}:{number}: unexpected report {msgs}")
                want = 1 if expected and kind != "memory" else 0
                if r.returncode != want:
                    fail(f"{name}: exit status {r.returncode}, expected {want} ({r.stderr.strip()})")
                if os.path.exists(os.path.join(tmp, "check-ran-this.txt")):
                    fail(f"{name}: purple check evaluated the program (it wrote check-ran-this.txt)")
                print(f"{kind}/{name}: {sum(len(v) for v in reports.values())} reports")
        # The same programs do run when run: the marker proves something.
        subprocess.run([purple, os.path.join(here, "bad", "reader-error.purple")], cwd=tmp, capture_output=True, timeout=300)
        r = subprocess.run([purple, "-e", '(call-with-output-file "check-ran-this.txt" (lambda (p) (display 1 p)))'], cwd=tmp, timeout=300)
        if not os.path.exists(os.path.join(tmp, "check-ran-this.txt")):
            fail("the marker file is not written even when a program runs: the no-evaluation check proves nothing")
        r = subprocess.run([purple, "check", os.path.join(tmp, "no-such-file.purple")], capture_output=True, text=True, timeout=300)
        if r.returncode != 2 or "cannot read" not in r.stderr:
            fail(f"a missing file: status {r.returncode}, stderr {r.stderr!r}")
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
