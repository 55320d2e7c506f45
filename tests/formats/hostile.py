"""Hostile files: truncated, corrupted, zip bombs, pickle injection, malformed headers. Each must
give Purple a clear file-error, never a crash, a hang or a run of foreign code."""
import io
import os
import pickle
import struct
import sys
import zipfile
import zlib
import torch
import torch.nn as nn
from common import HostileFiles, emit

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)
hostile = HostileFiles(d)
write, cases = hostile.write, hostile.cases   # cases: (file name, loader, a word the message must contain)


class Evil:
    def __reduce__(self):
        return (os.system, ("touch " + P("PWNED"),))


if mode == "gen":
    buf = io.BytesIO()
    torch.save(nn.Linear(64, 64).state_dict(), buf)
    good = buf.getvalue()
    for frac in [0.0001, 0.3, 0.6, 0.999]:
        write("truncated-%g.pt" % frac, good[:int(len(good) * frac)], word="truncated")
    z = zipfile.ZipFile(io.BytesIO(good))
    pkl = z.getinfo([n for n in z.namelist() if n.endswith("data.pkl")][0])
    bad = bytearray(good)
    bad[pkl.header_offset + 100] ^= 0xFF   # inside the pickle: its CRC no longer matches
    write("corrupt-pickle.pt", bytes(bad), word="CRC")
    bad = bytearray(good)
    bad[-200] ^= 0x55                      # inside the central directory or the last record
    write("corrupt-tail.pt", bytes(bad), word="corrupt")
    bad = bytearray(good)
    bad[len(good) // 2] ^= 0x01            # inside a tensor's bytes
    write("corrupt-storage.pt", bytes(bad), word="CRC")
    # zip bomb: 200 MB of zeros deflated into ~200 KB
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zz:
        zz.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
        zz.writestr("archive/data/0", bytes(200 * 1024 * 1024))
    write("zip-bomb.pt", out.getvalue(), word="zip bomb")
    # overlapping entries: the central directory lists the same bytes twice
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zz:
        zz.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2))
        zz.writestr("archive/data/0", bytes(1000))
    data = bytearray(out.getvalue())
    cd = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, cd + 42, 0)
    write("zip-overlap.pt", bytes(data), word="overlap")
    # a hidden entry: a local file entry the central directory does not list, here a second
    # archive/data.pkl before the real one, which a reader walking the local headers takes
    name = [n for n in z.namelist() if n.endswith("data.pkl")][0].encode()
    hidden = pickle.dumps({"weight": 666}, protocol=2)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, zlib.crc32(hidden), len(hidden), len(hidden),
                        len(name), 0) + name + hidden
    data = bytearray(local + good)
    shift = len(local)
    eocd = data.rfind(b"PK\x05\x06")
    count, cd_size, cd_offset = struct.unpack_from("<HII", data, eocd + 10)
    struct.pack_into("<I", data, eocd + 16, cd_offset + shift)
    if eocd >= 20 and data[eocd - 20:eocd - 16] == b"PK\x06\x07":   # zip64: its record and locator point too
        locator = eocd - 20
        record = struct.unpack_from("<Q", data, locator + 8)[0] + shift
        struct.pack_into("<Q", data, locator + 8, record)
        struct.pack_into("<Q", data, record + 48, struct.unpack_from("<Q", data, record + 48)[0] + shift)
    p = cd_offset + shift
    while data[p:p + 4] == b"PK\x01\x02":
        n, e, c = struct.unpack_from("<HHH", data, p + 28)
        struct.pack_into("<I", data, p + 42, struct.unpack_from("<I", data, p + 42)[0] + shift)
        p += 46 + n + e + c
    check = zipfile.ZipFile(io.BytesIO(bytes(data)))
    assert check.namelist() == z.namelist() and check.testzip() is None   # the directory alone reads fine
    write("hidden-entry.pt", bytes(data), word="not in the central directory")
    write("hidden-entry-unsafe.pt", bytes(data), loader="torch-load-unsafe", word="not in the central directory")
    # pickle injection: os.system
    buf = io.BytesIO()
    torch.save({"x": Evil()}, buf)
    write("os-system.pt", buf.getvalue(), word="system")
    write("os-system-unsafe.pt", buf.getvalue(), loader="torch-load-unsafe", word="-")
    write("os-system-legacy.pt", b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19." + pickle.dumps(Evil(), protocol=2), word="system")
    # pickles that abuse the machine
    magic = pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2) + pickle.dumps(1001, protocol=2) + pickle.dumps({}, protocol=2)
    write("bad-opcode.pt", magic + b"\x80\x02\xff.", word="opcode")
    write("stack-underflow.pt", magic + b"\x80\x02a.", word="empty stack")
    write("memo-miss.pt", magic + b"\x80\x02h\x07.", word="memo")
    write("no-stop.pt", magic + b"\x80\x02K\x01", word="truncated")
    write("deep-nesting.pt", magic + b"\x80\x02" + b"]" * 200000 + b"a" * 199999 + b"." + pickle.dumps([], protocol=2), word="nested")
    write("huge-string.pt", magic + b"\x80\x02X\xff\xff\xff\x7f" + b"x" * 10, word="truncated")
    write("empty.pt", b"", word="empty")
    write("random.pt", bytes(range(256)) * 4, word="not a torch.save file")
    # safetensors
    header = b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
    write("huge-header.safetensors", struct.pack("<Q", 2 ** 62) + header, "load-safetensors", "header")
    write("truncated.safetensors", struct.pack("<Q", len(header)) + header + bytes(8), "load-safetensors", "outside")
    write("bad-json.safetensors", struct.pack("<Q", 10) + b"{not json}", "load-safetensors", "corrupt")
    h2 = b'{"w":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,16]}}'
    write("bad-shape.safetensors", struct.pack("<Q", len(h2)) + h2 + bytes(16), "load-safetensors", "bytes for")
    h3 = b'{"w":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}'
    write("bad-dtype.safetensors", struct.pack("<Q", len(h3)) + h3 + bytes(4), "load-safetensors", "F99")
    # numpy
    import numpy as np
    b = io.BytesIO()
    np.save(b, np.arange(100, dtype=np.float32))
    write("truncated.npy", b.getvalue()[:-10], "load-npy", "truncated")
    write("header.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'", "load-npy", "truncated")
    # torchscript
    b = io.BytesIO()
    torch.jit.save(torch.jit.script(nn.Linear(3, 3)), b)
    write("truncated-script.pt", b.getvalue()[:len(b.getvalue()) // 2], "load-torchscript", "zip")
    write("not-script.pt", good, "load-torchscript", "not a torch.jit.save file")
    for name, loader, word in cases:
        emit(name, "file-error", 1)
    emit("pwned", 0)
else:
    pass
