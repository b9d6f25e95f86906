#!/usr/bin/env bash
# rmsnorm_backward in teams (branch rms-team: a row shared by R SIMD groups on the register
# path as layernorm_backward's, every load of the row before any store; ptxas sm_90 at
# Llama-3.2-1B's C = 2,048: 96 registers, no spills) against main (B, carried as
# .old/old.tar.gz), in one call of at most CALL_SECONDS (400):
#   checks on cuda: test_ops_llama (C up to 2,048), the Llama fixture;
#   the rmsnorm kernels under ncu, one Llama-3.2-1B training step (B=4 T=1024 bf16), A and B;
#   training steps, A and B alternated twice: Llama-3.2-1B and SmolLM2-135M at B=4 T=1024
#   bf16 (the first timing of the Llama family's training on the GPU: no peer yet).
#   mkdir -p .old && git archive main -- . ':!models/brown-mini/model.safetensors' | gzip > .old/old.tar.gz
# RMS_NO_NCU=1 leaves ncu out.
#   OUT=$OUT bash scripts/h200/rms_team.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 400
build_with_old
export TERN_TEST_HANDLER=cuda
step "ops: test_ops_llama on cuda" 90 ops-llama.log $b/tests/ops/test_ops_llama
[ -d .fixtures ] && step "llama fixture on cuda" 120 llama-fixture.log $b/tests/llama/test_llama_fixture
unset TERN_TEST_HANDLER
grep -h -E 'checks (passed|failed)' "$logs"/ops-llama.log "$logs"/llama-fixture.log >> "$summary"
A=$b/tern B=$base/build-h200/tern
if [ -z "${RMS_NO_NCU:-}" ] && command -v ncu > /dev/null; then
    for side in A B; do
        bin=$A
        [ $side = B ] && bin=$B
        step "ncu $side" 150 "ncu-$side.log" env TERN_CUDA_TUNE=graphs=0 ncu --clock-control none \
            --kernel-name regex:'rmsnorm|partial_add' --metrics gpu__time_duration.sum --csv "$bin" bench train \
            --init llama-3.2-1b --backend cuda --precision bf16 --batch 4 --seq 1024 --steps 1 --warmup 1
        note "ncu $side, Llama-3.2-1B (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-$side.log" 2 >> "$summary"
    done
fi
for r in 1 2; do
    for model in llama-3.2-1b smollm2-135m; do
        for side in A B; do
            bin=$A
            [ $side = B ] && bin=$B
            step "$model $side $r" 90 "train-$model-$side-$r.log" "$bin" bench train --init $model --backend cuda \
                --precision bf16 --batch 4 --seq 1024 --steps 10 --warmup 3
            note "  $(grep '^bench:' "$logs/train-$model-$side-$r.log" | tail -1)"
        done
    done
done
# Where GPT-2's training step goes now (A; GPT-2 has no rmsnorm, so A's GPT-2 is main's), every
# kernel under ncu, 124M then 1.5B when the call has time left: STEP_NCU=0 leaves it out.
if [ "${STEP_NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
    for init in gpt2 gpt2-xl; do
        step "ncu step $init" 200 "ncu-step-$init.log" ncu --clock-control none --metrics gpu__time_duration.sum \
            --csv "$A" bench train --init $init --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 1 --warmup 1
        note "ncu, GPT-2 $init B=16 T=1024 bf16 (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-step-$init.log" 2 >> "$summary"
    done
fi
