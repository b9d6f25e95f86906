#!/usr/bin/env bash
# The warpgroup flash kernels as the default on Hopper (flash_wgmma=1/1/1), in one short
# call of at most CALL_SECONDS (240): the GPT-2 fixture on cuda in fp32 and bf16 with the
# default, then GPT-2 124M's step (B=16 T=1024 bf16) with the default and with
# flash_wgmma=0/0/0 (the mma.sync kernels) alternated ROUNDS times (2), then 1.5B's step and
# peak both ways.
#   OUT=$OUT bash scripts/h200/wgmma_default.sh          (carry .deb .fixtures; models/brown-mini's
#   weights moved out of the tree for the call, as fetch-debs says)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 240
build_tern
if [ -d .fixtures ]; then
    TERN_TEST_HANDLER=cuda step "fixture, cuda fp32" 60 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 60 fixture-bf16.log \
        $b/tests/gpt2/test_gpt2_fixture
    grep -h -E 'checks (passed|failed)' "$logs"/fixture-*.log >> "$summary"
fi
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
for round in $(seq 1 "${ROUNDS:-2}"); do
    for v in default off; do
        env=()
        [ $v = off ] && env=(TERN_CUDA_TUNE=flash_wgmma=0/0/0)
        step "124M round $round, $v" 60 "train-$round-$v.log" env "${env[@]}" "${train[@]}" --steps 10 --warmup 3
        note "  $(grep '^bench:' "$logs/train-$round-$v.log" | tail -1)"
    done
done
for v in default off; do
    if [ "$(call_left)" -lt 45 ]; then note "skip 1.5B $v (the call's time is spent)"; continue; fi
    env=()
    [ $v = off ] && env=(TERN_CUDA_TUNE=flash_wgmma=0/0/0)
    peak_run "$logs/xl-$v.log" env "${env[@]}" "${train[@]}" --init gpt2-xl --steps 8 --warmup 3
    note "1.5B $v: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$logs/xl-$v.log" | tail -1 | sed 's/.*: median/median/')"
done
