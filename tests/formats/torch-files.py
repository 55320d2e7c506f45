"""torch.save files from Python loaded in Purple, and Purple's files loaded in Python."""
import os
import sys
import torch
import torch.nn as nn
from common import emit, emit_tensor, det_init, data

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)


def mlp():
    return det_init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))


def cnn():
    m = det_init(nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)))
    m.train()
    with torch.no_grad():
        m(data(3, 5, 1, 8, 8))   # running statistics that are not the defaults
    return m.eval()


def everything():
    base = torch.arange(24, dtype=torch.float32) * 0.5 - 3
    v = base[2:14].view(3, 4)
    return {
        "f32": torch.tensor([1.5, -2.25, 1e-30, float("inf")]),
        "f64": torch.tensor([[1 / 3, -2e300], [5e-324, float("-inf")]], dtype=torch.float64),
        "f16": torch.tensor([0.1, 65504, -6e-8], dtype=torch.float16),
        "bf16": torch.tensor([0.1, 3e38, -1], dtype=torch.bfloat16),
        "i8": torch.tensor([-128, 127, 0], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 7], dtype=torch.uint8),
        "i16": torch.tensor([-32768, 32767], dtype=torch.int16),
        "i32": torch.tensor([-2 ** 31, 2 ** 31 - 1], dtype=torch.int32),
        "i64": torch.tensor([-2 ** 62, 2 ** 62 + 1], dtype=torch.int64),
        "bool": torch.tensor([True, False, True]),
        "c64": torch.tensor([1 + 2j, -0.5j], dtype=torch.complex64),
        "c128": torch.tensor([3 - 4j], dtype=torch.complex128),
        "scalar": torch.tensor(7.25),
        "empty": torch.zeros(0, 3),
        "base": base,
        "view": v,
        "transposed": v.t(),
        "strided": base[1::5],
        "param": nn.Parameter(torch.tensor([1.0, 2.0])),
    }


if mode == "gen":
    torch.save(mlp().state_dict(), P("mlp.pt"))
    torch.save(cnn().state_dict(), P("cnn.pt"))
    torch.save(det_init(nn.Linear(3, 2, bias=False)).state_dict(), P("linear-nobias.pt"))
    torch.save(mlp().state_dict(), P("mlp-legacy.pt"), _use_new_zipfile_serialization=False)
    torch.save(everything(), P("everything.pt"))
    torch.save(everything(), P("everything-legacy.pt"), _use_new_zipfile_serialization=False)
    torch.save({"epoch": 7, "big": 2 ** 100, "neg": -(2 ** 70), "none": None, "tuple": (1, 2.5, "x"), "nested": [[1, [2, []]], {}],
                "size": torch.Size([2, 3]), "device": torch.device("cpu"), "dtype": torch.float16, "bytes": b"\x00\xff",
                3: "int key", "one": [5]}, P("misc.pt"), pickle_protocol=4)
    x = data(1, 5, 4)
    emit("mlp", mlp()(x))
    emit("cnn", cnn()(data(2, 2, 1, 8, 8)))
    emit("nobias", det_init(nn.Linear(3, 2, bias=False))(data(0, 2, 3)))
    emit("legacy", mlp()(x))
    for suffix in ["", "-legacy"]:
        e = everything()
        for k, t in e.items():
            emit_tensor(k + suffix, t)
        emit("shared" + suffix, 1)
        emit("param-grad" + suffix, 1)
    emit("misc", 7, 2 ** 100, -(2 ** 70), 1, 1, 2.5, "x", 2, 3, "cpu", "float16", 0, 255, "int", "key", 5)
else:
    # Python loads what Purple wrote, strictly, and computes bit for bit the same.
    m = mlp()
    m.load_state_dict(torch.load(P("purple-mlp.pt")), strict=True)
    assert torch.equal(m(data(1, 5, 4)), torch.load(P("purple-mlp-out.pt"))["out"]), "mlp outputs differ"
    c = cnn()
    sd = torch.load(P("purple-cnn.pt"))
    assert type(sd).__name__ == "OrderedDict"
    c.load_state_dict(sd, strict=True)
    assert torch.equal(c(data(2, 2, 1, 8, 8)), cnn()(data(2, 2, 1, 8, 8)))
    lin = nn.Linear(3, 2, bias=False)
    lin.load_state_dict(torch.load(P("purple-nobias.pt")), strict=True)
    assert torch.equal(lin.weight, det_init(nn.Linear(3, 2, bias=False)).weight)
    back = torch.load(P("purple-everything.pt"))
    for k, t in everything().items():
        b = back[k]
        assert b.dtype == t.dtype and b.shape == t.shape and b.stride() == t.stride() and b.storage_offset() == t.storage_offset(), k
        assert torch.equal(b, t) or (t.is_floating_point() and torch.equal(b.isnan(), t.isnan())), k
    assert back["view"].storage().data_ptr() == back["base"].storage().data_ptr(), "storage sharing lost"
    back["base"][2] = 100
    assert back["view"][0, 0] == 100 and back["transposed"][0, 0] == 100
    misc = torch.load(P("purple-misc.pt"))
    assert misc["epoch"] == 7 and misc["big"] == 2 ** 100 and misc["neg"] == -(2 ** 70) and misc["none"] is None, misc
    assert misc["tuple"] == (1, 2.5, "x") and misc["nested"] == [[1, [2, []]], {}] and misc["bytes"] == b"\x00\xff", misc
    assert misc[3] == "int key" and misc["one"] == [5], misc
    print("python loaded Purple's files: ok")
