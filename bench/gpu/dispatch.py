"""Per-op dispatch cost of tiny tensor ops on a device, python-torch side (same work as
dispatch.purple).

usage: python3 bench/gpu/dispatch.py DEVICE [N]
  DEVICE  cuda, cuda:N or cpu
  N       loop iterations per op (default 100000), after 1000 untimed warm-up iterations

Two loops, results dropped: torch.add(x, 1) on a 2-element float32 tensor, and
torch.relu(torch.matmul(a, b)) on 4x4 float32 tensors (two ops per iteration), all on DEVICE.
The device is synchronized before each loop starts and after it ends.
Prints "WORK ..." and, with D the device type (cuda or cpu):
  RESULT D-dispatch-add MICROSECONDS-PER-ITERATION CHECKSUM
  RESULT D-dispatch-matmul-relu MICROSECONDS-PER-ITERATION CHECKSUM"""
import sys

import torch

from gpu_common import clock, device_type, make_sync

args = sys.argv[1:]
device = args[0] if args else "cuda"
n = int(args[1]) if len(args) > 1 else 100000
kind = device_type(device)
sync = make_sync(device)
torch.set_flush_denormal(True)
torch.manual_seed(0)

x = torch.ones(2, device=device)
a = torch.randn(4, 4).to(device)
b = torch.randn(4, 4).to(device)
add, matmul, relu = torch.add, torch.matmul, torch.relu
for _ in range(1000):
    add(x, 1)
    relu(matmul(a, b))

print("WORK %s-dispatch-add: %d x (x + 1) on a float32 tensor of 2 elements on %s, results dropped "
      "(python-torch %s)" % (kind, n, device, torch.__version__), flush=True)
r = None
t0 = clock(sync)
for _ in range(n):
    r = add(x, 1)
t1 = clock(sync)
print("RESULT %s-dispatch-add %.6f %.4f" % (kind, (t1 - t0) / n * 1e6, r.sum().item()), flush=True)

print("WORK %s-dispatch-matmul-relu: %d x relu(a @ b) on float32 4x4 tensors on %s, results dropped"
      % (kind, n, device), flush=True)
t0 = clock(sync)
for _ in range(n):
    r = relu(matmul(a, b))
t1 = clock(sync)
print("RESULT %s-dispatch-matmul-relu %.6f %.4f" % (kind, (t1 - t0) / n * 1e6, r.sum().item()), flush=True)
