"""Datasets: image-folder-dataset against torchvision.datasets.ImageFolder (classes, sample order,
labels, pixels) and cifar10-dataset against the binary format read with NumPy, both through
data-loader batches.
usage: datasets.py PURPLE"""
import os
import sys

import numpy as np
import torch
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.io import read_image

from vision_common import check, close, finish, run_purple, temp_dir

purple = sys.argv[1]
d = temp_dir()
rng = np.random.RandomState(5)

# An image folder: three classes (one with a nested folder), files of mixed case and type, a
# file that is no image, which ImageFolder skips.
root = os.path.join(d, "folder")
layout = {"dog": ["b.png", "a.JPG", "sub/c.png", "sub/deeper/d.jpeg", "notes.txt"],
          "cat": ["z.png", "y.png"], "Zebra": ["one.png"]}
for cls, names in layout.items():
    for name in names:
        path = os.path.join(root, cls, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if name.endswith(".txt"):
            open(path, "w").write("not an image\n")
        else:
            Image.fromarray(rng.randint(0, 256, (8, 6, 3)).astype(np.uint8)).save(
                path, format="PNG" if name.endswith("png") else "JPEG")
folder = ImageFolder(root, loader=lambda p: read_image(p))
with open(os.path.join(d, "folder-want.txt"), "w") as f:
    f.write(" ".join(folder.classes) + "\n")
    for path, label in folder.samples:
        f.write("%s %d\n" % (os.path.relpath(path, root), label))
np.save(os.path.join(d, "folder-images.npy"), torch.stack([read_image(p) for p, _ in folder.samples]).numpy())

# CIFAR-10's binary version: 5 training files and the test file, a few records each.
cifar = os.path.join(d, "cifar")
os.makedirs(cifar)
records = {}
for name, n in [("data_batch_%d.bin" % k, 3 + k) for k in range(1, 6)] + [("test_batch.bin", 4)]:
    labels = rng.randint(0, 10, n).astype(np.uint8)
    pixels = rng.randint(0, 256, (n, 3072)).astype(np.uint8)
    with open(os.path.join(cifar, name), "wb") as f:
        f.write(np.concatenate([labels[:, None], pixels], 1).tobytes())
    records[name] = (labels, pixels)
train = [records["data_batch_%d.bin" % k] for k in range(1, 6)]
np.save(os.path.join(d, "cifar-train-images.npy"), np.concatenate([p for _, p in train]).reshape(-1, 3, 32, 32))
np.save(os.path.join(d, "cifar-train-labels.npy"), np.concatenate([l for l, _ in train]).astype(np.int64))
np.save(os.path.join(d, "cifar-test-images.npy"), records["test_batch.bin"][1].reshape(-1, 3, 32, 32))
os.makedirs(os.path.join(d, "bad"))
open(os.path.join(d, "bad", "test_batch.bin"), "wb").write(bytes(3073 * 2 + 5))

out = run_purple(purple, "datasets.purple", d)
got = out.splitlines()
want = open(os.path.join(d, "folder-want.txt")).read().splitlines()
check(got[: len(want)] == want, "image folder: classes or samples differ from ImageFolder's:\n%s\n%s" % (got[: len(want)], want))
print("%-40s %d classes, %d samples in ImageFolder's order" % ("image-folder-dataset", len(folder.classes), len(folder.samples)))
close("image-folder-dataset pixels", np.load(os.path.join(d, "purple-folder-images.npy")),
      np.load(os.path.join(d, "folder-images.npy")), 0)
close("image-folder labels (data-loader)", np.load(os.path.join(d, "purple-folder-labels.npy")),
      np.array([label for _, label in folder.samples], np.int64), 0)
close("cifar10 train images (data-loader)", np.load(os.path.join(d, "purple-cifar-train-images.npy")),
      np.load(os.path.join(d, "cifar-train-images.npy")), 0)
close("cifar10 train labels (data-loader)", np.load(os.path.join(d, "purple-cifar-train-labels.npy")),
      np.load(os.path.join(d, "cifar-train-labels.npy")), 0)
close("cifar10 test images, to-float", np.load(os.path.join(d, "purple-cifar-test-images.npy")),
      np.load(os.path.join(d, "cifar-test-images.npy")).astype(np.float32) / 255, 0)
check(any(l.startswith("bad.bin: error") and "3073" in l for l in got), "cifar10-dataset: a file of the wrong size is no error")
finish()
