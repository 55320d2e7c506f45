# LBFGS on a small double-precision LSTM-cell sequence model (issue 30: the shape of PyTorch's
# time_sequence_prediction example), from deterministic weights and data; every closure call's
# loss and the weights after each step, compared with lbfgs-sequence.purple.
import torch
import torch.nn as nn
from interop_common import emit


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 6)
        self.lstm2 = nn.LSTMCell(6, 6)
        self.linear = nn.Linear(6, 1)

    def forward(self, input):
        n = input.size(0)
        h, c, h2, c2 = (torch.zeros(n, 6, dtype=torch.double) for _ in range(4))
        outputs = []
        for x in input.split(1, dim=1):
            h, c = self.lstm1(x, (h, c))
            h2, c2 = self.lstm2(h, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


seq = Sequence().double()
with torch.no_grad():
    for k, name in enumerate(sorted(n for n, _ in seq.named_parameters())):
        p = dict(seq.named_parameters())[name]
        p.copy_((torch.sin(torch.arange(p.numel()) * 0.37 + k * 0.1) * 0.3).reshape(p.shape))
waves = torch.sin((torch.arange(25).double() + torch.tensor([[0.], [7.], [13.], [21.]], dtype=torch.double)) / 4.0)
input, target = waves[:, :-1], waves[:, 1:]
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=6)
criterion = nn.MSELoss()
for step in range(2):
    losses = []

    def closure():
        optimizer.zero_grad()
        loss = criterion(seq(input), target)
        losses.append(loss.item())
        loss.backward()
        return loss

    returned = optimizer.step(closure)
    emit("losses-%d" % step, losses)
    emit("returned-%d" % step, returned)
    for name, p in sorted(seq.named_parameters()):
        emit("%s-%d" % (name, step), p)
