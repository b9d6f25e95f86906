#!/usr/bin/env bash
# tern's flash attention against PyTorch's kernels (cuDNN, FlashAttention-2, memory-efficient)
# at GPT-2's training sizes (B=16, T=1024, hs=64, causal, bf16; 12 and 25 heads), forward and
# backward, alternated ATT_ROUNDS times (default 2) in one call:
# `bench_ops cuda "B16 T1024"` and bench/h200/attention_peers.py.
#   OUT=$OUT bash scripts/h200/attention_peers.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 300
build_targets bench_ops
for r in $(seq 1 "${ATT_ROUNDS:-2}"); do
    step "tern, round $r" 120 tern-$r.log $b/bench/ops/bench_ops cuda "B16 T1024"
    grep '^attention' "$logs/tern-$r.log" >> "$summary"
    step "peers, round $r" 180 peers-$r.log python3 bench/h200/attention_peers.py
    grep -E '^(gpu|NH)' "$logs/peers-$r.log" >> "$summary"
done
