# Functional and tensor ops of the second wave (see nn-functional.purple), from python3-torch.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from interop_common import emit


def data(k, *shape):
    n = math.prod(shape)
    return (torch.cos(torch.arange(n) * 0.53 + k) * 1.5).reshape(shape)


def weights_like(t):
    return torch.cos(torch.arange(t.numel()) * 0.29).reshape(t.shape)


def with_grads(label, f, *xs):
    ls = [x.detach().requires_grad_(True) for x in xs]
    out = f(*ls)
    emit(label, out)
    (out * weights_like(out)).sum().backward()
    for i, l in enumerate(ls):
        emit(label + "-grad" + str(i), l.grad)


def flat(out):
    if isinstance(out, torch.Tensor):
        return out.detach().reshape(-1).tolist()
    r = []
    for o in out:
        r += flat(o)
    return r


x3, x4, x5 = data(0, 2, 3, 5), data(1, 1, 2, 4, 5), data(2, 1, 2, 3, 3, 4)
with_grads("pad-constant", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), x4)
with_grads("pad-negative", lambda x: F.pad(x, (-1, 2)), x3)
with_grads("pad-constant-all", lambda x: F.pad(x, (1, 1, 1, 0, 0, 1)), x3)
with_grads("pad-reflect1", lambda x: F.pad(x, (2, 3), mode="reflect"), x3)
with_grads("pad-reflect2", lambda x: F.pad(x, (1, 2, 3, 1), mode="reflect"), x4)
with_grads("pad-reflect3", lambda x: F.pad(x, (1, 1, 2, 0, 1, 2), mode="reflect"), x5)
with_grads("pad-replicate1", lambda x: F.pad(x, (3, 0), mode="replicate"), x3)
with_grads("pad-replicate2", lambda x: F.pad(x, (2, 1, 1, 3), mode="replicate"), x4)
with_grads("pad-replicate3", lambda x: F.pad(x, (1, 0, 0, 2, 1, 1), mode="replicate"), x5)
with_grads("pad-circular1", lambda x: F.pad(x, (2, 1), mode="circular"), x3)
with_grads("pad-circular2", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), x4)
with_grads("pad-circular3", lambda x: F.pad(x, (1, 1, 0, 2, 1, 0), mode="circular"), x5)
emit("pad-unbatched", F.pad(data(3, 2, 4), (1, 2), mode="reflect"))
emit("pad-int", F.pad(torch.tensor([[1, 2], [3, 4]]), (1, 1), value=7))

with_grads("interp-nearest", lambda x: F.interpolate(x, size=(7, 3)), x4)
with_grads("interp-nearest-scale", lambda x: F.interpolate(x, scale_factor=1.7), x4)
with_grads("interp-nearest-exact", lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"), x4)
with_grads("interp-bilinear", lambda x: F.interpolate(x, size=(6, 8), mode="bilinear"), x4)
with_grads("interp-bilinear-ac", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True), x4)
with_grads("interp-bicubic", lambda x: F.interpolate(x, size=(5, 9), mode="bicubic"), x4)
with_grads("interp-bicubic-ac", lambda x: F.interpolate(x, scale_factor=(1.5, 0.5), mode="bicubic", align_corners=True), x4)
with_grads("interp-linear", lambda x: F.interpolate(x, size=9, mode="linear"), x3)
with_grads("interp-trilinear", lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), x5)
with_grads("interp-area", lambda x: F.interpolate(x, size=(2, 3), mode="area"), x4)
with_grads("interp-recompute", lambda x: F.interpolate(x, scale_factor=1.3, mode="bilinear", recompute_scale_factor=True), x4)
with_grads("interp-antialias", lambda x: F.interpolate(x, size=(2, 3), mode="bilinear", antialias=True), x4)
emit("interp-nearest3d", F.interpolate(x5, size=(2, 5, 3)))

a, b = data(4, 3, 5), data(5, 3, 5)
with_grads("normalize", lambda x: F.normalize(x), a)
with_grads("normalize-p1", lambda x: F.normalize(x, p=1, dim=0), a)
with_grads("cosine", lambda x, y: F.cosine_similarity(x, y), a, b)
with_grads("cosine-dim0", lambda x, y: F.cosine_similarity(x, y, dim=0, eps=1e-3), a, b)
with_grads("cosine-module", lambda x, y: nn.CosineSimilarity(dim=1)(x, y), a, b)
with_grads("cosine-broadcast", lambda x, y: F.cosine_similarity(x, y, dim=-1), data(6, 2, 1, 5), data(7, 1, 3, 5))
with_grads("pairwise", lambda x, y: F.pairwise_distance(x, y), a, b)
with_grads("pairwise-p3", lambda x, y: nn.PairwiseDistance(p=3, keepdim=True)(x, y), a, b)
with_grads("cdist", lambda x, y: torch.cdist(x, y), a, data(8, 4, 5))
with_grads("cdist-p1", lambda x, y: torch.cdist(x, y, p=1.0), a, data(8, 4, 5))
with_grads("cdist-batched", lambda x, y: torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist"),
           data(9, 2, 3, 4), data(10, 2, 5, 4))

