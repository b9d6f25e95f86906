#!/usr/bin/env bash
# After merging work that touches the seam, the attention kernels and the models: every cuda
# check of gqa_check.sh, the Llama model on cuda (llama-tiny-a as it is and with its
# key/value heads repeated, and the two references of tests/llama/refs; cuda against cpu at
# SmolLM2-135M's shape), the flash kernels on the GPU (grouped heads too), and this tree (A)
# against another commit's (B, .old/old.tar.gz as in ab_tree.sh): GPT-2 124M training step and
# batch-1 decoding, alternated, so that a change of speed shows in the same call.
#   OUT=$OUT bash scripts/h200/merge_check.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
build_tern
for t in gqa attention; do
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_$t on cuda" 300 gpu-$t.log $b/tests/gpu/test_gpu_$t
done
export TERN_TEST_HANDLER=cuda
for t in llama attention random_args matmul layernorm loss; do
    step "ops: test_ops_$t on cuda" 300 ops-$t.log $b/tests/ops/test_ops_$t
done
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
step "llama: llama-tiny-a on cuda (both head layouts)" 300 llama-model.log $b/tests/llama/test_llama_model "" cuda both
for ref in qwen2-tiny-b llama3-tiny-c; do
    step "llama: $ref on cuda" 300 llama-$ref.log $b/tests/llama/test_llama_model tests/llama/refs/$ref cuda gqa
done
TERN_CROSS_CONFIG=smollm2-135m TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "llama: cuda against cpu, SmolLM2-135M, B x T = 2x512" 600 llama-cross.log $b/tests/llama/test_llama_cross
TERN_GPU=cuda step "flash kernels on cuda (grouped and GPT-2 heads)" 300 flash-kernels.log \
    $b/tests/attention_kernels/test_flash_kernels
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -60 >> "$summary" 2>/dev/null
base=/tmp/tern-ab-old
rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
{ cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $base/build-h200 -j "$(nproc)" --target tern_cli; } > "$logs/ab-build.log" 2>&1 ||
    { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
ab_gpt2 "${AB_ROUNDS:-2}" $base/build-h200/tern
