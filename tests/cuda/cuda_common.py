"""Shared by the Python halves of the tests in tests/cuda/ (see pyrun.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402  (tests/checks.py, the drivers' shared check and finish)

SKIP = 77


def setup():
    """Returns (torch, device, mode, dir) after the checks every Python step makes: torch imports,
    and the device (PURPLE_CUDA_TEST_DEVICE, default "cuda") exists. Exits 77 otherwise."""
    mode, d = sys.argv[1], sys.argv[2]
    try:
        import torch
    except ImportError as e:
        print("skipped: this Python (%s) cannot import torch: %s" % (sys.executable, e))
        sys.exit(SKIP)
    device = os.environ.get("PURPLE_CUDA_TEST_DEVICE") or "cuda"
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("skipped: no CUDA device for Python's torch %s (torch.cuda.is_available() is False)" % torch.__version__)
        sys.exit(SKIP)
    print("python torch %s, device %s" % (torch.__version__, device))
    return torch, device, mode, d


class Checks:
    """tests/checks.py's check and finish, with the comparisons the CUDA tests make."""

    def ok(self, label, cond, detail=""):
        checks.check(label, cond, detail)
        return cond

    def close(self, label, got, expected, tol=0.0):
        """max |got - expected| <= tol * max(1, max |expected|), compared in float64 on the CPU."""
        import torch
        got64 = got.detach().to("cpu", torch.float64)
        exp64 = expected.detach().to("cpu", torch.float64)
        if got64.shape != exp64.shape:
            return self.ok(label, False, "shapes %s and %s" % (tuple(got64.shape), tuple(exp64.shape)))
        diff = (got64 - exp64).abs().max().item() if got64.numel() else 0.0
        allowed = tol * max(1.0, exp64.abs().max().item() if exp64.numel() else 0.0)
        return self.ok(label + " (max |diff| %g, allowed %g)" % (diff, allowed), diff <= allowed,
                       "got %s, expected %s" % (got64.flatten()[:8].tolist(), exp64.flatten()[:8].tolist()))

    def device_type(self, label, t, device):
        want = "cuda" if device.startswith("cuda") else device
        return self.ok("%s is on %s (%s)" % (label, want, t.device), t.device.type == want)

    def finish(self):
        checks.finish()
