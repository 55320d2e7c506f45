#!/usr/bin/env python3
"""Purple's TensorBoard event files read back with Python's protobuf, from TensorBoard's own
published .proto definitions (tests/tensorboard/proto, copied from tensorflow/tensorboard): every
record's framing and masked CRC-32C (computed here, independently), the file version event, and
the steps, tags and values of scalars, add-scalars runs, histograms (against numpy), images
(decoded and compared pixel by pixel), text, and fit's :tensorboard log.

usage: check_events.py PURPLE [PROTOC]"""
import glob
import io
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
purple = os.path.abspath(sys.argv[1])
protoc = sys.argv[2] if len(sys.argv) > 2 else "protoc"
tmp = tempfile.mkdtemp(prefix="purple-tb-")
gen = os.path.join(tmp, "pb")
os.makedirs(gen)
protos = sorted(glob.glob(os.path.join(here, "proto", "tensorboard", "compat", "proto", "*.proto")))
subprocess.run([protoc, f"--proto_path={os.path.join(here, 'proto')}", f"--python_out={gen}"] + protos, check=True)
sys.path.insert(0, gen)
from tensorboard.compat.proto import event_pb2  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402


# CRC-32C (Castagnoli), bit by bit: independent of Purple's table-driven C++.
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_events(path):
    events, bad = [], []
    with open(path, "rb") as f:
        blob = f.read()
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            bad.append(f"{path}: truncated header at {pos}")
            break
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if length_crc != masked(header):
            bad.append(f"{path}: length CRC at {pos}")
        data = blob[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[pos + 12 + length:pos + 16 + length])
        if data_crc != masked(data):
            bad.append(f"{path}: data CRC at {pos}")
        e = event_pb2.Event()
        e.ParseFromString(data)
        events.append(e)
        pos += 16 + length
    return events, bad


script = os.path.join(tmp, "log.purple")
with open(script, "w") as f:
    f.write(r'''
(define w (summary-writer "logs/run1"))
(do ((i 0 (+ i 1))) ((= i 10))
  (add-scalar w "loss/train" (/ 1.0 (+ i 1)) i))
(add-scalar w "accuracy" (tensor-full (quote ()) 0.75) 3 1700000000.5)
(add-scalars w "lr" '((adam . 0.001) (sgd . 0.1)) 5)
(define values (tensor-reshape (tensor-arange 1000 :dtype 'float64) 10 100))
(add-histogram w "weights" (tensor-sin values) 7 :bins 20)
(add-histogram w "constant" (tensor-ones 5) 8)
(define img (tensor-reshape (tensor-div (tensor-arange 48 :dtype 'float32) 47.) 3 4 4))
(add-image w "picture" img 2)
(add-image w "grey-hwc" (tensor-reshape (tensor-arange 6 :dtype 'uint8) 2 3 1) 2 :dataformats "HWC")
(add-images w "batch" (tensor-rand 5 1 8 8) 4 :columns 4)
(add-text w "notes" "**hello** from Purple" 9)
(summary-writer-close w)
(display (summary-writer-file w))
(guard (e (#t (newline) (display (error-object-message e))))
  (add-scalar w "late" 1 1))

;; fit logs to TensorBoard
(manual-seed 0)
(define xs (tensor-randn 64 4))
(define ys (tensor-randint 0 3 (list 64)))
(define loader (data-loader (tensor-dataset xs ys) :batch-size 16))
(define model (sequential (linear 4 8) (relu) (linear 8 3)))
(fit model (sgd (parameters model) :lr 0.1) cross-entropy loader :validation loader :epochs 3
     :tensorboard "logs/fit" :verbose #f)
''')
run = subprocess.run([purple, script], cwd=tmp, capture_output=True, text=True)
check("the logging script runs", run.returncode == 0, run.stderr)
out_lines = run.stdout.splitlines()
check("writing to a closed writer is an error", len(out_lines) > 1 and "closed" in out_lines[-1], run.stdout)

files = sorted(glob.glob(os.path.join(tmp, "logs", "run1", "events.out.tfevents.*")))
check("one event file, named as PyTorch names them", len(files) == 1 and out_lines
      and os.path.realpath(os.path.join(tmp, out_lines[0])) == os.path.realpath(files[0])
      and os.path.basename(files[0]).split(".")[3].isdigit(), str(files))
events, bad = read_events(files[0]) if files else ([], ["no file"])
check("every record's length and data CRC", not bad, "; ".join(bad[:5]))
check("the first event is the file version", events and events[0].file_version == "brain.Event:2", str(events[:1]))
by_tag = {}
for e in events[1:]:
    for v in e.summary.value:
        by_tag.setdefault(v.tag, []).append((e.step, e.wall_time, v))
scal = by_tag.get("loss/train", [])
check("scalars: ten steps with their values", [s for s, _, _ in scal] == list(range(10))
      and all(abs(v.simple_value - np.float32(1.0 / (s + 1))) < 1e-7 for s, _, v in scal), str(scal[:3]))
