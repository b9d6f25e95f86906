#!/usr/bin/env bash
# Two things the twenty-fourth session's first call found, measured in one call of at most
# CALL_SECONDS (400):
#   - layernorm_backward at GPT-2 1.5B's width (C = 1,600, 50 values a lane) took 410 us a
#     call on the register path (ptxas: 255 registers and spills); rows wider than
#     lnb_lane_max (24) values a lane now loop over the row. Checks on cuda (test_gpu_rows
#     against cpu at C = 1,600, test_ops_layernorm), then 1.5B's step and peak with the new
#     rule, with the old one (lnb_lane_max=64) and with --recompute layernorm;
#   - the warpgroup flash kernels in training (the first call's variants never ran: their
#     log names held slashes): GPT-2 124M with each WGMMA_VARIANTS, alternated
#     LNB_ROUNDS times (2), then 1.5B with flash_wgmma=2/1/1.
#   OUT=$OUT bash scripts/h200/lnb.sh          (carry .deb)
# Ran once (run 110 of bench/h200/NOTES.md) on the tree of its commit: the lnb_lane_max rule
# lost and was deleted after it, and so were the wgmma variants 2 (overlap) and rows128.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 400
build_tern
TERN_GPU_TEST_RUNTIMES=cuda step "test_gpu_rows on cuda (layer norms against cpu, C up to 1,600)" 60 gpu-rows.log \
    $b/tests/gpu/test_gpu_rows
TERN_TEST_HANDLER=cuda step "ops: test_ops_layernorm on cuda" 60 ops-layernorm.log $b/tests/ops/test_ops_layernorm
grep -h -E 'checks (passed|failed)' "$logs/gpu-rows.log" "$logs/ops-layernorm.log" >> "$summary"

xl() { # name, tune or "", extra args...
    local name=$1 tune=$2 log=$logs/xl-$1.log
    shift 2
    if [ "$(call_left)" -lt 45 ]; then note "skip 1.5B $name (the call's time is spent)"; return 0; fi
    peak_run "$log" env ${tune:+TERN_CUDA_TUNE=$tune} $b/tern bench train --init gpt2-xl --backend cuda \
        --precision bf16 --batch 16 --seq 1024 --steps 8 --warmup 3 "$@"
    note "1.5B $name: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$log" | tail -1 | sed 's/.*: median/median/')"
}
xl default ""
xl lnb_lane_max=64 lnb_lane_max=64
xl recompute-layernorm "" --recompute layernorm

train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3)
variants=${WGMMA_VARIANTS:-default flash_wgmma=1/1/1 flash_wgmma=2/1/1 flash_wgmma=2/1/1,flash_pipelined=1/1/1 flash_wgmma=2/1/1,flash_rows128=1}
for round in $(seq 1 "${LNB_ROUNDS:-2}"); do
    for v in $variants; do
        if [ "$v" = default ]; then env=(); else env=(TERN_CUDA_TUNE=$v); fi
        log="train-$round-${v//[\/=,]/-}.log"
        step "124M round $round, $v" 60 "$log" env "${env[@]}" "${train[@]}"
        note "  $(grep '^bench:' "$logs/$log" | tail -1)"
    done
done
xl flash_wgmma=2/1/1 flash_wgmma=2/1/1
