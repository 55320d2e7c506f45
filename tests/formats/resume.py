"""Resume across languages: Python trains 100 steps and saves a checkpoint; Purple resumes it for
100 steps and saves; Python resumes Purple's checkpoint for the last 100 steps. The loss curve
must be the uninterrupted Python run's to float tolerance. Data order is a function of the step
and the weights start from fixed values, so no random state has to cross."""
import os
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from common import emit, det_init, data

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)
X = data(0, 64, 6)
Y = torch.arange(64) % 3


def make():
    m = det_init(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)))
    return m, torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=1e-4)


def train(m, opt, first, last, losses):
    for step in range(first, last):
        b = (step * 5) % 4          # the batch order: 0 1 2 3 0 ... scrambled by the step
        xb, yb = X[16 * b:16 * b + 16], Y[16 * b:16 * b + 16]
        opt.zero_grad()
        loss = F.cross_entropy(m(xb), yb)
        loss.backward()
        opt.step()
        losses[step] = loss.item()


def uninterrupted():
    m, opt = make()
    losses = {}
    train(m, opt, 0, 300, losses)
    return m, losses


if mode == "gen":
    m, opt = make()
    train(m, opt, 0, 100, {})
    torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 100}, P("ckpt-100.pt"))
    _, losses = uninterrupted()
    for step in range(100, 200):
        emit("~loss", step, losses[step])
else:
    ck = torch.load(P("ckpt-200.pt"))
    assert ck["epoch"] == 200
    m, opt = make()
    m.load_state_dict(ck["model"], strict=True)
    opt.load_state_dict(ck["optimizer"])
    losses = {}
    train(m, opt, 200, 300, losses)
    ref, expected = uninterrupted()
    worst = max(abs(losses[s] - expected[s]) / abs(expected[s]) for s in range(200, 300))
    assert worst < 1e-4, "loss curve after the round trip differs by %g" % worst
    for a, b in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)
    print("resumed in Python after Purple: 100 losses within %.2g of the uninterrupted run" % worst)
