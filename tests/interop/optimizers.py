# NAdam, RAdam, Adamax, Adadelta steps, and EMA/SWA weight averaging, from deterministic weights
# and data: what optimizers.purple computes, in python3-torch.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, update_bn
from interop_common import emit


def det_init(m):
    names = sorted(n for n, _ in m.named_parameters())
    params = dict(m.named_parameters())
    with torch.no_grad():
        for k, n in enumerate(names):
            p = params[n]
            p.copy_((torch.sin(torch.arange(p.numel()) * 0.37 + k * 0.1) * 0.3).reshape(p.shape))
    return m


def data(k, *shape):
    n = math.prod(shape)
    return (torch.cos(torch.arange(n) * 0.53 + k) * 1.5).reshape(shape)


def make():
    return det_init(nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)))


x = data(0, 8, 4)
y = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1])
makers = [
    ("nadam", lambda p: torch.optim.NAdam(p)),
    ("nadam-options", lambda p: torch.optim.NAdam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01)),
    ("radam", lambda p: torch.optim.RAdam(p, lr=0.01)),
    ("radam-wd", lambda p: torch.optim.RAdam(p, lr=0.02, betas=(0.5, 0.9), weight_decay=0.05, eps=1e-6)),
    ("adamax", lambda p: torch.optim.Adamax(p)),
    ("adamax-options", lambda p: torch.optim.Adamax(p, lr=0.05, betas=(0.7, 0.95), weight_decay=0.02, maximize=True)),
    ("adadelta", lambda p: torch.optim.Adadelta(p)),
    ("adadelta-options", lambda p: torch.optim.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
]
for name, mk in makers:
    m = make()
    opt = mk(m.parameters())
    losses = []
    for i in range(12):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    emit(name + "-losses", losses)
    emit(name + "-w0", m[0].weight)
    emit(name + "-b2", m[2].bias)

# parameter groups with per-group learning rates
m = make()
opt = torch.optim.NAdam([{"params": m[0].parameters(), "lr": 0.05}, {"params": m[2].parameters()}], lr=0.01)
for i in range(3):
    opt.zero_grad()
    F.cross_entropy(m(x), y).backward()
    opt.step()
emit("groups-nadam-w0", m[0].weight)
emit("groups-nadam-w2", m[2].weight)

# a scheduler drives the new optimizers too
m = make()
opt = torch.optim.RAdam(m.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
for i in range(8):
    opt.zero_grad()
    F.cross_entropy(m(x), y).backward()
    opt.step()
    sched.step()
emit("radam-step-lr-w0", m[0].weight)


def train_averaged(avg, m, steps=6, bn=False):
    opt = torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.5)
    for i in range(steps):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        avg.update_parameters(m)


m = make()
swa = AveragedModel(m)
train_averaged(swa, m)
emit("swa-n", [int(swa.n_averaged)])
emit("swa-w0", swa.module[0].weight)
emit("swa-out", swa(x))
emit("model-w0", m[0].weight)

m = make()
ema = AveragedModel(m, avg_fn=lambda a, p, n: 0.9 * a + (1 - 0.9) * p)
train_averaged(ema, m)
emit("ema-w0", ema.module[0].weight)
emit("ema-out", ema(x))

m = make()
custom = AveragedModel(m, avg_fn=lambda a, p, n: a * 0.5 + p * 0.5 + n * 0.001)
train_averaged(custom, m, steps=4)
emit("custom-b0", custom.module[0].bias)

# batch norm: buffers averaged with use_buffers, or recomputed by update_bn
def make_bn():
    return det_init(nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 3)))

m = make_bn()
avg = AveragedModel(m, use_buffers=True)
train_averaged(avg, m, steps=5)
emit("bn-avg-running-mean", avg.module[1].running_mean)
emit("bn-avg-running-var", avg.module[1].running_var)
m = make_bn()
swa = AveragedModel(m)
train_averaged(swa, m, steps=5)
loader = [(data(i, 6, 4), None) for i in range(3)]
update_bn(loader, swa)
emit("update-bn-running-mean", swa.module[1].running_mean)
emit("update-bn-running-var", swa.module[1].running_var)
swa.eval()
emit("update-bn-out", swa(x))
