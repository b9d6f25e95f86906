#!/usr/bin/env bash
# The flash kernels' switches again now that their products are warpgroup products (they
# were chosen on the mma.sync kernels, runs 22-54): each variant of FLASH_VARIANTS (cuda
# tuning strings, `default` for none) gets the flash kernels' time of a GPT-2 124M step
# under ncu, then 124M steps (alternated, FLASH_ROUNDS rounds) and one 1.5B pass each.
# ptxas (sm_90a, hs 64) for the dK dV kernel: kv_halves 225 registers, without halves 247,
# pipelined 201; none spills, all two groups a multiprocessor.
#   OUT=$OUT bash scripts/h200/flash_tune.sh          (carry .deb .fixtures)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 580
build_tern
variants=${FLASH_VARIANTS:-"default flash_kv_halves=0 flash_pipelined=1/1/1 flash_ds_saved=0"}
nm() { echo "$1" | tr "/=," "___"; } # a log name for a variant
tenv() { if [ "$1" = default ]; then echo; else echo "TERN_CUDA_TUNE=$1"; fi; }
if [ -z "${FLASH_NO_CHECKS:-}" ]; then
    for v in $variants; do
        [ "$v" = default ] && continue
        TERN_TEST_HANDLER=cuda step "test_ops_attention, $v" 120 "att-$(nm $v).log" env $(tenv "$v") \
            $b/tests/ops/test_ops_attention
        grep -h -E 'checks (passed|failed)' "$logs/att-$(nm $v).log" >> "$summary"
    done
fi
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
"${train[@]}" --steps 2 --warmup 1 > "$logs/tune-gemms.log" 2>&1 # cuBLASLt's choices cached first
if command -v ncu > /dev/null; then
    for v in $variants; do
        step "ncu $v" 90 "ncu-$(nm $v).log" env $(tenv "$v") ncu --clock-control none --kernel-name regex:flash \
            --metrics gpu__time_duration.sum --csv "${train[@]}" --steps 1 --warmup 1
        note "ncu, 124M, $v (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-$(nm $v).log" 2 >> "$summary"
    done
fi
for r in $(seq 1 "${FLASH_ROUNDS:-2}"); do
    for v in $variants; do
        step "124M $v $r" 60 "s-$(nm $v)-$r.log" env $(tenv "$v") "${train[@]}" --steps 10 --warmup 3
        note "  $(grep '^bench:' "$logs/s-$(nm $v)-$r.log" | tail -1)"
    done
done
for v in $variants; do
    step "1.5B $v" 90 "xl-$(nm $v).log" env $(tenv "$v") "${train[@]}" --init gpt2-xl --steps 6 --warmup 2
    note "  $(grep '^bench:' "$logs/xl-$(nm $v).log" | tail -1)"
done
