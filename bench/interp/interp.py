"""Interpreter workloads, CPython side (same work as interp.purple and interp.scm).
Run: python3 bench/interp/interp.py WORKLOAD [SIZE]
Prints "WORK ...", "RESULT name seconds checksum" (wall clock, timed region only) and
"CPU name seconds" (processor time of the same region)."""
import sys
import time

sys.setrecursionlimit(100000)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def tak(x, y, z):
    if not y < x:
        return z
    return tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y))


def build_list(n):
    # The Lisp versions cons a fresh list; the Python equivalent appends in a loop.
    acc = []
    i = 0
    while i < n:
        acc.append(i)
        i += 1
    return acc


def sum_list(lst):
    s = 0
    for x in lst:
        s += x
    return s


def list_bench(n, reps):
    total = 0
    for _ in range(reps):
        total += sum_list(build_list(n))
    return total


def make_adder(k):
    return lambda x: x + k


def closure_bench(n):
    xs = build_list(1000)
    total = 0
    for k in range(n):
        ys = list(map(lambda y: 2 * y, list(map(make_adder(k), xs))))
        total += ys[0]
    return total


def symbol_hash_bench(n):
    # Python's symbols are interned strings.
    h = {}
    keys = []
    intern = sys.intern
    for i in range(n):
        k = intern("k" + str(i))
        h[k] = i
        keys.append(k)
    s = 0
    for k in keys:
        s += h.get(k, 0)
    return s


def run(name, work, thunk):
    print(f"WORK {name}: {work}", flush=True)
    c0 = time.process_time()
    t0 = time.perf_counter()
    r = thunk()
    t1 = time.perf_counter()
    c1 = time.process_time()
    print(f"RESULT {name} {t1 - t0:.9f} {r}", flush=True)
    print(f"CPU {name} {c1 - c0:.9f}", flush=True)


def main():
    workload = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else None
    if workload == "fib":
        n = size or 30
        run("fib", f"naive (fib {n})", lambda: fib(n))
    elif workload == "tak":
        n = size or 10
        run("tak", f"(tak 18 12 6) {n} times, summed", lambda: sum(tak(18, 12, 6) for _ in range(n)))
    elif workload == "list":
        n = size or 1000000
        run("list", f"cons a {n}-element list and sum it, 5 times", lambda: list_bench(n, 5))
    elif workload == "closure":
        n = size or 1000
        run("closure", f"{n} x (map double (map (make-adder k) xs)), |xs| = 1000", lambda: closure_bench(n))
    elif workload == "symbol-hash":
        n = size or 200000
        run("symbol-hash", f"{n} symbol keys: intern, insert, look up, sum", lambda: symbol_hash_bench(n))
    else:
        raise SystemExit(f"unknown workload {workload}")


main()
