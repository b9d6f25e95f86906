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
fx=.fixtures/fixtures/llama-tiny-a
[ -d $fx ] || fx=../shared/fixtures/llama-tiny-a
run=(--model $fx --data $fx/data.bin --batch 4 --seq 64 --lr 1e-3 --backend cuda --precision bf16)
step "llama: train 4 steps on cuda" 60 llama-whole.log $b/tern train "${run[@]}" --steps 4
step "llama: train --stop-after 2, then --resume" 60 llama-part.log sh -c \
    "$b/tern train ${run[*]} --steps 4 --stop-after 2 --out /tmp/llama-ck && $b/tern train --resume /tmp/llama-ck"
steps() { sed -n 's/^\(step [0-9]*\/4 | loss [0-9.]*\) .*/\1/p' "$1"; }
if [ "$(steps "$logs/llama-whole.log")" = "$(steps "$logs/llama-part.log")" ] && [ -n "$(steps "$logs/llama-whole.log")" ]; then
    note "llama resume on cuda: the stopped and resumed run's 4 losses equal the whole run's"
else
    note "FAIL llama resume on cuda: $(steps "$logs/llama-whole.log" | tr '\n' ';') vs $(steps "$logs/llama-part.log" | tr '\n' ';')"
fi
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -40 >> "$summary" 2>/dev/null
wait $old_build || { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
train=(bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 20 --warmup 5)
gen=(bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
for r in $(seq 1 "${AB_ROUNDS:-2}"); do
    for side in A B; do
        bin=$b/tern
        [ $side = B ] && bin=$base/build-h200/tern
        step "train $side, round $r" 90 "ab-train-$side-$r.log" env TERN_CACHE_DIR=/tmp/kc-$side "$bin" "${train[@]}"
        note "  $side: $(grep '^bench:' "$logs/ab-train-$side-$r.log" | tail -1)"
        step "generate $side, round $r" 60 "ab-gen-$side-$r.log" env TERN_CACHE_DIR=/tmp/kc-$side "$bin" "${gen[@]}"
        note "  $side: $(grep '^bench:' "$logs/ab-gen-$side-$r.log" | tail -1)"
    done
done
