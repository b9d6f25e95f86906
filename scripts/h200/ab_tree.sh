#!/usr/bin/env bash
# This tree (A) against another commit's tree (B, carried as .old/old.tar.gz, made here with
# `git archive`): the training step (GPT-2 124M, B=16, T=1024, bf16) and batch-1 bf16
# decoding, alternated AB_ROUNDS times (default 3) in one call; then the GPU checks on A.
#   mkdir -p .old && git archive OLD | gzip > .old/old.tar.gz
#   OUT=$OUT bash scripts/h200/ab_tree.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
build_tern
base=/tmp/tern-ab-old
rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
start=$SECONDS
{ cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $base/build-h200 -j "$(nproc)" --target tern_cli; } > "$logs/ab-build.log" 2>&1 ||
    { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
note "ok   B build ($((SECONDS - start)) s)"
ab_gpt2 "${AB_ROUNDS:-3}" $base/build-h200/tern
export TERN_TEST_HANDLER=cuda
TERN_GPU=cuda step "dsl: kernel zoo on cuda" 120 dsl-ops.log $b/tests/kernel/test_kernel_ops
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
for t in attention matmul layernorm elementwise embed loss; do
    step "ops: test_ops_$t on cuda" 200 ops-$t.log $b/tests/ops/test_ops_$t
done
check_errors
step "make gpt2 BACKEND=cuda (fixture model)" 120 make-gpt2.log \
    make gpt2 BUILD=$b BACKEND=cuda MODEL=.fixtures/fixtures/gpt2-tiny-a TOKENS=20 TEMPERATURE=0
grep -h -E 'checks (passed|failed)|: loss|as expected' "$logs"/*.log >> "$summary" 2>/dev/null
if [ -f scripts/h200/make_llama_refs.py ]; then
    step "llama references (transformers, float64 on the CPU)" 240 llama-refs.log \
        python3 scripts/h200/make_llama_refs.py "$OUT/llama-refs"
    [ -d "$OUT/llama-refs" ] && tar czf "$OUT/llama-refs.tgz" -C "$OUT" llama-refs && rm -rf "$OUT/llama-refs"
fi
