#!/usr/bin/env python3
"""Char-level GPT training throughput on a device, python-torch side (same work as
char-gpt.purple). The model, optimizer and schedule are those of examples/char-gpt.purple and
bench/flagship/char-gpt.py (nanoGPT's); what differs from those, for timing on a GPU:
  - the corpus is one text file (--corpus, e.g. from gen-corpus.py), not the fortunes directory;
  - the token data live on --device, and a batch is cut there with one take() of
    (random offsets + arange(block)), the same ops on both sides;
  - tokens/s covers the timed training steps only: --warmup-steps untimed steps first, then steps
    until --max-iters or --max-seconds of training, between two device synchronizations;
    validation losses (--eval-iters batches) are estimated before and after, untimed;
  - --amp 1 is bfloat16 autocast on the device's type; --sdpa 1 computes attention with
    scaled_dot_product_attention(is_causal=True) instead of the masked softmax; no sampling.

usage: char-gpt.py --corpus FILE [--device cuda] [--preset small|gpt10m|tiny] [--key value ...]
Options (defaults from the preset): --n-layer --n-head --n-embd --block-size --batch-size --dropout
--lr --min-lr --warmup-iters --max-iters --max-seconds --warmup-steps --eval-iters --amp --sdpa
--seed --weight-decay --grad-clip --threads --name.
Prints "WORK ...", "LOSS NAME VAL-BEFORE VAL-AFTER LAST-TRAIN-LOSS" and
  RESULT NAME TOKENS-PER-SECOND STEPS
where NAME is chargpt-<preset>[-bf16][-sdpa] unless --name gives it."""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpu_common import clock, device_type, make_sync

PRESETS = {
    "tiny": dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=8, dropout=0.0, lr=3e-3, min_lr=3e-4,
                 warmup_iters=5, max_iters=60, eval_iters=4),
    "small": dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=32, dropout=0.0, lr=2e-3, min_lr=2e-4,
                  warmup_iters=50, max_iters=3000, eval_iters=20),
    "gpt10m": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64, dropout=0.2, lr=1e-3, min_lr=1e-4,
                   warmup_iters=100, max_iters=5000, eval_iters=20),
}
DEFAULTS = dict(device="cuda", corpus=None, max_seconds=None, warmup_steps=5, amp=0, sdpa=0, seed=1337, threads=None,
                weight_decay=0.1, grad_clip=1.0, name=None)


def parse(argv):
    preset, over = "small", {}
    if len(argv) % 2:
        raise SystemExit("char-gpt: expected --key value pairs, got %r" % argv)
    for i in range(0, len(argv), 2):
        key, value = argv[i][2:].replace("-", "_"), argv[i + 1]
        if key == "preset":
            preset = value
            continue
        try:
            over[key] = int(value)
        except ValueError:
            try:
                over[key] = float(value)
            except ValueError:
                over[key] = None if value == "#f" else value
    cfg = dict(DEFAULTS)
    cfg.update(PRESETS[preset])
    cfg.update(over)
    cfg["preset"] = preset
    return cfg


cfg = parse(sys.argv[1:])
if not cfg["corpus"]:
    raise SystemExit("char-gpt: --corpus FILE is required (python3 bench/gpu/gen-corpus.py FILE writes one)")
device = cfg["device"]
kind = device_type(device)
sync = make_sync(device)
if cfg["threads"]:
    torch.set_num_threads(cfg["threads"])
torch.set_flush_denormal(True)
torch.manual_seed(cfg["seed"])
amp = bool(cfg["amp"])
sdpa = bool(cfg["sdpa"])
name = cfg["name"] or "chargpt-" + cfg["preset"] + ("-bf16" if amp else "") + ("-sdpa" if sdpa else "")

with open(cfg["corpus"], "rb") as f:
    raw = torch.tensor(list(f.read()), dtype=torch.long)
