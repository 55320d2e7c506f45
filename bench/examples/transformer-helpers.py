"""A small transformer language model written the way people write one: the python3-torch side
of bench/examples/transformer-helpers.purple (attention as plain functions, a block whose
self-attention is a method, the model's forward a loop over its blocks).

The same model, data and optimiser as the Purple side, built in the same order and drawing the
same random numbers from LibTorch's generator, so the two print the same losses.

Run: /usr/bin/python3 bench/examples/transformer-helpers.py [--threads N] [--seed S] [--steps N]
Prints "WORK transformer-helpers: ..." and "RESULT transformer-helpers SECONDS LAST-LOSS".
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)

VOCAB, WIDTH, N_HEADS, N_BLOCKS, T, B = 96, 128, 4, 4, 64, 16
HEAD_WIDTH = WIDTH // N_HEADS


def split_heads(x):
    return x.view(B, T, N_HEADS, HEAD_WIDTH).transpose(1, 2)


def merge_heads(x):
    return x.transpose(1, 2).reshape(B, T, WIDTH)


def causal_mask(n):
    return torch.triu(torch.full((n, n), -math.inf), diagonal=1)


def attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD_WIDTH)
    weights = torch.softmax(scores + mask, -1)
    return weights @ v


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.fc_1 = nn.Linear(WIDTH, 4 * WIDTH)
        self.fc_2 = nn.Linear(4 * WIDTH, WIDTH)

    def self_attention(self, x, mask):
        q, k, v = (split_heads(p) for p in self.qkv(x).chunk(3, -1))
        return self.proj(merge_heads(attention(q, k, v, mask)))

    def forward(self, x, mask):
        x = x + self.self_attention(self.ln_1(x), mask)
        h = F.gelu(self.fc_1(self.ln_2(x)))
        return x + self.fc_2(h)


class LanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(T, WIDTH)
        self.blocks = nn.ModuleList([Block() for _ in range(N_BLOCKS)])
        self.ln = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        mask = causal_mask(T)
        x = self.embed(tokens) + self.position(torch.arange(T))
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


model = LanguageModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)


def batch():
    offsets = torch.randint(0, VOCAB, (B, 1))
    strides = torch.randint(1, 5, (B, 1))
    sequence = (offsets + strides * torch.arange(T + 1)) % VOCAB
    return sequence[:, :T], sequence[:, 1:]


def loss_of(inputs, targets):
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(B * T, VOCAB), targets.reshape(B * T))


print(f"WORK transformer-helpers: {args.steps} steps, batch {B} x {T} tokens, {N_BLOCKS} blocks of width "
      f"{WIDTH}, AdamW, {args.threads} thread(s)")
start = time.perf_counter()
last = None
for step in range(1, args.steps + 1):
    inputs, targets = batch()
    loss = loss_of(inputs, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    last = loss.item()
    if step == 1 or step % 10 == 0:
        print(f"step {step}: loss {last:.4f}")
print(f"RESULT transformer-helpers {time.perf_counter() - start:.6f} {last:.4f}")
