#!/usr/bin/env bash
# The end of a session's merges in one call under ten minutes: the cuda checks of what changed
# (the sampling kernels: test_gpu_rows and test_ops_loss on cuda; the GPT-2 fixture fp32 and
# bf16; the Llama model on cuda; the CLI on cuda: tern train with a stop and a resume), then
# GPT-2 124M's training step and batch-1 decoding against the tree in .old/old.tar.gz (as
# merge_check.sh), alternated, AB_ROUNDS rounds (2).
#   OUT=$OUT bash scripts/h200/session_check.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
build_tern
base=/tmp/tern-ab-old
rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
# the old tree builds while the checks run
( cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $base/build-h200 -j 8 --target tern_cli ) > "$logs/ab-build.log" 2>&1 &
old_build=$!
TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_rows on cuda" 240 gpu-rows.log $b/tests/gpu/test_gpu_rows
export TERN_TEST_HANDLER=cuda
step "ops: test_ops_loss on cuda" 240 ops-loss.log $b/tests/ops/test_ops_loss
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
step "llama: llama-tiny-a on cuda (both head layouts)" 300 llama-model.log $b/tests/llama/test_llama_model "" cuda both
unset TERN_TEST_HANDLER
check_llama_resume
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -40 >> "$summary" 2>/dev/null
wait $old_build || { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
ab_gpt2 "${AB_ROUNDS:-2}" $base/build-h200/tern
