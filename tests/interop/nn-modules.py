# Forward outputs of built-in layers, Purple-style composition and losses, with deterministic
# weights: parameter k (in sorted-name order) gets sin(arange(n) * 0.37 + k * 0.1) * 0.3.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from interop_common import emit

torch.set_grad_enabled(False)


def det_init(m):
    names = sorted(n for n, _ in m.named_parameters())
    params = dict(m.named_parameters())
    for k, n in enumerate(names):
        p = params[n]
        p.copy_((torch.sin(torch.arange(p.numel()) * 0.37 + k * 0.1) * 0.3).reshape(p.shape))
    return m


def data(*shape, k=0):
    n = math.prod(shape)
    return (torch.cos(torch.arange(n) * 0.53 + k) * 1.5).reshape(shape)


x = data(3, 4)
mlp = det_init(nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3), nn.Softmax(-1)))
print("names: " + " ".join(mlp.state_dict().keys()))
emit("mlp", mlp(x))
emit("count", [sum(p.numel() for p in mlp.parameters())])

img = data(2, 3, 8, 8, k=1)
cnn = det_init(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2), nn.Conv2d(4, 2, 3, stride=2),
                             nn.ReLU(), nn.Flatten(), nn.Linear(2, 3)))
emit("cnn", cnn(img))
emit("avg-pool", nn.AvgPool2d(2, stride=1)(img))
emit("adaptive", nn.AdaptiveAvgPool2d(3)(img))
emit("conv1d", det_init(nn.Conv1d(3, 2, 3, padding=1))(data(2, 3, 6)))
emit("conv-same", det_init(nn.Conv2d(3, 2, 3, padding="same"))(img))
emit("convT", det_init(nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1))(img))

bn = det_init(nn.BatchNorm2d(3))
bn.train()
emit("bn-train", bn(img))
emit("bn-running-mean", bn.running_mean)
emit("bn-running-var", bn.running_var)
bn.eval()
emit("bn-eval", bn(img))
bn1 = det_init(nn.BatchNorm1d(4))
emit("bn1d", bn1(x))
emit("layer-norm", det_init(nn.LayerNorm(4))(x))
emit("group-norm", det_init(nn.GroupNorm(1, 3))(img))
emb = det_init(nn.Embedding(10, 3, padding_idx=0))
emit("embedding", emb(torch.tensor([[1, 0, 9], [4, 4, 2]])))
emit("dropout-eval", nn.Dropout(0.5).eval()(x))

seq = data(5, 2, 4, k=2)   # (L, N, E)
rnn = det_init(nn.RNN(4, 3, num_layers=2))
o, h = rnn(seq)
emit("rnn-out", o)
emit("rnn-h", h)
lstm = det_init(nn.LSTM(4, 3, batch_first=True, bidirectional=True))
o, (h, c) = lstm(seq)
emit("lstm-out", o)
emit("lstm-c", c)
gru = det_init(nn.GRU(4, 3))
o, h = gru(seq, data(1, 2, 3, k=3))
emit("gru-out", o)
mha = det_init(nn.MultiheadAttention(4, 2))
o, w = mha(seq, seq, seq)
emit("mha-out", o)
emit("mha-w", w)
mhab = det_init(nn.MultiheadAttention(4, 2, batch_first=True))
o, w = mhab(seq, seq, seq, need_weights=False)
emit("mha-bf", o)
enc = det_init(nn.TransformerEncoderLayer(4, 2, dim_feedforward=8)).eval()
emit("encoder", enc(seq))

emit("gelu", nn.GELU()(x))
emit("tanh", nn.Tanh()(x))
emit("sigmoid", torch.sigmoid(x))
emit("log-softmax", nn.LogSoftmax(0)(x))

# functional
w = data(5, 4, k=4)
b = data(5, k=5)
emit("tensor-linear", F.linear(x, w, b))
emit("f-conv2d", F.conv2d(img, data(2, 3, 3, 3, k=6), data(2, k=7), stride=2, padding=1))
emit("f-max-pool2d", F.max_pool2d(img, 3, stride=2, padding=1))
emit("f-avg-pool2d", F.avg_pool2d(img, 2))
emit("f-batch-norm", F.batch_norm(x, torch.zeros(4), torch.ones(4), weight=data(4, k=8), bias=data(4, k=9), training=True))
emit("f-layer-norm", F.layer_norm(x, [4], data(4, k=8), data(4, k=9), eps=1e-3))
emit("f-embedding", F.embedding(torch.tensor([3, 1]), w))
emit("one-hot", F.one_hot(torch.tensor([0, 2, 1]), 4))
q, k_, v = data(2, 3, 4, k=10), data(2, 5, 4, k=11), data(2, 5, 4, k=12)
att = torch.softmax(q @ k_.transpose(-2, -1) / math.sqrt(4), -1) @ v
emit("sdpa", att)
mask = torch.ones(3, 3, dtype=torch.bool).tril()
att = torch.softmax((q @ q.transpose(-2, -1) / math.sqrt(4)).masked_fill(~mask, float("-inf")), -1) @ q
emit("sdpa-causal", att)

# losses
logits = data(4, 5, k=13)
target = torch.tensor([1, 0, 4, 2])
emit("cross-entropy", F.cross_entropy(logits, target))
emit("ce-smooth", F.cross_entropy(logits, target, label_smoothing=0.1))
emit("ce-ignore", F.cross_entropy(logits, torch.tensor([1, -100, 4, 2])))
emit("ce-sum", F.cross_entropy(logits, target, reduction="sum"))
emit("ce-none", F.cross_entropy(logits, target, reduction="none"))
emit("ce-weight", F.cross_entropy(logits, target, weight=torch.tensor([1., 2., 3., 4., 5.])))
emit("ce-probs", F.cross_entropy(logits, torch.softmax(data(4, 5, k=14), -1)))
emit("ce-of-softmax", F.cross_entropy(torch.softmax(logits, -1), target))
emit("nll", F.nll_loss(F.log_softmax(logits, -1), target))
p, y = data(6, k=15), data(6, k=16)
emit("mse", F.mse_loss(p, y))
emit("l1", F.l1_loss(p, y, reduction="sum"))
emit("smooth-l1", F.smooth_l1_loss(p, y, beta=0.5))
emit("huber", F.huber_loss(p, y, delta=0.7))
emit("bce", F.binary_cross_entropy(torch.sigmoid(p), torch.sigmoid(y)))
emit("bce-logits", F.binary_cross_entropy_with_logits(p, (y > 0).float(), pos_weight=torch.tensor(2.)))
emit("kl-div", F.kl_div(F.log_softmax(logits, -1), torch.softmax(data(4, 5, k=14), -1), reduction="batchmean"))
