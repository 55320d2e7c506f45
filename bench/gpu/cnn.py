"""Small-CNN training steps on a device, python-torch side (same work as cnn.purple).

usage: python3 bench/gpu/cnn.py DEVICE [STEPS [MODE ...]]
  DEVICE  cuda, cuda:N or cpu
  STEPS   timed steps per mode (default 300), after 3 untimed warm-up steps
  MODE    fp32, amp (float16 autocast and a grad scaler; bfloat16 on cpu) or bf16 (bfloat16
          autocast, no scaler); default: fp32 amp bf16

The network of bench/train/cnn.py: conv 1->32 3x3 pad 1, relu, maxpool 2, conv 32->64 3x3 pad 1,
relu, maxpool 2, flatten, linear 3136->128, relu, linear 128->10; cross-entropy, Adam 1e-3. For
each mode: torch.manual_seed(0), the model made on the CPU and moved to DEVICE, then one fixed
batch (randn 64x1x28x28, randint labels) made on the CPU and moved to DEVICE. The loss is read
(.item()) after the first warm-up step and once after the timed steps.
Prints, for each mode, "WORK ..." and
  RESULT cnn-step-<mode> SECONDS-PER-STEP FINAL-LOSS FIRST-LOSS
(the final loss is tiny, as the network learns its one batch by heart, hence %.3e)."""
import sys

import torch
import torch.nn as nn

from gpu_common import amp_dtype, clock, device_type, fmt, make_scaler, make_sync, train_step

args = sys.argv[1:]
device = args[0] if args else "cuda"
steps = int(args[1]) if len(args) > 1 else 300
modes = args[2:] or ["fp32", "amp", "bf16"]
kind = device_type(device)
sync = make_sync(device)
torch.set_flush_denormal(True)


def run(mode):
    dtype = amp_dtype(mode, device)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = make_scaler(device) if mode == "amp" else None
    x = torch.randn(64, 1, 28, 28).to(device)
    y = torch.randint(0, 10, (64,)).to(device)

    def step():
        return train_step(model, opt, scaler, kind, dtype, x, y)

    first = step().item()
    step()
    step()
    t0 = clock(sync)
    for _ in range(steps):
        last = step()
    t1 = clock(sync)
    return (t1 - t0) / steps, last.item(), first


for mode in modes:
    per_step, loss, first = run(mode)
    print("WORK cnn-step-%s: %d Adam steps of a 2-conv CNN on one batch of 64 28x28 images on %s, autocast %s%s "
          "(python-torch %s)" % (mode, steps, device, str(amp_dtype(mode, device) or "off").replace("torch.", ""),
                                 ", grad scaler" if mode == "amp" else "", torch.__version__), flush=True)
    print("RESULT cnn-step-%s %.9f %.3e %s" % (mode, per_step, loss, fmt(first)), flush=True)
