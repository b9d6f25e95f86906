#!/usr/bin/env bash
# The warpgroup GEMM of our own (src/kernels/gemm_wg.c, the cuda handler's gemm_wg key) in
# one call, carrying .deb:
#   1. its kernels on cuda (test_gemm_wg_kernels: the host cases and 124M's shapes);
#   2. bench_gemm_wg against cuBLASLt (bench_ops) on the fc products (GEMM_WG_BENCH: the
#      variants' filter, default "_ho"; "none" skips it);
#   3. cuda against cpu, GPT-2 124M, 2 x 512, with gemm_wg=2 (GEMM_WG_CROSS=1);
#   4. the training step under default, gemm_wg=1 and gemm_wg=2, alternated GEMM_WG_ROUNDS
#      times (default 2), each variant's last loss printed beside its time (the same
#      initialisation and tokens: the losses agree to bf16 rounding or a product is wrong).
#   5. test_ops_matmul on cuda with gemm_wg=2 (its col_sums cases have the GEMM's shapes).
# GEMM_WG_XL=1: 1.5B's products and step (gpt2-xl, 8 steps after 3) instead of 124M's.
#   OUT=$OUT bash scripts/h200/gemm_wg.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start "${CALL_SECONDS:-560}"
xl=${GEMM_WG_XL:-}
build_targets tern_cli test_gemm_wg_kernels test_ops_matmul bench_gemm_wg bench_ops ${GEMM_WG_CROSS:+test_cross_handler}
TERN_GPU=cuda step "gemm_wg kernels on cuda" 120 kernels.log $b/tests/gemm_kernels/test_gemm_wg_kernels
tail -6 "$logs/kernels.log" | while read -r l; do note "  $l"; done
filter=${GEMM_WG_BENCH:-_ho}
if [ "$filter" != none ]; then
    step "bench_gemm_wg $filter${xl:+ xl}" 240 gemm.log $b/bench/dsl/bench_gemm_wg cuda 16384 "$filter" ${xl:+xl}
    grep '^gemm_wg' "$logs/gemm.log" | while read -r l; do note "  $l"; done
    step "cuBLASLt fc products" 120 lt.log $b/bench/ops/bench_ops cuda "matmul bf16 fc B16 T1024${xl:+ xl}"
    grep 'matmul bf16' "$logs/lt.log" | while read -r l; do note "  $l"; done
fi
if [ -n "${GEMM_WG_CROSS:-}" ]; then
    TERN_CUDA_TUNE=gemm_wg=2 TERN_TEST_HANDLER=cuda TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
        step "cuda (gemm_wg=2) against cpu, GPT-2 124M, 2 x 512" 240 cross.log $b/tests/gpt2/test_cross_handler
fi
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
if [ -n "$xl" ]; then train+=(--init gpt2-xl --steps 8 --warmup 3); else train+=(--steps 10 --warmup 3); fi
for r in $(seq 1 "${GEMM_WG_ROUNDS:-2}"); do
    for v in 0 1 2; do
        TERN_CUDA_TUNE=gemm_wg=$v step "train${xl:+ 1.5B}, gemm_wg=$v, round $r" 150 "train-$v-$r.log" "${train[@]}"
        note "  $(grep '^bench:' "$logs/train-$v-$r.log" | tail -1 | sed 's/.*: median/median/'); \
$(grep '^step' "$logs/train-$v-$r.log" | tail -1)"
    done
done
TERN_CUDA_TUNE=gemm_wg=2 TERN_TEST_HANDLER=cuda step "test_ops_matmul on cuda, gemm_wg=2" 150 ops.log \
    $b/tests/ops/test_ops_matmul
