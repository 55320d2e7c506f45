# Optimizers, schedulers and gradient clipping from deterministic weights and data.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
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
    ("sgd", lambda p: torch.optim.SGD(p, lr=0.1)),
    ("sgd-nesterov", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam", lambda p: torch.optim.Adam(p, lr=0.01)),
    ("adam-amsgrad", lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("adamw", lambda p: torch.optim.AdamW(p, lr=0.01)),
    ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True)),
    ("adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01)),
]
for name, mk in makers:
    m = make()
    opt = mk(m.parameters())
    for i in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
    emit(name + "-loss", loss)
    emit(name + "-w", m[0].weight)

m = make()
opt = torch.optim.LBFGS(m.parameters(), lr=0.5, max_iter=5)


def closure():
    opt.zero_grad()
    l = F.cross_entropy(m(x), y)
    l.backward()
    return l


for i in range(2):
    opt.step(closure)
emit("lbfgs-loss", F.cross_entropy(m(x), y))

# parameter groups
m = make()
opt = torch.optim.SGD([{"params": m[0].parameters(), "lr": 0.5}, {"params": m[2].parameters()}], lr=0.1)
loss = F.cross_entropy(m(x), y)
loss.backward()
opt.step()
emit("groups-w0", m[0].weight)
emit("groups-w2", m[2].weight)

# clipping
m = make()
F.cross_entropy(m(x), y).backward()
emit("clip-norm", torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5))
emit("clipped-grad", m[0].weight.grad)
F.cross_entropy(m(x), y).backward()
torch.nn.utils.clip_grad_value_(m.parameters(), 0.05)
emit("clip-value-grad", m[2].weight.grad)


def lrs(opt, sched, n=12, key=None):
    out = []
    for i in range(n):
        g = opt.param_groups[0]
        out.append(g["lr"] if key is None else (g["momentum"] if key == "momentum" else g["betas"][0]))
        opt.step()
        sched.step()
    return out


def sgd():
    return torch.optim.SGD(make().parameters(), lr=0.1, momentum=0.9)


o = sgd(); emit("step-lr", lrs(o, torch.optim.lr_scheduler.StepLR(o, 3, gamma=0.5)))
o = sgd(); emit("exponential-lr", lrs(o, torch.optim.lr_scheduler.ExponentialLR(o, 0.9)))
o = sgd(); emit("cosine-lr", lrs(o, torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, eta_min=0.01)))
o = sgd(); emit("one-cycle-lr", lrs(o, torch.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=12)))
o = sgd(); emit("one-cycle-momentum", lrs(o, torch.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=12), key="momentum"))
o = torch.optim.Adam(make().parameters(), lr=0.1)
emit("one-cycle-3-beta1", lrs(o, torch.optim.lr_scheduler.OneCycleLR(o, 0.1, total_steps=12, three_phase=True,
                                                                     anneal_strategy="linear"), key="beta1"))
o = sgd(); emit("linear-warmup", lrs(o, torch.optim.lr_scheduler.LinearLR(o, 0.25, total_iters=4)))
