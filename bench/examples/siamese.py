"""PyTorch's Siamese network example (pytorch/examples siamese_network/main.py), python3-torch side
of bench/examples/siamese.purple.

The same program as the example, written out again for this benchmark: pairs of images, half of
the same class (target 1) and half of two different classes (target 0), each image through a
ResNet-18 trunk whose first convolution takes one channel (torchvision's resnet18 without its fc
layer), the two 512-feature vectors joined and classified by Linear(1024, 256), ReLU,
Linear(256, 1), sigmoid; BCELoss, Adadelta lr 1.0, StepLR(step 1, gamma 0.7), the head's linear
layers Xavier-uniform with bias 0.01. It prints the example's log lines ("Train Epoch: ...",
"Test set: Average loss: ..., Accuracy: ...").

Differences from the example, all on both sides, to keep the run short and the two sides
comparable: Fashion-MNIST from Debian's dataset-fashion-mnist (the IDX files read directly: the
uint8 images kept, turned into float 0..255 per sample as the example does); a fixed number of
batches (--train-batches 20 of 64, --test-batches 5 of 64; the example runs 14 epochs and tests
in batches of 1,000); one epoch; the pairs are drawn with torch.randint instead of Python's
random module, so that the seed fixes them and Purple can draw the same ones; the test loss is
averaged over the test pairs actually seen.

Logs match siamese.purple as far as the random draws and the arithmetic allow: Purple's random
numbers are LibTorch's, and both sides draw in the same order (resnet18's initialisation as
torchvision makes it, the one-channel conv1, the head's layers and their Xavier draws, the
loader's shuffling seed at the start of each pass, then three or four randint per pair), so the
initial weights and the pairs are the same. Batch norm and Adadelta's arithmetic is LibTorch's on
both sides, but differences in the last bits grow over the steps.

Run: /usr/bin/python3 bench/examples/siamese.py [--threads N] [--seed S] [--train-batches N]
     [--test-batches N] [--batch-size N]
Prints "WORK siamese: ..." and "RESULT siamese SECONDS TEST-LOSS" (loading, training and test;
start-up excluded).
"""
import argparse
import gzip
import os
import time
from itertools import islice

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torch.optim.lr_scheduler import StepLR

DIR = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description="Siamese network on Fashion-MNIST")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--train-batches", type=int, default=20)
parser.add_argument("--test-batches", type=int, default=5)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--gamma", type=float, default=0.7)
parser.add_argument("--log-interval", type=int, default=10)
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


def randint(low, high):
    """A random integer in [low, high], as random.randint, from LibTorch's generator."""
    return int(torch.randint(low, high + 1, (1,)).item())


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnet = torchvision.models.resnet18(weights=None)
        # one input channel (grayscale) instead of three
        self.resnet.conv1 = nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        self.fc_in_features = self.resnet.fc.in_features
        # the trunk: every layer but the last
        self.resnet = torch.nn.Sequential(*(list(self.resnet.children())[:-1]))
        self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 256), nn.ReLU(inplace=True), nn.Linear(256, 1))
        self.sigmoid = nn.Sigmoid()
        self.resnet.apply(self.init_weights)
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.resnet(x)
        return output.view(output.size()[0], -1)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


class APP_MATCHER(torch.utils.data.Dataset):
    def __init__(self, split):
        self.data = read_idx(os.path.join(DIR, split + "-images-idx3-ubyte.gz")).unsqueeze(1).clone()
        self.targets = read_idx(os.path.join(DIR, split + "-labels-idx1-ubyte.gz"))
        self.group_examples()

    def group_examples(self):
        """The indices of each class's images, for picking pairs."""
        np_arr = np.array(self.targets.clone())
        self.grouped_examples = {}
        for i in range(0, 10):
            self.grouped_examples[i] = np.where((np_arr == i))[0]

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        # an anchor image from a random class
        selected_class = randint(0, 9)
        random_index_1 = randint(0, self.grouped_examples[selected_class].shape[0] - 1)
        index_1 = self.grouped_examples[selected_class][random_index_1]
        image_1 = self.data[index_1].clone().float()
        if index % 2 == 0:
            # a positive pair: another image of the same class
            random_index_2 = randint(0, self.grouped_examples[selected_class].shape[0] - 1)
            while random_index_2 == random_index_1:
                random_index_2 = randint(0, self.grouped_examples[selected_class].shape[0] - 1)
            index_2 = self.grouped_examples[selected_class][random_index_2]
            image_2 = self.data[index_2].clone().float()
            target = torch.tensor(1, dtype=torch.float)
        else:
            # a negative pair: an image of another class
            other_selected_class = randint(0, 9)
            while other_selected_class == selected_class:
                other_selected_class = randint(0, 9)
            random_index_2 = randint(0, self.grouped_examples[other_selected_class].shape[0] - 1)
            index_2 = self.grouped_examples[other_selected_class][random_index_2]
            image_2 = self.data[index_2].clone().float()
            target = torch.tensor(0, dtype=torch.float)
        return image_1, image_2, target


def train(model, train_loader, optimizer, epoch):
    model.train()
    criterion = nn.BCELoss()
    # islice: the first --train-batches batches, without reading (and drawing the pairs of) one more
    for batch_idx, (images_1, images_2, targets) in enumerate(islice(train_loader, args.train_batches)):
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(images_1), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, test_loader):
    model.eval()
    test_loss, correct, seen = 0, 0, 0
    criterion = nn.BCELoss()
    with torch.no_grad():
        for images_1, images_2, targets in islice(test_loader, args.test_batches):
            outputs = model(images_1, images_2).squeeze()
            test_loss += criterion(outputs, targets).sum().item()
            pred = torch.where(outputs > 0.5, 1, 0)
            correct += pred.eq(targets.view_as(pred)).sum().item()
            seen += len(targets)
    test_loss /= seen
    print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
        test_loss, correct, seen, 100. * correct / seen))
    return test_loss


model = SiameseNetwork()
train_loader = torch.utils.data.DataLoader(APP_MATCHER("train"), batch_size=args.batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(APP_MATCHER("t10k"), batch_size=args.batch_size)
optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

print("WORK siamese: resnet18 Siamese network on Fashion-MNIST pairs, BCE, Adadelta 1.0, "
      "%d training batches and %d test batches of %d, %d thread(s)" % (
          args.train_batches, args.test_batches, args.batch_size, args.threads), flush=True)
for epoch in range(1, 2):
    train(model, train_loader, optimizer, epoch)
    test_loss = test(model, test_loader)
    scheduler.step()
print("RESULT siamese %.6f %.4f" % (time.perf_counter() - t0, test_loss), flush=True)
