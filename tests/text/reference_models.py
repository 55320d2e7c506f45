"""Reference transformers in python3-torch, written for these tests from the public model
definitions: a GPT-2 as nanoGPT defines it (nn.Linear weights, exported to Hugging Face's
transposed Conv1D layout) and a Llama as llama2.c's model.py defines it (rotary embeddings on
interleaved pairs, exported to Hugging Face's rotate-half layout with export.py's permutation of
the q and k rows). The models compute from their own layouts, so a loader that gets the Hugging
Face layout wrong (an untransposed Conv1D, unpermuted heads, the wrong rotary halves) cannot
agree with them. Random weights, no cache: each forward sees the whole sequence."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def positions_and_mask(ids, padding):
    """Each row's positions counted from its first real token, and the (B 1 T T) attention mask:
    causal, never to padding (a padding query sees itself, so no softmax row is empty)."""
    B, T = ids.shape
    if padding is None:
        padding = torch.ones(B, T, dtype=torch.long)
    pos = (padding.cumsum(1) - 1).clamp(min=0)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return pos, causal[None, None] & (padding.bool()[:, None, None, :] | torch.eye(T, dtype=torch.bool)[None, None])


# ---- GPT-2 ---------------------------------------------------------------------------------------

class GPT2Block(nn.Module):
    def __init__(self, d, heads, scale=1.0):
        super().__init__()
        self.heads, self.scale = heads, scale
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads) * self.scale
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab, positions, d, layers, heads, scale_by_layer=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.h = nn.ModuleList([GPT2Block(d, heads, 1.0 / (i + 1) if scale_by_layer else 1.0) for i in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.config = dict(model_type="gpt2", vocab_size=vocab, n_positions=positions, n_embd=d, n_layer=layers,
                           n_head=heads, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                           tie_word_embeddings=True, bos_token_id=vocab - 1, eos_token_id=vocab - 1,
                           scale_attn_by_inverse_layer_idx=scale_by_layer)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.2)
            else:
                nn.init.normal_(p, 0.0, 0.1)   # biases and norms random too: every tensor must land
        with torch.no_grad():
            for b in self.h:
                b.ln_1.weight.add_(1.0)
                b.ln_2.weight.add_(1.0)
            self.ln_f.weight.add_(1.0)

    def forward(self, ids, padding=None):
        B, T = ids.shape
        pos, mask = positions_and_mask(ids, padding)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.h:
            x = b(x, mask)
        return self.ln_f(x) @ self.wte.weight.T

    def hf_state_dict(self, prefix="transformer.", dtype=torch.float32):
        """Hugging Face's GPT2LMHeadModel names; Conv1D weights are (in, out)."""
        sd = {prefix + "wte.weight": self.wte.weight, prefix + "wpe.weight": self.wpe.weight}
        for i, b in enumerate(self.h):
            p = "%sh.%d." % (prefix, i)
            sd.update({p + "ln_1.weight": b.ln_1.weight, p + "ln_1.bias": b.ln_1.bias,
                       p + "attn.c_attn.weight": b.c_attn.weight.T, p + "attn.c_attn.bias": b.c_attn.bias,
                       p + "attn.c_proj.weight": b.c_proj.weight.T, p + "attn.c_proj.bias": b.c_proj.bias,
                       p + "ln_2.weight": b.ln_2.weight, p + "ln_2.bias": b.ln_2.bias,
                       p + "mlp.c_fc.weight": b.c_fc.weight.T, p + "mlp.c_fc.bias": b.c_fc.bias,
                       p + "mlp.c_proj.weight": b.mlp_proj.weight.T, p + "mlp.c_proj.bias": b.mlp_proj.bias})
        sd.update({prefix + "ln_f.weight": self.ln_f.weight, prefix + "ln_f.bias": self.ln_f.bias})
        return {k: v.detach().to(dtype).contiguous() for k, v in sd.items()}


# ---- Llama ---------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w


