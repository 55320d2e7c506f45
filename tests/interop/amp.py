# Autocast (CPU, bfloat16) and the gradient scaler: what amp.purple computes, in python3-torch.
# LibTorch 1.13 has only CUDA kernels for the two AMP ops; there they are written out from the
# CUDA kernels' definition, and GradScaler's own logic runs on CPU tensors (its scale() asserts
# CUDA, so that one method is restated without the assert). torch 2.x runs on CPU as it is.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from interop_common import emit


def unscale_(grads, found_inf, inv_scale):
    for g in grads:
        if not torch.isfinite(g).all():
            found_inf.fill_(1.0)
        if inv_scale.item() != 1.0:
            g.mul_(inv_scale)


def update_scale_(scale, tracker, found_inf, growth, backoff, interval):
    s, t = scale.item(), int(tracker.item())
    if found_inf.item():
        s, t = float(torch.tensor(s * backoff, dtype=torch.float32)), 0
    else:
        if t + 1 == interval:
            grown = float(torch.tensor(s * growth, dtype=torch.float32))
            if math.isfinite(grown):
                s = grown
            t = 0
        else:
            t = t + 1
    scale.fill_(s)
    tracker.fill_(t)
    return scale


if hasattr(torch.amp, "GradScaler"):
    # torch 2.3+: the scaler is torch.amp.GradScaler, for any device, and LibTorch has CPU kernels
    # for both AMP ops (what Purple calls when its LibTorch has them).
    def CPUGradScaler(**kw):
        return torch.amp.GradScaler("cpu", **kw)
else:
    torch._amp_foreach_non_finite_check_and_unscale_ = unscale_
    torch._amp_update_scale_ = update_scale_

    # GradScaler disables itself without CUDA before setting up its state; it is made to believe
    # AMP is available, and the two kernels above do the work.
    from torch.cuda.amp import GradScaler
    torch.cuda.amp.grad_scaler.amp_definitely_not_available = lambda: False

    class _Replicator(torch.cuda.amp.grad_scaler._MultiDeviceReplicator):   # without its CUDA assertion
        def __init__(self, master):
            self.master = master
            self._per_device_tensors = {}

    torch.cuda.amp.grad_scaler._MultiDeviceReplicator = _Replicator

    class CPUGradScaler(GradScaler):
        def scale(self, outputs):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)


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


x = data(0, 8, 4)
y = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1])
a, b = data(1, 5, 7), data(2, 7, 3)

with torch.autocast("cpu", dtype=torch.bfloat16):
    mm = a @ b
    emit("autocast-matmul-dtype", [str(mm.dtype).replace("torch.", "")])
    emit("autocast-matmul", mm.float())
    lin = F.linear(a, data(3, 2, 7), data(4, 2))
    emit("autocast-linear", lin.float())
    sm = torch.softmax(mm, -1)
    emit("autocast-softmax-dtype", [str(sm.dtype).replace("torch.", "")])
    emit("autocast-softmax", sm)
    s = mm + 1.0
    emit("autocast-add-dtype", [str(s.dtype).replace("torch.", "")])
    conv = F.conv1d(data(5, 2, 3, 9), data(6, 4, 3, 3))
    emit("autocast-conv1d", conv.float())
    with torch.autocast("cpu", enabled=False):
        emit("autocast-disabled-dtype", [str((a @ b).dtype).replace("torch.", "")])
emit("after-autocast-dtype", [str((a @ b).dtype).replace("torch.", "")])

# a training step: forward under autocast, backward outside
m = det_init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
losses = []
for i in range(5):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(x)
        loss = F.cross_entropy(out, y)
    losses.append(loss.item())
    loss.backward()
    if i == 0:
        emit("amp-out-dtype", [str(out.dtype).replace("torch.", ""), str(loss.dtype).replace("torch.", "")])
        emit("amp-grad-w0", m[0].weight.grad)
    opt.step()
emit("amp-losses", losses)
emit("amp-w2", m[2].weight)

# the grad scaler: growth every 3 clean steps, an injected inf at step 4
m = det_init(nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
gs = CPUGradScaler(init_scale=16.0, growth_interval=3)
gs._enabled = True
scales, stepped = [], []
for i in range(10):
    opt.zero_grad()
    loss = F.cross_entropy(m(x), y)
    gs.scale(loss).backward()
    if i == 4:
        with torch.no_grad():
            m[0].weight.grad[0, 0] = float("inf")
    if i == 6:
        gs.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
    before = m[2].bias.detach().clone()
    gs.step(opt)
    stepped.append(0 if torch.equal(before, m[2].bias.detach()) else 1)
    gs.update()
    scales.append(gs.get_scale())
emit("scaler-scales", scales)
emit("scaler-stepped", stepped)
emit("scaler-w0", m[0].weight)
sd = gs.state_dict()
emit("scaler-state", [sd["scale"], sd["growth_factor"], sd["backoff_factor"], sd["growth_interval"], sd["_growth_tracker"]])
gs.update(1024.0)
emit("scaler-new-scale", [gs.get_scale()])
