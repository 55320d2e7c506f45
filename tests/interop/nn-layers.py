# The second wave's layers (see nn-layers.purple): forward outputs, gradients of parameters and
# inputs, state-dict names and seeded initial weights, from python3-torch.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from interop_common import emit


def det_init(m):
    names = sorted(n for n, _ in m.named_parameters())
    params = dict(m.named_parameters())
    with torch.no_grad():
        for k, n in enumerate(names):
            p = params[n]
            p.copy_((torch.sin(torch.arange(p.numel()) * 0.37 + k * 0.1) * 0.3).reshape(p.shape))
    return m


def data(k, *shape):
    n = math.prod(shape)
    return (torch.cos(torch.arange(n) * 0.53 + k) * 1.5).reshape(shape)


def weights_like(t):
    return torch.cos(torch.arange(t.numel()) * 0.29).reshape(t.shape)


def first_tensor(out):
    return out if isinstance(out, torch.Tensor) else first_tensor(out[0])


def leaf(x):
    return x.detach().requires_grad_(True) if x.is_floating_point() else x


def emit_grad(label, t):
    if t.grad is None:
        print(label + ": none")
    else:
        emit(label, t.grad)


def flat(out):
    if isinstance(out, torch.Tensor):
        return out.detach().reshape(-1).tolist()
    r = []
    for o in out:
        r += flat(o)
    return r


def check(label, m, *inputs):
    xs = [leaf(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    out = m(*xs)
    o = first_tensor(out)
    emit(label, flat(out))
    (o * weights_like(o)).sum().backward()
    for n, p in sorted(m.named_parameters()):
        emit_grad(label + "-grad-" + n, p)
    for i, x in enumerate(xs):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            emit_grad(label + "-xgrad" + str(i), x)


def checked(label, m, *inputs):
    check(label, det_init(m), *inputs)


class Fn(nn.Module):
    """A parameterless module from a function (Python 1.13 lacks some of Purple's padding modules)."""
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


class Out(nn.Module):
    """Calls M with an output size, as (m x size) does in Purple."""
    def __init__(self, m, size):
        super().__init__()
        self.m = m
        self.size = size

    def forward(self, x, size):
        return self.m(x, output_size=self.size)


# ---- convolutions ----
checked("conv3d", nn.Conv3d(2, 3, (2, 3, 2), stride=(1, 2, 1), padding=1, dilation=(1, 1, 2)), data(0, 2, 2, 4, 5, 6))
checked("conv3d-groups", nn.Conv3d(4, 4, 3, groups=2, bias=False, padding="same"), data(1, 1, 4, 5, 5, 5))
checked("conv1d-reflect", nn.Conv1d(2, 3, 3, padding=2, padding_mode="reflect"), data(2, 2, 2, 7))
checked("conv2d-circular", nn.Conv2d(2, 2, 3, padding=1, padding_mode="circular"), data(3, 1, 2, 5, 4))
checked("convT1d", nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1, output_padding=1), data(4, 2, 3, 6))
ct = det_init(nn.ConvTranspose1d(3, 2, 3, stride=2))
xs = leaf(data(5, 1, 3, 5))
out = ct(xs, output_size=[12])
emit("convT1d-size", out)
(out * weights_like(out)).sum().backward()
for n, p in sorted(ct.named_parameters()):
    emit_grad("convT1d-size-grad-" + n, p)
emit_grad("convT1d-size-xgrad0", xs)
checked("convT3d", nn.ConvTranspose3d(2, 2, 3, stride=2, groups=2), data(6, 1, 2, 3, 3, 3))
emit("f-conv3d", F.conv3d(data(7, 1, 2, 4, 4, 4), data(8, 3, 2, 2, 2, 2), data(9, 3), stride=2))
emit("f-convT1d", F.conv_transpose1d(data(7, 2, 3, 5), data(8, 3, 2, 3), None, stride=2, padding=1))

# ---- pooling ----
checked("max-pool1d", nn.MaxPool1d(3, stride=2, padding=1), data(0, 2, 3, 9))
checked("max-pool1d-ceil", nn.MaxPool1d(2, ceil_mode=True, dilation=2), data(1, 2, 3, 9))
emit("max-pool1d-indices", nn.MaxPool1d(3, stride=2, return_indices=True)(data(2, 2, 3, 9))[1])
checked("max-pool3d", nn.MaxPool3d(2), data(3, 1, 2, 4, 4, 4))
emit("max-pool3d-indices", nn.MaxPool3d((2, 2, 1), return_indices=True)(data(3, 1, 2, 4, 4, 4))[1])
checked("avg-pool1d", nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False), data(4, 2, 3, 9))
checked("avg-pool3d", nn.AvgPool3d(2, stride=1, ceil_mode=True), data(5, 1, 2, 3, 3, 3))
checked("avg-pool3d-div", nn.AvgPool3d((2, 2, 3), divisor_override=5), data(6, 1, 2, 4, 4, 6))
checked("adaptive-max-pool1d", nn.AdaptiveMaxPool1d(4), data(7, 2, 3, 9))
checked("adaptive-max-pool2d", nn.AdaptiveMaxPool2d((3, None)), data(8, 2, 3, 7, 5))
emit("adaptive-max-pool2d-indices", nn.AdaptiveMaxPool2d(2, return_indices=True)(data(8, 2, 3, 7, 5))[1])
checked("adaptive-avg-pool1d", nn.AdaptiveAvgPool1d(3), data(9, 2, 3, 8))
checked("adaptive-avg-pool3d", nn.AdaptiveAvgPool3d((2, None, 3)), data(10, 1, 2, 5, 4, 7))
emit("f-max-pool1d", F.max_pool1d(data(0, 2, 3, 9), 2))
emit("f-max-pool3d-idx", flat(F.max_pool3d(data(3, 1, 2, 4, 4, 4), 3, stride=1, padding=1, return_indices=True)))
emit("f-avg-pool1d", F.avg_pool1d(data(4, 2, 3, 9), 4, stride=3))
emit("f-adaptive-max-pool1d", flat(F.adaptive_max_pool1d(data(7, 2, 3, 9), 5, return_indices=True)))
emit("f-adaptive-avg-pool3d", F.adaptive_avg_pool3d(data(10, 1, 2, 5, 4, 7), 2))

