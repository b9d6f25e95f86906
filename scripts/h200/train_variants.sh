#!/usr/bin/env bash
# The training step (GPT-2 124M, B=16, T=1024, bf16) under settings chosen in the
# environment, each timed in the same run: TRAIN_VARIANTS lists them, space-separated, a '+'
# joining two settings of one variant (the cuda handler's tuning is one variable of options:
# TERN_CUDA_TUNE=flash_groups=0/0/0,flash_kv_halves=0; TERN_CACHE_DIR=...+TERN_CUDA_TUNE=...);
# `default` runs without any. TRAIN_CHECK=1 first runs the fixture in bf16 on cuda;
# TRAIN_SUITES lists op suites to run on cuda first (matmul layernorm ...), TRAIN_CROSS=1 the
# 124M cross-handler test (TRAIN_CHECK_ENV: settings, '+'-joined, for these checks); TRAIN_NCU=1 ends with Nsight Compute's kernel durations of one
# default step, or of one under TRAIN_NCU_ENV's settings ('+'-joined, as a variant) as well;
# TRAIN_CLOCKS=1 samples the SM clock, power and temperature (nvidia-smi) during each variant.
#   OUT=$OUT TRAIN_VARIANTS="default X=1" bash scripts/h200/train_variants.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
# TRAIN_CHECK_ENV: settings ('+'-joined) the checks below run under
check_env=(env $(echo "${TRAIN_CHECK_ENV:-}" | tr + " "))
if [ -n "${TRAIN_CHECK:-}" ]; then
    TERN_TEST_HANDLER=cuda step "fixture, cuda fp32" 120 fixture-fp32.log "${check_env[@]}" \
        $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log \
        "${check_env[@]}" $b/tests/gpt2/test_gpt2_fixture
fi
for t in ${TRAIN_SUITES:-}; do # op suites on cuda, e.g. "matmul layernorm"
    TERN_TEST_HANDLER=cuda step "ops: test_ops_$t on cuda" 200 "ops-$t.log" "${check_env[@]}" $b/tests/ops/test_ops_$t
done
if [ -n "${TRAIN_CROSS:-}" ]; then
    TERN_TEST_HANDLER=cuda TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
        step "cuda against cpu, GPT-2 124M, 2 x 512" 240 cross-2x512.log "${check_env[@]}" $b/tests/gpt2/test_cross_handler
fi
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3)
i=0
for v in ${TRAIN_VARIANTS:-default}; do
    i=$((i + 1))
    if [ "$v" = default ]; then env=(); else env=(${v//+/ }); fi
    smi=
    if [ -n "${TRAIN_CLOCKS:-}" ] && command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 \
            > "$logs/clocks-$i.csv" 2> /dev/null &
        smi=$!
    fi
    step "train, $v" 90 "train-$i.log" env "${env[@]}" "${train[@]}"
    note "  $(grep '^bench:' "$logs/train-$i.log" | tail -1)"
    if [ -n "$smi" ]; then
        kill "$smi" 2> /dev/null
        wait "$smi" 2> /dev/null
        # the samples while busy (power over 300 W): their median clock, power and temperature
        note "  clocks (busy samples: median MHz, W, C): $(awk -F', *' '$2 > 300 {print $1, $2, $3}' "$logs/clocks-$i.csv" |
            sort -n | awk '{a[NR]=$0} END {print NR ? NR " samples, " a[int((NR + 1) / 2)] : "none"}')"
    fi
done
if [ -n "${TRAIN_NCU:-}" ] && command -v ncu > /dev/null; then
    step "ncu: kernel durations of one train step" 240 ncu-train.log \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv "${train[@]::11}" --steps 1 --warmup 1
    note "ncu, train step (per step):"
    python3 scripts/h200/ncu_sum.py "$logs/ncu-train.log" 2 >> "$summary"
    if [ -n "${TRAIN_NCU_ENV:-}" ]; then
        step "ncu: one train step, $TRAIN_NCU_ENV" 240 ncu-train-env.log env ${TRAIN_NCU_ENV//+/ } \
            ncu --clock-control none --metrics gpu__time_duration.sum --csv "${train[@]::11}" --steps 1 --warmup 1
        note "ncu, train step, $TRAIN_NCU_ENV (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-train-env.log" 2 >> "$summary"
    fi
fi
grep -h -E "checks (passed|failed)|logits|loss" "$logs"/fixture-*.log "$logs"/ops-*.log "$logs"/cross-*.log 2>/dev/null | head -40 >> "$summary"
