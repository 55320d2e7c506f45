"""Tiny-tensor dispatch, python3-torch side (same work as dispatch.cpp and dispatch.purple).
Run: /usr/bin/python3 bench/dispatch/dispatch.py N THREADS [add|matmul-relu|both]
Prints "WORK ...", "RESULT name seconds checksum" (wall clock, timed region only) and
"CPU name seconds" (processor time of the same region) for each loop."""
import sys
import time

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
which = sys.argv[3] if len(sys.argv) > 3 else "both"
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
torch.manual_seed(0)

x = torch.ones(2)
a = torch.randn(4, 4)
b = torch.randn(4, 4)
for _ in range(1000):  # warm-up
    torch.add(x, 1)
    torch.relu(torch.matmul(a, b))

add, matmul, relu = torch.add, torch.matmul, torch.relu

r = None
if which != "matmul-relu":
    print(f"WORK add: {n} x (x + 1) on a float32 tensor of 2 elements, results dropped", flush=True)
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(n):
        r = add(x, 1)
    t1 = time.perf_counter()
    c1 = time.process_time()
    print(f"RESULT add {t1 - t0:.9f} {r.sum().item():g}", flush=True)
    print(f"CPU add {c1 - c0:.9f}", flush=True)
if which != "add":
    print(f"WORK matmul-relu: {n} x relu(a @ b) on float32 4x4 tensors, results dropped", flush=True)
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(n):
        r = relu(matmul(a, b))
    t1 = time.perf_counter()
    c1 = time.process_time()
    print(f"RESULT matmul-relu {t1 - t0:.9f} {r.sum().item():.4f}", flush=True)
    print(f"CPU matmul-relu {c1 - c0:.9f}", flush=True)
