"""(purple text) models against reference transformers in python3-torch (reference_models.py):
random-weight GPT-2 and grouped-query Llama folders (and Qwen2's q/k/v biases, Mistral with linear
rotary scaling) in Hugging Face's layout -- single files and
shards, float32, float16 and bfloat16, tied and untied heads, with and without GPT-2's
"transformer." prefix, and torch.save's pytorch_model.bin -- loaded by load-pretrained; logits compared to 1e-4 (and, loaded as bfloat16, to 5% of their range), greedy continuations
(one prompt, and a left-padded batch) id for id; save-pretrained's folder read back; strict
loading (a missing, an unexpected and a misshapen tensor each named in the error).
Usage: models.py PURPLE"""
import json
import os
import sys

import numpy as np
import torch

from text_common import check, close, finish, load_safetensors, run_purple, save_folder, temp_dir
from reference_models import GPT2, Llama, greedy


def main():
    purple = sys.argv[1]
    torch.manual_seed(0)
    tmp = temp_dir()
    cases = []
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 300, (2, 10), generator=gen)
    prompt = [5, 17, 42]
    batch = [[7, 8, 9, 10, 11], [250, 3], [1, 2, 3, 99]]

    def rounded(model, dtype):
        """MODEL with every weight rounded to DTYPE (what a float16 or bfloat16 file holds)."""
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).float())
        return model

    gpt2 = GPT2(vocab=300, positions=64, d=32, layers=2, heads=4)
    llama = Llama(vocab=300, d=64, layers=2, heads=4, kv_heads=2, hidden=96, theta=10000.0)
    llama_tied = Llama(vocab=300, d=48, layers=2, heads=4, kv_heads=4, hidden=80, theta=500000.0, tied=True)
    gpt2_scaled = GPT2(vocab=300, positions=64, d=32, layers=3, heads=4, scale_by_layer=True)
    qwen2 = Llama(vocab=300, d=64, layers=2, heads=4, kv_heads=2, hidden=96, theta=1000000.0, model_type="qwen2")
    mistral = Llama(vocab=300, d=64, layers=2, heads=8, kv_heads=2, hidden=96, model_type="mistral", rope_factor=2.0)
    gpt2_half = rounded(GPT2(vocab=300, positions=64, d=32, layers=2, heads=4), torch.float16)
    llama_bf16 = rounded(Llama(vocab=300, d=64, layers=3, heads=8, kv_heads=2, hidden=96), torch.bfloat16)

    folders = [
        ("gpt2", gpt2, gpt2.config, gpt2.hf_state_dict(), 1),
        ("gpt2-openai-f16", gpt2_half, gpt2_half.config, dict(gpt2_half.hf_state_dict(prefix="", dtype=torch.float16),
                                                              **{"h.%d.attn.bias" % i: torch.ones(1, 1, 64, 64).tril()
                                                                 for i in range(2)}), 1),
        ("gpt2-scale-by-layer", gpt2_scaled, gpt2_scaled.config, gpt2_scaled.hf_state_dict(), 1),
        ("llama-gqa", llama, llama.config, llama.hf_state_dict(), 1),
        ("qwen2-qkv-bias", qwen2, qwen2.config, qwen2.hf_state_dict(), 1),
        ("mistral-linear-rope", mistral, mistral.config, mistral.hf_state_dict(), 1),
        ("llama-tied-shards", llama_tied, llama_tied.config, llama_tied.hf_state_dict(), 3),
        ("llama-bf16-shards", llama_bf16, llama_bf16.config, llama_bf16.hf_state_dict(dtype=torch.bfloat16), 2),
    ]
    refs = {}
    # torch.save's pytorch_model.bin, as older uploads and llama2.c's export.py --hf have it; the
    # tied head saved as well, sharing the embedding's storage
    tied_sd = dict(llama_tied.hf_state_dict(), **{"lm_head.weight": llama_tied.tok.weight.detach()})
    folders += [("llama-torch-save", llama, llama.config, llama.hf_state_dict(), 1),
                ("llama-tied-torch-save-shards", llama_tied, llama_tied.config, tied_sd, 2)]
    for name, model, config, sd, shards in folders:
        path = os.path.join(tmp, name)
        save_folder(path, config, sd, shards, torch_save="torch-save" in name)
        with torch.no_grad():
            logits = model(ids)
            pad = torch.tensor([[0] * (5 - len(r)) + [1] * len(r) for r in batch])
            padded_ids = torch.tensor([[0] * (5 - len(r)) + r for r in batch])
            padded_logits = model(padded_ids, pad)
        refs[name] = dict(logits=logits, padded=padded_logits, pad=pad,
                          greedy=greedy(model, prompt, 12),
                          batch=[greedy(model, r, 6) for r in batch])
        cases.append(dict(name=name, dir=path, ids=ids.tolist(), prompt=prompt, steps=12,
                          batch=batch, padded_ids=padded_ids.tolist(), pad=pad.tolist(),
                          resave=os.path.join(tmp, name + "-resaved")))

    # Strictness: one tensor missing, one unexpected, one misshapen.
    sd = llama.hf_state_dict()
    broken = {
        "missing": ({k: v for k, v in sd.items() if k != "model.layers.1.mlp.up_proj.weight"}, "model.layers.1.mlp.up_proj.weight"),
        "unexpected": (dict(sd, **{"model.layers.0.self_attn.extra.weight": torch.zeros(3)}), "model.layers.0.self_attn.extra.weight"),
        "misshapen": (dict(sd, **{"model.norm.weight": torch.ones(65)}), "model.norm.weight"),
    }
    errors = []
    for kind, (tensors, key) in broken.items():
        path = os.path.join(tmp, "llama-" + kind)
        save_folder(path, llama.config, tensors)
        errors.append(dict(dir=path, key=key, kind=kind))

    with open(os.path.join(tmp, "cases.json"), "w") as f:
        json.dump(dict(cases=cases, errors=errors), f)
    print(run_purple(purple, "models.purple", tmp))

    for case in cases:
        name = case["name"]
        got = load_safetensors(os.path.join(tmp, name + "-out.safetensors"))
        with open(os.path.join(tmp, name + "-out.json")) as f:
            out = json.load(f)
        ref = refs[name]
        close(name + " logits (B T vocab)", got["logits"], ref["logits"], 1e-4)
        mask = ref["pad"].bool()
        close(name + " left-padded logits (real tokens)", got["padded"][mask], ref["padded"][mask], 1e-4)
        close(name + " resaved folder's logits", got["resaved"], ref["logits"], 1e-4)
        # loaded in bfloat16 (computed in bfloat16, RMSNorm in float32): near, not equal
        close(name + " :dtype bfloat16 logits", got["bf16"], ref["logits"], 0.05 * float(ref["logits"].abs().max()))
        check(out["greedy"] == ref["greedy"], "%s greedy %s, reference %s" % (name, out["greedy"], ref["greedy"]))
        check(out["batch"] == ref["batch"], "%s batched greedy %s, reference %s" % (name, out["batch"], ref["batch"]))
        check(out["nocache"] == ref["greedy"], "%s greedy without the cache %s" % (name, out["nocache"]))
        saved = load_safetensors(os.path.join(case["resave"], "model.safetensors"))
        original = [n for n, m, c, sd, s in folders if n == name][0]
        want = {k for k in [f for f in folders if f[0] == name][0][3] if not k.endswith(".attn.bias")}
        if name.startswith("llama-tied"):
            want.discard("lm_head.weight")   # tied: saved once, as the embedding
        check(set(saved) == want, "%s: save-pretrained's keys differ: %s" % (name, sorted(set(saved) ^ want)[:6]))
        print("%-48s greedy %s, batch %s" % (name, out["greedy"] == ref["greedy"], out["batch"] == ref["batch"]))
    with open(os.path.join(tmp, "errors-out.json")) as f:
        messages = json.load(f)
    for e, msg in zip(errors, messages):
        check(e["key"] in msg and e["kind"] in msg, "the %s-key error does not name %s: %s" % (e["kind"], e["key"], msg))
        print("%-48s %s" % ("error (" + e["kind"] + ")", msg[:110]))
    finish()


if __name__ == "__main__":
    main()
