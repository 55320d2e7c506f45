"""Helpers shared by the Python sides of bench/gpu/ (each mirrors what its .purple twin spells out).

A device is any string torch.device accepts ("cuda", "cuda:0", "cpu"). Timings read the clock
after synchronizing the device, so they cover the GPU work, not only the kernel launches."""
import time

import torch


def device_type(device):
    return torch.device(device).type


def make_sync(device):
    if device_type(device) == "cuda":
        return torch.cuda.synchronize
    return lambda: None


def clock(sync):
    """Seconds, after the device has finished everything queued so far."""
    sync()
    return time.perf_counter()


def amp_dtype(mode, device):
    """The autocast dtype of a mode: fp32 none; amp float16 on CUDA (bfloat16 on CPU, the only
    CPU autocast dtype of LibTorch 1.13); bf16 bfloat16."""
    if mode == "fp32":
        return None
    if mode == "amp":
        return torch.float16 if device_type(device) == "cuda" else torch.bfloat16
    if mode == "bf16":
        return torch.bfloat16
    raise SystemExit("unknown mode %r (expected fp32, amp or bf16)" % mode)


def make_scaler(device):
    """torch.amp.GradScaler(device) where this torch has it (2.3 and later); otherwise
    torch.cuda.amp.GradScaler, which disables itself off CUDA."""
    kind = device_type(device)
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        try:
            return amp.GradScaler(kind)
        except (TypeError, RuntimeError, AssertionError):
            pass
    return torch.cuda.amp.GradScaler(enabled=(kind == "cuda"))


def train_step(model, opt, scaler, kind, dtype, x, y):
    """One cross-entropy training step as both benchmarks take it: the forward pass under
    autocast when DTYPE is given, gradients cleared to None, and the step through SCALER when
    there is one. Returns the loss (a tensor: reading it would wait for the device)."""
    import torch.nn.functional as F
    if dtype is None:
        loss = F.cross_entropy(model(x), y)
    else:
        with torch.autocast(kind, dtype=dtype):
            loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return loss


def fmt(x, digits=4):
    return "%.*f" % (digits, x)
