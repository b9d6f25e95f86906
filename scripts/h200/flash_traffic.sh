#!/usr/bin/env bash
# The flash kernels' memory traffic: per launch of a GPT-2 124M and a 1.5B step (B=16,
# T=1024, bf16), Nsight Compute's duration, DRAM bytes read and written and L2 bytes,
# averaged over the step's layers by scripts/h200/ncu_bytes.py (bench/h200/NOTES.md, run 177).
#   OUT=$OUT bash scripts/h200/flash_traffic.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start "${CALL_SECONDS:-300}"
build_tern
command -v ncu > /dev/null || { note "FAIL no ncu"; exit 1; }
args=(bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
$b/tern "${args[@]}" --steps 2 --warmup 1 > "$logs/warm.log" 2>&1 # kernels compiled, cuBLASLt's choices cached
for size in 124M 1.5B; do
    extra=()
    [ $size = 1.5B ] && extra=(--init gpt2-xl)
    step "ncu bytes $size" 150 "bytes-$size.log" ncu --clock-control none --kernel-name regex:flash \
        --metrics $metrics --csv $b/tern "${args[@]}" "${extra[@]}" --steps 1 --warmup 1
    note "$size, per layer:"
    python3 scripts/h200/ncu_bytes.py "$logs/bytes-$size.log" >> "$summary"
done
