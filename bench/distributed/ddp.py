"""One data-parallel epoch of the Fashion-MNIST MLP, python3-torch side (same work as ddp.purple):
784-128-10 MLP, cross-entropy on logits, Adam 1e-3, a global batch of 64 (32 per rank on 2 ranks),
DistributedSampler shards, DistributedDataParallel over Gloo, one intra-op thread per rank.
Run: torchrun --nproc_per_node 2 bench/distributed/ddp.py [LIMIT]
Rank 0 prints "WORK ...", "RESULT ddp-epoch seconds mean-loss" and "STEPS n"."""
import gzip
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

limit = int(sys.argv[1]) if len(sys.argv) > 1 else None
torch.set_flush_denormal(True)
dist.init_process_group("gloo")
rank, ranks = dist.get_rank(), dist.get_world_size()
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
if limit:
    images, labels = images[:limit], labels[:limit]
n = images.shape[0]
x_all = (images.float() / 255.0).reshape(n, 784)
y_all = labels.long()
batch = 64 // ranks
dataset = torch.utils.data.TensorDataset(x_all, y_all)
sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True, seed=0)
loader = torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=sampler)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
if rank == 0:
    print(f"WORK ddp-epoch: {n} Fashion-MNIST images over {ranks} ranks, 784-128-10 MLP, Adam 1e-3, batch {batch} "
          f"per rank, DistributedSampler shards, DDP gradient all-reduce (Gloo), "
          f"{torch.get_num_threads()} thread(s) per rank", flush=True)
sampler.set_epoch(0)
total, steps = 0.0, 0
dist.barrier()
t0 = time.perf_counter()
for x, y in loader:
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    total += loss.item()
    steps += 1
dist.barrier()
t1 = time.perf_counter()
if rank == 0:
    print(f"RESULT ddp-epoch {t1 - t0} {round(total / steps, 3)}")
    print(f"STEPS {steps}", flush=True)
dist.destroy_process_group()