# ---- normalization ----
checked("instance-norm1d", nn.InstanceNorm1d(3), data(0, 2, 3, 6))
inorm = det_init(nn.InstanceNorm2d(3, affine=True, track_running_stats=True))
check("instance-norm2d", inorm, data(1, 2, 3, 4, 4))
emit("instance-norm2d-running-mean", inorm.running_mean)
emit("instance-norm2d-running-var", inorm.running_var)
inorm.eval()
emit("instance-norm2d-eval", inorm(data(2, 2, 3, 4, 4)))
checked("instance-norm3d-unbatched", nn.InstanceNorm3d(2, affine=True), data(3, 2, 3, 3, 3))
bn3 = det_init(nn.BatchNorm3d(2, momentum=0.3))
check("batch-norm3d", bn3, data(4, 2, 2, 3, 3, 3))
emit("batch-norm3d-running-var", bn3.running_var)
emit("f-instance-norm", F.instance_norm(data(5, 2, 3, 5), weight=data(6, 3), bias=data(7, 3), eps=1e-3))
emit("f-group-norm", F.group_norm(data(5, 2, 4, 5), 2, data(6, 4), data(7, 4)))

# ---- dropout in evaluation mode, activations ----
for d in [nn.Dropout2d(0.3), nn.Dropout3d(), nn.AlphaDropout(0.2), nn.FeatureAlphaDropout(0.4), nn.Dropout1d(0.5)]:
    x = data(0, 2, 3, 4, 5)
    emit("dropout-eval", d.eval()(x if not isinstance(d, nn.Dropout1d) else x.reshape(2, 3, 20)))
emit("dropout-p0", F.dropout2d(data(0, 2, 3, 4, 5), 0.0))
checked("prelu", nn.PReLU(), data(0, 2, 3, 4))
checked("prelu-channels", nn.PReLU(3, init=0.1), data(1, 2, 3, 4))
emit("f-prelu", F.prelu(data(1, 2, 3, 4), torch.tensor([0.1, 0.2, -0.3])))
check("identity", nn.Identity(), data(2, 3, 4))
for a in [nn.LeakyReLU(0.2), nn.ELU(), nn.ELU(0.5), nn.SELU(), nn.CELU(2.0), nn.SiLU(), nn.Mish(), nn.Softplus(2, 1),
          nn.Hardtanh(-0.5, 0.7), nn.ReLU6(), nn.Hardswish(), nn.Hardsigmoid(), nn.LogSigmoid(), nn.Softsign(),
          nn.Tanhshrink(), nn.Softmin(1), nn.GLU(), nn.GLU(0)]:
    check("act-" + type(a).__name__, a, data(3, 2, 6))
emit("f-leaky-relu", F.leaky_relu(data(3, 2, 6), 0.3))
emit("f-softplus", F.softplus(data(3, 2, 6), 0.5, 1))

