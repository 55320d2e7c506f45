"""Reference for metrics.purple: the same data and metric definitions (scikit-learn's
conventions) computed with python3-torch ops."""
import torch
from interop_common import emit

n, k = 200, 5
i = torch.arange(0, n)
targets = (i * 7 + 3) % k
cls = torch.arange(0, k)
scores = torch.sin(i.float().reshape(n, 1) * 0.37 + cls.float().reshape(1, k) * 1.3) + \
    (targets.reshape(n, 1) == cls.reshape(1, k)).float() * (i % 3 != 0).float().reshape(n, 1)
preds = scores.argmax(dim=1)

emit("accuracy", (preds == targets).double().mean().item())
cm = torch.zeros(k, k, dtype=torch.int64)
for t, p in zip(targets.tolist(), preds.tolist()):
    cm[t, p] += 1
emit("confusion", cm)

cmd = cm.double()
tp = cmd.diagonal()
predicted, actual = cmd.sum(0), cmd.sum(1)
prec = torch.where(predicted > 0, tp / predicted.clamp(min=1e-300), torch.zeros_like(tp))
rec = torch.where(actual > 0, tp / actual.clamp(min=1e-300), torch.zeros_like(tp))
f1 = torch.where(prec + rec > 0, 2 * prec * rec / (prec + rec).clamp(min=1e-300), torch.zeros_like(tp))
present = (predicted + actual) > 0
acc = (preds == targets).double().mean().item()
for avg in ["macro", "micro", "weighted", "none"]:
    for name, v in [("precision", prec), ("recall", rec), ("f1", f1)]:
        if avg == "macro":
            out = v[present].mean().item()
        elif avg == "micro":
            out = acc
        elif avg == "weighted":
            out = ((v * actual).sum() / actual.sum()).item()
        else:
            out = v.float()
        emit(name + "-" + avg, out)