vocab = torch.unique(raw)
vocab_size = len(vocab)
byte_to_token = torch.zeros(256, dtype=torch.long)
byte_to_token[vocab] = torch.arange(vocab_size)
data = byte_to_token[raw].to(device)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]
block_size, batch_size = cfg["block_size"], cfg["batch_size"]
offsets = torch.arange(block_size, device=device)


def get_batch(split):
    d = train_data if split == "train" else val_data
    ix = torch.randint(len(d) - block_size - 1, (batch_size,), device=device)
    rows = ix.unsqueeze(1) + offsets
    return d.take(rows), d.take(rows + 1)


def sdpa_reference(q, k, v, dropout_p=0.0, is_causal=True):
    """For torch before 2.0, which has no F.scaled_dot_product_attention (Purple falls back the same
    way on LibTorch before 2.1)."""
    T, S = q.size(-2), k.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    if is_causal:
        att = att.masked_fill(torch.ones(T, S, dtype=torch.bool, device=q.device).tril().logical_not(), float("-inf"))
    att = F.dropout(F.softmax(att, dim=-1), dropout_p)
    return att @ v


sdpa_fn = getattr(F, "scaled_dot_product_attention", sdpa_reference)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.attn_dropout = nn.Dropout(c["dropout"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.n_head, self.n_embd, self.dropout = c["n_head"], c["n_embd"], c["dropout"]
        self.register_buffer("mask", torch.tril(torch.ones(c["block_size"], c["block_size"]))
                             .view(1, 1, c["block_size"], c["block_size"]))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if sdpa:
            y = sdpa_fn(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])
        self.drop = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.drop(self.c_proj(F.gelu(self.c_fc(x))))


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
        for pname, p in self.named_parameters():
            if pname.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))
            elif pname.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif pname.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        T = idx.size(1)
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))
        for b in self.h:
            x = b(x)
        # the output layer is the token embedding, transposed (weight tying)
        return F.linear(self.ln_f(x), self.wte.weight)


model = GPT(cfg).to(device)
n_params = sum(p.numel() for p in model.parameters())
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


def compute_loss(x, y):
    if amp:
        with torch.autocast(kind, dtype=torch.bfloat16):
            logits = model(x)
            return F.cross_entropy(logits.view(-1, vocab_size), y.view(-1))
    logits = model(x)
    return F.cross_entropy(logits.view(-1, vocab_size), y.view(-1))


@torch.no_grad()
def estimate_loss(split):
    model.eval()
    total = sum(compute_loss(*get_batch(split)).item() for _ in range(cfg["eval_iters"]))
    model.train()
    return total / cfg["eval_iters"]


def train_step():
    x, y = get_batch("train")
    opt.zero_grad(set_to_none=True)
    loss = compute_loss(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    opt.step()
    sched.step()
    return loss


print("WORK %s: %d parameters (%d layers, %d heads, %d wide, context %d, batch %d), vocabulary %d, "
      "%d training tokens, on %s, autocast %s, attention %s (python-torch %s)"
      % (name, n_params, cfg["n_layer"], cfg["n_head"], cfg["n_embd"], block_size, batch_size, vocab_size, n, device,
         "bfloat16" if amp else "off", "sdpa" if sdpa else "masked softmax", torch.__version__), flush=True)
val_before = estimate_loss("val")
it = 0
loss = None
while it < min(cfg["warmup_steps"], max_iters):
    loss = train_step()
    it += 1
t0 = clock(sync)
steps = 0
while it < max_iters:
    loss = train_step()
    it += 1
    steps += 1
    if cfg["max_seconds"] is not None and time.perf_counter() - t0 >= cfg["max_seconds"]:
        break
t1 = clock(sync)
last = loss.item() if loss is not None else float("nan")
val_after = estimate_loss("val")
print("LOSS %s %.4f %.4f %.4f" % (name, val_before, val_after, last), flush=True)
print("RESULT %s %.1f %d" % (name, steps * batch_size * block_size / max(t1 - t0, 1e-9), steps), flush=True)
if kind == "cuda":
    print("INFO %s max-allocated %d" % (name, torch.cuda.max_memory_allocated()), flush=True)
