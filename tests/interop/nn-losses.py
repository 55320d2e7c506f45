# The second wave's losses (see nn-losses.purple), from python3-torch.
import math
import torch
import torch.nn.functional as F
from interop_common import emit


def data(k, *shape):
    n = math.prod(shape)
    return (torch.cos(torch.arange(n) * 0.53 + k) * 1.5).reshape(shape)


def weights_like(t):
    return torch.cos(torch.arange(t.numel()) * 0.29).reshape(t.shape)


def loss_check(label, f, *xs):
    for red in ["mean", "sum", "none"]:
        ls = [x.detach().requires_grad_(True) for x in xs]
        out = f(red, *ls)
        tag = label + "-" + red
        emit(tag, out)
        (out * weights_like(out)).sum().backward()
        for i, l in enumerate(ls):
            emit(tag + "-grad" + str(i), l.grad)


a, b = data(0, 4, 5), data(1, 4, 5)
y = torch.tensor([1.0, -1.0, -1.0, 1.0])
loss_check("cosine-embedding", lambda r, x1, x2: F.cosine_embedding_loss(x1, x2, y, reduction=r), a, b)
loss_check("cosine-embedding-margin",
           lambda r, x1, x2: F.cosine_embedding_loss(x1, x2, torch.tensor([1, -1, -1, 1]), margin=0.2, reduction=r), a, b)
loss_check("margin-ranking", lambda r, x1, x2: F.margin_ranking_loss(x1, x2, torch.sign(data(2, 4, 5)), reduction=r), a, b)
loss_check("margin-ranking-m",
           lambda r, x1, x2: F.margin_ranking_loss(x1, x2, torch.sign(data(2, 4, 5)), margin=0.5, reduction=r), a, b)
loss_check("triplet", lambda r, x, p, n: F.triplet_margin_loss(x, p, n, reduction=r), a, b, data(3, 4, 5))
loss_check("triplet-opts", lambda r, x, p, n: F.triplet_margin_loss(x, p, n, margin=0.5, p=1, swap=True, reduction=r),
           a, b, data(3, 4, 5))
loss_check("hinge-embedding", lambda r, x: F.hinge_embedding_loss(x, torch.sign(data(2, 4, 5)), margin=0.7, reduction=r), a)
loss_check("soft-margin", lambda r, x: F.soft_margin_loss(x, torch.sign(data(2, 4, 5)), reduction=r), a)
loss_check("multi-margin", lambda r, x: F.multi_margin_loss(x, torch.tensor([1, 0, 4, 2]), reduction=r), a)
loss_check("multi-margin-p2", lambda r, x: F.multi_margin_loss(x, torch.tensor([1, 0, 4, 2]), p=2, margin=0.5,
                                                               weight=data(4, 5), reduction=r), a)
loss_check("multilabel-margin", lambda r, x: F.multilabel_margin_loss(
    x, torch.tensor([[3, 0, -1, 1, 1], [1, 2, 3, -1, 0], [0, -1, 0, 0, 0], [4, 3, 2, 1, 0]]), reduction=r), a)
ml = torch.tensor([[1.0, 0, 1, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
loss_check("multilabel-soft-margin", lambda r, x: F.multilabel_soft_margin_loss(x, ml, reduction=r), a)
loss_check("multilabel-soft-margin-w", lambda r, x: F.multilabel_soft_margin_loss(x, ml, weight=data(5, 5), reduction=r), a)

counts = torch.abs(torch.round(data(6, 4, 5) * 3))
loss_check("poisson", lambda r, x: F.poisson_nll_loss(x, counts, reduction=r), a)
loss_check("poisson-full", lambda r, x: F.poisson_nll_loss(x, counts, full=True, reduction=r), a)
loss_check("poisson-rate", lambda r, x: F.poisson_nll_loss(x, counts, log_input=False, reduction=r), torch.abs(a))
var = torch.abs(data(7, 4, 5)) + 0.1
loss_check("gaussian", lambda r, x, v: F.gaussian_nll_loss(x, b, v, reduction=r), a, var)
loss_check("gaussian-full", lambda r, x, v: F.gaussian_nll_loss(x, b, v, full=True, eps=0.5, reduction=r), a, var)
loss_check("gaussian-short", lambda r, x, v: F.gaussian_nll_loss(x, b, v, reduction=r), a, torch.abs(data(8, 4)))
loss_check("gaussian-one", lambda r, x, v: F.gaussian_nll_loss(x, b, v, reduction=r), a, torch.abs(data(8, 4, 1)))

lp_raw = data(9, 6, 2, 4)
loss_check("ctc", lambda r, x: F.ctc_loss(F.log_softmax(x, 2), torch.tensor([[1, 2, 2], [3, 1, 0]]), [6, 5], [3, 2],
                                          reduction=r), lp_raw)
loss_check("ctc-concat", lambda r, x: F.ctc_loss(F.log_softmax(x, 2), torch.tensor([1, 2, 2, 3, 1]), torch.tensor([6, 5]),
                                                 torch.tensor([3, 2]), reduction=r), lp_raw)
loss_check("ctc-blank", lambda r, x: F.ctc_loss(F.log_softmax(x, 2), torch.tensor([[1, 0, 2], [3, 1, 1]]), [6, 6], [3, 3],
                                                blank=3, reduction=r), lp_raw)
loss_check("ctc-zero-inf", lambda r, x: F.ctc_loss(F.log_softmax(x, 2), torch.tensor([[1, 1, 1], [2, 2, 2]]), [3, 6], [3, 3],
                                                   zero_infinity=True, reduction=r), lp_raw)
