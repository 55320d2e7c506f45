"""Output helpers shared by the python side of the interop tests: one labelled line per result,
booleans as 1/0, tensors flattened (the Purple side prints the same with `emit`)."""
import torch


def fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v
    return repr(float(v))


def emit(label, t):
    if isinstance(t, torch.Tensor):
        vals = t.detach().reshape(-1).tolist()
    elif isinstance(t, (list, tuple)):
        vals = list(t)
    else:
        vals = [t]
    print(label + ":" + "".join(" " + fmt(v) for v in vals))
