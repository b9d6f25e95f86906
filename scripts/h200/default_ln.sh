#!/usr/bin/env bash
# The layer norms recomputed (--recompute layernorm) against kept (the default), alternated,
# in one call of at most CALL_SECONDS (240): the GPT-2 fixture on cuda in fp32 and bf16
# first, then 124M (B=16 T=1024 bf16, 10 steps after 3) and 1.5B (8 after 3), twice each,
# each with its peak GPU memory. Run 118 of bench/h200/NOTES.md ran it on a tree where the
# recomputation was the default (the pairs then were the default and --recompute none); it
# cost 0.7% a step at both sizes, and the default stayed as it was.
#   OUT=$OUT bash scripts/h200/default_ln.sh          (carry .deb .fixtures)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 240
build_targets tern_cli test_gpt2_fixture
export TERN_TEST_HANDLER=cuda
step "fixture, cuda fp32" 60 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 60 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
unset TERN_TEST_HANDLER
grep -h -E 'checks (passed|failed)' "$logs"/fixture-*.log >> "$summary"
run() { # label, model, steps, extra args...
    local label=$1 model=$2 steps=$3 log=$logs/run-${1//[ \/=,.]/-}.log
    shift 3
    if [ "$(call_left)" -lt 35 ]; then note "skip $label (the call's time is spent)"; return 0; fi
    peak_run "$log" $b/tern bench train --init "$model" --backend cuda --precision bf16 --batch 16 --seq 1024 \
        --steps "$steps" --warmup 3 "$@"
    note "$label: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$log" | tail -1 | sed 's/.*: median/median/')"
}
for r in 1 2; do
    run "124M recompute layernorm $r" gpt2 10 --recompute layernorm
    run "124M default $r" gpt2 10
done
for r in 1 2; do
    run "1.5B recompute layernorm $r" gpt2-xl 8 --recompute layernorm
    run "1.5B default $r" gpt2-xl 8
done
