"""The profilers against programs with a known answer (tests/profile/*.purple).

usage: run.py PURPLE CHECK   where CHECK is memory, sampling, operators or names

The lines a report must name are marked `; MARK: ...` in the programs, so the checks follow
the files when they are edited.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def marked_line(path, mark):
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if "MARK: " + mark in line:
                return number
    raise SystemExit(f"no MARK: {mark} in {path}")


def run(args, env=None, cwd=HERE):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout)
        print(r.stderr)
        raise SystemExit(f"{args} exited with {r.returncode}")
    return r


def memory(purple, tmp):
    env = dict(os.environ, PROFILE_TMP=tmp)
    out = run([purple, "leak.purple"], env=env).stdout
    print(out)
    graph_line = marked_line(os.path.join(HERE, "leak.purple"), "graph-held activations")
    loss_line = marked_line(os.path.join(HERE, "leak.purple"), "loss tensor keeps its graph")
    hoard_line = marked_line(os.path.join(HERE, "leak.purple"), "hoarded values")
    top = re.search(r'^TOP \("([^"]*)" (\d+) "([^"]*)" (\d+)\)$', out, re.M)
    check(top is not None, "the report has a top row")
    if top:
        check(top.group(1) == "leak.purple" and int(top.group(2)) == graph_line and top.group(3) == "forward",
              f"the largest memory is forward's matmul line (leak.purple:{graph_line}), held by graphs: {top.groups()}")
        # 20 graphs kept, each saving the [64 1024] float activation of relu (256 KiB); a cell or two
        # may still be alive (the collector scans the stack conservatively), so at least 15 of them
        check(int(top.group(4)) >= 15 * 64 * 1024 * 4, "its bytes are held by autograd graphs")
    table = out.split("DIFFTOP")[0]
    check(re.search(rf"leak\.purple:{loss_line}\s+loop in train-keeping-tensors", table) is not None,
          f"the graphs' holders are the losses made at leak.purple:{loss_line} in train-keeping-tensors")
    check(re.search(rf"leak\.purple:{hoard_line}\s+loop in hoard", table) is not None,
          f"the hoarded values are named at leak.purple:{hoard_line} in hoard")
    check(re.search(rf"^\s*195\.3 KiB\s+195\.3 KiB\s+0 B\s+0 B\s+50\s+leak\.purple:{hoard_line}", table, re.M) is not None,
          "the hoard line holds 50 tensors of 4000 bytes, all in values")
    diff = re.search(r'^DIFFTOP \("([^"]*)" (\d+) "([^"]*)" (\d+)\)$', out, re.M)
    check(diff is not None and int(diff.group(2)) == graph_line and int(diff.group(4)) > 0,
          "the diff's largest growth is the graph-held line")
    with open(os.path.join(tmp, "after.snap")) as f:
        check(f.read().startswith("(purple-tensor-memory-snapshot 1 "), "the snapshot file was written")
    after = re.search(r"^GRAPH-AFTER-DROP (\d+)$", out, re.M)
    check(after is not None and int(after.group(1)) == 0, "dropping the losses frees their graphs")


def sampling(purple, tmp):
    prefix = os.path.join(tmp, "hot")
    r = run([purple, "--profile", "--profile-out", prefix, "hot.purple"])
    print(r.stderr)
    hot_line = marked_line(os.path.join(HERE, "hot.purple"), "hot line")
    check(r.stdout.strip().startswith("3464"), "the program's own output is on standard output")
    procedures, lines = r.stderr.split("Time by source line")
    rows = [l for l in procedures.splitlines() if "%" in l and "samples" not in l]
    # busy-sum's body is a named let in tail position: its loop replaces it on the stack, and is
    # named after it
    check(any("loop in busy-sum (hot.purple:4)" in l and float(l.split()[5].rstrip("%")) > 50 for l in rows),
          "busy-sum's loop is on the stack in most samples (cumulative)")
    line_rows = [l for l in lines.splitlines() if re.match(r"\s*[\d.]+ s", l)]
    check(bool(line_rows) and f"hot.purple:{hot_line}" in line_rows[0],
          f"the line with the most self time is hot.purple:{hot_line}: {line_rows[:1]}")
    check(bool(line_rows) and "loop in busy-sum" in line_rows[0], "that line is named with its procedure")
    total = 0
    with open(prefix + ".folded") as f:
        folded = f.read().splitlines()
    for line in folded:
        m = re.match(r"^(.+) (\d+)$", line)
        check(m is not None and all(m.group(1).split(";")), f"folded line parses: {line[:80]}")
        total += int(m.group(2)) if m else 0
    check(total > 0 and any("loop in busy-sum (hot.purple:4)" in l for l in folded), "the folded stacks pass through busy-sum")
    svg = ET.parse(prefix + ".svg").getroot()
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    check(any(t and t.startswith("loop in busy-sum") for t in titles), "the flame graph has a box for busy-sum")


def names(purple, tmp):
    prefix = os.path.join(tmp, "names")
    r = run([purple, "--profile", "--profile-out", prefix, "names.purple"])
    print(r.stderr)
    procedures, lines = r.stderr.split("Time by source line")
    do_line = marked_line(os.path.join(HERE, "names.purple"), "do loop")
    fit_line = marked_line(os.path.join(HERE, "names.purple"), "fit call")
    check("#<module>" not in procedures, "no module is named #<module>")
    check(re.search(r"  net$", procedures, re.M) is not None, "the model called at the top is named net, its define-module name")
    check("net.layer1 (Sequential)" in procedures, "its submodule layer1 is named by its path, net.layer1, and type")
    check("net.layer1.0.fc (Linear)" in procedures,
          "a submodule called inside a block that sequential ran is named by its whole path, net.layer1.0.fc")
    check(re.search(r"^\s*\S+ s\s+\S+%\s+\S+ s\s+\S+%\s+(Sequential|Linear)\b", procedures, re.M) is None,
          "inside fit too, every module is named from the model (no Sequential or Linear at the root of a path)")
    check(f"do loop (line {do_line}) in train" in procedures and "do-loop" not in procedures,
          f"the do loop is named by its procedure and line (do loop (line {do_line}) in train), not a gensym")
    line_rows = [l for l in lines.splitlines() if re.match(r"\s*[\d.]+ s", l)]
    fit_rows = [l for l in line_rows if f"names.purple:{fit_line} " in l]
    # fit reaches its loop by tail calls, which replace fit's own call on the stack: its time is
    # the loop's, and the line calling fit gets all of it
    loop_rows = [l for l in procedures.splitlines() if l.endswith(")") and "epoch-loop in fit" in l]
    loop_seconds = float(loop_rows[0].split()[3]) if loop_rows else None
    check(len(fit_rows) == 1 and loop_seconds and float(fit_rows[0].split()[3]) >= loop_seconds,
          f"the line calling fit (names.purple:{fit_line}) is in the by-line table with the time fit's loop "
          f"took ({loop_seconds} s): {fit_rows}")
    with open(prefix + ".folded") as f:
        folded = f.read()
    check("net.layer1.0.fc (Linear)" in folded, "the folded stacks name modules the same way")


def operators(purple, tmp):
    env = dict(os.environ, PROFILE_TMP=tmp)
    out = run([purple, "ops.purple"], env=env).stdout
    print(out)
    line = marked_line(os.path.join(HERE, "ops.purple"), "forward ops")
    check(re.search(r"^aten::mm\s.*\[\[128, 64\], \[64, 32\]\].*ops\.purple:%d \(step\)" % line, out, re.M) is not None,
          f"the table has aten::mm with its input shapes and the line that ran it (ops.purple:{line}, step)")
    events = int(re.search(r"^EVENTS (\d+)$", out, re.M).group(1))
    with open(os.path.join(tmp, "trace.json")) as f:
        trace = json.load(f)
    ops = trace["traceEvents"]
    check(len(ops) == events and events > 0, f"the trace holds every event ({len(ops)} of {events})")
    names = {e["name"] for e in ops}
    check({"aten::mm", "aten::relu", "aten::sum"} <= names, f"the trace names aten operators: {sorted(names)[:8]}")
    check(all(e["ph"] == "X" and e["dur"] >= 0 and "ts" in e for e in ops), "every event is a complete event with a duration")
    mm = [e for e in ops if e["name"] == "aten::mm" and e["cat"] == "cpu_op"]
    check(any(e["args"].get("Purple source") == f"ops.purple:{line} (step)" for e in mm),
          "aten::mm carries the Purple source of its call")
    # aten::mm asks aten::empty for its result: the bytes are aten::mm's, so sorted by memory the
    # first operator is one that asked for memory, not aten::empty
    m = re.search(r"^MEMTOP (\S+) (-?\d+)$", out, re.M)
    check(m is not None and m.group(1) not in ("aten::empty", "aten::empty_strided") and int(m.group(2)) > 0,
          f"sorted by self memory, the first operator is one that asked for memory: {m and m.groups()}")
    e = re.search(r"^EMPTYSELF (-?\d+)$", out, re.M)
    check(e is not None and int(e.group(1)) == 0, "aten::empty called by other operators keeps no bytes of its own")
    backward = [e for e in ops if e["cat"] == "backward"]
    check(any("MmBackward" in e["name"] and e["args"].get("Purple source") == f"ops.purple:{line} (step)" for e in backward),
          "MmBackward carries the forward call's line through the sequence number")


def main():
    purple, what = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        {"memory": memory, "sampling": sampling, "operators": operators, "names": names}[what](purple, tmp)
    if failures:
        print(f"{len(failures)} checks failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
