import torch
from interop_common import emit


def grad(out, inputs, **kw):
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    return list(torch.autograd.grad(out, inputs, **kw))


def flat(ts):
    return [v for t in ts for v in t.detach().reshape(-1).tolist()]


# matmul chain
torch.manual_seed(0)
a = torch.randn(3, 4, requires_grad=True)
b = torch.randn(4, 5, requires_grad=True)
c = torch.randn(5, 2, requires_grad=True)
torch.tanh(a @ b @ c).sum().backward()
emit("matmul-a", a.grad)
emit("matmul-b", b.grad)
emit("matmul-c", c.grad)
v = torch.randn(4, requires_grad=True)
emit("matvec", flat(grad(torch.sigmoid(a @ v).sum(), [a, v])))

# softmax, log-softmax
x = torch.randn(4, 5, requires_grad=True)
w = torch.randn(4, 5)
emit("softmax", flat(grad((torch.softmax(x, 1) * w).sum(), x)))
emit("softmax-dim0", flat(grad((torch.softmax(x, 0) * w).sum(), x)))
targets = torch.tensor([1, 0, 4, 2])
nll = -torch.log_softmax(x, 1).gather(1, targets.unsqueeze(1)).mean()
emit("nll", nll)
emit("log-softmax", flat(grad(nll, x)))
emit("logsumexp", flat(grad(torch.logsumexp(x, 1).sum(), x)))

# broadcasting
p = torch.randn(3, 1, requires_grad=True)
q = torch.randn(1, 4, requires_grad=True)
r = torch.randn(4, requires_grad=True)
bl = (((p + q) * r) ** 2).sum()
emit("broadcast", flat(grad(bl, [p, q, r])))
s = torch.tensor(1.5, requires_grad=True)
emit("broadcast-scalar", flat(grad((torch.exp(p * s) / (q + 3.)).sum(), [p, q, s])))

# indexing
m = torch.randn(5, 3, requires_grad=True)
idx = torch.tensor([0, 2, 2, 4, 2])
emit("index-tensor", flat(grad((m[idx] * torch.arange(15.).reshape(5, 3)).sum(), m)))
emit("index-slice", flat(grad((m[1:4, 0:2] ** 3).sum(), m)))
emit("index-mask", flat(grad(torch.exp(m[m > 0]).sum(), m)))
emit("index-select", flat(grad(m.index_select(1, torch.tensor([2, 2, 0])).sum(), m)))
emit("gather", flat(grad((m.gather(1, torch.tensor([[0], [1], [2], [1], [0]])) * 7.).sum(), m)))

# second derivatives
x3 = torch.tensor(2., requires_grad=True)
g1 = grad(x3 ** 3, x3, create_graph=True)[0]
emit("x3-first", g1)
emit("x3-second", flat(grad(g1, x3)))
z = torch.randn(6, requires_grad=True)
fz = (z ** 3 * torch.sin(z)).sum()
gz = grad(fz, z, create_graph=True)[0]
emit("second-diag", flat(grad(gz.sum(), z)))
mw = torch.randn(3, 3, requires_grad=True)
mx = torch.randn(3, requires_grad=True)
loss2 = torch.tanh(mw @ mx).sum()
gs = grad(loss2, [mw, mx], create_graph=True)
vv = torch.randn(3)
emit("hvp", flat(grad((gs[1] * vv).sum(), [mw, mx], retain_graph=True)))
emit("grad-norm-penalty", flat(grad((gs[0] ** 2).sum(), mw)))

# backward with create_graph
y2 = torch.tensor([0.5, -1., 2.], requires_grad=True)
torch.exp(y2 * y2).sum().backward(create_graph=True)
emit("create-graph-grad", y2.grad)
emit("create-graph-second", flat(grad(y2.grad.sum(), y2)))

# hooks
hx = torch.tensor([1., 2., 3.], requires_grad=True)
hy = hx * hx
hy.register_hook(lambda g: g * 2)
torch.sin(hy).sum().backward()
emit("hook", hx.grad)
