"""Strict loading (issue 29): files that two readers would read differently, or that blow up
memory, each generated here byte by byte. Every hostile file must give Purple a clear file-error
whose message holds the given word, in safe mode and with :safe #f; the well-formed controls must
still load; shared structure (a "billion laughs" pickle) must load quickly, shared, and small.

gen writes the files, a cases.purple list for strict.purple, and the lines Purple must print."""
import io
import os
import pickle
import struct
import sys
import zipfile
import numpy as np
import torch
import torch.nn as nn
from common import HostileFiles, emit

mode, d = sys.argv[1], sys.argv[2]
P = lambda f: os.path.join(d, f)
hostile = HostileFiles(d)
write, cases = hostile.write, hostile.cases   # cases: (file name, loader, a word the message must contain)


def torch_bytes(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def entries(archive):
    z = zipfile.ZipFile(io.BytesIO(archive))
    return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def rezip(items):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in items:
            z.writestr(name, data)
    return out.getvalue()


def pickle_zip(pkl, version=b"3\n"):
    """A torch.save archive whose data.pkl is PKL (raw pickle bytes)."""
    return rezip([("archive/data.pkl", pkl), ("archive/version", version)])


def rename(archive, old, new, local=True, central=True):
    """Renames an entry in place (same length) in the local header, the central directory or both."""
    assert len(old) == len(new)
    data = bytearray(archive)
    cd = data.rfind(b"PK\x05\x06")
    cd_start = struct.unpack_from("<I", data, cd + 16)[0]
    i = 0
    while True:
        i = data.find(old, i)
        if i < 0:
            break
        if (i < cd_start and local) or (i >= cd_start and central):
            data[i:i + len(old)] = new
        i += len(old)
    return bytes(data)


def local_header(archive, name):
    z = zipfile.ZipFile(io.BytesIO(archive))
    return z.getinfo(name).header_offset


if mode == "gen":
    good = torch_bytes({"w": torch.arange(3, dtype=torch.float32)})
    items = entries(good)
    top = items[0][0].split("/")[0]

    # ---- billion laughs: 10 nested lists, each holding 10 references to the one below ----
    magic = pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2) + pickle.dumps(1001, protocol=2) + pickle.dumps({}, protocol=2)
    keys = pickle.dumps([], protocol=2)
    # DUP only: MARK x10, a leaf, then per level 9 DUPs and LIST.
    dup = b"\x80\x02" + b"(" * 10 + b"K\x01" + (b"2" * 9 + b"l") * 10 + b"."
    # memo: BINPUT each level, BINGET it ten times.
    memo = b"\x80\x02K\x01q\x000"
    for k in range(10):
        memo += b"](" + (b"h" + bytes([k])) * 10 + b"eq" + bytes([k + 1]) + b"0"
    memo += b"h\x0a."
    # the memo version inside an allow-listed OrderedDict
    odict = memo[:-1] + b"q\x0b0ccollections\nOrderedDict\n)RX\x06\x00\x00\x00laughsh\x0bs."
    laughs = [("laughs-dup.pt", pickle_zip(dup)), ("laughs-memo.pt", magic + memo + keys), ("laughs-odict.pt", pickle_zip(odict))]
    for name, data in laughs:
        with open(P(name), "wb") as f:
            f.write(data)
        emit(name, 1, 1)
        emit(name + "-unsafe", 1, 1)
    emit("laughs-resaved", 1, 1, 1)   # torch-save of it: small, quick, shared again when loaded
    # A constructor called again and again on one shared 100,000-element list: each call copies it.
    copies = b"\x80\x02](K\x01" + b"2" * 99999 + b"eq\x000cbuiltins\nset\nq\x010" + b"h\x01h\x00\x85R0" * 20000 + b"N."
    write("copy-bomb.pt", pickle_zip(copies), word="memory bomb")

    # ---- zip archives that two parsers read differently ----
    write("two-folders.pt", rezip(items + [("other/data.pkl", pickle.dumps({"evil": 1}, protocol=2))]), word="two top-level folders")
    write("outside-folder.pt", rezip(items + [("data.pkl", pickle.dumps({"evil": 1}, protocol=2))]), word="outside")
    write("local-name.pt", rename(good, b"%s/data.pkl" % top.encode(), b"%s/data.pkx" % top.encode(), central=False), word="name")
    storage = "%s/data/0" % top
    data = bytearray(good)
    h = local_header(good, storage)
    struct.pack_into("<I", data, h + 22, struct.unpack_from("<I", data, h + 22)[0] + 1)   # uncompressed size
    write("local-size.pt", bytes(data), word="sizes")
    data = bytearray(good)
    struct.pack_into("<H", data, h + 8, 8)   # method: deflated, while the directory says stored
    write("local-method.pt", bytes(data), word="method")
    named = rezip(items + [("%s/xx/data" % top, b"x")])
    write("dotdot.pt", rename(named, b"%s/xx/data" % top.encode(), b"%s/../data" % top.encode()), word="..")
    named = rezip([("X" + n, b) for n, b in items])
    write("absolute.pt", rename(named, b"X" + top.encode() + b"/", b"/" + top.encode() + b"/"), word="absolute")
    named = rezip(items + [("%s/data/x" % top, b"x")])
    write("backslash.pt", rename(named, b"%s/data/x" % top.encode(), b"%s/data\\x" % top.encode()), word="backslash")
    # the version and byteorder records
    ver = lambda v: rezip([(n, v if n.endswith("/version") else b) for n, b in items])
    write("version-2e64.pt", ver(b"18446744073709551616\n"), word="version")
    write("version-minus1.pt", ver(b"-1\n"), word="version")
    write("no-version.pt", rezip([(n, b) for n, b in items if not n.endswith("/version")]), word="version")
    write("byteorder-big.pt", rezip([(n, b) for n, b in items if not n.endswith("/byteorder")] + [("%s/byteorder" % top, b"big")]), word="big")
    # a storage record longer than its tensor needs: 13 bytes for 3 floats
    write("storage-long.pt", rezip([(n, b + b"\x00" if n == storage else b) for n, b in items]), word="exactly")
    # TorchScript archives are refused by torch-load in both modes
    b = io.BytesIO()
    torch.jit.save(torch.jit.script(nn.Linear(3, 3)), b)
    write("torchscript.pt", b.getvalue(), word="load-torchscript")

    # ---- safetensors against the format's rules ----
    def st(header, payload):
        h = header.encode() if isinstance(header, str) else header
        return struct.pack("<Q", len(h)) + h + payload

    two = '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[%d,%d]}}'
    write("gap.safetensors", st(two % (48, 64), bytes(16) + pickle.dumps("hidden", protocol=2)[:32].ljust(32, b".") + bytes(16)),
          "load-safetensors", "gap")
    one = '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
    write("trailing.safetensors", st(one, bytes(16) + b"trailing"), "load-safetensors", "after the last tensor")
    write("duplicate.safetensors", st('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
                                      '"a":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}', bytes(32)), "load-safetensors", "twice")
    write("rank.safetensors", st('{"a":{"dtype":"F32","shape":[%s],"data_offsets":[0,4]}}' % ",".join(["1"] * 100000), bytes(4)),
          "load-safetensors", "dimensions")
    deep = '{"__metadata__":' + '{"a":' * 50000 + '"x"' + '}' * 50000 + ',' + one[1:]
    write("deep-metadata.safetensors", st(deep, bytes(16)), "load-safetensors", "nested")
    write("deep-metadata-2.safetensors", st(deep, bytes(16)), "safetensors-metadata", "nested")
    nonflat = '{"__metadata__":{"k":{"x":"y"}},' + one[1:]
    write("nonflat-metadata.safetensors", st(nonflat, bytes(16)), "load-safetensors", "strings to strings")
    write("nonflat-metadata-2.safetensors", st(nonflat, bytes(16)), "safetensors-metadata", "strings to strings")
    write("number-metadata.safetensors", st('{"__metadata__":{"k":1},' + one[1:], bytes(16)), "safetensors-metadata", "strings to strings")
    write("gap-2.safetensors", st(two % (48, 64), bytes(64)), "safetensors-metadata", "gap")

    # ---- .npy headers as NumPy reads them ----
    def npy(header, payload=bytes(12)):
        h = header.encode()
        h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + payload if len(h) < 65536 else \
            b"\x93NUMPY\x02\x00" + struct.pack("<I", len(h)) + h + payload

    write("long-header.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" + " " * 20000), "load-npy", "10000")
    write("extra-key.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'evil': 1, }"), "load-npy", "evil")
    write("missing-key.npy", npy("{'descr': '<f4', 'shape': (3,), }"), "load-npy", "fortran_order")
    write("fortran-yes.npy", npy("{'descr': '<f4', 'fortran_order': 'yes', 'shape': (3,), }"), "load-npy", "boolean")
    write("shape-int.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': 3, }"), "load-npy", "tuple")

    # ---- bool data: a byte other than 0 or 1 is undefined behaviour in LibTorch (fuzz-npy) ----
    write("bool-byte.npy", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", b"\x01\x20"), "load-npy", "bool")
    write("bool-byte.safetensors", st('{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x00\x02"),
          "load-safetensors", "bool")
    # an empty array whose other dimensions multiply past int64 (LibTorch's strides overflow)
    write("stride-overflow.npy", npy("{'descr': '<u2', 'fortran_order': True, 'shape': (0, 888888888888, 8888888888), }", b""),
          "load-npy", "too big")
    write("stride-overflow.safetensors", st('{"a":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}}', b""),
          "load-safetensors", "too big")
    bitems = entries(torch_bytes({"b": torch.tensor([True, False])}))
    write("bool-byte.pt", rezip([(n, b"\x01\x02" if n.endswith("/data/0") else b) for n, b in bitems]), word="bool")
    # the legacy (pre-zip) format: its storages are filled after the pickle made the tensors
    legacy = io.BytesIO()
    torch.save({"b": torch.tensor([True, False])}, legacy, _use_new_zipfile_serialization=False)
    legacy = bytearray(legacy.getvalue())
    legacy[legacy.rfind(b"\x01\x00") + 1] = 2
    write("bool-byte-legacy.pt", bytes(legacy), word="bool")

    # ---- pickle strictness ----
    write("appends-set.pt", pickle_zip(b"\x80\x02\x8f(K\x01K\x02e."), word="set")
    write("surrogate.pt", pickle_zip(b"\x80\x02X\x03\x00\x00\x00\xed\xa0\x80."), word="surrogate")
    write("bad-utf8.pt", pickle_zip(b"\x80\x02X\x02\x00\x00\x00a\xff."), word="UTF-8")
    write("surrogate-p0.pt", pickle_zip(b"V\\ud800\n."), word="surrogate")
    write("frame-lies.pt", pickle_zip(b"\x80\x04\x95" + struct.pack("<Q", 3) + b"X\x05\x00\x00\x00hello."), word="frame")
    write("frame-past-end.pt", pickle_zip(b"\x80\x04\x95" + struct.pack("<Q", 1000) + b"K\x01."), word="frame")
    write("frame-early.pt", pickle_zip(b"\x80\x04\x95" + struct.pack("<Q", 12) + b"K\x01\x95" + struct.pack("<Q", 1) + b".."),
          word="new frame")

    # ---- controls: well-formed files that must still load ----
    for proto in (2, 4, 5):
        obj = {"s": "h\u00e9llo \U0001f600", "set": {7}, "l": [1, 2], "t": torch.tensor([1.5, 2.5])}
        with open(P("ctl-p%d.pt" % proto), "wb") as f:
            torch.save(obj, f, pickle_protocol=proto)
        emit("ctl-p%d" % proto, 7, 1, 2, obj["t"])
    with open(P("ctl-p0.pt"), "wb") as f:
        f.write(pickle_zip(pickle.dumps({"s": "h\u00e9llo \U0001f600", "l": [1, 2]}, protocol=0)))
    emit("ctl-p0", 1, 2)
    np.save(P("ctl.npy"), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(P("ctl-fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)))
    np.save(P("ctl-scalar.npy"), np.float32(4.5))
    emit("ctl.npy", 0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
    emit("ctl-fortran.npy", 0.0, 1.0, 2.0, 3.0, 4.0, 5.0)
    emit("ctl-scalar.npy", 4.5)

    with open(P("cases.purple"), "w") as f:
        f.write("(define cases '(\n")
        for name, loader, word in cases:
            f.write('  ("%s" "%s" "%s")\n' % (name, loader, word.replace("\\", "\\\\")))
        f.write("))\n")
    for name, loader, word in cases:
        emit(name, "file-error", 1)
        if loader == "torch-load":
            emit(name + "-unsafe", "file-error", 1)
else:
    # torch-save kept the sharing: Python's torch.load gives one list object per level
    x = torch.load(P("laughs-resaved.pt"))
    depth = 0
    while isinstance(x, list):
        if len(x) != 10 or any(e is not x[0] for e in x):
            sys.exit("laughs-resaved.pt: level %d is not ten references to one list" % depth)
        x, depth = x[0], depth + 1
    if depth != 10 or x != 1:
        sys.exit("laughs-resaved.pt: %d levels, leaf %r" % (depth, x))
