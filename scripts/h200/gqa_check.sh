#!/usr/bin/env bash
# Grouped-query attention (issue 22) on the H200: the GPU core's grouped kernels on the cuda
# runtime against the float64 reference (tests/gpu/test_gpu_gqa: NH 4 KV 2, MQA, KV = NH,
# NH 6 KV 3 hs 64; f32, bf16; forward, backward, cached with and without the split), the
# GPT-2 attention kernels beside them (test_gpu_attention), the op-level tests through the
# cuda handler (its flash and cuBLASLt paths at KV = NH, the core's kernels at KV < NH), and
# the GPT-2 fixture and cuda-vs-cpu cross test, which must pass unchanged. For speed at
# KV = NH, scripts/h200/ab_tree.sh against main (the kernels traced at KV = NH are
# byte-identical to main's, so no change is expected).
#   OUT=$OUT bash scripts/h200/gqa_check.sh          (carry .deb .fixtures)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
build_tern
for t in gqa attention; do
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_$t on cuda" 300 gpu-$t.log $b/tests/gpu/test_gpu_$t
done
export TERN_TEST_HANDLER=cuda
for t in llama attention; do
    step "ops: test_ops_$t on cuda" 300 ops-$t.log $b/tests/ops/test_ops_$t
done
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -40 >> "$summary" 2>/dev/null
