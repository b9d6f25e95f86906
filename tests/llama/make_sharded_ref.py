#!/usr/bin/env python3
"""A small sharded checkpoint written by the reference `safetensors` package, as Hugging Face
lays one out (model-0000K-of-0000N.safetensors + model.safetensors.index.json), for
test_llama_weights. Values are i * 0.25 - 1 per tensor (row-major), so the test can recompute
them. Run from the repository root:

    python3 tests/llama/make_sharded_ref.py tests/llama/data/sharded"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file


def values(shape, dtype):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64) * 0.25 - 1).reshape(shape).astype(dtype)


SHARDS = [
    {"model.embed_tokens.weight": ((5, 4), np.float32), "model.norm.weight": ((4,), np.float16)},
    {"lm_head.weight": ((5, 4), np.float32),
     "model.layers.0.mlp.gate_proj.weight": ((3, 4), np.float16)},
]

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
weight_map, total = {}, 0
for k, tensors in enumerate(SHARDS):
    name = f"model-{k + 1:05d}-of-{len(SHARDS):05d}.safetensors"
    arrays = {t: values(shape, dt) for t, (shape, dt) in tensors.items()}
    save_file(arrays, os.path.join(out, name), metadata={"format": "pt"})
    for t, a in arrays.items():
        weight_map[t] = name
        total += a.nbytes
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
              f, indent=2)
    f.write("\n")
