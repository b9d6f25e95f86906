#!/usr/bin/env python3
"""Rotary inverse frequencies in float64 with numpy, from transformers' published formulas
(modeling_rope_utils: _compute_default_rope_parameters and _compute_llama3_parameters), written
out as tests/llama/data/rope_inv_freq.json for test_llama_config. Run:

    python3 tests/llama/rope_inv_freq_ref.py > tests/llama/data/rope_inv_freq.json

default:  inv_freq[i] = 1 / theta ** (2 i / head_dim), i < head_dim / 2
llama3:   wavelen = 2 pi / inv_freq;  low_wl = L / low_freq_factor;  high_wl = L / high_freq_factor
          wavelen > low_wl:            inv_freq / factor
          high_wl <= wavelen <= low_wl: (1 - s) inv_freq / factor + s inv_freq,
                                        s = (L / wavelen - low_freq_factor) / (high - low)
          wavelen < high_wl:           inv_freq
(transformers evaluates these in float32; here they are float64, as tern computes them.)"""
import json
import math

import numpy as np


def inv_freq(theta, head_dim, scaling):
    f = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    if scaling is None:
        return f
    factor, low, high, L = scaling
    wavelen = 2 * math.pi / f
    low_wl, high_wl = L / low, L / high
    scaled = np.where(wavelen > low_wl, f / factor, f)
    s = (L / wavelen - low) / (high - low)
    smoothed = (1 - s) * scaled / factor + s * scaled
    medium = (wavelen >= high_wl) & (wavelen <= low_wl)
    return np.where(medium, smoothed, scaled)


CASES = [
    # name, rope_theta, head_dim, llama3 (factor, low, high, original_max_position) or None
    ("llama-tiny-a", 10000.0, 16, None),
    ("smollm2-135m", 100000.0, 64, None),
    ("qwen2.5-0.5b", 1000000.0, 64, None),
    ("llama-3.2-1b", 500000.0, 64, (32.0, 1.0, 4.0, 8192)),
    ("llama-3.1-8b", 500000.0, 128, (8.0, 1.0, 4.0, 8192)),
    # every band in 8 pairs: i = 0 high, 1-2 medium, 3-7 low
    ("three-bands", 10000.0, 16, (4.0, 1.0, 4.0, 64)),
]

out = []
for name, theta, hd, scaling in CASES:
    case = {"name": name, "rope_theta": theta, "head_dim": hd,
            "inv_freq": [float(v) for v in inv_freq(theta, hd, scaling)]}
    if scaling:
        case["rope_scaling"] = {"rope_type": "llama3", "factor": scaling[0],
                                "low_freq_factor": scaling[1], "high_freq_factor": scaling[2],
                                "original_max_position_embeddings": scaling[3]}
    out.append(case)
print(json.dumps({"numpy": np.__version__, "cases": out}, indent=1))
