# Padded and packed sequences with the recurrent layers (see nn-sequences.purple), from python3-torch.
import math
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence, pack_padded_sequence, pad_packed_sequence, pack_sequence
from torch.nn.utils.rnn import unpack_sequence, unpad_sequence, PackedSequence
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


def flat(out):
    if isinstance(out, PackedSequence):
        return flat([out.data, out.batch_sizes])
    if isinstance(out, torch.Tensor):
        return out.detach().reshape(-1).tolist()
    r = []
    for o in out:
        r += flat(o)
    return r


seqs = [data(0, 3, 4), data(1, 5, 4), data(2, 2, 4)]
emit("pad", pad_sequence(seqs))
emit("pad-bf", pad_sequence(seqs, batch_first=True, padding_value=-1.0))
left = pad_sequence([s.flip(0) for s in seqs], batch_first=True).flip(1)
emit("pad-left", left)
padded = pad_sequence(seqs)
packed = pack_padded_sequence(padded, [3, 5, 2], enforce_sorted=False)
emit("packed", flat(packed))
emit("packed-sorted-indices", packed.sorted_indices)
emit("packed-unsorted-indices", packed.unsorted_indices)
emit("unpacked", flat(pad_packed_sequence(packed)))
emit("unpacked-total", flat(pad_packed_sequence(packed, batch_first=True, total_length=7, padding_value=9.0)))
emit("pack-sequence", flat(pack_sequence([data(1, 5, 4), data(0, 3, 4), data(2, 2, 4)])))
emit("unpack-sequence", flat(unpack_sequence(packed)))
# (python3-torch 1.13's unpad_sequence transposes its argument in place: give it a copy)
emit("unpad-sequence", flat(unpad_sequence(padded.clone(), torch.tensor([3, 5, 2]))))


def run_packed(label, m, state):
    x = padded.detach().requires_grad_(True)
    p = pack_padded_sequence(x, torch.tensor([3, 5, 2]), enforce_sorted=False)
    out_p, st = m(p, state) if state is not None else m(p)
    out, lengths = pad_packed_sequence(out_p)
    emit(label, out)
    emit(label + "-lengths", lengths)
    emit(label + "-state", flat(st))
    (out * weights_like(out)).sum().backward()
    for n, q in sorted(m.named_parameters()):
        emit(label + "-grad-" + n, q.grad)
    emit(label + "-xgrad", x.grad)


run_packed("lstm", det_init(nn.LSTM(4, 3, num_layers=2)), None)
run_packed("lstm-bi", det_init(nn.LSTM(4, 3, bidirectional=True)), None)
run_packed("gru", det_init(nn.GRU(4, 3)), data(5, 1, 3, 3))
run_packed("rnn", det_init(nn.RNN(4, 2, nonlinearity="relu")), None)
run_packed("lstm-proj", det_init(nn.LSTM(4, 3, proj_size=2)), None)

bf = det_init(nn.GRU(4, 3, batch_first=True))
pbf = pack_padded_sequence(pad_sequence(seqs, batch_first=True), torch.tensor([3, 5, 2]), batch_first=True,
                           enforce_sorted=False)
obf, hbf = bf(pbf)
emit("gru-bf", flat(pad_packed_sequence(obf, batch_first=True)))
emit("gru-bf-h", hbf)

with torch.no_grad():
    emit("lstm-unbatched", flat(det_init(nn.LSTM(4, 3))(data(0, 3, 4))))
    emit("gru-unbatched-h0", flat(det_init(nn.GRU(4, 3, num_layers=2))(data(0, 3, 4), data(1, 2, 3))))