check("scalars: wall times are recent", all(t > 1.6e9 for _, t, _ in scal), str(scal[:1]))
acc = by_tag.get("accuracy", [])
check("scalar from a tensor, with a given wall time", len(acc) == 1 and acc[0][0] == 3 and abs(acc[0][2].simple_value - 0.75) < 1e-7
      and acc[0][1] == 1700000000.5, str(acc))

hist = by_tag.get("weights", [])
if hist:
    h = hist[0][2].histo
    ref = np.sin(np.arange(1000, dtype=np.float64))
    counts, edges = np.histogram(ref, bins=20)
    check("histogram: step, min, max, num, sum, sum of squares", hist[0][0] == 7 and np.isclose(h.min, ref.min(), rtol=1e-12)
          and np.isclose(h.max, ref.max(), rtol=1e-12) and h.num == 1000 and abs(h.sum - ref.sum()) < 1e-9 and abs(h.sum_squares - ref.dot(ref)) < 1e-6, str(h)[:300])
    check("histogram: buckets as numpy counts them (with the empty left bucket)",
          list(h.bucket) == [0.0] + counts.astype(float).tolist() and
          np.allclose(list(h.bucket_limit), edges.tolist()), f"{list(h.bucket)[:5]} vs {counts[:5]}")
else:
    check("histogram present", False, str(by_tag.keys()))
const = by_tag.get("constant", [])
check("histogram of equal values", const and const[0][2].histo.num == 5 and sum(const[0][2].histo.bucket) == 5
      and const[0][2].histo.min == 1.0, str(const))

try:
    from PIL import Image
except ImportError:
    Image = None
pic = by_tag.get("picture", [])
if pic and Image:
    im = pic[0][2].image
    decoded = np.array(Image.open(io.BytesIO(im.encoded_image_string)))
    expected = np.round(np.arange(48, dtype=np.float32).reshape(3, 4, 4) / np.float32(47) * 255).astype(np.uint8).transpose(1, 2, 0)
    check("image: size, colour space and every pixel", im.height == 4 and im.width == 4 and im.colorspace == 3
          and decoded.shape == (4, 4, 3) and (decoded == expected).all(), f"{im.height}x{im.width}x{im.colorspace} {decoded}")
else:
    check("image present (and PIL to decode it)", False, str(by_tag.keys()))
grey = by_tag.get("grey-hwc", [])
if grey and Image:
    im = grey[0][2].image
    decoded = np.array(Image.open(io.BytesIO(im.encoded_image_string)))
    check("image: uint8 HWC taken as is", im.colorspace == 1 and decoded.tolist() == [[0, 1, 2], [3, 4, 5]], str(decoded))
batch = by_tag.get("batch", [])
check("images: one grid picture of the batch", batch and batch[0][0] == 4 and batch[0][2].image.width == 2 + 4 * 10
      and batch[0][2].image.height == 2 + 2 * 10, str(batch[0][2].image.width if batch else None))
text = by_tag.get("notes/text_summary", [])
check("text: a string tensor for the text plugin", text and text[0][0] == 9
      and text[0][2].metadata.plugin_data.plugin_name == "text"
      and list(text[0][2].tensor.string_val) == [b"**hello** from Purple"], str(text))

runs = {}
for path in glob.glob(os.path.join(tmp, "logs", "run1", "lr_*", "events.out.tfevents.*")):
    evs, bad = read_events(path)
    runs[os.path.basename(os.path.dirname(path))] = (evs, bad)
check("add-scalars: one run per tag", sorted(runs) == ["lr_adam", "lr_sgd"], str(sorted(runs)))
for name, want in [("lr_adam", 0.001), ("lr_sgd", 0.1)]:
    evs, bad = runs.get(name, ([], ["missing"]))
    vals = [(e.step, v.tag, v.simple_value) for e in evs for v in e.summary.value]
    check(f"add-scalars: {name}", not bad and len(vals) == 1 and vals[0][0] == 5 and vals[0][1] == "lr"
          and abs(vals[0][2] - want) < 1e-7, f"{bad} {vals}")

fit_files = glob.glob(os.path.join(tmp, "logs", "fit", "events.out.tfevents.*"))
if fit_files:
    evs, bad = read_events(fit_files[0])
    tags = {}
    for e in evs[1:]:
        for v in e.summary.value:
            tags.setdefault(v.tag, []).append((e.step, v.simple_value))
    check("fit :tensorboard: CRCs", not bad, str(bad[:3]))
    check("fit :tensorboard: the training loss at every step", [s for s, _ in tags.get("train/loss", [])] == list(range(1, 13)),
          str(tags.get("train/loss")))
    check("fit :tensorboard: per-epoch loss, val-loss, val-accuracy, lr",
          all([s for s, _ in tags.get(t, [])] == [1, 2, 3] for t in ("epoch/loss", "epoch/val-loss", "epoch/val-accuracy", "epoch/lr")),
          str(sorted(tags)))
else:
    check("fit wrote an event file", False, str(os.listdir(os.path.join(tmp, "logs"))))

finish()
