# The module API (see nn-module-api.purple): print(model) and the order and outputs of forward hooks.
import torch
import torch.nn as nn
import torch.nn.functional as F


def emit(label, vals):
    print(label + ":" + "".join(" " + str(v) for v in vals))


class Fn(nn.Module):
    def __init__(self, name, text=""):
        super().__init__()
        self.name, self.text = name, text

    def _get_name(self):
        return self.name

    def extra_repr(self):
        return self.text


zoo = nn.Sequential(
    nn.Linear(4, 5), nn.Linear(3, 2, bias=False), nn.Conv1d(2, 3, 3),
    nn.Conv2d(1, 4, 3, stride=2, padding=1, dilation=2, bias=False, padding_mode="reflect"), nn.Conv2d(3, 3, 3, padding="same"),
    nn.Conv3d(2, 4, (1, 2, 3)), nn.ConvTranspose1d(3, 2, 4, stride=2, output_padding=1), nn.ConvTranspose2d(4, 2, 3, groups=2),
    nn.MaxPool1d(3), nn.MaxPool2d(2, stride=1), nn.MaxPool2d((2, 3)), nn.MaxPool3d(2, ceil_mode=True),
    nn.AvgPool1d(3), nn.AvgPool2d(2), nn.AvgPool3d(2, stride=1),
    nn.AdaptiveAvgPool1d(3), nn.AdaptiveAvgPool2d((3, None)), nn.AdaptiveMaxPool2d(4), nn.AdaptiveMaxPool1d(2),
    nn.BatchNorm1d(4), nn.BatchNorm2d(3, momentum=None), nn.BatchNorm3d(2, affine=False), nn.InstanceNorm1d(3),
    nn.InstanceNorm2d(3, affine=True), nn.LayerNorm(4), nn.LayerNorm((3, 4), eps=1e-3), nn.GroupNorm(2, 4),
    nn.Dropout(), nn.Dropout(0.2), nn.Dropout2d(0.3), nn.AlphaDropout(0.1),
    nn.Embedding(10, 3), nn.Embedding(10, 3, padding_idx=0, max_norm=1.0), nn.EmbeddingBag(10, 3, mode="sum"),
    nn.Flatten(), nn.ReLU(), nn.GELU(), nn.GELU(approximate="tanh"), nn.Sigmoid(), nn.Tanh(), nn.Softmax(-1), nn.LogSoftmax(1),
    nn.PReLU(), nn.PReLU(3), nn.Identity(), nn.LeakyReLU(0.2), nn.ELU(), nn.SELU(), nn.CELU(), nn.SiLU(), nn.Mish(),
    nn.Softplus(), nn.Hardtanh(), nn.ReLU6(),
    nn.Hardswish(), nn.Hardsigmoid(), nn.LogSigmoid(), nn.Softsign(), nn.Tanhshrink(), nn.Softmin(1), nn.GLU(),
    nn.PixelShuffle(2), nn.PixelUnshuffle(2), nn.Upsample(scale_factor=2), nn.Upsample(size=(4, 5), mode="bilinear"),
    nn.ReflectionPad2d(1), nn.ReplicationPad1d((1, 2)), nn.ConstantPad2d(1, 0.5), nn.ZeroPad2d(2),
    nn.RNN(4, 3), nn.LSTM(4, 3, num_layers=2, batch_first=True, dropout=0.5, bidirectional=True), nn.GRU(2, 3, bias=False),
    nn.LSTM(4, 3, proj_size=2), nn.RNNCell(3, 2), nn.LSTMCell(3, 2), nn.GRUCell(3, 2, bias=False),
    nn.RNNCell(3, 2, nonlinearity="relu"),
    nn.MultiheadAttention(4, 2), nn.TransformerEncoderLayer(4, 2, dim_feedforward=8), nn.CosineSimilarity(),
    nn.PairwiseDistance())
print(zoo)
print(nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8))


def hook_all(model):
    for name, m in model.named_modules():
        label = "hook " + (name if name else "<root>")
        m.register_forward_hook(lambda m, a, out, label=label: emit(
            label, list((out if isinstance(out, torch.Tensor) else out[0]).shape)))


torch.manual_seed(0)
tf = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0)
hook_all(tf)
tf(torch.randn(5, 2, 8), torch.randn(3, 2, 8))
cnn = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Sequential(nn.MaxPool2d(2), nn.Flatten()), nn.Linear(144, 10))
hook_all(cnn)
cnn(torch.randn(2, 1, 14, 14))
lin = nn.Linear(3, 2)
with torch.no_grad():
    lin.weight.copy_(torch.tensor([[1., 2., 3.], [4., 5., 6.]]))
    lin.bias.copy_(torch.tensor([0.5, -0.5]))
lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
lin.register_forward_hook(lambda m, args, out: out + 1)
emit("hooked", lin(torch.tensor([[1., 1., 1.]])).flatten().tolist())
