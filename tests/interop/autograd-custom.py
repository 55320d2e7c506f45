import torch
import torch.utils.checkpoint
from interop_common import emit


def grad(out, inputs, **kw):
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    return list(torch.autograd.grad(out, inputs, **kw))


def flat(ts):
    return [v for t in ts for v in t.detach().reshape(-1).tolist()]


class SmoothAbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sqrt(x * x + 0.1)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x / torch.sqrt(x * x + 0.1)


class SinCos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return torch.sin(x) * y, torch.cos(x) + y

    @staticmethod
    def backward(ctx, ga, gb):
        x, y = ctx.saved_tensors
        return ga * (torch.cos(x) * y) - gb * torch.sin(x), ga * torch.sin(x) + gb


class Power(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return x ** n

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * (x ** (ctx.n - 1) * ctx.n), None


class MyLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x, g.sum(0)


class MaxAndArgmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        i = x.argmax(1, keepdim=True)
        ctx.save_for_backward(i)
        ctx.shape = x.shape
        ctx.mark_non_differentiable(i)
        return x.gather(1, i), i

    @staticmethod
    def backward(ctx, g, gi):
        i, = ctx.saved_tensors
        return torch.zeros(ctx.shape).scatter(1, i, g)


torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
y = torch.randn(5, requires_grad=True)
emit("smooth-abs", SmoothAbs.apply(x))
g1 = grad(SmoothAbs.apply(x).sum(), x, create_graph=True)[0]
emit("smooth-abs-grad", g1)
emit("smooth-abs-second", flat(grad((g1 * g1).sum(), x)))

sc = SinCos.apply(x, y)
emit("sin-cos", flat(sc))
emit("sin-cos-grad", flat(grad((sc[0] * sc[1]).sum(), [x, y])))
emit("sin-cos-only-first", flat(grad(SinCos.apply(x, y)[0].sum(), [x, y])))

emit("power", flat(grad(Power.apply(x, 3).sum(), x)))
gp = grad(Power.apply(x, 3).sum(), x, create_graph=True)[0]
emit("power-second", flat(grad(gp.sum(), x)))

lx = torch.randn(4, 3, requires_grad=True)
lw = torch.randn(2, 3, requires_grad=True)
lb = torch.randn(2, requires_grad=True)
lt = torch.randn(2, 2)
torch.tanh(MyLinear.apply(lx, lw, lb) @ lt).sum().backward()
emit("linear-x", lx.grad)
emit("linear-w", lw.grad)
emit("linear-b", lb.grad)

mx = torch.randn(3, 4, requires_grad=True)
ma = MaxAndArgmax.apply(mx)
emit("argmax", ma[1])
emit("argmax-requires-grad", ma[1].requires_grad)
emit("max-grad", flat(grad((ma[0] * torch.tensor([[1.], [2.], [3.]])).sum(), mx)))

hx = torch.randn(4, requires_grad=True)
hy = SmoothAbs.apply(hx)
hy.register_hook(lambda g: g * torch.arange(4.))
hy.sum().backward()
emit("custom-hook", hx.grad)

cw = torch.randn(4, 4, requires_grad=True)
cx = torch.randn(2, 4, requires_grad=True)


def block(h):
    return torch.tanh(h @ cw)


cp = torch.utils.checkpoint.checkpoint
(cp(block, cp(block, cx)) * torch.arange(4.)).sum().backward()
emit("checkpoint-x", cx.grad)
emit("checkpoint-w", cw.grad)

dx = torch.randn(4, dtype=torch.float64, requires_grad=True)
dy = torch.randn(4, dtype=torch.float64, requires_grad=True)
emit("gradcheck-smooth-abs", torch.autograd.gradcheck(SmoothAbs.apply, (dx,)))
emit("gradcheck-sin-cos", torch.autograd.gradcheck(SinCos.apply, (dx, dy)))
emit("gradgradcheck-sin-cos", torch.autograd.gradgradcheck(SinCos.apply, (dx, dy)))
emit("gradcheck-power", torch.autograd.gradcheck(Power.apply, (dx, 3)))
