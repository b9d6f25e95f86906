#!/usr/bin/env bash
# The test suites that can target a GPU, run on the H200: the DSL's feature zoo (including
# the warp-matrix product) on the CUDA runtime, the GPU core's tests on CUDA, and the
# op-level tests with the cuda handler.   OUT=$OUT bash scripts/h200/suites.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
TERN_GPU=cuda step "dsl: kernel zoo on cuda" 300 dsl-ops.log $b/tests/kernel/test_kernel_ops
for t in $b/tests/gpu/test_gpu_*; do
    [ -x "$t" ] && TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: $(basename "$t") on cuda" 300 "$(basename "$t").log" "$t"
done
for t in $b/tests/ops/test_ops_*; do
    [ -x "$t" ] && TERN_TEST_HANDLER=cuda step "ops: $(basename "$t") on cuda" 300 "$(basename "$t").log" "$t"
done
grep -h -E "checks (passed|failed)|FAIL|skipp" "$logs"/*.log | sort | uniq -c | head -40 >> "$summary"
