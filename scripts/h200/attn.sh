#!/usr/bin/env bash
# The training step's attention on the H200: the fixture and a 124M cross test, the step with
# flash attention (mma, bf16's only path: the cuBLASLt products and their block size, once
# TERN_CUDA_ATTENTION=gemm and TERN_CUDA_ATT_BLOCK, were deleted as slower, NOTES.md), then
# per-kernel GPU durations of one step from Nsight Compute (kernels serialised, so only
# their own durations count), summed by kernel name.
#   OUT=$OUT bash scripts/h200/attn.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
export TERN_TEST_HANDLER=cuda
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, 2 x 512, flash attention (mma)" 240 cross-2x512.log \
    $b/tests/gpt2/test_cross_handler
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
step "train step, flash attention (mma)" 90 train-mma.log "${train[@]}" --steps 10 --warmup 3
note "  $(grep '^bench:' $logs/train-mma.log)"
if command -v ncu > /dev/null; then
    step "ncu: kernel durations of one train step" 240 ncu-train.log \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        "${train[@]}" --steps 1 --warmup 1
fi
