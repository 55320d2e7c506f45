"""Data-loader worker processes, python3-torch side of bench/data/workers.purple: the same
tokenising dataset (about 1 ms of Python work per sample), loaded by torch's DataLoader with
num_workers 0 and 2. It shows what this machine allows: on 2 cores, the workers' speed-up is
bounded by the cores the parent and the workers share, whatever the language.
    /usr/bin/python3 bench/data/workers.py [samples] [rounds] [work]
work: how many times each sample tokenises its line (default 8 in Purple; CPython is slower per
round, so pick the count that makes its per-sample time about 1 ms: it is printed)."""
import sys
import time
import torch
from torch.utils.data import DataLoader, Dataset

samples = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
work = int(sys.argv[3]) if len(sys.argv) > 3 else 8
torch.set_num_threads(1)

words = ["tok" + str(k * 7919) for k in range(97)]


def line(i):
    return "".join(words[(i * 31 + k * 17) % 97] + " " for k in range(60))


def token_id(s, start, end):
    h = 17
    for j in range(start, end):
        h = (h * 31 + ord(s[j])) % 1000003
    return h % 5000


def tokenise(s):
    ids, start = [], 0
    for i, c in enumerate(s):
        if c == " ":
            ids.append(token_id(s, start, i))
            start = i + 1
    return ids


class Tokens(Dataset):
    def __len__(self):
        return samples

    def __getitem__(self, i):
        text = line(i)
        ids = tokenise(text)
        for _ in range(work - 1):
            ids = tokenise(text)
        return torch.tensor(ids, dtype=torch.int64), i % 10


def per_sample_ms():
    ds = Tokens()
    t0 = time.perf_counter()
    for i in range(200):
        ds[i]
    return (time.perf_counter() - t0) / 200 * 1000


def rate(workers):
    loader = DataLoader(Tokens(), batch_size=32, shuffle=True, num_workers=workers,
                        generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return samples / (time.perf_counter() - t0)


print("WORK data-workers: %d samples, %.2f ms of Python work each, batch 32, shuffled" % (samples, per_sample_ms()))
results = [(rate(0), rate(2)) for _ in range(rounds)]
r0 = max(r[0] for r in results)
r2 = max(r[1] for r in results)
print("num-workers 0: %d samples/s" % round(r0))
print("num-workers 2: %d samples/s" % round(r2))
print("ratio: %.2f" % (r2 / r0))
