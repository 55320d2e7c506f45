# resnet18 trained on a folder of small JPEGs, as a newcomer writes it: python3-torch side of
# bench/examples/resnet-folder.purple. torchvision's ImageFolder (PIL, RGB) with ToTensor and
# Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)), a DataLoader of batch 32 shuffled (no workers),
# torchvision's resnet18 with 10 classes, CrossEntropyLoss, SGD lr 0.01 momentum 0.9; --epochs
# (default 3) passes over the folder, each printing its mean loss and its time.
# The folder: the first --images (default 640) Fashion-MNIST training images, each padded to
# 32x32 with black and scaled 2x by repeating pixels (64x64, exactly the same on both sides),
# saved as greyscale JPEGs (quality 75) in one subfolder per class under
# $TMPDIR/purple-bench-fashion64-N, made the first time by whichever side runs first (PIL here,
# write-jpeg there: the two encoders give the same bytes; the folder is built beside and renamed
# into place, so a half-made one is never read).
# Run: /usr/bin/python3 bench/examples/resnet-folder.py [--threads N] [--epochs E] [--images N]
#      (threads default: $PURPLE_BENCH_THREADS, else $OMP_NUM_THREADS, else 1)
# Time, system time, page faults and peak RSS: /usr/bin/time -v /usr/bin/python3 bench/examples/resnet-folder.py
import argparse, gzip, os, shutil, tempfile, time
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torchvision
from PIL import Image
from torchvision import datasets, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int,
                    default=int(os.environ.get("PURPLE_BENCH_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))))
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--images", type=int, default=640)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
args = parser.parse_args()
torch.set_num_threads(args.threads)

CLASSES = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def make_folder(root, n):
    """The first N training images as 64x64 greyscale JPEGs, one subfolder per class."""
    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))[:n]
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz"))[:n]
    part = "%s.part%d" % (root, os.getpid())
    for name in CLASSES:
        os.makedirs(os.path.join(part, name), exist_ok=True)
    for i in range(n):
        big = np.pad(images[i], 2).repeat(2, axis=0).repeat(2, axis=1)
        Image.fromarray(big, mode="L").save(os.path.join(part, CLASSES[labels[i]], "%05d.jpg" % i), quality=75)
    try:
        os.rename(part, root)
    except OSError:   # another run made it meanwhile
        shutil.rmtree(part)


folder = os.path.join(os.environ.get("TMPDIR", tempfile.gettempdir()), "purple-bench-fashion64-%d" % args.images)
if not os.path.isdir(folder):
    make_folder(folder, args.images)

torch.manual_seed(args.seed)
print("WORK resnet-folder: resnet18 (10 classes) on %d 64x64 JPEGs in an image folder, batch 32, SGD 0.01 "
      "momentum 0.9, %d epoch(s), %d thread(s)" % (args.images, args.epochs, args.threads), flush=True)
start = time.perf_counter()
transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
train_set = datasets.ImageFolder(folder, transform=transform)
train_loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
model = torchvision.models.resnet18(num_classes=10)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

for epoch in range(1, args.epochs + 1):
    model.train()
    t0 = time.perf_counter()
    running = 0.0
    for images, labels in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        running += loss.item()
    mean_loss = running / len(train_loader)
    print("epoch %d: mean loss %.4f (%.2f s)" % (epoch, mean_loss, time.perf_counter() - t0), flush=True)
print("RESULT resnet-folder %.6f %.4f" % (time.perf_counter() - start, mean_loss), flush=True)
