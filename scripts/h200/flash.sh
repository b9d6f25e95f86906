#!/usr/bin/env bash
# The flash attention kernels after the bf16-bits emitter change, the run-12 fixes, and PDL
# decoding, in one call: correctness (fixture, 124M cross test with mma, the op suites that
# failed in verify.sh), the training step (bf16 attention is the mma path; the cuBLASLt one
# is f32's since this change), generation with and
# without programmatic dependent launch, then Nsight Compute's kernel durations of one
# step with the flash kernels.   OUT=$OUT bash scripts/h200/flash.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
export TERN_TEST_HANDLER=cuda
TERN_GPU=cuda step "dsl: kernel zoo on cuda (load_matrix, wait_previous)" 200 dsl-ops.log $b/tests/kernel/test_kernel_ops
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, 124M, 2 x 512, mma" 240 cross-mma.log $b/tests/gpt2/test_cross_handler
for t in matmul attention loss; do
    step "ops: test_ops_$t on cuda" 200 "ops-$t.log" $b/tests/ops/test_ops_$t
done
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
step "train step (bf16: flash attention, mma)" 90 train-mma.log "${train[@]}" --steps 10 --warmup 3
note "  $(grep '^bench:' $logs/train-mma.log)"
gen=($b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
for pdl in 1 0; do
    TERN_CUDA_TUNE=pdl=$pdl step "generate bf16, pdl=$pdl" 60 gen-pdl$pdl.log "${gen[@]}"
    note "  $(grep '^bench:' $logs/gen-pdl$pdl.log)"
done
if command -v ncu > /dev/null; then
    step "ncu: kernel durations of one train step (mma)" 240 ncu-train.log \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        "${train[@]}" --steps 1 --warmup 1
    note "ncu, train step (per step):"
    python3 scripts/h200/ncu_sum.py "$logs/ncu-train.log" 2 >> "$summary"
fi
grep -h -E "checks (passed|failed)" "$logs"/*.log >> "$summary"
