"""PyTorch's polynomial regression example (pytorch/examples regression/main.py), python3-torch
side of bench/examples/regression.purple.

The same program as the example, written out again for this benchmark: a target polynomial of
degree 4 with random coefficients (randn * 5), features x, x^2, x^3, x^4 of random batches of 32
(randn), one Linear(4, 1) layer trained with smooth L1 loss and plain gradient steps
(param -= 0.1 * grad) until a batch's loss is below 1e-3; then it prints the loss, the number of
batches and the learned and actual functions, as the example does.

Differences from the example, on both sides: a fixed seed (the example draws unseeded), and the
thread count from --threads.

Logs match regression.purple: Purple's random numbers are LibTorch's, so with the same seed and
the same draws in the same order (the target's weights, its bias, the Linear layer's
initialisation, then one randn(32) per batch) both sides fit the same batches and stop after
the same number of them with the same coefficients.

Run: /usr/bin/python3 bench/examples/regression.py [--threads N] [--seed S] [--repeat K]
  --repeat K: fit K times in a row, each from a fresh target and layer (longer runs to time; the
  example is K = 1). Prints "WORK regression: ..." and "RESULT regression SECONDS BATCHES".
"""
import argparse
import time
from itertools import count

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser(description="polynomial regression")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--repeat", type=int, default=1)
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)

POLY_DEGREE = 4


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def poly_desc(W, b):
    """Creates a string description of a polynomial."""
    result = "y = "
    for i, w in enumerate(W):
        result += "{:+.2f} x^{} ".format(w, i + 1)
    result += "{:+.2f}".format(b[0])
    return result


def fit():
    W_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5

    def f(x):
        """Approximated function."""
        return x.mm(W_target) + b_target.item()

    def get_batch(batch_size=32):
        """Builds a batch i.e. (x, f(x)) pair."""
        random = torch.randn(batch_size)
        x = make_features(random)
        y = f(x)
        return x, y

    # Define model
    fc = torch.nn.Linear(W_target.size(0), 1)

    for batch_idx in count(1):
        # Get data
        batch_x, batch_y = get_batch()
        # Reset gradients
        fc.zero_grad()
        # Forward pass
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        # Backward pass
        output.backward()
        # Apply gradients
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        # Stop criterion
        if loss < 1e-3:
            break

    print("Loss: {:.6f} after {} batches".format(loss, batch_idx))
    print("==> Learned function:\t" + poly_desc(fc.weight.view(-1), fc.bias))
    print("==> Actual function:\t" + poly_desc(W_target.view(-1), b_target))
    return batch_idx


print("WORK regression: degree-4 polynomial, Linear(4, 1), smooth L1, batches of 32 until loss < 1e-3, "
      "%d fit(s), %d thread(s)" % (args.repeat, args.threads), flush=True)
t0 = time.perf_counter()
batches = sum(fit() for _ in range(args.repeat))
print("RESULT regression %.6f %d" % (time.perf_counter() - t0, batches), flush=True)
