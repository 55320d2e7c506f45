# MNIST CNN (PyTorch's examples/mnist), python3-torch side, on Debian's Fashion-MNIST files (the
# same format as MNIST). Same work as mnist-cnn.purple: Conv2d(1,32,3), Conv2d(32,64,3),
# max-pool, dropout 0.25, fc 9216->128, dropout 0.5, fc 128->10, log-softmax; Adadelta lr 1.0
# with StepLR gamma 0.7, batch 64 shuffled, ToTensor + Normalize((0.1307,), (0.3081,)) through
# torchvision's FashionMNIST dataset (uint8 images, converted per sample) and a DataLoader; the
# first --batches training batches (default 200), then the whole test set in batches of 1000.
# torchvision reads the raw IDX files from ROOT/FashionMNIST/raw: they are unpacked from
# /usr/share/datasets/fashion-mnist into $TMPDIR/purple-bench-mnist the first time.
# Run: /usr/bin/python3 bench/examples/mnist-cnn.py [--threads N] [--batches B] [--epochs E]
#      (threads default: $PURPLE_BENCH_THREADS, else $OMP_NUM_THREADS, else 1)
# Peak memory and time: /usr/bin/time -v /usr/bin/python3 bench/examples/mnist-cnn.py --threads 1
import argparse, gzip, os, shutil, tempfile, time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int,
                    default=int(os.environ.get("PURPLE_BENCH_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))))
parser.add_argument("--batches", type=int, default=200)
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
args = parser.parse_args()
torch.set_num_threads(args.threads)

root = os.path.join(os.environ.get("TMPDIR", tempfile.gettempdir()), "purple-bench-mnist")
raw = os.path.join(root, "FashionMNIST", "raw")
os.makedirs(raw, exist_ok=True)
for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]:
    if not os.path.exists(os.path.join(raw, name)):
        part = os.path.join(raw, name + ".part%d" % os.getpid())
        with gzip.open(os.path.join(args.data, name + ".gz"), "rb") as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(part, os.path.join(raw, name))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        if batch_idx >= args.batches:
            break
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(loader.dataset), 100. * batch_idx / len(loader), loss.item()))


def test(model, loader):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(loader.dataset)
    print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
        test_loss, correct, len(loader.dataset), 100. * correct / len(loader.dataset)))
    return test_loss


torch.manual_seed(1)
transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
train_set = datasets.FashionMNIST(root, train=True, download=False, transform=transform)
test_set = datasets.FashionMNIST(root, train=False, download=False, transform=transform)
train_loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=True)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000)
model = Net()
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
print("WORK mnist-cnn: %d epoch(s) of %d training batches of 64 and the test set, %d thread(s)"
      % (args.epochs, args.batches, args.threads))
start = time.time()
for epoch in range(1, args.epochs + 1):
    train(model, train_loader, optimizer, epoch)
    last_test_loss = test(model, test_loader)
    scheduler.step()
print("RESULT mnist-cnn %.6f %.4f" % (time.time() - start, last_test_loss))
