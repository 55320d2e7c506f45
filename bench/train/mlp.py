"""Fashion-MNIST MLP epoch, python3-torch side (same work as mlp.purple).
784-128-10 MLP (Linear, ReLU, Linear) on logits, cross-entropy, Adam lr 1e-3, batch 64,
shuffled, one epoch over the 60,000 training images; gradients cleared to None each step.
Run: /usr/bin/python3 bench/train/mlp.py THREADS [index|dataloader] [LIMIT [STEPS]]
  index:      batches cut with a random permutation and tensor indexing (default)
  dataloader: torch.utils.data.DataLoader over a TensorDataset (the tutorial way)
  index+test: as index, with the 10,000 test images loaded before training too, as a script that
              evaluates afterwards does; on glibc this raises the dynamic mmap threshold (freed
              large blocks teach malloc to keep blocks that size on the heap), which can make the
              epoch faster than `index` alone
Prints "WORK ...", "RESULT mlp-epoch seconds mean-loss" (the epoch only, not loading),
"CPU mlp-epoch seconds" (processor time of the epoch) and
"RSS peak-bytes" (getrusage ru_maxrss)."""
import gzip
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
mode = sys.argv[2] if len(sys.argv) > 2 else "index"
limit = int(sys.argv[3]) if len(sys.argv) > 3 and int(sys.argv[3]) > 0 else None
max_steps = int(sys.argv[4]) if len(sys.argv) > 4 else None   # for bench/train/counts.py
torch.set_num_threads(threads)
torch.set_flush_denormal(True)
torch.manual_seed(0)

DIR = "/usr/share/datasets/fashion-mnist"


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape).copy())


images = load_idx(f"{DIR}/train-images-idx3-ubyte.gz")
labels = load_idx(f"{DIR}/train-labels-idx1-ubyte.gz")
if mode == "index+test":
    test_images = load_idx(f"{DIR}/t10k-images-idx3-ubyte.gz")
    test_labels = load_idx(f"{DIR}/t10k-labels-idx1-ubyte.gz")
    x_test = (test_images.float() / 255.0).reshape(-1, 784)
    del test_images
if limit:
    images, labels = images[:limit], labels[:limit]
n = images.shape[0]
x_all = (images.float() / 255.0).reshape(n, 784)
y_all = labels.long()

model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def batches_index():
    perm = torch.randperm(n)
    for i in range(0, n, 64):
        idx = perm[i:i + 64]
        yield x_all[idx], y_all[idx]


def batches_dataloader():
    ds = torch.utils.data.TensorDataset(x_all, y_all)
    return torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True)


batches = batches_dataloader if mode == "dataloader" else batches_index
print(f"WORK mlp-epoch: {n} Fashion-MNIST images, 784-128-10 MLP, cross-entropy on logits, "
      f"Adam 1e-3, batch 64, shuffled ({mode}), {threads} thread(s), flush-denormal on", flush=True)
c0 = time.process_time()
t0 = time.perf_counter()
total, steps = 0.0, 0
model.train()
for x, y in batches():
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    total += loss.item()
    steps += 1
    if steps == max_steps:
        break
t1 = time.perf_counter()
c1 = time.process_time()
print(f"RESULT mlp-epoch {t1 - t0:.9f} {total / steps:.3f}", flush=True)
print(f"CPU mlp-epoch {c1 - c0:.9f}", flush=True)
print(f"STEPS {steps}")
print(f"RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}", flush=True)
