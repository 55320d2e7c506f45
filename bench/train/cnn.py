"""Small-CNN training step on 28x28 inputs, python3-torch side (same work as cnn.purple).
conv 1->32 3x3 pad 1, relu, maxpool 2, conv 32->64 3x3 pad 1, relu, maxpool 2, flatten,
linear 3136->128, relu, linear 128->10; cross-entropy, Adam 1e-3, one fixed random batch of 64.
Run: /usr/bin/python3 bench/train/cnn.py THREADS STEPS
Prints "WORK ...", "RESULT cnn-step seconds-per-step final-loss" (after 3 warm-up steps) and
"CPU cnn-step seconds-per-step" (processor time)."""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
torch.manual_seed(0)

model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(64, 1, 28, 28)
y = torch.randint(0, 10, (64,))


def step():
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(3):
    step()
print(f"WORK cnn-step: {steps} Adam steps of a 2-conv CNN on one batch of 64 28x28 images, "
      f"{threads} thread(s), flush-denormal on", flush=True)
c0 = time.process_time()
t0 = time.perf_counter()
for _ in range(steps):
    last = step()
t1 = time.perf_counter()
c1 = time.process_time()
print(f"RESULT cnn-step {(t1 - t0) / steps:.9f} {last:.3f}", flush=True)
print(f"CPU cnn-step {(c1 - c0) / steps:.9f}", flush=True)
