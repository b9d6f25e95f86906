#!/usr/bin/env bash
# The DSL's warpgroup product (tern_wgmma_bf16) on the H200, in one call:
#   1. test_kernel_wgmma with TERN_GPU=cuda: every operand placement against plain C,
#      exactly (the kernels compile as sm_90a: wgmma.mma_async from the tiles' descriptors).
#   2. bench_wgmma: the same products by tern_wgmma_bf16 and by tern_load_matrix +
#      tern_mma_bf16 (the flash kernels' way), TFLOP/s of each, at WGMMA_SHAPES
#      ("groups:reps" pairs; default 528:256 and 1056:512).
#   OUT=$OUT bash scripts/h200/wgmma.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
build_targets test_kernel_wgmma bench_wgmma
TERN_GPU=cuda step "test_kernel_wgmma on cuda" 300 wgmma-test.log $b/tests/kernel/test_kernel_wgmma
grep -h -E 'checks (passed|failed)|check failed|differ' "$logs/wgmma-test.log" | head -8 >> "$summary"
for shape in ${WGMMA_SHAPES:-528:256 1056:512}; do
    step "bench_wgmma ${shape/:/ groups, reps }" 120 "bench-${shape/:/-}.log" $b/bench/dsl/bench_wgmma cuda ${shape/:/ }
    grep -h -E 'TFLOP|note' "$logs/bench-${shape/:/-}.log" >> "$summary"
done
