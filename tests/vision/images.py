"""Image files: read-image against torchvision.io.read_image on JPEGs and PNGs of every colour
type (grey, grey+alpha, RGB, RGBA, palettes with and without transparency, 1-bit, interlaced),
in every mode; write-png and write-jpeg read back by PIL; save-image and make-grid against
torchvision.utils; corrupt, truncated and unsupported files as file-errors.
usage: images.py PURPLE"""
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import torch
import torchvision.utils as U
from PIL import Image
from torchvision.io import ImageReadMode, read_image

from vision_common import check, close, finish, run_purple, temp_dir

purple = sys.argv[1]
d = temp_dir()
rng = np.random.RandomState(3)
rgb = rng.randint(0, 256, (23, 31, 3)).astype(np.uint8)
alpha = rng.randint(0, 256, (23, 31)).astype(np.uint8)
files = {}


def save(name, img, **kw):
    path = os.path.join(d, name)
    img.save(path, **kw)
    files[name] = path


save("rgb.png", Image.fromarray(rgb))
save("rgba.png", Image.fromarray(np.dstack([rgb, alpha])))
save("gray.png", Image.fromarray(rgb[:, :, 0]))
save("gray-alpha.png", Image.fromarray(np.dstack([rgb[:, :, 0], alpha]), "LA"))
save("palette.png", Image.fromarray(rgb).quantize(16))
pal_t = Image.fromarray(rgb).quantize(8)
save("palette-trns.png", pal_t, transparency=3)
save("bits1.png", Image.fromarray(rgb[:, :, 0] > 128))
save("interlaced.png", Image.fromarray(rgb), optimize=False, interlace=1)
save("rgb.jpg", Image.fromarray(rgb), quality=90)
save("gray.jpg", Image.fromarray(rgb[:, :, 0]), quality=85)
save("progressive.jpg", Image.fromarray(rgb), quality=80, progressive=True)
big = np.kron(rgb, np.ones((5, 5, 1), np.uint8))
save("subsampled.jpg", Image.fromarray(big), quality=70, subsampling=2)

modes = {"unchanged": ImageReadMode.UNCHANGED, "gray": ImageReadMode.GRAY, "gray-alpha": ImageReadMode.GRAY_ALPHA,
         "rgb": ImageReadMode.RGB, "rgb-alpha": ImageReadMode.RGB_ALPHA}
cases = []
for name, path in sorted(files.items()):
    for mode, tv_mode in modes.items():
        try:
            want = read_image(path, tv_mode)
        except RuntimeError:
            continue   # torchvision refuses it too (alpha from a JPEG)
        # Where torchvision 0.14 is wrong, Purple does what PIL and later torchvision do:
        # - a palette PNG in UNCHANGED mode gives its indices there; Purple expands the palette
        #   (RGB, or RGBA with palette transparency);
        # - an alpha channel added to an image without one is 255 (opaque) in Purple; torchvision
        #   0.14 fills 1 for 1-bit images and garbles palette images.
        if name.startswith("palette") and mode == "unchanged":
            want = read_image(path, ImageReadMode.RGB_ALPHA if "trns" in name else ImageReadMode.RGB)
        elif mode.endswith("alpha") and name in ("rgb.png", "gray.png", "bits1.png", "interlaced.png", "palette.png"):
            colour = read_image(path, ImageReadMode.GRAY if mode == "gray-alpha" else ImageReadMode.RGB)
            want = torch.cat([colour, torch.full_like(colour[:1], 255)])
        cases.append((name, mode, want))

