# Data order: DataLoader shuffling, samplers and their seeds, as data-order.purple draws them.
import torch
from torch.utils.data import (DataLoader, TensorDataset, RandomSampler, WeightedRandomSampler,
                              SubsetRandomSampler, BatchSampler, SequentialSampler)
from interop_common import emit

ds = TensorDataset(torch.arange(10))


def batches(loader):
    return [int(v) for b in loader for v in b[0]]


g = torch.Generator().manual_seed(7)
loader = DataLoader(ds, batch_size=3, shuffle=True, generator=g)
emit("shuffle-generator-epoch1", batches(loader))
emit("shuffle-generator-epoch2", batches(loader))

torch.manual_seed(3)
loader = DataLoader(ds, batch_size=4, shuffle=True)
emit("shuffle-global-epoch1", batches(loader))
emit("shuffle-global-epoch2", batches(loader))
emit("global-after", torch.rand(2))

torch.manual_seed(5)
loader = DataLoader(ds, batch_size=4, shuffle=True, drop_last=True)
emit("drop-last", batches(loader))

torch.manual_seed(5)
loader = DataLoader(ds, batch_size=3, sampler=RandomSampler(ds, replacement=True, num_samples=40))
emit("random-replacement", batches(loader))

g = torch.Generator().manual_seed(1)
loader = DataLoader(ds, batch_size=5, sampler=RandomSampler(ds, num_samples=23, generator=g))
emit("random-num-samples", batches(loader))

g = torch.Generator().manual_seed(2)
w = [0.1, 0.1, 5.0, 0.1, 0.1, 3.0, 0.1, 0.1, 0.1, 1.0]
loader = DataLoader(ds, batch_size=4, sampler=WeightedRandomSampler(w, 12, generator=g))
emit("weighted", batches(loader))
loader = DataLoader(ds, batch_size=4, sampler=WeightedRandomSampler(w, 6, replacement=False, generator=g))
emit("weighted-no-replacement", batches(loader))

g = torch.Generator().manual_seed(9)
loader = DataLoader(ds, batch_size=2, sampler=SubsetRandomSampler([1, 3, 5, 7, 8], generator=g))
emit("subset", batches(loader))

torch.manual_seed(4)
loader = DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), 4, drop_last=False))
emit("batch-sampler", batches(loader))
loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 3, drop_last=True))
emit("batch-sampler-sequential", batches(loader))


class Drawing(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([i, int(torch.randint(0, 100, (1,)).item())])


torch.manual_seed(1)
emit("per-sample-draws", [v for b in DataLoader(Drawing(), batch_size=4, shuffle=True) for row in b.tolist() for v in row])