# ---- resampling ----
checked("pixel-shuffle", nn.PixelShuffle(2), data(0, 1, 8, 3, 3))
checked("pixel-unshuffle", nn.PixelUnshuffle(2), data(1, 1, 2, 4, 6))
checked("upsample-bilinear", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), data(2, 1, 2, 3, 4))
checked("upsample-nearest", nn.Upsample(size=(5, 7)), data(3, 1, 2, 3, 4))
checked("upsample-bicubic", nn.Upsample(scale_factor=1.5, mode="bicubic"), data(4, 1, 2, 3, 4))
checked("upsample-linear", nn.Upsample(scale_factor=2.5, mode="linear"), data(5, 1, 2, 5))
checked("upsample-trilinear", nn.Upsample(size=3, mode="trilinear"), data(6, 1, 1, 2, 2, 2))
checked("reflection-pad2d", nn.ReflectionPad2d((1, 2, 0, 1)), data(0, 1, 2, 3, 4))
checked("reflection-pad1d", nn.ReflectionPad1d(2), data(1, 2, 5))
checked("replication-pad1d", nn.ReplicationPad1d((3, 1)), data(2, 1, 2, 5))
checked("replication-pad3d", nn.ReplicationPad3d(1), data(3, 1, 1, 2, 2, 3))
checked("constant-pad3d", nn.ConstantPad3d(1, 0.5), data(4, 1, 1, 2, 2, 2))
checked("zero-pad2d", nn.ZeroPad2d((1, 0, 2, 1)), data(5, 1, 2, 3, 3))
checked("circular-pad2d", Fn(lambda x: F.pad(x, (1, 1, 1, 1), mode="circular")), data(6, 1, 2, 3, 3))

# ---- embedding-bag ----
words = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
checked("bag-sum", nn.EmbeddingBag(10, 3, mode="sum"), words, torch.tensor([0, 4]))
checked("bag-mean-2d", nn.EmbeddingBag(10, 3), torch.tensor([[1, 2, 4, 5], [4, 3, 2, 9]]))
checked("bag-max", nn.EmbeddingBag(10, 3, mode="max"), words, torch.tensor([0, 3, 5]))
checked("bag-weights", nn.EmbeddingBag(10, 3, mode="sum"), words, torch.tensor([0, 4]), data(1, 8))
checked("bag-last-offset", nn.EmbeddingBag(10, 3, include_last_offset=True), words, torch.tensor([0, 2, 8]))
checked("bag-padding", nn.EmbeddingBag(10, 3, padding_idx=2), words, torch.tensor([0, 4]))
emit("f-bag", F.embedding_bag(words, data(2, 10, 4), torch.tensor([0, 3]), mode="mean"))

# ---- cells ----
checked("rnn-cell", nn.RNNCell(4, 3), data(0, 2, 4), data(1, 2, 3))
checked("rnn-cell-relu", nn.RNNCell(4, 3, nonlinearity="relu", bias=False), data(0, 2, 4))
checked("rnn-cell-unbatched", nn.RNNCell(4, 3), data(0, 4))
checked("gru-cell", nn.GRUCell(4, 3), data(2, 2, 4), data(3, 2, 3))
checked("gru-cell-nostate", nn.GRUCell(4, 3), data(2, 2, 4))
lc = det_init(nn.LSTMCell(4, 3))
lx, lh, lcs = leaf(data(4, 2, 4)), leaf(data(5, 2, 3)), leaf(data(6, 2, 3))
h, c = lc(lx, (lh, lcs))
emit("lstm-cell", flat([h, c]))
((h * weights_like(h)) + c * 0.5).sum().backward()
for n, p in sorted(lc.named_parameters()):
    emit_grad("lstm-cell-grad-" + n, p)
emit_grad("lstm-cell-xgrad", lx)
emit_grad("lstm-cell-hgrad", lh)
emit_grad("lstm-cell-cgrad", lcs)
with torch.no_grad():
    emit("lstm-cell-unbatched", flat(det_init(nn.LSTMCell(4, 3))(data(4, 4))))
cell = det_init(nn.GRUCell(3, 2))
seq = data(7, 5, 2, 3)
h = torch.zeros(2, 2)
hs = []
with torch.no_grad():
    for t in range(5):
        h = cell(seq[t], h)
        hs.append(h)
emit("gru-unrolled", flat(hs))

# ---- state-dict names and seeded initial weights ----
def names(label, m):
    print(label + ": " + " ".join(m.state_dict().keys()))


names("names-conv3d", nn.Conv3d(2, 3, 3))
names("names-instance-norm", nn.InstanceNorm2d(3, affine=True, track_running_stats=True))
names("names-prelu", nn.PReLU(3))
names("names-bag", nn.EmbeddingBag(5, 2))
names("names-lstm-cell", nn.LSTMCell(3, 2))
names("names-gru-cell", nn.GRUCell(3, 2, bias=False))
names("names-rnn-cell", nn.RNNCell(3, 2))
names("names-convT1d", nn.ConvTranspose1d(2, 3, 3))
torch.manual_seed(7)
for m in [nn.Conv3d(2, 3, 2), nn.ConvTranspose1d(3, 2, 3), nn.ConvTranspose3d(1, 2, 2), nn.PReLU(2), nn.LSTMCell(3, 2),
          nn.GRUCell(2, 3), nn.RNNCell(2, 2), nn.EmbeddingBag(4, 3), nn.InstanceNorm1d(2, affine=True), nn.BatchNorm3d(2)]:
    emit("seeded", flat(list(m.state_dict().values())))
emit("seeded-after", torch.rand(3))
