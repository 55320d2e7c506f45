#!/usr/bin/python3
"""Per-category breakdown of a perf profile recorded with call graphs (--call-graph dwarf).

  perf script -i FILE.data | bench/profile/breakdown.py SIDE [ITERATIONS [BASELINE.txt]]

SIDE picks the rule set: purple, cxx or python; or "top" to list the leaf functions (self time)
of the kept samples instead. Each sample goes to the first category (in
rule order) whose pattern matches its stack; samples of start-up and exit (module import,
prelude loading, atexit/finalizers at exit) are dropped. Record with a cpu-clock sampling
period (perf record -F 2000 --call-graph dwarf: one sample per 0.5 ms of CPU, on every thread);
with ITERATIONS (how many loop iterations the profiled run did), each category is also given in
CPU microseconds per iteration (sample count x period / iterations, all threads included).
BASELINE.txt is the `perf script` text of the same program run with 1 iteration: its samples
(start-up, set-up, exit that the patterns above miss) are subtracted category by category, so
only the loop's cost remains.
"""
import re
import sys

# (category, regex on a frame's symbol or DSO). Shared LibTorch rules come first in every set,
# so "the op" means the same code on every side: at::_ops::*::call and the wrapping of the
# Python/Purple number 1 into a 0-d tensor (C++ does that inside add.Scalar, Python in its
# argument parser, Purple in binaryOperands).
DROP = r"Py_FinalizeEx|Py_InitializeFromConfig|PyImport_Import|_find_and_load|__cxa_finalize|\bexit\b|_dl_start|_dl_init|_dl_fini|_dl_relocate|_dl_map_object|dl_open|" \
       r"purple::Interp::Interp\b|purple::gcInit"
OP = ("LibTorch: the op itself (dispatch, TensorIterator, kernel, result allocation)",
      r"at::_ops::\w+::call|wrapped_scalar_tensor|scalar_tensor_static|purple::wrappedScalar")
RULES = {
    "purple": [
        ("GC: running tensor finalizers (frees the dropped results)",
         r"finalizeTensor|GC_invoke_finalizers"),
        ("GC: wrapping the result (cell allocation, finalizer registration, collections it triggers)",
         r"purple::wrapTensor"),
        ("releasing dropped and overwritten results (set! reusing the cell, stack cells of nested calls)",
         r"purple::assignFreshTensor|ScratchTensors|purple::releaseTensor"),
        OP,
        ("GC: marker thread", r"^COMM:GC-marker"),
        ("GC: other (allocation, collection)", r"LEAF:libgc\.so"),
        ("boundary: argument conversion and the builtin call (Invoker, callPrimitiveApp)",
         r"purple::Invoker|purple::callPrimitiveApp|purple::.*primitiveApp|purple::.*(Arg|Scalar|Conv)"),
        ("evaluator (eval loop, variable lookup, calls, safe points)", r"purple::"),
        ("other", r"."),
    ],
    "cxx": [
        OP,
        ("releasing the previous result (~Tensor, free)", r"~TensorImpl|intrusive_ptr|release_resources|\bfree\b|_int_free"),
        ("the loop itself", r"."),
    ],
    # Start-up (no samples dropped): where the time of `purple -e 1` / `python3 -c "import torch"` goes.
    "startup": [
        ("exit: library destructors (_dl_fini, atexit)", r"_dl_fini|__cxa_finalize|\bexit\b|Py_FinalizeEx"),
        ("dynamic loading: static initializers of the libraries (_dl_init: LibTorch's operator registration)",
         r"_dl_init"),
        ("dynamic loading: mapping and symbol relocation (_dl_relocate_object, do_lookup_x)",
         r"_dl_relocate|_dl_lookup|do_lookup_x|_dl_map|_dl_start|_dl_sysdep|_dl_protect"),
        ("Python: importing torch's Python modules", r"PyImport|_find_and_load|PyEval|python3"),
        ("Purple: interpreter and prelude start-up", r"purple::|GC_init"),
        ("other (kernel: exec, page faults)", r"."),
    ],
    "python": [
        OP,
        ("releasing the previous result (THPVariable_dealloc, ~Tensor)",
         r"THPVariable_dealloc|THPVariable_subclass_dealloc|~TensorImpl|subtype_dealloc"),
        ("binding: wrapping the result (THPVariable_Wrap)", r"THPVariable_Wrap|THPVariable_NewWithVar"),
        ("binding: argument parsing and the call (PythonArgParser, libtorch_python)",
         r"PythonArg|FunctionSignature|FunctionParameter|libtorch_python"),
        ("Python interpreter (eval loop, range, attribute lookup)", r"."),
    ],
}


