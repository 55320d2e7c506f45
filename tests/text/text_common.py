"""Shared by the (purple text) tests: a temporary folder, running Purple, comparing arrays, and a
safetensors writer (Debian 12 has no python3-safetensors; the format is a JSON header and bytes).
Each test is a Python script that makes model or tokenizer folders with python3-torch and
python3-sentencepiece, computes the reference, and runs a Purple script beside it
(tests/text/*.purple) on the same files."""
import atexit
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what)
    return ok


def temp_dir():
    d = tempfile.mkdtemp(prefix="purple-text-", dir=os.environ.get("TMPDIR"))
    atexit.register(shutil.rmtree, d, True)
    return d


def run_purple(purple, script, *args, timeout=1200, env=None):
    p = subprocess.run([purple, os.path.join(HERE, script)] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout,
                       env=env)
    if p.returncode != 0:
        print(p.stdout[-4000:])
        print(p.stderr[-4000:])
        raise SystemExit("purple %s exited with %d" % (script, p.returncode))
    return p.stdout


def close(name, got, want, atol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return check(False, "%s: shape %s, reference %s" % (name, got.shape, want.shape))
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    print("%-48s max |purple - reference| = %.3g" % (name, diff))
    return check(diff <= atol, "%s: max difference %g > %g" % (name, diff, atol))


def finish():
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("all checks passed")


_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}


def save_safetensors(tensors, path):
    """TENSORS (name -> tensor) to PATH in the safetensors layout, in the order given."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = (t.view(torch.int16) if t.dtype in (torch.float16, torch.bfloat16) else t).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    kinds = {"F32": (np.float32, None), "F16": (np.int16, torch.float16), "BF16": (np.int16, torch.bfloat16),
             "I64": (np.int64, None)}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        np_type, view = kinds[h["dtype"]]
        t = torch.from_numpy(np.frombuffer(data[a:b], dtype=np_type).copy()).reshape(h["shape"])
        out[name] = t.view(view) if view is not None else t
    return out


def save_folder(path, config, tensors, shards=1, torch_save=False):
    """A Hugging Face model folder: config.json and model.safetensors, or SHARDS shard files with
    model.safetensors.index.json; with TORCH_SAVE, torch.save's pytorch_model.bin (and its index)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write = (lambda t, p: torch.save(t, p)) if torch_save else save_safetensors
    stem, ext = ("pytorch_model", ".bin") if torch_save else ("model", ".safetensors")
    if shards == 1:
        write(tensors, os.path.join(path, stem + ext))
        return
    names = list(tensors)
    weight_map = {}
    for k in range(shards):
        part = names[k::shards]
        file = "%s-%05d-of-%05d%s" % (stem, k + 1, shards, ext)
        write({n: tensors[n] for n in part}, os.path.join(path, file))
        weight_map.update({n: file for n in part})
    with open(os.path.join(path, stem + ext + ".index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
