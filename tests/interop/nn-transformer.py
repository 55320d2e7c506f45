# Transformer layers, stacks and the full transformer (see nn-transformer.purple), from python3-torch.
import math
import torch
import torch.nn as nn
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


def grads(label, m, out):
    (out * weights_like(out)).sum().backward()
    for n, p in sorted(m.named_parameters()):
        emit(label + "-grad-" + n, p.grad)


def flat(out):
    if out is None:
        return [False]
    if isinstance(out, torch.Tensor):
        return out.detach().reshape(-1).tolist()
    r = []
    for o in out:
        r += flat(o)
    return r


src = data(0, 5, 2, 8)
tgt = data(1, 4, 2, 8)
causal = nn.Transformer.generate_square_subsequent_mask(4)
emit("causal-mask", causal)

enc = det_init(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0))
out = enc(src)
emit("enc", out)
grads("enc", enc, out)
enc2 = det_init(nn.TransformerEncoderLayer(8, 4, dim_feedforward=12, dropout=0.0, activation="gelu", norm_first=True,
                                           layer_norm_eps=1e-3))
pad_mask = torch.tensor([[False, False, False, True, True], [False] * 5])
out2 = enc2(src, src_key_padding_mask=pad_mask, src_mask=nn.Transformer.generate_square_subsequent_mask(5))
emit("enc-prenorm", out2)
grads("enc-prenorm", enc2, out2)
emit("enc-batch-first", det_init(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True))(
    src.transpose(0, 1)))
emit("enc-unbatched", det_init(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0))(data(2, 5, 8)))
emit("enc-causal", det_init(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0))(
    src, src_mask=nn.Transformer.generate_square_subsequent_mask(5)))

dec = det_init(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0))
dout = dec(tgt, src, tgt_mask=causal, memory_key_padding_mask=pad_mask)
emit("dec", dout)
grads("dec", dec, dout)
dec2 = det_init(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=True, activation="gelu"))
dout2 = dec2(tgt, src, causal)
emit("dec-prenorm", dout2)
grads("dec-prenorm", dec2, dout2)

stack = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 3, norm=nn.LayerNorm(8))
det_init(stack)
sout = stack(src, src_key_padding_mask=pad_mask)
emit("encoder-stack", sout)
grads("encoder-stack", stack, sout)
dstack = det_init(nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 2))
emit("decoder-stack", dstack(tgt, src, tgt_mask=causal))

tf = det_init(nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16,
                             dropout=0.0))
tout = tf(src, tgt, tgt_mask=causal, src_key_padding_mask=pad_mask, memory_key_padding_mask=pad_mask)
emit("transformer", tout)
grads("transformer", tf, tout)
emit("transformer-bf", det_init(nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                               dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True))(
    src.transpose(0, 1), tgt.transpose(0, 1)))
print("names-transformer: " + " ".join(nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                                      dim_feedforward=16).state_dict().keys()))
print("names-decoder-layer: " + " ".join(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16).state_dict().keys()))

mha = det_init(nn.MultiheadAttention(8, 2, kdim=6, vdim=6))
a = mha(tgt, data(3, 5, 2, 6), data(4, 5, 2, 6), key_padding_mask=pad_mask, average_attn_weights=False)
emit("mha-kv", flat(a))
emit("mha-unbatched", flat(det_init(nn.MultiheadAttention(8, 2))(data(5, 4, 8), data(6, 3, 8), data(7, 3, 8))))
emit("mha-bool-mask", flat(det_init(nn.MultiheadAttention(8, 2))(tgt, tgt, tgt,
                                                                attn_mask=torch.ones(4, 4, dtype=torch.bool).triu(1))))
# kdim != vdim: separate q/k/v projection weights (use_separate_proj_weight), with every mask kind
mha2 = det_init(nn.MultiheadAttention(8, 2, kdim=6, vdim=5))
key2, val2 = data(8, 5, 2, 6), data(9, 5, 2, 5)
bool_mask = torch.tensor([[False, True, False, False, True]] * 4)
o2, w2 = mha2(tgt, key2, val2, key_padding_mask=pad_mask, attn_mask=bool_mask, need_weights=True)
emit("mha-kdim-vdim", flat((o2, w2)))
grads("mha-kdim-vdim", mha2, o2)
emit("mha-kdim-vdim-no-weights", flat(mha2(tgt, key2, val2, need_weights=False)))
emit("mha-kdim-vdim-float-mask", flat(mha2(tgt, key2, val2, attn_mask=data(10, 4, 5) * 0.5, key_padding_mask=pad_mask)))
emit("mha-kdim-vdim-3d-mask", flat(mha2(tgt, key2, val2, attn_mask=data(11, 4, 4, 5), average_attn_weights=False)))
emit("mha-kdim-vdim-unbatched", flat(mha2(data(12, 4, 8), data(13, 5, 6), data(14, 5, 5),
                                          key_padding_mask=torch.tensor([False, False, True, False, False]))))
mha3 = det_init(nn.MultiheadAttention(8, 4, kdim=3, vdim=7, bias=False, add_bias_kv=True, add_zero_attn=True,
                                      batch_first=True))
o3, w3 = mha3(tgt.transpose(0, 1), data(15, 2, 5, 3), data(16, 2, 5, 7), key_padding_mask=pad_mask)
emit("mha-kdim-vdim-bias-kv", flat((o3, w3)))
grads("mha-kdim-vdim-bias-kv", mha3, o3)
print("shapes-mha: " + " ".join(n + ":" + "x".join(map(str, t.shape)) for n, t in
                                nn.MultiheadAttention(8, 2, kdim=6, vdim=5).state_dict().items()))
print("names-mha: " + " ".join(nn.MultiheadAttention(8, 2, kdim=6, vdim=5, add_bias_kv=True).state_dict().keys()))

torch.manual_seed(3)
emit("seeded-enc", flat(list(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16).state_dict().values())))
emit("seeded-dec", flat(list(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16).state_dict().values())))
emit("seeded-transformer", flat(list(nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                                                    dim_feedforward=16).state_dict().values())))
emit("seeded-after", torch.rand(3))
