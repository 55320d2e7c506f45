"""TorchScript modules saved by Python (traced and scripted) run and fine-tune in Purple."""
import os
import sys
from typing import List, Tuple
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import emit, det_init, data

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))
        self.norm = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.norm(self.body(x))


class Multi(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, xs: List[torch.Tensor], pair: Tuple[torch.Tensor, float]) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        total = pair[0] * pair[1]
        outs = [self.lin(x) for x in xs]
        for o in outs:
            total = total + o.sum()
        return total, outs


def net():
    return det_init(Net()).eval()


def finetune(m):
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(m.eval()(data(i, 6, 4)), torch.tensor([0, 1, 2, 0, 1, 2]))   # eval: no dropout
        loss.backward()
        opt.step()
    return m


x = data(1, 5, 4)
if mode == "gen":
    torch.jit.save(torch.jit.trace(net(), x), P("traced.pt"))
    torch.jit.save(torch.jit.script(net()), P("scripted.pt"))
    torch.jit.save(torch.jit.script(det_init(Multi())), P("multi.pt"))
    emit("traced", net()(x))
    emit("scripted", net()(x))
    total, outs = det_init(Multi())([data(2, 3, 2), data(3, 1, 2)], (torch.tensor(2.0), 1.5))
    emit("multi", total, *outs)
    emit("names", *[n for n, _ in net().state_dict().items()])
    emit("params", sum(p.numel() for p in net().parameters()))
    emit("~finetuned", finetune(net())(x))
else:
    m = net()
    m.load_state_dict(torch.load(P("purple-finetuned.pt")), strict=True)
    ref = finetune(net())
    assert torch.allclose(m(x), ref(x), rtol=1e-4, atol=1e-6)
    print("torchscript fine-tuned in Purple matches Python: ok")
