"""The (purple vision) models against torchvision.models: every state-dict name and shape, in
order; the initialisation's statistics (the mean and spread of each large tensor, exact values of
the constant ones); and, with the weights torchvision made saved by torch.save and loaded with
load-state-dict!, the logits on the same input to 1e-4.
usage: models.py PURPLE [FAMILY ...]   FAMILY: resnet vgg mobilenet efficientnet densenet vit"""
import math
import os
import sys

import numpy as np
import torch
import torchvision.models as M

from vision_common import check, close, finish, run_purple, temp_dir

torch.set_grad_enabled(False)
purple = sys.argv[1]
families = sys.argv[2:] or ["resnet", "vgg", "mobilenet", "efficientnet", "densenet", "vit"]

# Per family: (purple name, torchvision constructor, keyword arguments); the first one of each
# family also has its logits compared, on an input of the given size.
FAMILIES = {
    "resnet": ([("resnet18", M.resnet18, {}), ("resnet34", M.resnet34, {}), ("resnet50", M.resnet50, {}),
                ("resnet101", M.resnet101, {}), ("resnet18", M.resnet18, {"num_classes": 10})], 64),
    "vgg": ([("vgg11-bn", M.vgg11_bn, {"num_classes": 10}), ("vgg11", M.vgg11, {}), ("vgg16", M.vgg16, {}),
             ("vgg16-bn", M.vgg16_bn, {})], 32),
    "mobilenet": ([("mobilenet-v2", M.mobilenet_v2, {}), ("mobilenet-v2", M.mobilenet_v2, {"num_classes": 7})], 64),
    "efficientnet": ([("efficientnet-b0", M.efficientnet_b0, {}),
                      ("efficientnet-b0", M.efficientnet_b0, {"num_classes": 5})], 64),
    "densenet": ([("densenet121", M.densenet121, {})], 64),
    "vit": ([("vit-b-16", M.vit_b_16, {})], 224),
}


def stats(t):
    t = t.double()
    return float(t.mean()), float(t.std()) if t.numel() > 1 else 0.0


for family in families:
    models, size = FAMILIES[family]
    d = temp_dir()
    torch.manual_seed(0)
    x = torch.randn(2 if family != "vit" else 1, 3, size, size)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    reference = {}
    for i, (name, make, kw) in enumerate(models):
        torch.manual_seed(100 + i)
        m = make(**kw).eval()
        sd = m.state_dict()
        reference[i] = [(k, list(v.shape), stats(v) if v.is_floating_point() else None, v.numel())
                        for k, v in sd.items()]
        if i == 0:
            # Random BN statistics, so that eval mode's normalisation is exercised.
            for k, v in sd.items():
                if k.endswith("running_mean"):
                    v.copy_(torch.randn(v.shape) * 0.1)
                elif k.endswith("running_var"):
                    v.copy_(torch.rand(v.shape) + 0.5)
                elif k.endswith("heads.head.weight"):
                    v.copy_(torch.randn(v.shape) * 0.02)   # ViT's head starts at zero
            torch.save(sd, os.path.join(d, "weights.pth"))
            np.save(os.path.join(d, "logits.npy"), m(x).numpy())
        del m, sd
    specs = ["%s:%d" % (name, kw.get("num_classes", 1000)) for name, _, kw in models]
    out = run_purple(purple, "models.purple", d, *specs)
    lines = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            lines.setdefault(int(parts[0]), []).append(parts[1:])
    for i, (name, _, kw) in enumerate(models):
        label = "%s%s" % (name, kw and " %s" % kw or "")
        got = lines.get(i, [])
        want = reference[i]
        check([g[0] for g in got] == [w[0] for w in want], "%s: state-dict names differ from torchvision's" % label)
        check(len(got) == len(want), "%s: %d entries, torchvision %d" % (label, len(got), len(want)))
        bad_shapes = [w[0] for g, w in zip(got, want) if g[1] != "x".join(map(str, w[1])) and not (g[1] == "-" and w[1] == [])]
        check(not bad_shapes, "%s: shapes differ: %s" % (label, bad_shapes[:5]))
        # Initialisation: constants exactly; large random tensors by their mean and spread.
        bad_init = []
        for g, (k, shape, st, n) in zip(got, want):
            if st is None or g[2] == "-":
                continue
            mean, std = float(g[2]), float(g[3])
            if st[1] == 0:
                if not (abs(mean - st[0]) < 1e-6 and std < 1e-6):
                    bad_init.append("%s: constant %g, Purple mean %g std %g" % (k, st[0], mean, std))
            elif n >= 4096 and not k.endswith(("running_mean", "running_var")):
                if abs(std - st[1]) > 0.05 * st[1] or abs(mean - st[0]) > 6 * st[1] / math.sqrt(n) + 1e-6:
                    bad_init.append("%s: mean %g std %g, torchvision %g %g" % (k, mean, std, st[0], st[1]))
        check(not bad_init, "%s: initialisation differs: %s" % (label, bad_init[:4]))
        print("%-36s %d names and shapes checked, initialisation %s" % (label, len(want), "ok" if not bad_init else "DIFFERS"))
    close("%s logits (%s)" % (family, models[0][0]), np.load(os.path.join(d, "purple-logits.npy")),
          np.load(os.path.join(d, "logits.npy")), 1e-4)
finish()
