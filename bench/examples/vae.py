"""PyTorch's VAE example (pytorch/examples vae/main.py), python3-torch side of bench/examples/vae.purple.

The same program as the example, written out again for this benchmark: a fully connected VAE
784-400-20(mu, logvar)-400-784 on Fashion-MNIST, Adam lr 1e-3, batch 128, shuffled, BCE (sum) + KL
divergence, one epoch and a test pass, then 64 images sampled from the prior. It prints the
example's log lines ("Train Epoch: ...", "====> Epoch: ... Average loss", "====> Test set loss").

Differences from the example, all on both sides: Fashion-MNIST from Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist: the four IDX files, gzipped, in one folder; torchvision's
FashionMNIST(download=False) looks for them under FashionMNIST/raw/ uncompressed, so a small
Dataset here reads them and gives torchvision's samples: uint8 images kept, ToTensor per sample); one epoch; images are saved only with --save-images DIR.

Logs match vae.purple line for line: Purple's random numbers are LibTorch's, so with the same seed
and the same draws in the same order (the Linear layers' initialisation in construction order,
the loader's shuffling seed drawn when the epoch starts, then one randn_like per batch) both
sides start from the same weights, see the same batches and the same noise. The last digits of
the losses can differ once the threads split sums differently.

Run: /usr/bin/python3 bench/examples/vae.py [--threads N] [--seed S] [--limit N] [--save-images DIR]
  --limit N: the first N training images and the first N/6 test images (for quick runs).
Prints "WORK vae: ..." and "RESULT vae SECONDS TEST-LOSS" (data loading, the epoch and the test
pass; interpreter start-up and imports excluded) for bench/runner.py.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from torchvision import transforms

DIR = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description="VAE on Fashion-MNIST")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--limit", type=int, default=0)
parser.add_argument("--save-images", default=None)
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)
t0 = time.perf_counter()


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.from_numpy(np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims).copy())


class FashionMNIST(torch.utils.data.Dataset):
    """What torchvision.datasets.FashionMNIST(root, train, transform=ToTensor()) gives: the
    images kept as uint8, each sample turned into a float32 [1, 28, 28] tensor in [0, 1] when
    it is read (through PIL, as torchvision does)."""

    def __init__(self, split, limit):
        self.data = read_idx(os.path.join(DIR, split + "-images-idx3-ubyte.gz"))
        self.targets = read_idx(os.path.join(DIR, split + "-labels-idx1-ubyte.gz")).long()
        if limit:
            self.data, self.targets = self.data[:limit], self.targets[:limit]
        self.to_tensor = transforms.ToTensor()

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        image = Image.fromarray(self.data[index].numpy(), mode="L")
        return self.to_tensor(image), int(self.targets[index])


train_loader = torch.utils.data.DataLoader(FashionMNIST("train", args.limit),
                                           batch_size=args.batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(FashionMNIST("t10k", args.limit // 6),
                                          batch_size=args.batch_size, shuffle=False)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item() / len(data)))
    print("====> Epoch: {} Average loss: {:.4f}".format(epoch, train_loss / len(train_loader.dataset)))


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0 and args.save_images:
                from torchvision.utils import save_image
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(-1, 1, 28, 28)[:n]])
                save_image(comparison, os.path.join(args.save_images, "reconstruction_%d.png" % epoch), nrow=n)
    test_loss /= len(test_loader.dataset)
    print("====> Test set loss: {:.4f}".format(test_loss))
    return test_loss


print("WORK vae: %d Fashion-MNIST images, VAE 784-400-20-400-784, BCE+KLD, Adam 1e-3, batch %d, "
      "1 epoch + test pass on %d, %d thread(s)" % (len(train_loader.dataset), args.batch_size,
                                                   len(test_loader.dataset), args.threads), flush=True)
for epoch in range(1, 2):
    train(epoch)
    test_loss = test(epoch)
    with torch.no_grad():
        sample = model.decode(torch.randn(64, 20))
        if args.save_images:
            from torchvision.utils import save_image
            save_image(sample.view(64, 1, 28, 28), os.path.join(args.save_images, "sample_%d.png" % epoch))
print("RESULT vae %.6f %.4f" % (time.perf_counter() - t0, test_loss), flush=True)
