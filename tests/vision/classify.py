"""examples/classify-image.purple against Python's torchvision pipeline: the same JPEG (made here
by PIL from a synthetic picture), read_image, Resize(256, antialias) + CenterCrop(224) +
ConvertImageDtype + Normalize, resnet50 with the same weights (random, with random batch-norm
statistics; saved by torch.save). The logits must agree to 1e-4 and the printed top-5 must name
the same classes. Also checks that examples/imagenet-classes.txt is torchvision's list.
usage: classify.py PURPLE"""
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision.models as M
import torchvision.transforms as T
from PIL import Image
from torchvision.io import ImageReadMode, read_image
from torchvision.models._meta import _IMAGENET_CATEGORIES

from vision_common import ROOT, check, close, finish, temp_dir

torch.set_grad_enabled(False)
purple = sys.argv[1]
d = temp_dir()
example = os.path.join(ROOT, "examples", "classify-image.purple")
classes_file = os.path.join(ROOT, "examples", "imagenet-classes.txt")
check(open(classes_file).read().splitlines() == list(_IMAGENET_CATEGORIES),
      "examples/imagenet-classes.txt is not torchvision's _IMAGENET_CATEGORIES")

# A synthetic photo: smooth colour gradients and a disc, 300 x 400, saved as a JPEG by PIL.
yy, xx = np.mgrid[0:300, 0:400].astype(np.float32)
picture = np.stack([xx / 400 * 255, yy / 300 * 255, 128 + 100 * np.sin(xx / 23) * np.cos(yy / 31)], -1)
picture[(yy - 150) ** 2 + (xx - 220) ** 2 < 70 ** 2] = [240, 200, 40]
jpeg = os.path.join(d, "photo.jpg")
Image.fromarray(picture.clip(0, 255).astype(np.uint8)).save(jpeg, quality=92)

torch.manual_seed(0)
model = M.resnet50().eval()
sd = model.state_dict()
for k, v in sd.items():
    if k.endswith("running_mean"):
        v.copy_(torch.randn(v.shape) * 0.1)
    elif k.endswith("running_var"):
        v.copy_(torch.rand(v.shape) + 0.5)
weights = os.path.join(d, "resnet50.pth")
torch.save(sd, weights)
preprocess = T.Compose([T.Resize(256, antialias=True), T.CenterCrop(224), T.ConvertImageDtype(torch.float32),
                        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
logits = model(preprocess(read_image(jpeg, ImageReadMode.RGB)).unsqueeze(0))
top = torch.topk(torch.softmax(logits[0], -1), 5)

# The example as a user runs it.
logits_file = os.path.join(d, "logits.npy")
cmd = [purple, example, jpeg, weights, "--logits", logits_file]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=900)
print(p.stdout)
if p.returncode != 0:
    print(p.stderr[-3000:])
    raise SystemExit("the example exited with %d" % p.returncode)
close("resnet50 logits, example vs torchvision", np.load(logits_file), logits.numpy(), 1e-4)
lines = [l for l in p.stdout.splitlines() if l.startswith("  ")]
check(len(lines) == 5, "the example printed %d classes, not 5" % len(lines))
for line, index, prob in zip(lines, top.indices.tolist(), top.values.tolist()):
    name = _IMAGENET_CATEGORIES[index]
    check(("%s (%d)" % (name, index)) in line, "expected %s (%d) in %r" % (name, index, line))
    shown = float(line.rsplit(":", 1)[1].strip().rstrip("%"))
    check(abs(shown - 100 * prob) < 0.011, "probability %s shown, torchvision %.4f%%" % (shown, 100 * prob))
    print("  torchvision: %s (%d) %.2f%%" % (name, index, 100 * prob))
finish()
