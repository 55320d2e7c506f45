"""Python's half of torchscript.purple: TorchScript modules on the GPU.

gen:   scripts (torch.jit.script) a small network with batch norm and dropout, and a module with
       control flow and a list argument; saves each made on the CPU and, moved to the device,
       on the device (its tensors then live on the GPU in the archive); a traced one too; and the
       expected outputs, on the CPU.
check: loads the state dict Purple saved after fine-tuning the scripted network on the device
       (three SGD steps), checks its tensors are on the GPU, and compares it with the same three
       steps taken here on the device."""
import os
from collections import OrderedDict
from typing import List

from cuda_common import setup, Checks

torch, device, mode, d = setup()
import torch.nn as nn
import torch.nn.functional as F

P = lambda f: os.path.join(d, f)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))
        self.norm = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.norm(self.body(x))


class Loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, xs: List[torch.Tensor], n: int) -> torch.Tensor:
        acc = torch.zeros_like(xs[0])
        for x in xs:
            h = x
            for _ in range(n):
                h = torch.tanh(self.lin(h))
            acc = acc + h
        if n > 2:
            acc = acc * 2.0
        return acc


def det_init(m):
    with torch.no_grad():
        for k, (name, p) in enumerate(sorted(m.named_parameters())):
            p.copy_((torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.37 + k * 0.1) * 0.3).reshape(p.shape))
    return m


def data(k, *shape):
    n = 1
    for s in shape:
        n *= s
    return (torch.cos(torch.arange(n, dtype=torch.float64) * 0.53 + k) * 1.5).float().reshape(shape)


def finetune(m, dev):
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    labels = torch.tensor([0, 1, 2, 0, 1, 2], device=dev)
    for i in range(3):
        opt.zero_grad()
        m.eval()
        loss = F.cross_entropy(m(data(i, 6, 4).to(dev)), labels)
        loss.backward()
        opt.step()
    return m


x = data(1, 5, 4)
xs = [data(2, 2, 3), data(3, 2, 3)]

if mode == "gen":
    net = det_init(Net()).eval()
    torch.jit.save(torch.jit.script(net), P("scripted_cpu.pt"))
    torch.jit.save(torch.jit.script(det_init(Net()).eval().to(device)), P("scripted_dev.pt"))
    torch.jit.save(torch.jit.trace(det_init(Net()).eval().to(device), x.to(device)), P("traced_dev.pt"))
    loop = det_init(Loop())
    torch.jit.save(torch.jit.script(loop.to(device)), P("loop_dev.pt"))
    with torch.no_grad():
        expected = OrderedDict([("net", net(x)),
                                ("loop2", loop.cpu()(xs, 2)),
                                ("loop3", loop.cpu()(xs, 3))])
    torch.save(expected, P("expected.pt"))
    print("scripted and saved Net and Loop (on the CPU and on %s)" % device)
else:
    c = Checks()
    sd = torch.load(P("purple_finetuned.pt"))
    print("Purple's fine-tuned state dict: %s" % ", ".join("%s@%s" % (k, v.device) for k, v in sd.items()))
    for k, v in sd.items():
        c.device_type("Purple's %s" % k, v, device)
    ref = finetune(det_init(Net()).to(device), device)
    m = det_init(Net()).to(device)
    m.load_state_dict(sd, strict=True)
    m.eval()
    ref.eval()
    for (k, a), (_, b) in zip(m.state_dict().items(), ref.state_dict().items()):
        c.close("fine-tuned %s (Purple on the device) = Python's" % k, a, b, 1e-4)
    c.close("outputs of the fine-tuned nets", m(x.to(device)), ref(x.to(device)), 1e-4)
    c.finish()
