#!/usr/bin/env bash
# Where the flash kernels' warps wait: for one launch each of flash_backward_kv,
# flash_backward_q and flash_forward in a GPT-2 124M step (B=16, T=1024, bf16), Nsight
# Compute's full set, its details page in the summary's logs, and the SASS lines with the
# most warp-stall samples (scripts/h200/sass_stalls.py) in the summary itself.
#   OUT=$OUT bash scripts/h200/flash_stalls.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start "${CALL_SECONDS:-420}"
build_targets tern_cli
command -v ncu > /dev/null || { note "FAIL no ncu"; exit 1; }
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 ${STALLS_TRAIN_ARGS:-})
"${train[@]}" --steps 2 --warmup 1 > "$logs/warm.log" 2>&1 # kernels compiled, cuBLASLt's choices cached
note "  $(grep '^bench:' "$logs/warm.log" | tail -1)"
for k in ${STALLS_KERNELS:-flash_backward_kv flash_backward_q flash_forward}; do
    step "ncu full: $k" 150 "full-$k.log" ncu --clock-control none -k "regex:^${k}" --launch-skip 1 \
        --launch-count 1 --set full --import-source no -f -o "$OUT/$k" "${train[@]}" --steps 1 --warmup 0
    step "details: $k" 60 "details-$k.log" ncu -i "$OUT/$k.ncu-rep" --page details
    keep="Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Compute \(SM\) Th"
    keep="$keep|Memory Throughput|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|Issued Warp|L2 Hit"
    keep="$keep|Eligible Warps|No Eligible|Active Warps Per"
    grep -E "$keep" "$logs/details-$k.log" | sed 's/^ */  /' >> "$summary"
    step "raw tensor metrics: $k" 60 "raw-$k.log" ncu -i "$OUT/$k.ncu-rep" --page raw --csv
    python3 scripts/h200/sass_stalls.py raw "$logs/raw-$k.log" >> "$summary" 2>&1
    step "source: $k" 60 "source-$k.csv" ncu -i "$OUT/$k.ncu-rep" --page source --csv --print-source sass
    python3 scripts/h200/sass_stalls.py source "$logs/source-$k.csv" >> "$summary" 2>&1
    rm -f "$OUT/$k.ncu-rep"
done
