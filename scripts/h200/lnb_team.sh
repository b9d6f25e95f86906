#!/usr/bin/env bash
# The layer norm backward with a row shared by two SIMD groups at GPT-2 1.5B's width
# (gk_lnb_team: 25 values a lane at C = 1,600, no spills in ptxas), against the tree before
# it (B, carried as .old/old.tar.gz), in one call of at most CALL_SECONDS (560):
#   checks on cuda: test_gpu_rows against cpu (C up to 2,048, teams of two), test_ops_layernorm,
#     the GPT-2 fixture in bf16 (the layer norms recomputed bit for bit as kept);
#   GPT-2 1.5B B=16 T=1024 bf16, this tree (A) and B alternated XL_ROUNDS times (2): the step
#     and the peak, at the default and with --recompute layernorm;
#   GPT-2 124M's step, A and B (C = 768 takes the one-SIMD-group path in both: a control);
#   with LNB_NCU=1 instead: the layer norm kernels' durations under ncu (1.5B, 2 steps), A and
#   B, at the default and with --recompute layernorm; then the rounds.
#   mkdir -p .old && git archive OLD -- . ':!models/brown-mini/model.safetensors' | gzip > .old/old.tar.gz
# LNB_NO_CHECKS=1 leaves the checks out (a second call on the same tree).
#   OUT=$OUT bash scripts/h200/lnb_team.sh          (carry .deb .fixtures .old)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 560
build_with_old

if [ -z "${LNB_NO_CHECKS:-}" ]; then
TERN_GPU_TEST_RUNTIMES=cuda step "test_gpu_rows on cuda against cpu" 60 gpu-rows.log $b/tests/gpu/test_gpu_rows
export TERN_TEST_HANDLER=cuda
step "ops: test_ops_layernorm on cuda" 90 ops-layernorm.log $b/tests/ops/test_ops_layernorm
[ -d .fixtures ] && TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log \
    $b/tests/gpt2/test_gpt2_fixture
unset TERN_TEST_HANDLER
grep -h -E 'checks (passed|failed)' "$logs"/gpu-rows.log "$logs"/ops-layernorm.log "$logs"/fixture-bf16.log >> "$summary"
fi

xl() { # label, binary, extra args...
    local label=$1 bin=$2 log=$logs/xl-${1//[ \/=,]/-}.log
    shift 2
    if [ "$(call_left)" -lt 45 ]; then note "skip 1.5B $label (the call's time is spent)"; return 0; fi
    peak_run "$log" "$bin" bench train --init gpt2-xl --backend cuda --precision bf16 \
        --batch 16 --seq 1024 --steps 8 --warmup 3 "$@"
    note "1.5B $label: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$log" | tail -1 | sed 's/.*: median/median/')"
}
ncu_ln() { # label, binary, extra args...: the layer norm kernels' time a step under ncu (1.5B
    # unless the args name another --init)
    local label=$1 bin=$2 log=ncu-${1//[ \/=,]/-}.log
    shift 2
    command -v ncu > /dev/null || { note "FAIL no ncu"; return 0; }
    step "ncu $label" 120 "$log" env TERN_CUDA_TUNE=graphs=0 ncu --clock-control none --kernel-name regex:'layernorm|partial_add' \
        --metrics gpu__time_duration.sum --csv "$bin" bench train --init gpt2-xl "$@" --backend cuda --precision bf16 \
        --batch 16 --seq 1024 --steps 1 --warmup 1
    note "ncu $label (per step):"
    python3 scripts/h200/ncu_sum.py "$logs/$log" 2 >> "$summary"
}
if [ -n "${LNB_NCU:-}" ]; then
    ncu_ln "A" $b/tern
    ncu_ln "B" $base/build-h200/tern
    ncu_ln "A recompute" $b/tern --recompute layernorm
    ncu_ln "B recompute" $base/build-h200/tern --recompute layernorm
    ncu_ln "A 124M" $b/tern --init gpt2
    ncu_ln "B 124M" $base/build-h200/tern --init gpt2
fi
for round in $(seq 1 "${XL_ROUNDS:-2}"); do
    xl "A $round" $b/tern
    xl "B $round" $base/build-h200/tern
done
xl "A recompute layernorm" $b/tern --recompute layernorm
xl "B recompute layernorm" $base/build-h200/tern --recompute layernorm
i=0
for side in A B A B; do
    i=$((i + 1))
    bin=$b/tern
    [ $side = B ] && bin=$base/build-h200/tern
    step "124M $side ($i)" 60 "train-$i.log" "$bin" bench train --backend cuda --precision bf16 --batch 16 --seq 1024 \
        --steps 10 --warmup 3
    note "  $(grep '^bench:' "$logs/train-$i.log" | tail -1)"
done
