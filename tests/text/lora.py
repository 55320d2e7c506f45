"""LoRA in (purple text) against PEFT's layout and arithmetic: lora.purple adapts a grouped-query
Llama (q_proj, v_proj, o_proj; trained with fit under bfloat16 autocast and gradient
checkpointing) and a GPT-2 (its Conv1D c_attn), trains the adapters with the base frozen, saves
them with save-lora, merges them, and loads them again. Here the saved files are read as PEFT
would read them (adapter_config.json's fields, adapter_model.safetensors's key names), the
adapters are merged in python3-torch (W + alpha/r B A) into the base weights, and the reference
model's logits are compared with Purple's adapted, merged and reloaded models' (1e-4).
Usage: lora.py PURPLE"""
import json
import os
import sys

import torch

from text_common import check, close, finish, load_safetensors, run_purple, save_folder, temp_dir
from reference_models import GPT2, Llama


def unpermute(w, heads):
    """The inverse of export.py's permutation: Hugging Face's rotate-half rows back to llama2.c's."""
    rows, cols = w.shape
    return w.view(heads, 2, rows // heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def main():
    purple = sys.argv[1]
    torch.manual_seed(0)
    tmp = temp_dir()
    ids = torch.randint(0, 200, (2, 7), generator=torch.Generator().manual_seed(3))
    llama = Llama(vocab=200, d=32, layers=2, heads=4, kv_heads=2, hidden=48)
    gpt2 = GPT2(vocab=200, positions=32, d=32, layers=2, heads=4)
    cases = [dict(name="llama", model=llama, sd=llama.hf_state_dict(), targets=["q_proj", "v_proj", "o_proj"],
                  rank=4, alpha=8, amp=True, checkpointing=True),
             dict(name="gpt2", model=gpt2, sd=gpt2.hf_state_dict(), targets=["c_attn"], rank=2, alpha=4, amp=False,
                  checkpointing=False)]
    for c in cases:
        c["dir"] = os.path.join(tmp, c["name"])
        save_folder(c["dir"], c["model"].config, c["sd"])
    with open(os.path.join(tmp, "cases.json"), "w") as f:
        json.dump({"cases": [dict(name=c["name"], dir=c["dir"], targets=c["targets"], rank=c["rank"], alpha=c["alpha"],
                                  amp=c["amp"], checkpointing=c["checkpointing"], ids=ids.tolist()) for c in cases]}, f)
    run_purple(purple, "lora.purple", tmp)

    for c in cases:
        name = c["name"]
        with open(os.path.join(tmp, name + "-out.json")) as f:
            out = json.load(f)
        adapter = os.path.join(tmp, name + "-adapter")
        with open(os.path.join(adapter, "adapter_config.json")) as f:
            config = json.load(f)
        tensors = load_safetensors(os.path.join(adapter, "adapter_model.safetensors"))
        check(config.get("peft_type") == "LORA" and config.get("r") == c["rank"] and config.get("lora_alpha") == c["alpha"]
              and sorted(config.get("target_modules", [])) == sorted(c["targets"]),
              "%s: adapter_config.json %s" % (name, config))
        adapted = sorted({k[len("base_model.model."):-len(".lora_A.weight")] for k in tensors if k.endswith(".lora_A.weight")})
        want = sorted(k[:-len(".weight")] for k in c["sd"] if k.endswith(".weight") and k.rsplit(".", 2)[-2] in c["targets"])
        check(adapted == want, "%s: adapted layers %s, expected %s" % (name, adapted, want))
        check(all(k.startswith("base_model.model.") and (k.endswith(".lora_A.weight") or k.endswith(".lora_B.weight"))
                  for k in tensors), "%s: key names not PEFT's: %s" % (name, list(tensors)[:4]))
        trainable = sorted(out["trainable"])
        check(trainable == sorted(k.replace("base_model.model.", "") for k in tensors),
              "%s: trainable parameters %s" % (name, trainable[:4]))
        check(out["base_same"], "%s: training changed the frozen base" % name)
        check(out["merged_plain"], "%s: lora-merge! left adapters behind" % name)
        check(out["losses"][-1] < out["losses"][0], "%s: the loss did not fall: %s" % (name, out["losses"]))
        check(any(float(t.abs().max()) > 0 for k, t in tensors.items() if "lora_B" in k), "%s: lora_B stayed zero" % name)
        print("%-10s losses %s" % (name, ["%.3f" % l for l in out["losses"]]))

        # Merge as PEFT does, W += alpha/r * B A (transposed for GPT-2's Conv1D), into the reference.
        scale = c["alpha"] / c["rank"]
        merged = dict(c["sd"])
        for layer in adapted:
            delta = scale * (tensors["base_model.model." + layer + ".lora_B.weight"].float()
                             @ tensors["base_model.model." + layer + ".lora_A.weight"].float())
            merged[layer + ".weight"] = merged[layer + ".weight"] + (delta.T if name == "gpt2" else delta)
        model = c["model"]
        with torch.no_grad():
            if name == "llama":
                for i, L in enumerate(model.layers):
                    p = "model.layers.%d.self_attn." % i
                    L.wq.weight.copy_(unpermute(merged[p + "q_proj.weight"], model.heads))
                    L.wv.weight.copy_(merged[p + "v_proj.weight"])
                    L.wo.weight.copy_(merged[p + "o_proj.weight"])
            else:
                for i, b in enumerate(model.h):
                    b.c_attn.weight.copy_(merged["transformer.h.%d.attn.c_attn.weight" % i].T)
            want_logits = model(ids)
        got = load_safetensors(os.path.join(tmp, name + "-out.safetensors"))
        close(name + ": adapted model vs merged reference", got["adapted"], want_logits, 1e-4)
        close(name + ": lora-merge! vs merged reference", got["merged"], want_logits, 1e-4)
        close(name + ": load-lora! vs merged reference", got["reloaded"], want_logits, 1e-4)
    finish()


if __name__ == "__main__":
    main()
