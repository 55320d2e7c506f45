"""The generation benchmark's model: a random 15M-parameter Llama shaped as llama2.c's stories15M
(dim 288, 6 layers, 6 heads, hidden 768, vocabulary 32,000, 256 positions, head tied to the
embedding), written twice from the same weights:
  OUT/model.bin      llama2.c's legacy (v0) checkpoint, which run.c reads;
  OUT/tokenizer.bin  run.c's tokenizer file, token i spelled " t<i>" (so run.c's output names ids);
  OUT/hf/            a Hugging Face folder (config.json, model.safetensors), q and k rows permuted
                     to the rotate-half layout as llama2.c's export.py does.
The weights are N(0, 0.1) (norm gains 1 + N(0, 0.1)): large enough that greedy decoding wanders
through the vocabulary instead of repeating one token, so that the three sides' ids are a real
check of each other. Token 1 (BOS, where run.c stops) has a zero embedding, so its logit is 0 and greedy decoding never
picks it among 32,000 random ones. Usage: make_weights.py OUT"""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "text"))
from text_common import save_folder  # noqa: E402

DIM, HIDDEN, LAYERS, HEADS, VOCAB, SEQ = 288, 768, 6, 6, 32000, 256


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(15)
    n = lambda *shape: torch.randn(*shape, generator=g) * 0.1
    emb = n(VOCAB, DIM)
    emb[1] = 0
    layers = [dict(att=1 + n(DIM), wq=n(DIM, DIM), wk=n(DIM, DIM), wv=n(DIM, DIM), wo=n(DIM, DIM), ffn=1 + n(DIM),
                   w1=n(HIDDEN, DIM), w2=n(DIM, HIDDEN), w3=n(HIDDEN, DIM)) for _ in range(LAYERS)]
    final = 1 + n(DIM)
    head = DIM // HEADS

    with open(os.path.join(out, "model.bin"), "wb") as f:
        f.write(struct.pack("7i", DIM, HIDDEN, LAYERS, HEADS, HEADS, VOCAB, SEQ))
        write = lambda t: f.write(t.contiguous().numpy().astype(np.float32).tobytes())
        write(emb)
        for key in ("att", "wq", "wk", "wv", "wo", "ffn", "w1", "w2", "w3"):
            for L in layers:
                write(L[key])
        write(final)
        write(torch.zeros(SEQ, head // 2))   # the unused freq_cis_real and _imag
        write(torch.zeros(SEQ, head // 2))

    with open(os.path.join(out, "tokenizer.bin"), "wb") as f:
        pieces = [(" t%d" % i).encode() for i in range(VOCAB)]
        f.write(struct.pack("i", max(len(p) for p in pieces)))
        for i, p in enumerate(pieces):
            f.write(struct.pack("fi", -float(i), len(p)))
            f.write(p)

    def permute(w):
        return w.view(HEADS, DIM // HEADS // 2, 2, DIM).transpose(1, 2).reshape(DIM, DIM)

    sd = {"model.embed_tokens.weight": emb}
    for i, L in enumerate(layers):
        p = "model.layers.%d." % i
        sd.update({p + "self_attn.q_proj.weight": permute(L["wq"]), p + "self_attn.k_proj.weight": permute(L["wk"]),
                   p + "self_attn.v_proj.weight": L["wv"], p + "self_attn.o_proj.weight": L["wo"],
                   p + "mlp.gate_proj.weight": L["w1"], p + "mlp.down_proj.weight": L["w2"],
                   p + "mlp.up_proj.weight": L["w3"], p + "input_layernorm.weight": L["att"],
                   p + "post_attention_layernorm.weight": L["ffn"]})
    sd["model.norm.weight"] = final
    config = dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=VOCAB, hidden_size=DIM,
                  intermediate_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=HEADS, max_position_embeddings=SEQ, rms_norm_eps=1e-5, rope_theta=10000.0,
                  hidden_act="silu", tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    save_folder(os.path.join(out, "hf"), config, sd)
    print("wrote %s: %.1fM parameters" % (out, (sum(t.numel() for t in sd.values())) / 1e6))


if __name__ == "__main__":
    main()
