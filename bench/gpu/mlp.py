"""MLP training epoch on a device, python-torch side (same work as mlp.purple).

usage: python3 bench/gpu/mlp.py DEVICE [N-IMAGES [PLACEMENT [MODE ...]]]
  DEVICE     cuda, cuda:N or cpu
  N-IMAGES   synthetic images (default 60000)
  PLACEMENT  device: the whole data set is copied to DEVICE once and each epoch's batches are cut
             there with a random permutation drawn on DEVICE (default);
             host: the data stays in CPU memory, batches are cut there with a CPU permutation
             and each batch is copied to DEVICE (.to(device)) before its step
  MODE       fp32, amp (float16 autocast and a grad scaler; bfloat16 on cpu) or bf16
             (bfloat16 autocast, no scaler); default: fp32 amp

The data: torch.manual_seed(0), then rand(N, 784) images and randint(0, 10, (N,)) labels, made
on the CPU. For each mode: an untimed warm-up of 10 steps on a throwaway model, then
torch.manual_seed(1), a 784-128-10 MLP (Linear, ReLU, Linear) moved to DEVICE, Adam lr 1e-3, and
one timed epoch of batch-64 steps (cross-entropy on logits, gradients cleared to None, the loss
summed on the device and read once at the end).
Prints, for each mode, "WORK ..." and
  RESULT mlp-epoch-<mode>[-host] SECONDS MEAN-LOSS
(the epoch with its permutation, between two device synchronizations)."""
import sys

import torch

from gpu_common import amp_dtype, clock, device_type, fmt, make_scaler, make_sync, train_step

args = sys.argv[1:]
device = args[0] if args else "cuda"
n = int(args[1]) if len(args) > 1 else 60000
placement = args[2] if len(args) > 2 else "device"
modes = args[3:] or ["fp32", "amp"]
if placement not in ("device", "host"):
    raise SystemExit("PLACEMENT must be device or host, not %r" % placement)
kind = device_type(device)
sync = make_sync(device)
torch.set_flush_denormal(True)

torch.manual_seed(0)
x_cpu = torch.rand(n, 784)
y_cpu = torch.randint(0, 10, (n,))
if placement == "device":
    x_all, y_all = x_cpu.to(device), y_cpu.to(device)
else:
    x_all, y_all = x_cpu, y_cpu


def epoch(mode, max_steps=None):
    """Returns (seconds, mean loss, steps)."""
    dtype = amp_dtype(mode, device)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = make_scaler(device) if mode == "amp" else None
    total = torch.zeros((), device=device)
    steps = 0
    t0 = clock(sync)
    perm = torch.randperm(n, device=device) if placement == "device" else torch.randperm(n)
    for i in range(0, n, 64):
        idx = perm[i:i + 64]
        if placement == "device":
            x, y = x_all[idx], y_all[idx]
        else:
            x, y = x_all[idx].to(device), y_all[idx].to(device)
        loss = train_step(model, opt, scaler, kind, dtype, x, y)
        total += loss.detach()
        steps += 1
        if steps == max_steps:
            break
    t1 = clock(sync)
    return t1 - t0, total.item() / steps, steps


for mode in modes:
    epoch(mode, max_steps=10)          # warm-up: kernels, cuBLAS handles, allocator pools
    seconds, mean_loss, steps = epoch(mode)
    name = "mlp-epoch-" + mode + ("-host" if placement == "host" else "")
    print("WORK %s: %d synthetic images on %s (data on %s), 784-128-10 MLP, cross-entropy, Adam 1e-3, "
          "batch 64, %d steps, autocast %s%s (python-torch %s)"
          % (name, n, device, placement, steps, str(amp_dtype(mode, device) or "off").replace("torch.", ""),
             ", grad scaler" if mode == "amp" else "", torch.__version__), flush=True)
    print("RESULT %s %.9f %s" % (name, seconds, fmt(mean_loss)), flush=True)
