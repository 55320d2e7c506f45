"""python3-torch's side of the generation benchmark: greedy decoding of N tokens after BOS from
the Hugging Face folder make_weights.py writes, with a key/value cache of our own writing (one
position per new token), in Hugging Face's rotate-half layout, eager PyTorch, no_grad.
Prints the ids and `RESULT torch SECONDS TOKENS`. Usage: generate_torch.py HF_DIR N THREADS"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "text"))
from text_common import load_safetensors  # noqa: E402


def main():
    folder, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    w = load_safetensors(os.path.join(folder, "model.safetensors"))
    dim, heads, layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    hd, eps, seq = dim // heads, c["rms_norm_eps"], c["max_position_embeddings"]
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd))
    ang = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos(), emb.sin()
    keys = torch.zeros(layers, heads, seq, hd)
    values = torch.zeros(layers, heads, seq, hd)
    L = [{k.split(".", 3)[3]: v for k, v in w.items() if k.startswith("model.layers.%d." % i)} for i in range(layers)]

    def norm(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    def rope(x, pos):
        h = hd // 2
        return x * cos[pos] + torch.cat([-x[..., h:], x[..., :h]], -1) * sin[pos]

    def forward(token, pos):
        x = w["model.embed_tokens.weight"][token]
        for i in range(layers):
            l = L[i]
            h = norm(x, l["input_layernorm.weight"])
            q = rope(F.linear(h, l["self_attn.q_proj.weight"]).view(heads, hd), pos)
            keys[i, :, pos] = rope(F.linear(h, l["self_attn.k_proj.weight"]).view(heads, hd), pos)
            values[i, :, pos] = F.linear(h, l["self_attn.v_proj.weight"]).view(heads, hd)
            att = torch.softmax((keys[i, :, : pos + 1] @ q.unsqueeze(-1)).squeeze(-1) / hd ** 0.5, -1)
            y = (att.unsqueeze(1) @ values[i, :, : pos + 1]).reshape(dim)
            x = x + F.linear(y, l["self_attn.o_proj.weight"])
            h = norm(x, l["post_attention_layernorm.weight"])
            x = x + F.linear(F.silu(F.linear(h, l["mlp.gate_proj.weight"])) * F.linear(h, l["mlp.up_proj.weight"]),
                             l["mlp.down_proj.weight"])
        return F.linear(norm(x, w["model.norm.weight"]), w["model.embed_tokens.weight"])

    with torch.no_grad():
        forward(1, 0)                      # warm-up, as the other sides' first step
        start = time.perf_counter()
        token, ids = 1, []
        for pos in range(steps):
            token = int(forward(token, pos).argmax())
            ids.append(token)
        seconds = time.perf_counter() - start
    print("IDS " + " ".join(map(str, ids)))
    print("RESULT torch %.4f %d" % (seconds, steps))


if __name__ == "__main__":
    main()
