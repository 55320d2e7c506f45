"""Optimizer state dicts both ways, for every optimizer Purple has: Python steps 3 times and saves
{"model", "optimizer", "epoch"}; Purple resumes for 2 steps and saves; Python resumes Purple's file
for 2 more steps. Weights must match uninterrupted Python runs."""
import os
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import emit, det_init, data

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)
x = data(0, 8, 4)
y = torch.tensor([0, 1, 2, 1, 0, 2, 2, 1])
makers = [
    ("sgd", lambda p: torch.optim.SGD(p, lr=0.1)),
    ("sgd-momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam", lambda p: torch.optim.Adam(p, lr=0.01)),
    ("adam-amsgrad", lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("adamw", lambda p: torch.optim.AdamW(p, lr=0.01)),
    ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True)),
    ("adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01)),
    ("lbfgs", lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=4, history_size=3)),
]


def make():
    return det_init(nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)))


def step(m, opt):
    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        return loss
    opt.step(closure)


def run(name, mk, n):
    m = make()
    opt = mk(m.parameters())
    for _ in range(n):
        step(m, opt)
    return m, opt


if mode == "gen":
    for name, mk in makers:
        m, opt = run(name, mk, 3)
        torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, P(name + ".pt"))
        m5, _ = run(name, mk, 5)
        emit("~" + name, m5[0].weight, m5[2].bias)
        emit(name + "-keys", *sorted(opt.state_dict()["param_groups"][0].keys()))
else:
    for name, mk in makers:
        ck = torch.load(P("purple-" + name + ".pt"))
        m = make()
        m.load_state_dict(ck["model"], strict=True)
        opt = mk(m.parameters())
        opt.load_state_dict(ck["optimizer"])
        assert ck["epoch"] == 5
        # the state Purple wrote has Python's structure and types
        mine = run(name, mk, 5)[1].state_dict()
        theirs = opt.state_dict()
        assert set(mine["state"].keys()) == set(theirs["state"].keys()), (name, mine["state"].keys(), theirs["state"].keys())
        for k, st in mine["state"].items():
            assert set(st.keys()) == set(theirs["state"][k].keys()), (name, k, st.keys(), theirs["state"][k].keys())
            for key, v in st.items():
                w = theirs["state"][k][key]
                assert type(v) == type(w) or (v is None) == (w is None) or isinstance(v, (int, float)), (name, key, type(v), type(w))
                if isinstance(v, torch.Tensor):
                    assert v.dtype == w.dtype and v.shape == w.shape, (name, key)
                    assert torch.allclose(v, w, rtol=1e-4, atol=1e-6), (name, key)
        assert [sorted(g.keys()) for g in mine["param_groups"]] == [sorted(g.keys()) for g in theirs["param_groups"]], name
        for _ in range(2):
            step(m, opt)
        m7, _ = run(name, mk, 7)
        assert torch.allclose(m[0].weight, m7[0].weight, rtol=1e-4, atol=1e-6), name
        print("ok " + name)