emit("repeat-interleave", torch.repeat_interleave(torch.tensor([1, 2, 3]), 2))
emit("repeat-interleave-dim", torch.repeat_interleave(torch.tensor([[1, 2], [3, 4]]), torch.tensor([1, 2]), dim=0))
emit("repeat-interleave-list", torch.repeat_interleave(torch.tensor([[1, 2], [3, 4]]), torch.tensor([3, 1]), dim=1))
emit("repeat-interleave-flat", torch.repeat_interleave(torch.tensor([[1, 2], [3, 4]]), 2))
with_grads("repeat-interleave-grad", lambda x: torch.repeat_interleave(x, 3, dim=1), a)
emit("meshgrid", flat(torch.meshgrid(torch.tensor([1, 2, 3]), torch.tensor([4, 5]), indexing="ij")))
emit("meshgrid-xy", flat(torch.meshgrid(torch.tensor([1, 2, 3]), torch.tensor([4, 5]), torch.tensor([6, 7]), indexing="xy")))
emit("bincount", torch.bincount(torch.tensor([0, 1, 1, 3, 2, 1, 7])))
emit("bincount-min", torch.bincount(torch.tensor([0, 1, 1, 3]), minlength=6))
emit("bincount-weights", torch.bincount(torch.tensor([0, 1, 1, 3]), weights=torch.tensor([0.5, 1.0, 0.25, 2.0])))

with_grads("addmm", lambda c, x, y: torch.addmm(c, x, y), data(0, 3, 4), data(1, 3, 5), data(2, 5, 4))
with_grads("addmm-ab", lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2), data(0, 4), data(1, 3, 5), data(2, 5, 4))
with_grads("addmv", lambda c, x, y: torch.addmv(c, x, y, beta=2, alpha=-1), data(0, 3), data(1, 3, 5), data(2, 5))
with_grads("baddbmm", lambda c, x, y: torch.baddbmm(c, x, y, beta=0.25, alpha=3), data(0, 2, 3, 4), data(1, 2, 3, 5),
           data(2, 2, 5, 4))
with_grads("baddbmm-broadcast", lambda c, x, y: torch.baddbmm(c, x, y), data(0, 3, 4), data(1, 2, 3, 5), data(2, 2, 5, 4))
with_grads("addbmm", lambda c, x, y: torch.addbmm(c, x, y, alpha=0.5), data(0, 3, 4), data(1, 2, 3, 5), data(2, 2, 5, 4))

bad = torch.tensor([1.0, float("nan"), float("inf"), float("-inf"), -2.5])
emit("nan-to-num", torch.nan_to_num(bad))
emit("nan-to-num-opts", torch.nan_to_num(bad, nan=-1.0, posinf=100.0, neginf=-100.0))
emit("nan-to-num-f64", torch.nan_to_num(bad.double(), nan=2.0))
q = data(3, 4, 6)
emit("quantile", torch.quantile(q, 0.3))
emit("quantile-list", torch.quantile(q, torch.tensor([0.1, 0.5, 0.9]), dim=1))
emit("quantile-keepdim", torch.quantile(q, torch.tensor([0.25, 0.75]), dim=0, keepdim=True))
for m in ["linear", "lower", "higher", "midpoint", "nearest"]:
    emit("quantile-" + m, torch.quantile(q, 0.4, dim=1, interpolation=m))
emit("nanquantile", torch.nanquantile(torch.tensor([1.0, float("nan"), 3.0, 2.0]), 0.5))
with_grads("quantile-grad", lambda x: torch.quantile(x, 0.6, dim=1), q)
with_grads("diff", lambda x: torch.diff(x), q)
with_grads("diff-n2", lambda x: torch.diff(x, n=2, dim=0), q)
with_grads("diff-pre-app", lambda x, p: torch.diff(x, dim=1, prepend=p, append=p), q, data(5, 4, 1))
emit("diff-int", torch.diff(torch.tensor([1, 4, 9, 16])))
