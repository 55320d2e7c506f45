"""The python side's half of the canonical printout (common.purple prints the same for Purple)."""
import os

import torch


def fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, complex):
        return repr(float(v.real)) + " " + repr(float(v.imag))
    return repr(float(v))


def values(t):
    t = t.detach().contiguous().reshape(-1)
    if t.is_floating_point():
        t = t.double()
    return t.tolist()


def emit(label, *xs):
    out = [label]
    for x in xs:
        if isinstance(x, torch.Tensor):
            out += [fmt(v) for v in values(x)]
        elif isinstance(x, (list, tuple)):
            out += [fmt(v) for v in x]
        else:
            out.append(x if isinstance(x, str) else fmt(x))
    print(" ".join(out))


def emit_tensor(label, t):
    """label dtype shape | stride | offset | values"""
    emit(label, str(t.dtype).replace("torch.", ""), list(t.shape), "|", list(t.stride()), "|", t.storage_offset(), "|", t)


def det_init(m, k0=0):
    """Fixed weights from the parameter index, so Purple can rebuild the same model without RNG."""
    with torch.no_grad():
        for k, (n, p) in enumerate(m.named_parameters()):
            p.copy_((torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.37 + (k + k0) * 0.1) * 0.3).reshape(p.shape))
    return m


def data(k, *shape):
    n = 1
    for s in shape:
        n *= s
    return (torch.cos(torch.arange(n, dtype=torch.float64) * 0.53 + k) * 1.5).float().reshape(shape)


class HostileFiles:
    """The hostile files a test generates into folder D: each is written with the loader that must
    refuse it and a word the refusal's message must hold (hostile.py, strict.py)."""

    def __init__(self, d):
        self.d = d
        self.cases = []   # (file name, loader, word)

    def write(self, name, data, loader="torch-load", word="-"):
        with open(os.path.join(self.d, name), "wb") as f:
            f.write(data)
        self.cases.append((name, loader, word))
