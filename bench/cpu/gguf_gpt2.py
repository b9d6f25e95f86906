#!/usr/bin/env python3
"""A random-init GPT-2 124M as GGUF, for timing llama.cpp against tern on the same model shape.

Weights N(0, 0.02) (layer norms 1 and 0, biases 0) like tern's `--init gpt2`; the vocabulary
and merges are GPT-2's own (llama.cpp needs a tokenizer to load a model). The tied embedding
serves as the lm head, as in GPT-2 and in tern. Matrices are stored in the requested type
(f32, f16, bf16, q8_0); 1-D tensors stay f32, as llama.cpp's converter does.

usage: gguf_gpt2.py TOKENIZER_DIR OUT.gguf f32|f16|bf16|q8_0   (needs numpy and gguf-py)
"""
import json
import sys

import numpy as np
import gguf

N_LAYER, N_EMBD, N_HEAD, N_CTX, N_VOCAB = 12, 768, 12, 1024, 50257
TYPES = {"f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
         "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
         "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
         "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0)}


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[3] not in TYPES:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    tok_dir, out, kind = sys.argv[1:]
    qtype, ftype = TYPES[kind]
    rng = np.random.default_rng(1234)

    w = gguf.GGUFWriter(out, "gpt2")
    w.add_block_count(N_LAYER)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(4 * N_EMBD)
    w.add_head_count(N_HEAD)
    w.add_layer_norm_eps(1e-5)
    w.add_file_type(ftype)

    with open(f"{tok_dir}/vocab.json", encoding="utf-8") as f:
        vocab = json.load(f)
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    if len(tokens) != N_VOCAB or any(t is None for t in tokens):
        print(f"gguf_gpt2: {tok_dir}/vocab.json is not GPT-2's 50257 tokens", file=sys.stderr)
        return 1
    with open(f"{tok_dir}/merges.txt", encoding="utf-8") as f:
        merges = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t == "<|endoftext|>" else gguf.TokenType.NORMAL
                       for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(N_VOCAB - 1)
    w.add_eos_token_id(N_VOCAB - 1)

    def matrix(name: str, rows: int, cols: int) -> None:
        """A weight [rows, cols] (ggml's {cols, rows}: rows outputs of cols inputs)."""
        x = rng.normal(0.0, 0.02, size=(rows, cols)).astype(np.float32)
        data = gguf.quants.quantize(x, qtype)
        w.add_tensor(name, data, raw_dtype=qtype)

    def vector(name: str, n: int, value: float) -> None:
        w.add_tensor(name, np.full((n,), value, dtype=np.float32))

    matrix("token_embd.weight", N_VOCAB, N_EMBD)
    matrix("position_embd.weight", N_CTX, N_EMBD)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", N_EMBD, 1.0)
        vector(p + "attn_norm.bias", N_EMBD, 0.0)
        matrix(p + "attn_qkv.weight", 3 * N_EMBD, N_EMBD)
        vector(p + "attn_qkv.bias", 3 * N_EMBD, 0.0)
        matrix(p + "attn_output.weight", N_EMBD, N_EMBD)
        vector(p + "attn_output.bias", N_EMBD, 0.0)
        vector(p + "ffn_norm.weight", N_EMBD, 1.0)
        vector(p + "ffn_norm.bias", N_EMBD, 0.0)
        matrix(p + "ffn_up.weight", 4 * N_EMBD, N_EMBD)
        vector(p + "ffn_up.bias", 4 * N_EMBD, 0.0)
        matrix(p + "ffn_down.weight", N_EMBD, 4 * N_EMBD)
        vector(p + "ffn_down.bias", N_EMBD, 0.0)
    vector("output_norm.weight", N_EMBD, 1.0)
    vector("output_norm.bias", N_EMBD, 0.0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
