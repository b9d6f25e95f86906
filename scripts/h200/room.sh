#!/usr/bin/env bash
# GPT-2's backward buffers sharing one room with the logits (dln and datty in one slot, dfch
# and dqkv in another, the logits' chunks no larger than the backward's slots at 1.5B), and
# ln_f's output in the layer norms' shared buffer when they are recomputed: this tree (A)
# against another (B, carried as .old/old.tar.gz), in one call of at most CALL_SECONDS (400):
#   checks on cuda: the GPT-2 fixture in fp32 and bf16 (its memory settings: logits in
#     chunks, GELU and layer norms recomputed, gradients bit for bit as kept);
#   GPT-2 1.5B B=16 T=1024 bf16, A and B alternated: step and peak at the default and with
#     --recompute layernorm; then 124M, A and B at the default and A with the recomputation.
# ROOM_AGAIN=1: no checks; 124M A and B alternated four times, then 1.5B with the
# recomputation, A and B twice.
#   mkdir -p .old && git archive OLD -- . ':!models/brown-mini/model.safetensors' | gzip > .old/old.tar.gz
#   OUT=$OUT bash scripts/h200/room.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 400
build_with_old
A=$b/tern B=$base/build-h200/tern
if [ -n "${ROOM_AGAIN:-}" ]; then # a second call: 124M A and B alternated 4 times, 1.5B's recomputation twice
    run_again=1
fi
export TERN_TEST_HANDLER=cuda
[ -z "${run_again:-}" ] && step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
[ -z "${run_again:-}" ] && TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
unset TERN_TEST_HANDLER
grep -h -E 'checks (passed|failed)' "$logs"/fixture-*.log >> "$summary"

run() { # label, binary, model (gpt2 or gpt2-xl), steps, extra args...
    local label=$1 bin=$2 model=$3 steps=$4 log=$logs/run-${1//[ \/=,.]/-}.log
    shift 4
    if [ "$(call_left)" -lt 40 ]; then note "skip $label (the call's time is spent)"; return 0; fi
    peak_run "$log" "$bin" bench train --init "$model" --backend cuda --precision bf16 --batch 16 --seq 1024 \
        --steps "$steps" --warmup 3 "$@"
    note "$label: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$log" | tail -1 | sed 's/.*: median/median/')"
}
if [ -n "${run_again:-}" ]; then
    for r in 1 2 3 4; do
        run "124M A $r" $A gpt2 10
        run "124M B $r" $B gpt2 10
    done
    for r in 1 2; do
        run "1.5B A recompute layernorm $r" $A gpt2-xl 8 --recompute layernorm
        run "1.5B B recompute layernorm $r" $B gpt2-xl 8 --recompute layernorm
    done
    exit 0
fi
run "1.5B A" $A gpt2-xl 8
run "1.5B B" $B gpt2-xl 8
run "1.5B A recompute layernorm" $A gpt2-xl 8 --recompute layernorm
run "1.5B B recompute layernorm" $B gpt2-xl 8 --recompute layernorm
run "1.5B A again" $A gpt2-xl 8
run "1.5B B again" $B gpt2-xl 8
for r in 1 2; do
    run "124M A $r" $A gpt2 10
    run "124M B $r" $B gpt2 10
    run "124M A recompute layernorm $r" $A gpt2 10 --recompute layernorm
done
