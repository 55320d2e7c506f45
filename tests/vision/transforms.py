"""Transforms of (purple vision) against torchvision.transforms on the same images and seeds.
usage: transforms.py PURPLE"""
import os
import sys

import numpy as np
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F

from vision_common import check, close, finish, run_purple, temp_dir

purple = sys.argv[1]
d = temp_dir()
g = torch.Generator().manual_seed(1)
img = torch.randint(0, 256, (3, 47, 63), dtype=torch.uint8, generator=g)
batch = torch.randint(0, 256, (2, 3, 30, 41), dtype=torch.uint8, generator=g)
fimg = torch.rand(3, 33, 28, generator=g)
np.save(os.path.join(d, "img.npy"), img.numpy())
np.save(os.path.join(d, "batch.npy"), batch.numpy())
np.save(os.path.join(d, "fimg.npy"), fimg.numpy())
out = run_purple(purple, "transforms.purple", d)

mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
want = {
    "resize-24-aa": F.resize(img, 24, antialias=True),
    "resize-24": F.resize(img, 24, antialias=False),
    "resize-20x30": F.resize(img, [20, 30], antialias=True),
    "resize-up-80": F.resize(img, 80, antialias=True),
    "resize-max-size": F.resize(img, 20, max_size=25, antialias=True),
    "resize-nearest": F.resize(img, 19, interpolation=T.InterpolationMode.NEAREST),
    "resize-bicubic": F.resize(img, 19, interpolation=T.InterpolationMode.BICUBIC, antialias=True),
    "resize-float": F.resize(fimg, 17, antialias=True),
    "resize-batch": F.resize(batch, 16, antialias=True),
    "center-crop-20": F.center_crop(img, 20),
    "center-crop-pad": F.center_crop(img, [50, 70]),
    "crop-outside": F.crop(img, -3, 50, 10, 20),
    "hflip": F.hflip(img),
    "to-float": F.convert_image_dtype(img, torch.float32),
    "normalize": F.normalize(F.convert_image_dtype(img, torch.float32), mean, std),
    "normalize-batch": F.normalize(F.convert_image_dtype(batch, torch.float32), mean, std),
    "prelude-normalize": F.normalize(F.convert_image_dtype(img, torch.float32), mean, std),
    "grayscale": F.rgb_to_grayscale(img),
    "brightness": F.adjust_brightness(img, 1.3),
    "contrast": F.adjust_contrast(img, 0.6),
    "saturation": F.adjust_saturation(img, 1.7),
    "hue": F.adjust_hue(img, 0.2),
    "hue-float": F.adjust_hue(fimg, -0.35),
    "contrast-float": F.adjust_contrast(fimg, 1.4),
    "imagenet": T.Compose([T.Resize(24, antialias=True), T.CenterCrop(20), T.ConvertImageDtype(torch.float32),
                           T.Normalize(mean, std)])(img),
}
torch.manual_seed(7)
want["rrc-params"] = torch.tensor([list(T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3]))
                                   for _ in range(20)])
torch.manual_seed(8)
rrc = T.RandomResizedCrop(16, antialias=True)
want["rrc"] = torch.stack([rrc(img) for _ in range(5)])
torch.manual_seed(9)
want["rrc-fallback"] = torch.tensor(list(T.RandomResizedCrop.get_params(img, [5.0, 6.0], [3 / 4, 4 / 3])))
torch.manual_seed(10)
jitter = T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
want["jitter"] = torch.stack([jitter(img) for _ in range(6)])
torch.manual_seed(11)
want["jitter-float"] = torch.stack([jitter(fimg) for _ in range(6)])
torch.manual_seed(12)
jitter2 = T.ColorJitter(brightness=(0.5, 0.9), hue=0.3)
want["jitter-partial"] = torch.stack([jitter2(img) for _ in range(4)])

# Purple converts a hue-adjusted uint8 image back as torchvision 0.14 does (scale by 255.999 and
# truncate). torchvision 0.15 and later round instead (Debian 13 has 0.20), which moves a pixel
# by one level, and ColorJitter's later steps can carry that to a few: on those versions the
# uint8 hue cases are held to 4 levels, every other case still to 1e-5.
tv = tuple(int(p) for p in torchvision.__version__.split(".")[:2])
rounding_hue = {"hue", "jitter", "jitter-partial"} if tv >= (0, 15) else set()
for name, w in want.items():
    path = os.path.join(d, name + ".npy")
    if not os.path.exists(path):
        check(False, name + ": Purple wrote no result")
        continue
    close(name, np.load(path), w.numpy(), 4 if name in rounding_hue else 1e-5)
finish()
