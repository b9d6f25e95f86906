#!/usr/bin/env bash
# The training step (GPT-2 124M, B=16, T=1024, bf16) under settings chosen in the
# environment, each timed in the same run: TRAIN_VARIANTS lists them, space-separated, a '+'
# joining two settings of one variant (TERN_CUDA_FLASH_GROUPS=0,0,0+TERN_CUDA_FLASH_KV_HALVES=0);
# `default` runs without any. TRAIN_CHECK=1 first runs the fixture in bf16 on cuda;
# TRAIN_SUITES lists op suites to run on cuda first (matmul layernorm ...), TRAIN_CROSS=1 the
# 124M cross-handler test; TRAIN_NCU=1 ends with Nsight Compute's kernel durations of one
# default step.
#   OUT=$OUT TRAIN_VARIANTS="default X=1" bash scripts/h200/train_variants.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
if [ -n "${TRAIN_CHECK:-}" ]; then
    TERN_TEST_HANDLER=cuda step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log \
        $b/tests/gpt2/test_gpt2_fixture
fi
for t in ${TRAIN_SUITES:-}; do # op suites on cuda, e.g. "matmul layernorm"
    TERN_TEST_HANDLER=cuda step "ops: test_ops_$t on cuda" 200 "ops-$t.log" $b/tests/ops/test_ops_$t
done
if [ -n "${TRAIN_CROSS:-}" ]; then
    TERN_TEST_HANDLER=cuda TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
        step "cuda against cpu, GPT-2 124M, 2 x 512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
fi
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3)
i=0
for v in ${TRAIN_VARIANTS:-default}; do
    i=$((i + 1))
    if [ "$v" = default ]; then env=(); else env=(${v//+/ }); fi
    step "train, $v" 90 "train-$i.log" env "${env[@]}" "${train[@]}"
    note "  $(grep '^bench:' "$logs/train-$i.log" | tail -1)"
done
if [ -n "${TRAIN_NCU:-}" ] && command -v ncu > /dev/null; then
    step "ncu: kernel durations of one train step" 240 ncu-train.log \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv "${train[@]::11}" --steps 1 --warmup 1
    note "ncu, train step (per step):"
    python3 scripts/h200/ncu_sum.py "$logs/ncu-train.log" 2 >> "$summary"
fi
grep -h -E "checks (passed|failed)|logits|loss" "$logs"/fixture-*.log "$logs"/ops-*.log "$logs"/cross-*.log 2>/dev/null | head -40 >> "$summary"
