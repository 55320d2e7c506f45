"""NumPy's .npy/.npz (written and read by numpy itself) and safetensors (written and read here from
the format's specification, since the safetensors package is not in Debian) in both directions."""
import json
import os
import struct
import sys
import zipfile
import numpy as np
import torch
from common import emit, emit_tensor

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)

ARRAYS = {
    "f32": np.array([[1.5, -2.25, 3e-30], [np.inf, -0.0, 7]], dtype=np.float32),
    "f64": np.array([1 / 3, -2e300, 5e-324]),
    "f16": np.array([0.1, 65504], dtype=np.float16),
    "i8": np.array([-128, 127], dtype=np.int8), "u8": np.array([0, 255], dtype=np.uint8),
    "i16": np.array([-32768], dtype=np.int16), "i32": np.array([2 ** 31 - 1], dtype=np.int32),
    "i64": np.array([[-2 ** 62], [5]], dtype=np.int64), "bool": np.array([True, False]),
    "c64": np.array([1 + 2j], dtype=np.complex64), "c128": np.array([3 - 4j]),
    "scalar": np.array(2.5), "empty": np.zeros((0, 3), dtype=np.float32),
}
SPECIAL = {"fortran": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
           "bigendian": np.arange(4, dtype=">i4")}

# Unsigned kinds LibTorch lacks: read widened, exactly (uint16 to int32, uint32 and uint64 to int64).
WIDE = {"u16": (np.array([0, 65535, 7], dtype=np.uint16), np.int32), "u32": (np.array([[4294967295, 1]], dtype=np.uint32), np.int64),
        "u64": (np.array([2 ** 63 - 1, 0], dtype=">u8"), np.int64)}

ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64,
             "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool, "C64": torch.complex64}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


def st_save(tensors, path, metadata=None):
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st_load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    assert (8 + n) % 8 == 0, "header not padded to 8 bytes"
    data, out, end = raw[8 + n:], {}, 0
    for name, info in sorted(((k, v) for k, v in header.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = info["data_offsets"]
        assert a == end, "tensors are not packed one after another"
        end = b
        dt = ST_DTYPES[info["dtype"]]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.uint8).view(dt).reshape(info["shape"]) if b > a else torch.zeros(info["shape"], dtype=dt)
    assert end == len(data), "bytes after the last tensor"
    return out, header.get("__metadata__")


def st_tensors():
    return {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7, "b": torch.tensor([1e-3, -2.0], dtype=torch.float64),
            "h": torch.tensor([0.5, 65504], dtype=torch.float16), "bf": torch.tensor([0.1, -3e38], dtype=torch.bfloat16),
            "i": torch.tensor([[-2 ** 62]], dtype=torch.int64), "i32": torch.tensor([7], dtype=torch.int32),
            "i16": torch.tensor([-5], dtype=torch.int16), "i8": torch.tensor([-7], dtype=torch.int8),
            "u": torch.tensor([200], dtype=torch.uint8), "m": torch.tensor([True, False]),
            "c": torch.tensor([1 - 1j], dtype=torch.complex64), "z": torch.zeros(0, 2)}


def from_numpy(a):
    """As Purple loads an array: C order, native byte order, 0-d stays 0-d (np.ascontiguousarray
    would make it 1-d), and an empty array gets contiguous strides (NumPy gives it zeros)."""
    t = torch.from_numpy(np.require(a.astype(a.dtype.newbyteorder("=")), requirements="C"))
    return t if t.numel() else torch.empty(t.shape, dtype=t.dtype)


if mode == "gen":
    for k, a in {**ARRAYS, **SPECIAL}.items():
        np.save(P(k + ".npy"), a)
    for k, (a, _) in WIDE.items():
        np.save(P(k + ".npy"), a)
    np.random.seed(0)   # what training scripts keep in checkpoints: NumPy's RNG state and scalars
    torch.save({"np_rng": np.random.get_state(), "loss": np.float64(0.25), "count": np.int64(3), "flag": np.bool_(True)},
               P("numpy-objects.pt"))
    np.savez(P("arrays.npz"), **ARRAYS)
    np.savez_compressed(P("compressed.npz"), **ARRAYS)
    st_save(st_tensors(), P("model.safetensors"), {"format": "pt", "note": "from python"})
    for k, a in {**ARRAYS, **SPECIAL}.items():
        emit_tensor("npy-" + k, from_numpy(a))
    for k, (a, wide) in WIDE.items():
        emit_tensor("npy-" + k, from_numpy(a.astype(wide)))
    rng = np.random.get_state()
    emit("np-rng", rng[0], rng[2], rng[3], rng[4])
    emit_tensor("np-rng-key", from_numpy(rng[1].astype(np.int64)))
    emit("np-scalars", 0.25, 3, True)
    for k, a in ARRAYS.items():
        emit_tensor("npz-" + k, from_numpy(a))
        emit_tensor("npzc-" + k, from_numpy(a))
    for k, t in st_tensors().items():
        emit_tensor("st-" + k, t)
    emit("st-metadata", "pt", "from", "python")
else:
    for k, a in ARRAYS.items():
        b = np.load(P("purple-" + k + ".npy"))
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(b, a, equal_nan=False) or np.array_equal(np.isnan(a), np.isnan(b)), k
    for f, method in [("purple.npz", zipfile.ZIP_STORED), ("purple-compressed.npz", zipfile.ZIP_DEFLATED)]:
        assert all(i.compress_type == method for i in zipfile.ZipFile(P(f)).infolist()), f
        z = np.load(P(f))
        assert sorted(z.files) == sorted(ARRAYS), z.files
        for k, a in ARRAYS.items():
            assert z[k].dtype == a.dtype and np.array_equal(z[k], a), (f, k)
    back, meta = st_load(P("purple.safetensors"))
    assert meta == {"format": "pt", "source": "purple"}, meta
    for k, t in st_tensors().items():
        assert back[k].dtype == t.dtype and torch.equal(back[k], t), k
    print("numpy and safetensors: ok")
