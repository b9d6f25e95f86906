#!/usr/bin/env bash
# The warpgroup GEMM of our own (src/kernels/gemm_wg.c, the cuda handler's gemm_wg keys) in
# one call, carrying .deb, the decisive steps first:
#   1. its kernels on cuda (test_gemm_wg_kernels: the host cases and 124M's shapes;
#      GEMM_WG_KERNELS=0 skips them);
#   2. the 124M training step under gemm_wg=0 (default), 1, 2 and 2 with the DGELU product's
#      aux prefetched, alternated GEMM_WG_ROUNDS times (default 2), each variant's last loss
#      printed beside its time (the same initialisation and tokens: the losses agree to bf16
#      rounding or a product is wrong; GEMM_WG_TUNINGS: another list of TERN_CUDA_TUNE values);
#   3. the 1.5B step (gpt2-xl, 8 steps after 3) under gemm_wg=0, 2, and 2 with tiles in bands
#      of 8 m blocks (at 1.5B only the GELU pair fits, so 1 and 2 are the same),
#      GEMM_WG_XL_ROUNDS times (default 1; 0 skips; GEMM_WG_XL_TUNINGS another list);
#   4. test_ops_matmul on cuda with gemm_wg=2 (its col_sums cases have the GEMM's shapes);
#   5. cuda against cpu, GPT-2 124M, 2 x 512, with gemm_wg=2 (GEMM_WG_CROSS=1);
#   6. bench_gemm_wg against cuBLASLt (bench_ops) on the fc products (GEMM_WG_BENCH: the
#      variants' filter, default "_ho"; "none" skips it; GEMM_WG_BENCH_XL=1 adds 1.5B's).
#   CALL_SECONDS=540 OUT=$OUT bash scripts/h200/gemm_wg.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start "${CALL_SECONDS:-560}"
filter=${GEMM_WG_BENCH:-_ho}
benches=(bench_gemm_wg bench_ops)
[ "$filter" = none ] && benches=()
build_targets tern_cli test_gemm_wg_kernels test_ops_matmul "${benches[@]}" ${GEMM_WG_CROSS:+test_cross_handler}
if [ "${GEMM_WG_KERNELS:-1}" != 0 ]; then
    TERN_GPU=cuda step "gemm_wg kernels on cuda" 120 kernels.log $b/tests/gemm_kernels/test_gemm_wg_kernels
    tail -6 "$logs/kernels.log" | while read -r l; do note "  $l"; done
fi
train_rounds() { # size label, rounds, tunings (TERN_CUDA_TUNE values), extra bench arguments...
    local size=$1 rounds=$2 tunings=$3 r t i
    shift 3
    for r in $(seq 1 "$rounds"); do
        i=0
        for t in $tunings; do
            i=$((i + 1))
            TERN_CUDA_TUNE=$t step "train $size, $t, round $r" 150 "train-$size-$i-$r.log" \
                $b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 "$@"
            note "  $(grep '^bench:' "$logs/train-$size-$i-$r.log" | tail -1 | sed 's/.*: median/median/'); \
$(grep '^step' "$logs/train-$size-$i-$r.log" | tail -1)"
        done
    done
}
train_rounds 124M "${GEMM_WG_ROUNDS:-2}" "${GEMM_WG_TUNINGS:-gemm_wg=0 gemm_wg=1 gemm_wg=2 gemm_wg=2,gemm_wg_prefetch=1}" \
    --steps 10 --warmup 3
train_rounds 1.5B "${GEMM_WG_XL_ROUNDS:-1}" "${GEMM_WG_XL_TUNINGS:-gemm_wg=0 gemm_wg=2 gemm_wg=2,gemm_wg_band=8}" \
    --init gpt2-xl --steps 8 --warmup 3
TERN_CUDA_TUNE=gemm_wg=2 TERN_TEST_HANDLER=cuda step "test_ops_matmul on cuda, gemm_wg=2" 150 ops.log \
    $b/tests/ops/test_ops_matmul
if [ -n "${GEMM_WG_CROSS:-}" ]; then
    TERN_CUDA_TUNE=gemm_wg=2 TERN_TEST_HANDLER=cuda TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
        step "cuda (gemm_wg=2) against cpu, GPT-2 124M, 2 x 512" 240 cross.log $b/tests/gpt2/test_cross_handler
fi
if [ "$filter" != none ]; then
    for xl in "" ${GEMM_WG_BENCH_XL:+xl}; do
        step "bench_gemm_wg $filter${xl:+ xl}" 240 "gemm$xl.log" $b/bench/dsl/bench_gemm_wg cuda 16384 "$filter" $xl
        grep '^gemm_wg' "$logs/gemm$xl.log" | while read -r l; do note "  $l"; done
        step "cuBLASLt fc products${xl:+ xl}" 120 "lt$xl.log" $b/bench/ops/bench_ops cuda "matmul bf16 fc B16 T1024${xl:+ xl}"
        grep 'matmul bf16' "$logs/lt$xl.log" | while read -r l; do note "  $l"; done
    done
fi
