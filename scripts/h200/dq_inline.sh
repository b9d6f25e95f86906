#!/usr/bin/env bash
# dQ made by the dK dV kernel (flash_dq_inline=1: the key tiles add their parts of each query
# tile's dQ in a fixed order, no dQ pass, no dS^T buffer) against the default (dS^T handed to
# the dQ pass). Checks on cuda first: test_flash_kernels (its dq_inline variants on the GPU),
# the GPT-2 fixture in bf16 and the Llama fixture with the switch (DQ_OPS=1: test_ops_attention too); then flash_tune.sh's
# timings (the flash kernels of a 124M and a 1.5B step under ncu, the steps alternated).
#   OUT=$OUT bash scripts/h200/dq_inline.sh          (carry .deb .fixtures)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 585 # CALL_SECONDS bounds it
build_tern
TERN_GPU=cuda step "test_flash_kernels on cuda" 200 flash-kernels.log $b/tests/attention_kernels/test_flash_kernels
grep -h -E 'checks (passed|failed)|dQ inline.*B=|FAIL' "$logs/flash-kernels.log" | grep -v nvrtc | tail -8 >> "$summary"
if [ -n "${DQ_OPS:-}" ]; then # the attention operation through the handler (85 s)
    TERN_TEST_HANDLER=cuda step "test_ops_attention, flash_dq_inline=1" 150 att-inline.log \
        env TERN_CUDA_TUNE=flash_dq_inline=1 $b/tests/ops/test_ops_attention
    grep -h -E 'checks (passed|failed)' "$logs/att-inline.log" >> "$summary"
fi
if [ -d .fixtures ]; then
    TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "GPT-2 fixture, cuda bf16, flash_dq_inline=1" 120 \
        fx-bf16.log env TERN_CUDA_TUNE=flash_dq_inline=1 $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda step "Llama fixture, cuda, flash_dq_inline=1" 120 fx-llama.log \
        env TERN_CUDA_TUNE=flash_dq_inline=1 $b/tests/llama/test_llama_fixture
    grep -h -E 'checks (passed|failed)' "$logs"/fx-*.log >> "$summary"
fi
FLASH_NO_CHECKS=1 FLASH_XL_NCU=1 FLASH_XL_ROUNDS=${FLASH_XL_ROUNDS:-1} FLASH_ROUNDS=${FLASH_ROUNDS:-2} \
    FLASH_VARIANTS="default flash_dq_inline=1" bash scripts/h200/flash_tune.sh
