#!/usr/bin/env bash
# The correctness checks alone, without the PyTorch timings of final.sh: the fixture on cuda
# in fp32 and bf16, cuda against cpu at 124M, the fault checks, the GPU-targetable suites
# (suites.sh), and compute-sanitizer's racecheck on the sampling kernels.
#   OUT=$OUT bash scripts/h200/verify.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
export TERN_TEST_HANDLER=cuda
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
check_errors
TERN_GPU=cuda step "dsl: kernel zoo on cuda" 200 dsl-ops.log $b/tests/kernel/test_kernel_ops
for t in $b/tests/gpu/test_gpu_*; do
    [ -x "$t" ] && TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: $(basename "$t") on cuda" 200 "$(basename "$t").log" "$t"
done
for t in $b/tests/ops/test_ops_*; do
    [ -x "$t" ] && step "ops: $(basename "$t") on cuda" 200 "$(basename "$t").log" "$t"
done
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$sanitizer" ]; then
    step "racecheck: test_ops_loss on cuda" 300 racecheck-loss.log "$sanitizer" --tool racecheck --print-limit 20 $b/tests/ops/test_ops_loss
    step "memcheck: test_ops_loss on cuda" 300 memcheck-loss.log "$sanitizer" --tool memcheck --print-limit 20 $b/tests/ops/test_ops_loss
else
    note "no compute-sanitizer found"
fi
grep -h -E "checks (passed|failed)|FAIL|skipp|ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$logs"/*.log | sort | uniq -c | head -40 >> "$summary"
grep -h -B2 -A8 "FAIL\|not ok" "$logs"/test_ops_loss.log | head -40 >> "$summary"
