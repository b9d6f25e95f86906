#!/usr/bin/env python3
"""A tern Llama checkpoint (config.json + model.safetensors, Hugging Face's layout) as GGUF, so
llama.cpp times the very weights tern times (bench/cpu/llama_bench.sh).

llama.cpp's own convert_hf_to_gguf.py needs torch and a tokenizer it recognises (SmolLM2's is
not here); this needs numpy and gguf-py only. The GGUF carries no vocabulary (tokenizer model
"none" with llama.vocab_size: llama.cpp makes dummy tokens, and llama-bench feeds random ids).
q_proj and k_proj rows are reordered from HF's rotate-half rotary layout to the interleaved
pairs llama.cpp's "llama" architecture rotates, as llama.cpp's converter does, so both
programs compute the same function. Matrices are stored in the requested type; 1-D tensors
stay f32. Only model_type llama without rope_scaling or biases (SmolLM2's shape) is handled;
anything else is refused.

usage: gguf_llama.py MODEL_DIR OUT.gguf f32|f16|bf16   (needs numpy and gguf-py)
"""
import json
import os
import struct
import sys

import numpy as np
import gguf

TYPES = {"f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
         "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
         "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16)}


def fail(msg: str) -> int:
    print(f"gguf_llama: {msg}", file=sys.stderr)
    return 1


def read_safetensors(path: str) -> dict:
    """name -> float32 array, from a single safetensors file (F32, F16 or BF16)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for safetensors")
    n = struct.unpack("<Q", data[:8])[0]
    if n > len(data) - 8:
        raise ValueError(f"{path}: header of {n} bytes past the end")
    header = json.loads(data[8:8 + n])
    base, out = 8 + n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        raw = data[base + lo:base + hi]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name} is {t['dtype']} (F32, F16 or BF16 expected)")
        if a.size != int(np.prod(t["shape"])):
            raise ValueError(f"{path}: {name} holds {a.size} values for shape {t['shape']}")
        out[name] = a.reshape(t["shape"])
    return out


def interleave_rotary(w: np.ndarray, heads: int) -> np.ndarray:
    """w [heads * D, C] with each head's rows (0..D/2-1 | D/2..D-1) in rotate-half order ->
    rows (0, D/2, 1, D/2+1, ...): the pairs llama.cpp rotates are adjacent rows."""
    rows, cols = w.shape
    d = rows // heads
    return w.reshape(heads, 2, d // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[3] not in TYPES:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    model_dir, out, kind = sys.argv[1:]
    qtype, ftype = TYPES[kind]
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llama":
        return fail(f"model_type {cfg.get('model_type')!r}: only llama is handled")
    if cfg.get("rope_scaling") or cfg.get("attention_bias") or cfg.get("mlp_bias"):
        return fail("rope_scaling and biases are not handled")
    L, C, I = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or C // H
    V = cfg["vocab_size"]
    try:
        t = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    except (OSError, ValueError, KeyError) as e:
        return fail(str(e))

    w = gguf.GGUFWriter(out, "llama")
    w.add_block_count(L)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(C)
    w.add_feed_forward_length(I)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_dimension_count(D)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(V)
    w.add_file_type(ftype)
    w.add_tokenizer_model("none")

    def take(name: str, shape: tuple) -> np.ndarray:
        if name not in t:
            raise KeyError(f"{model_dir}: no tensor {name}")
        a = t.pop(name)
        if tuple(a.shape) != shape:
            raise KeyError(f"{model_dir}: {name} is {list(a.shape)}, expected {list(shape)}")
        return np.ascontiguousarray(a, dtype=np.float32)

    def matrix(gname: str, a: np.ndarray) -> None:
        w.add_tensor(gname, gguf.quants.quantize(a, qtype), raw_dtype=qtype)

    def vector(gname: str, a: np.ndarray) -> None:
        w.add_tensor(gname, a)

    try:
        matrix("token_embd.weight", take("model.embed_tokens.weight", (V, C)))
        for i in range(L):
            p, g = f"model.layers.{i}.", f"blk.{i}."
            vector(g + "attn_norm.weight", take(p + "input_layernorm.weight", (C,)))
            matrix(g + "attn_q.weight", interleave_rotary(take(p + "self_attn.q_proj.weight", (H * D, C)), H))
            matrix(g + "attn_k.weight", interleave_rotary(take(p + "self_attn.k_proj.weight", (KV * D, C)), KV))
            matrix(g + "attn_v.weight", take(p + "self_attn.v_proj.weight", (KV * D, C)))
            matrix(g + "attn_output.weight", take(p + "self_attn.o_proj.weight", (C, H * D)))
            vector(g + "ffn_norm.weight", take(p + "post_attention_layernorm.weight", (C,)))
            matrix(g + "ffn_gate.weight", take(p + "mlp.gate_proj.weight", (I, C)))
            matrix(g + "ffn_up.weight", take(p + "mlp.up_proj.weight", (I, C)))
            matrix(g + "ffn_down.weight", take(p + "mlp.down_proj.weight", (C, I)))
        vector("output_norm.weight", take("model.norm.weight", (C,)))
        if not cfg.get("tie_word_embeddings", False):   # tied: llama.cpp reads token_embd as the head
            matrix("output.weight", take("lm_head.weight", (V, C)))
    except KeyError as e:
        return fail(str(e.args[0]))
    left = [n for n in t if not n.endswith("rotary_emb.inv_freq")]
    if left:
        return fail(f"{model_dir}: tensors the config does not imply: {', '.join(left[:3])}")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
