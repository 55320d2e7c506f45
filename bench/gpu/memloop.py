"""Allocation churn on a device, python-torch side (same work as memloop.purple).

usage: python3 bench/gpu/memloop.py DEVICE [ITERATIONS [SIZE]]
  DEVICE      cuda, cuda:N or cpu
  ITERATIONS  loop iterations (default 2000), after 2 untimed warm-up iterations
  SIZE        each iteration makes x = randn(SIZE, SIZE) on DEVICE (default 4096: 64 MiB of
              float32) and y = (x * 2 + 1).relu().sum(), dropping both at the next iteration

Prints "WORK ...", then, with D the device type (cuda or cpu):
  MEM D-loop PEAK-BYTES     torch.cuda.max_memory_allocated() over the loop (peak stats reset after
                            the warm-up); "n/a" off CUDA
  INFO D-loop max-reserved BYTES num-alloc-retries N num-ooms N    (on CUDA)
  RESULT D-loop SECONDS CHECKSUM   (the loop between two device synchronizations; the checksum
                            is the last y)"""
import sys

import torch

from gpu_common import clock, device_type, make_sync

args = sys.argv[1:]
device = args[0] if args else "cuda"
iters = int(args[1]) if len(args) > 1 else 2000
size = int(args[2]) if len(args) > 2 else 4096
kind = device_type(device)
cuda = kind == "cuda"
sync = make_sync(device)
torch.manual_seed(0)


def body():
    x = torch.randn(size, size, device=device)
    return (x * 2 + 1).relu().sum()


for _ in range(2):
    y = body()
if cuda:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
print("WORK %s-loop: %d x (x = randn(%d, %d); y = (x*2+1).relu().sum()) on %s, %d bytes per x (python-torch %s)"
      % (kind, iters, size, size, device, size * size * 4, torch.__version__), flush=True)
t0 = clock(sync)
for _ in range(iters):
    y = body()
t1 = clock(sync)
print("MEM %s-loop %s" % (kind, torch.cuda.max_memory_allocated() if cuda else "n/a"), flush=True)
if cuda:
    stats = torch.cuda.memory_stats()
    print("INFO %s-loop max-reserved %d num-alloc-retries %d num-ooms %d"
          % (kind, stats.get("reserved_bytes.all.peak", -1), stats.get("num_alloc_retries", -1),
             stats.get("num_ooms", -1)), flush=True)
print("RESULT %s-loop %.9f %.1f" % (kind, t1 - t0, y.item()), flush=True)
