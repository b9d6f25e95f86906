#!/usr/bin/env bash
# cuBLASLt's candidates at GPT-2 1.5B: run 43 found 8, 32 and 64 candidates level at 124M
# (the timing already picks the best the heuristic offers); 1.5B's products are other shapes.
# Each count of GEMM_COUNTS ("8 32" by default) tunes its own fresh cache (the disk cache's
# key does not hold the count), then the 1.5B and 124M steps alternate, GEMM_ROUNDS rounds.
#   OUT=$OUT bash scripts/h200/gemm_candidates.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 540
build_tern
counts=${GEMM_COUNTS:-"8 32"}
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
for c in $counts; do
    step "tune 1.5B, $c candidates" 150 "tune-$c.log" env TERN_CACHE_DIR=/tmp/kc-$c TERN_CUDA_TUNE=gemm_candidates=$c \
        "${train[@]}" --init gpt2-xl --steps 1 --warmup 1
    step "tune 124M, $c candidates" 60 "tune-s-$c.log" env TERN_CACHE_DIR=/tmp/kc-$c TERN_CUDA_TUNE=gemm_candidates=$c \
        "${train[@]}" --steps 1 --warmup 1
done
for r in $(seq 1 "${GEMM_ROUNDS:-2}"); do
    for c in $counts; do
        step "1.5B, $c candidates, round $r" 60 "xl-$c-$r.log" env TERN_CACHE_DIR=/tmp/kc-$c \
            TERN_CUDA_TUNE=gemm_candidates=$c "${train[@]}" --init gpt2-xl --steps 8 --warmup 3
        note "  $(grep '^bench:' "$logs/xl-$c-$r.log" | tail -1)"
        step "124M, $c candidates, round $r" 60 "s-$c-$r.log" env TERN_CACHE_DIR=/tmp/kc-$c \
            TERN_CUDA_TUNE=gemm_candidates=$c "${train[@]}" --steps 20 --warmup 5
        note "  $(grep '^bench:' "$logs/s-$c-$r.log" | tail -1)"
    done
done
