#!/usr/bin/env python3
"""The char-level GPT of examples/char-gpt.purple, written the usual way in python3-torch
(nanoGPT's model and training loop), for the fixed-time comparison in bench/flagship/run.sh.

usage: char-gpt.py [--preset small|gpt10m|tiny] [--key value ...]   (the same options)"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "tiny": dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=8, dropout=0.0, lr=3e-3, min_lr=3e-4,
                 warmup_iters=5, max_iters=60, eval_interval=30, eval_iters=4, sample_tokens=60),
    "small": dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=32, dropout=0.0, lr=2e-3, min_lr=2e-4,
                  warmup_iters=50, max_iters=3000, eval_interval=250, eval_iters=20, sample_tokens=300),
    "gpt10m": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64, dropout=0.2, lr=1e-3, min_lr=1e-4,
                   warmup_iters=100, max_iters=5000, eval_interval=250, eval_iters=20, sample_tokens=500),
}
DEFAULTS = dict(max_seconds=None, amp=0, seed=1337, temperature=0.8, top_k=20, threads=None, weight_decay=0.1,
                grad_clip=1.0, corpus="/usr/share/games/fortunes")
FILES = ("art ascii-art computers cookie debian definitions disclaimer drugs education ethnic food fortunes goedel "
         "humorists kids knghtbrd law linux linuxcookie literature love magic medicine men-women miscellaneous news "
         "paradoxum people perl pets platitudes politics pratchett riddles science songs-poems sports startrek tao "
         "translate-me wisdom work zippy").split()


def parse(argv):
    preset, over = "small", {}
    i = 0
    while i < len(argv):
        key, value = argv[i][2:].replace("-", "_"), argv[i + 1]
        if key == "preset":
            preset = value
        else:
            try:
                over[key] = int(value)
            except ValueError:
                try:
                    over[key] = float(value)
                except ValueError:
                    over[key] = None if value == "#f" else value
        i += 2
    cfg = dict(DEFAULTS)
    cfg.update(PRESETS[preset])
    cfg.update(over)
    return cfg


cfg = parse(sys.argv[1:])
if cfg["threads"]:
    torch.set_num_threads(cfg["threads"])
torch.set_flush_denormal(True)
torch.manual_seed(cfg["seed"])

raw = b"".join(open(os.path.join(cfg["corpus"], f), "rb").read() for f in FILES
               if os.path.exists(os.path.join(cfg["corpus"], f)))
raw = torch.tensor(list(raw), dtype=torch.long)
vocab = torch.unique(raw)
byte_to_token = torch.zeros(256, dtype=torch.long)
byte_to_token[vocab] = torch.arange(len(vocab))
data = byte_to_token[raw]
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]
vocab_size = len(vocab)
block_size, batch_size = cfg["block_size"], cfg["batch_size"]


def get_batch(split):
    d = train_data if split == "train" else val_data
    ix = torch.randint(len(d) - block_size - 1, (batch_size,))
    x = torch.stack([d[i:i + block_size] for i in ix])
    y = torch.stack([d[i + 1:i + 1 + block_size] for i in ix])
    return x, y


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.attn_dropout = nn.Dropout(c["dropout"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        self.register_buffer("bias", torch.tril(torch.ones(c["block_size"], c["block_size"]))
                             .view(1, 1, c["block_size"], c["block_size"]))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, c["n_embd"])
        self.wpe = nn.Embedding(c["block_size"], c["n_embd"])
        self.drop = nn.Dropout(c["dropout"])
        self.h = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"])
        self.lm_head = nn.Linear(c["n_embd"], vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))
            elif name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        T = idx.size(1)
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T)))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


model = GPT(cfg)
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                         {"params": no_decay, "weight_decay": 0.0}], lr=cfg["lr"], betas=(0.9, 0.99))
max_iters, warmup = cfg["max_iters"], cfg["warmup_iters"]


def lr_factor(it):
    if it < warmup:
        return (it + 1) / warmup
    ratio = min(1.0, (it - warmup) / max(1, max_iters - warmup))
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return (cfg["min_lr"] + coeff * (cfg["lr"] - cfg["min_lr"])) / cfg["lr"]


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
amp = bool(cfg["amp"])


def compute_loss(x, y):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        logits = model(x)
        return F.cross_entropy(logits.view(-1, vocab_size), y.view(-1))


@torch.no_grad()
def estimate_loss(split):
    model.eval()
    total = sum(compute_loss(*get_batch(split)).item() for _ in range(cfg["eval_iters"]))
    model.train()
    return total / cfg["eval_iters"]


print("char-gpt (python3-torch): %d parameters, vocabulary %d, %d training and %d validation tokens"
      % (sum(p.numel() for p in model.parameters()), vocab_size, n, len(data) - n))
start = time.time()
first_val = estimate_loss("val")
print("step 0: val loss %.4f" % first_val)
it, tokens, train_time = 0, 0, 0.0
while it < max_iters and not (cfg["max_seconds"] and time.time() - start >= cfg["max_seconds"]):
    t0 = time.time()
    x, y = get_batch("train")
    opt.zero_grad(set_to_none=True)
    loss = compute_loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    opt.step()
    sched.step()
    train_time += time.time() - t0
    it += 1
    tokens += batch_size * block_size
    if it % cfg["eval_interval"] == 0:
        print("step %d: train loss %.4f, val loss %.4f, lr %.2e, %.1f s"
              % (it, loss.item(), estimate_loss("val"), opt.param_groups[0]["lr"], time.time() - start))
val = estimate_loss("val")
print("end at step %d after %.1f s: val loss %.4f, %.0f tokens/s (training steps only)"
      % (it, time.time() - start, val, tokens / max(train_time, 1e-9)))