def samples(stream):
    """Yields (comm, [frame strings]) per sample of `perf script` output."""
    comm, frames, period = None, [], 0
    for line in stream:
        if not line.strip():
            if comm is not None:
                yield comm, frames, period
            comm, frames = None, []
        elif line[0] not in " \t":
            f = line.split()
            comm, frames = f[0], []
            period = next((int(x) for x, y in zip(f, f[1:]) if x.isdigit() and y.startswith("cpu-clock")), 0)
        else:
            parts = line.strip().split(" ", 1)
            frames.append(parts[1] if len(parts) > 1 else parts[0])
    if comm is not None:
        yield comm, frames, period


def short(frame):
    f = re.sub(r"\+0x[0-9a-f]+ \(", " (", frame)
    f = re.sub(r"^[0-9a-f]+ ", "", f)
    f = re.sub(r"std::_Hashtable<.*>::", "std::unordered_map<...>::", f)
    f = re.sub(r"\(anonymous namespace\)", "(anon)", f)
    m = re.match(r"(.*) \((\S+)\)$", f)
    sym, dso = (m.group(1), m.group(2)) if m else (f, "")
    if len(sym) > 110:
        sym = sym[:107] + "..."
    return "%s [%s]" % (sym, dso.rsplit("/", 1)[-1])


def top(limit):
    drop = re.compile(DROP)
    counts, total, dropped = {}, 0, 0
    for comm, frames, period in samples(sys.stdin):
        if any(drop.search(f) for f in frames):
            dropped += 1
            continue
        total += 1
        key = ("(%s) " % comm if comm != "purple" and "GC" in comm else "") + (short(frames[0]) if frames else "?")
        counts[key] = counts.get(key, 0) + 1
    print("| self | function |")
    print("|--:|---|")
    for k, c in sorted(counts.items(), key=lambda kv: -kv[1])[:limit]:
        print("| %.1f%% | `%s` |" % (100 * c / total, k.replace("|", "\\|")))
    print("\n%d samples (%d start-up/exit samples dropped)" % (total, dropped))


def main():
    side = sys.argv[1]
    if side == "top":
        return top(int(sys.argv[2]) if len(sys.argv) > 2 else 15)
    iters = float(sys.argv[2]) if len(sys.argv) > 2 else None
    # A pattern starting with LEAF: only looks at the frames below the first interpreter frame
    # (every Purple stack has libgc's GC_call_with_stack_base at its root).
    rules = [(name, rx.startswith("LEAF:"), re.compile(rx[5:] if rx.startswith("LEAF:") else rx))
             for name, rx in RULES[side]]
    interp = re.compile(r"purple::|_PyEval_EvalFrameDefault|\bmain\b")
    drop = re.compile(DROP if side != "startup" else r"^$NEVER")

    def classify(stream):
        counts, ns, total, dropped = {}, {}, 0, 0
        for comm, frames, period in samples(stream):
            if any(drop.search(f) for f in frames):
                dropped += 1
                continue
            total += 1
            cut = next((i for i, f in enumerate(frames) if interp.search(f)), len(frames))
            for name, leaf, rx in rules:
                keys = frames[:cut] if leaf else ["COMM:" + comm] + frames
                if any(rx.search(k) for k in keys):
                    counts[name] = counts.get(name, 0) + 1
                    ns[name] = ns.get(name, 0) + period
                    break
        return counts, ns, total, dropped

    counts, ns, total, dropped = classify(sys.stdin)
    based = ""
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            bc, bns, btotal, _ = classify(f)
        for name in list(ns):
            ns[name] = max(0, ns[name] - bns.get(name, 0))
        based = ", minus %d samples of the 1-iteration baseline run" % btotal
    unit, scale = ("CPU ms/run", 1e6) if side == "startup" else ("CPU µs/iter", 1e3)
    alln = sum(ns.values()) or 1
    print("| category | share | %s |" % unit if iters else "| category | share |")
    print("|---|--:|--:|" if iters else "|---|--:|")
    for name, _, _ in rules:
        if not ns.get(name):
            continue
        print("| %s | %.1f%% |%s" % (name, 100 * ns[name] / alln, " %.2f |" % (ns[name] / scale / iters) if iters else ""))
    if iters:
        print("| **total** | 100%% | **%.2f** |" % (sum(ns.values()) / scale / iters))
    print("\n%d samples (%d start-up/exit samples dropped%s)" % (total, dropped, based))


if __name__ == "__main__":
    main()