def rotary_interleaved(x, pos, theta):
    """llama2.c's apply_rotary_emb: pairs (x[2i], x[2i+1]) rotated as complex numbers."""
    d = x.shape[-1]
    freqs = 1.0 / (theta ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    ang = pos.float()[..., None] * freqs                       # (B, T, d/2)
    cos, sin = ang.cos()[:, :, None, :], ang.sin()[:, :, None, :]
    xr, xi = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
    return torch.stack([xr * cos - xi * sin, xr * sin + xi * cos], dim=-1).flatten(3).type_as(x)


class Llama(nn.Module):
    """MODEL_TYPE "qwen2" gives q, k and v biases (Qwen2's one difference); ROPE_FACTOR > 1 divides
    the positions' angles as rope_scaling {"type": "linear"} does."""

    def __init__(self, vocab, d, layers, heads, kv_heads, hidden, theta=10000.0, eps=1e-5, tied=False,
                 model_type="llama", rope_factor=1.0):
        super().__init__()
        self.rope_factor = rope_factor
        qkv_bias = model_type == "qwen2"
        self.vocab, self.d, self.heads, self.kv_heads, self.theta, self.eps = vocab, d, heads, kv_heads, theta, eps
        self.hd = d // heads
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            L = nn.Module()
            L.wq, L.wk = nn.Linear(d, heads * self.hd, bias=qkv_bias), nn.Linear(d, kv_heads * self.hd, bias=qkv_bias)
            L.wv, L.wo = nn.Linear(d, kv_heads * self.hd, bias=qkv_bias), nn.Linear(heads * self.hd, d, bias=False)
            L.w1, L.w2, L.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(hidden, d, bias=False), nn.Linear(d, hidden, bias=False)
            L.attention_norm, L.ffn_norm = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
            self.layers.append(L)
        self.norm = nn.Parameter(torch.ones(d))
        self.output = nn.Linear(d, vocab, bias=False)
        for p in self.parameters():
            nn.init.normal_(p, 0.0, 0.1)
        with torch.no_grad():
            for L in self.layers:
                L.attention_norm.add_(1.0)
                L.ffn_norm.add_(1.0)
            self.norm.add_(1.0)
        self.tied = tied
        if tied:
            self.output.weight = self.tok.weight
        self.config = dict(model_type=model_type, vocab_size=vocab, hidden_size=d, intermediate_size=hidden,
                           num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                           rms_norm_eps=eps, rope_theta=theta, max_position_embeddings=256, hidden_act="silu",
                           tie_word_embeddings=tied, bos_token_id=1, eos_token_id=2)
        if rope_factor != 1.0:
            self.config["rope_scaling"] = {"type": "linear", "factor": rope_factor}

    def forward(self, ids, padding=None):
        B, T = ids.shape
        pos, mask = positions_and_mask(ids, padding)
        pos = pos.float() / self.rope_factor
        rep = self.heads // self.kv_heads
        x = self.tok(ids)
        for L in self.layers:
            h = rms_norm(x, L.attention_norm, self.eps)
            q = rotary_interleaved(L.wq(h).view(B, T, self.heads, self.hd), pos, self.theta)
            k = rotary_interleaved(L.wk(h).view(B, T, self.kv_heads, self.hd), pos, self.theta)
            v = L.wv(h).view(B, T, self.kv_heads, self.hd)
            k = k.repeat_interleave(rep, dim=2)
            v = v.repeat_interleave(rep, dim=2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            att = ((q @ k.transpose(-2, -1)) / math.sqrt(self.hd)).masked_fill(~mask, float("-inf")).softmax(-1)
            x = x + L.wo((att @ v).transpose(1, 2).reshape(B, T, -1))
            h = rms_norm(x, L.ffn_norm, self.eps)
            x = x + L.w2(F.silu(L.w1(h)) * L.w3(h))
        return self.output(rms_norm(x, self.norm, self.eps))

    def hf_state_dict(self, dtype=torch.float32):
        """Hugging Face's LlamaForCausalLM names, q and k rows permuted to the rotate-half layout
        (llama2.c export.py's permute_original)."""
        def permute(w, heads):
            rows = w.shape[0]
            return w.view(heads, rows // heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)
        sd = {"model.embed_tokens.weight": self.tok.weight}
        for i, L in enumerate(self.layers):
            p = "model.layers.%d." % i
            sd.update({p + "self_attn.q_proj.weight": permute(L.wq.weight, self.heads),
                       p + "self_attn.k_proj.weight": permute(L.wk.weight, self.kv_heads),
                       p + "self_attn.v_proj.weight": L.wv.weight, p + "self_attn.o_proj.weight": L.wo.weight,
                       p + "mlp.gate_proj.weight": L.w1.weight, p + "mlp.down_proj.weight": L.w2.weight,
                       p + "mlp.up_proj.weight": L.w3.weight,
                       p + "input_layernorm.weight": L.attention_norm, p + "post_attention_layernorm.weight": L.ffn_norm})
            if L.wq.bias is not None:   # the biases' rows permuted as the weights' are
                sd.update({p + "self_attn.q_proj.bias": permute(L.wq.bias, self.heads),
                           p + "self_attn.k_proj.bias": permute(L.wk.bias, self.kv_heads),
                           p + "self_attn.v_proj.bias": L.wv.bias})
        sd["model.norm.weight"] = self.norm
        if not self.tied:
            sd["lm_head.weight"] = self.output.weight
        return {k: v.detach().to(dtype).contiguous() for k, v in sd.items()}


def greedy(model, ids, n, stop=()):
    """N greedy ids after IDS (a list), recomputing the whole sequence each step."""
    seq, out = list(ids), []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([seq]))[0, -1].argmax())
            out.append(nxt)
            seq.append(nxt)
            if nxt in stop:
                break
    return out
