# LSTMCell sine-wave prediction (PyTorch's examples/time_sequence_prediction), python3-torch side.
# Same work as lstm-sine.purple: 100 sine waves of length 1000 made from one seed, a Sequence
# model of two LSTMCells (1->51, 51->51) and a Linear(51, 1) in double precision, trained on
# waves 3..99 with LBFGS (lr 0.8) and MSELoss, each step a closure that zeroes the gradients,
# runs the model, prints the loss and back-propagates; after each step a no-grad prediction of
# the first 3 waves plus 1000 future points, whose test loss is printed.
# Run: /usr/bin/python3 bench/examples/lstm-sine.py [--threads N] [--steps S]
#      (threads default: $PURPLE_BENCH_THREADS, else $OMP_NUM_THREADS, else 1; steps default 15)
# Peak memory and time: /usr/bin/time -v /usr/bin/python3 bench/examples/lstm-sine.py --threads 1
import argparse, os, time
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int,
                    default=int(os.environ.get("PURPLE_BENCH_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))))
parser.add_argument("--steps", type=int, default=15)
args = parser.parse_args()
torch.set_num_threads(args.threads)

# The data (generate.py, with torch's generator instead of numpy's so both sides draw the same
# offsets): wave i is sin((t + offset_i) / T) for t = 0 .. L-1.
T, L, N = 20, 1000, 100
torch.manual_seed(2)
offsets = torch.randint(-4 * T, 4 * T, (N, 1))
data = torch.sin((torch.arange(L) + offsets).double() / 1.0 / T)


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


torch.manual_seed(0)
input = data[3:, :-1]
target = data[3:, 1:]
test_input = data[:3, :-1]
test_target = data[:3, 1:]
seq = Sequence()
seq.double()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
print("WORK lstm-sine: %d lbfgs step(s), 100 waves of 1000 points, float64, %d thread(s)" % (args.steps, args.threads))
start = time.time()
for i in range(args.steps):
    print("STEP: ", i)

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        print("loss: %.10f" % loss.item())
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        future = 1000
        pred = seq(test_input, future=future)
        loss = criterion(pred[:, :-future], test_target)
        last_test_loss = loss.item()
        print("test loss: %.10f" % loss.item())
print("RESULT lstm-sine %.6f %.6e" % (time.time() - start, last_test_loss))
