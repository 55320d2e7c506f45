;;; (purple text): pretrained transformers for Purple -- load Hugging Face model folders (GPT-2,
;;; Llama and its kin), tokenize text as their tokenizers do, generate with a key/value cache, and
;;; fine-tune with LoRA in PEFT's layout. docs/text.md describes it. The bodies are in text/, one
;;; idea per file; the SentencePiece binding (builtins/text/) and the JSON reader
;;; (builtins/formats/json.cpp) are builtins. Names starting with text-- are internal.
(define-library (purple text)
  (export
   ;; models (text/model, gpt2, llama)
   load-pretrained model-from-config model-config save-pretrained gradient-checkpointing!
   ;; the key/value cache (text/attention)
   make-kv-cache kv-cache? kv-cache-length kv-cache-capacity
   ;; generation (text/generate)
   generate
   ;; tokenizers (text/tokenizer, tokenizer-json, bpe)
   load-tokenizer tokenizer? tokenizer-kind tokenizer-encode tokenizer-decode tokenizer-bos tokenizer-eos
   tokenizer-pad tokenizer-vocab-size tokenizer-id->token tokenizer-token->id tokenizer-streamer
   ;; LoRA (text/lora)
   lora! lora-merge! lora-parameters save-lora load-lora!)
  ;; The builtins (tensors, nn, read-json-file, sentencepiece-*) and the prelude (checkpoint,
  ;; no-grad ...) come from the default environment.
  (import (scheme base))
  (include "text/config.purple" "text/weights.purple" "text/layers.purple" "text/attention.purple"
           "text/llama.purple" "text/gpt2.purple" "text/model.purple" "text/generate.purple"
           "text/lora.purple" "text/bpe.purple" "text/tokenizer.purple" "text/tokenizer-json.purple"))
