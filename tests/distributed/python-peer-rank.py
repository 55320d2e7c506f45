# The python3-torch half of python-peer.py: a plain torch.distributed program with Gloo.
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
r = dist.get_rank()
failures = []

def check(name, got, want):
    if got != want:
        failures.append(f"{name}: got {got}, want {want}")

x = torch.full((3,), r + 1.0); dist.all_reduce(x); check("all-reduce sum", x.tolist(), [3.0] * 3)
x = torch.full((2,), 10 * (r + 1), dtype=torch.int64); dist.all_reduce(x, op=dist.ReduceOp.MAX); check("max", x.tolist(), [20, 20])
x = torch.tensor([0.5, 1.5]) if r == 0 else torch.zeros(2); dist.broadcast(x, 0); check("broadcast 0", x.tolist(), [0.5, 1.5])
x = torch.tensor([[1.0, 2.0], [3.0, 4.0]]) if r == 1 else torch.zeros(2, 2); dist.broadcast(x, 1)
check("broadcast 1", x.tolist(), [[1.0, 2.0], [3.0, 4.0]])
out = [torch.zeros(1), torch.zeros(1)]; dist.all_gather(out, torch.full((1,), float(r)))
check("all-gather", [t.tolist() for t in out], [[0.0], [1.0]])
inbox = torch.zeros(4, dtype=torch.float64)
if r == 0:
    dist.send(torch.arange(4, dtype=torch.float64), 1); dist.recv(inbox, 1)
else:
    dist.recv(inbox, 0); dist.send(torch.arange(4, dtype=torch.float64), 0)
check("send/recv", inbox.tolist(), [0.0, 1.0, 2.0, 3.0])
both = dist.new_group([0, 1])
x = torch.full((1,), 5.0); dist.all_reduce(x, group=both); check("sub-group", x.tolist(), [10.0])
dist.barrier()
dist.barrier()
dist.destroy_process_group()
if failures:
    print("python rank", r, "FAILED:", *failures, sep="\n  ")
    sys.exit(1)
print("python rank", r, "ok")