# Files that are not images, or broken ones: each must be a file-error naming the path.
jpeg_bytes = open(files["rgb.jpg"], "rb").read()
png_bytes = open(files["rgb.png"], "rb").read()
bad = {
    "truncated.jpg": jpeg_bytes[: len(jpeg_bytes) // 2],
    "truncated.png": png_bytes[: len(png_bytes) // 2],
    "header-only.png": png_bytes[:40],
    "corrupt.png": png_bytes[:60] + bytes(200) + png_bytes[260:],
    "corrupt.jpg": jpeg_bytes[:200] + bytes(range(256)) * 2 + jpeg_bytes[712:],
    "empty.png": b"",
    "text.jpg": b"this is not an image\n",
    "jpeg-magic-only.jpg": b"\xff\xd8\xff",
}


def png_claiming(width, height):
    """A PNG whose header claims WIDTH x HEIGHT RGB pixels, followed by almost no data."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(100)))
            + chunk(b"IEND", b""))


bad["bomb.png"] = png_claiming(60000, 60000)         # 3.6e9 pixels: refused before allocating
bad["short-claim.png"] = png_claiming(3000, 2000)    # allocated, then the data ends
Image.fromarray((rng.rand(9, 7) * 65535).astype(np.uint16)).save(os.path.join(d, "sixteen.png"))
bad_names = list(bad) + ["sixteen.png", "missing.png"]
for name, data in bad.items():
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
with open(os.path.join(d, "cases.txt"), "w") as f:
    for name, mode, _ in cases:
        f.write("%s %s\n" % (name, mode))
    for name in bad_names:
        f.write("%s bad\n" % name)

batch = torch.rand(5, 3, 9, 11, generator=torch.Generator().manual_seed(4))
np.save(os.path.join(d, "batch.npy"), batch.numpy())
out = run_purple(purple, "images.purple", d)

for i, (name, mode, want) in enumerate(cases):
    close("read-image %s :mode %s" % (name, mode), np.load(os.path.join(d, "read-%d.npy" % i)), want.numpy(), 0)

errors = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith("bad-"))
for name in bad_names:
    msg = errors.get("bad-" + name, "no error")
    check(msg.startswith("file-error") and name in msg, "read-image %s: expected a file-error naming it, got %s" % (name, msg))
    print("%-40s %s" % ("read-image " + name, msg[:110]))

# Under a tensor budget, a picture larger than the budget is refused before it is decoded.
p = subprocess.run([purple, "--max-tensor-bytes", "4M", "-e",
                    '(guard (e (#t (display (error-object-kind e)) (display ": ") (display (condition/report-string e))))'
                    ' (read-image "%s"))' % os.path.join(d, "short-claim.png")],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
check(p.stdout.startswith("memory-error"), "read-image under --max-tensor-bytes 4M: %s %s" % (p.stdout, p.stderr))
print("%-40s %s" % ("read-image 3000x2000 under a 4 MB budget", p.stdout.strip()[:100]))

# write-png round trips exactly through PIL; write-jpeg encodes as PIL's libjpeg does at the
# same quality (the same library with the same defaults: 4:2:0, baseline).
for i, (name, mode, want) in enumerate(cases):
    if mode != "unchanged" or want.shape[0] == 2:
        continue
    got = np.asarray(Image.open(os.path.join(d, "written-%d.png" % i)))
    if got.ndim == 2:
        got = got[:, :, None]
    close("write-png %s (read by PIL)" % name, got.transpose(2, 0, 1), np.load(os.path.join(d, "read-%d.npy" % i)), 0)
for name in ["rgb", "gray"]:
    written = np.load(os.path.join(d, "jpeg-source-%s.npy" % name))
    pil_path = os.path.join(d, "pil-%s.jpg" % name)
    Image.fromarray(written[0] if written.shape[0] == 1 else written.transpose(1, 2, 0)).save(pil_path, quality=90)
    got = np.asarray(Image.open(os.path.join(d, "written-%s.jpg" % name))).astype(float)
    want = np.asarray(Image.open(pil_path)).astype(float)
    close("write-jpeg %s, quality 90 (vs PIL's)" % name, got, want, 0)

# save-image and make-grid as torchvision.utils.
for name, kw in [("grid", {}), ("grid-nrow2-pad4", {"nrow": 2, "padding": 4, "pad_value": 0.5}),
                 ("grid-normalize", {"normalize": True}), ("grid-range", {"normalize": True, "value_range": (0.2, 0.7)}),
                 ("grid-scale-each", {"normalize": True, "scale_each": True})]:
    close("make-grid " + name, np.load(os.path.join(d, name + ".npy")), U.make_grid(batch, **kw).numpy(), 1e-6)
    path = os.path.join(d, "want-" + name + ".png")
    U.save_image(batch, path, **kw)
    close("save-image " + name, np.asarray(Image.open(os.path.join(d, name + ".png"))), np.asarray(Image.open(path)), 0)
path = os.path.join(d, "want-one.png")
U.save_image(batch[0, :1], path)
close("save-image one grey image", np.asarray(Image.open(os.path.join(d, "one.png"))), np.asarray(Image.open(path)), 0)
finish()
