#!/usr/bin/env bash
# The flash kernels' switches again now that their products are warpgroup products (they
# were chosen on the mma.sync kernels, runs 22-54): each variant of FLASH_VARIANTS (cuda
# tuning strings, `default` for none) gets the flash kernels' time of a GPT-2 124M step
# under ncu, then 124M steps (alternated, FLASH_ROUNDS rounds) and one 1.5B pass each.
# (Run 120's ptxas, sm_90a hs 64, with K and V still in registers: kv_halves 225 registers,
# without halves 247, pipelined 201, all two groups a multiprocessor. Since run 121 the
# warpgroup kernels take the flash_wg_* keys; flash_groups and the rest are the warp-level
# kernels'.)
# FLASH_OLD=1: the variant `old` is main's tree carried as .old/old.tar.gz (build_with_old),
# at its defaults; the checks then also run test_flash_kernels on cuda. FLASH_FIXTURES=1: the
# GPT-2 (bf16, fp32) and Llama fixtures on cuda first; FLASH_XL_NCU=1: the flash kernels of a
# 1.5B step under ncu; FLASH_XL_ROUNDS: 1.5B passes (1).
#   OUT=$OUT bash scripts/h200/flash_tune.sh          (carry .deb .fixtures [.old])
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 580
if [ -n "${FLASH_OLD:-}" ]; then build_with_old; else build_tern; fi
variants=${FLASH_VARIANTS:-"default flash_kv_halves=0 flash_pipelined=1/1/1 flash_ds_saved=0"}
nm() { echo "$1" | tr "/=," "___"; } # a log name for a variant
tenv() { if [ "$1" = default ] || [ "$1" = old ]; then echo; else echo "TERN_CUDA_TUNE=$1"; fi; }
bin() { if [ "$1" = old ]; then echo "$base/build-h200/tern"; else echo "$b/tern"; fi; }
if [ -z "${FLASH_NO_CHECKS:-}" ]; then
    if [ -n "${FLASH_OLD:-}" ]; then
        TERN_GPU=cuda step "test_flash_kernels on cuda" 200 flash-kernels.log $b/tests/attention_kernels/test_flash_kernels
        grep -h -E 'checks (passed|failed)' "$logs/flash-kernels.log" >> "$summary"
        if [ -z "${FLASH_KERNELS_ONLY:-}" ]; then # FLASH_KERNELS_ONLY=1: test_flash_kernels alone
            TERN_TEST_HANDLER=cuda step "test_ops_attention" 200 att-default.log $b/tests/ops/test_ops_attention
            grep -h -E 'checks (passed|failed)' "$logs/att-default.log" >> "$summary"
        fi
    fi
    for t in ${FLASH_GPU_TESTS:-}; do # FLASH_GPU_TESTS: more test binaries (paths in the build) run on cuda
        TERN_GPU=cuda TERN_TEST_HANDLER=cuda step "$t on cuda" 120 "gt-$(basename "$t").log" "$b/$t"
        grep -h -E 'checks (passed|failed)' "$logs/gt-$(basename "$t").log" >> "$summary"
    done
    if [ -n "${FLASH_FIXTURES:-}" ] && [ -d .fixtures ]; then # the models' fixtures on cuda, bf16 and fp32
        TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "GPT-2 fixture, cuda bf16" 120 fx-gpt2-bf16.log \
            $b/tests/gpt2/test_gpt2_fixture
        TERN_TEST_HANDLER=cuda step "GPT-2 fixture, cuda fp32" 120 fx-gpt2-fp32.log $b/tests/gpt2/test_gpt2_fixture
        TERN_TEST_HANDLER=cuda step "Llama fixture, cuda" 120 fx-llama.log $b/tests/llama/test_llama_fixture
        grep -h -E 'checks (passed|failed)' "$logs"/fx-*.log >> "$summary"
    fi
    for v in $variants; do
        [ "$v" = default ] || [ "$v" = old ] && continue
        TERN_TEST_HANDLER=cuda step "test_ops_attention, $v" 120 "att-$(nm $v).log" env $(tenv "$v") \
            $b/tests/ops/test_ops_attention
        grep -h -E 'checks (passed|failed)' "$logs/att-$(nm $v).log" >> "$summary"
    done
fi
args=(bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
train=($b/tern "${args[@]}")
"${train[@]}" --steps 2 --warmup 1 > "$logs/tune-gemms.log" 2>&1 # cuBLASLt's choices cached first
if command -v ncu > /dev/null; then
    for v in $variants; do
        step "ncu $v" 90 "ncu-$(nm $v).log" env $(tenv "$v") ncu --clock-control none --kernel-name regex:flash \
            --metrics gpu__time_duration.sum --csv "$(bin $v)" "${args[@]}" --steps 1 --warmup 1
        note "ncu, 124M, $v (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-$(nm $v).log" 2 >> "$summary"
    done
fi
for r in $(seq 1 "${FLASH_ROUNDS:-2}"); do
    for v in $variants; do
        step "124M $v $r" 60 "s-$(nm $v)-$r.log" env $(tenv "$v") "$(bin $v)" "${args[@]}" --steps 10 --warmup 3
        note "  $(grep '^bench:' "$logs/s-$(nm $v)-$r.log" | tail -1)"
    done
done
if [ -n "${FLASH_XL_NCU:-}" ] && command -v ncu > /dev/null; then
    for v in $variants; do
        step "ncu 1.5B $v" 120 "ncu-xl-$(nm $v).log" env $(tenv "$v") ncu --clock-control none --kernel-name regex:flash \
            --metrics gpu__time_duration.sum --csv "$(bin $v)" "${args[@]}" --init gpt2-xl --steps 1 --warmup 1
        note "ncu, 1.5B, $v (per step):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-xl-$(nm $v).log" 2 >> "$summary"
    done
fi
for r in $(seq 1 "${FLASH_XL_ROUNDS:-1}"); do
    for v in $variants; do
        step "1.5B $v $r" 90 "xl-$(nm $v)-$r.log" env $(tenv "$v") "$(bin $v)" "${args[@]}" --init gpt2-xl --steps 6 --warmup 2
        note "  $(grep '^bench:' "$logs/xl-$(nm $v)-$r.log" | tail -1)"
    done
done
# FLASH_LLAMA=1: Llama-3.2-1B (grouped heads, B=4 T=1024) steps too, alternated twice
if [ -n "${FLASH_LLAMA:-}" ]; then
    for r in 1 2; do
        for v in $variants; do
            step "Llama-3.2-1B $v $r" 60 "ll-$(nm $v)-$r.log" env $(tenv "$v") "$(bin $v)" bench train --init llama-3.2-1b \
                --backend cuda --precision bf16 --batch 4 --seq 1024 --steps 10 --warmup 3
            note "  $(grep '^bench:' "$logs/ll-$(nm $v)-$r.log" | tail -1)"
        done
    done
fi
