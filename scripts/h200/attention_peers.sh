#!/usr/bin/env bash
# A training step's kernels against their peers, at GPT-2's training sizes (B=16, T=1024,
# bf16), alternated ATT_ROUNDS times (default 2) in one call:
# - tern's flash attention (`bench_ops cuda "B16 T1024"`; 12 and 25 heads, hs 64, causal,
#   forward and backward) against PyTorch's kernels (cuDNN, FlashAttention-2, memory-efficient:
#   bench/h200/attention_peers.py);
# - the fc product [16384, 768] @ [768, 3072], plain and with its GELU epilogue, by cuBLASLt
#   (the same bench_ops run).
#   OUT=$OUT bash scripts/h200/attention_peers.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 300
build_targets bench_ops
for r in $(seq 1 "${ATT_ROUNDS:-2}"); do
    step "tern, round $r" 120 tern-$r.log $b/bench/ops/bench_ops cuda "B16 T1024"
    grep -E '^(attention|matmul)' "$logs/tern-$r.log" >> "$summary"
    step "peers, round $r" 180 peers-$r.log python3 bench/h200/attention_peers.py
    grep -E '^(gpu|NH)' "$logs/peers-$r.log" >> "$summary"
done
