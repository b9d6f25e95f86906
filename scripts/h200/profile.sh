#!/usr/bin/env bash
# Where a training step's time goes, beyond kernel durations: the step time against the sum
# of its kernels (the gaps between them), and Nsight Compute's launch, occupancy, throughput
# and warp-stall sections for one launch of each kernel named in PROFILE_KERNELS (regular
# expressions over kernel names; default the flash kernels, layer norm and cross-entropy).
#   OUT=$OUT bash scripts/h200/profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
step "train step" 90 train.log "${train[@]}" --steps 10 --warmup 3
note "  $(grep '^bench:' $logs/train.log)"
command -v ncu > /dev/null || { note "FAIL no ncu"; exit 1; }
step "ncu: kernel durations of one train step" 240 ncu-train.log \
    ncu --clock-control none --metrics gpu__time_duration.sum --csv "${train[@]}" --steps 1 --warmup 1
note "ncu, train step (per step):"
python3 scripts/h200/ncu_sum.py "$logs/ncu-train.log" 2 >> "$summary"
kernels=${PROFILE_KERNELS:-"flash_forward flash_backward_kv flash_backward_q layernorm_backward layernorm_[vziulqfhbs]+_[0-9] cross_entropy"}
for k in $kernels; do
    n=$(echo "$k" | tr -c 'a-z_\n' '_')
    # the second launch of the kernel: the first may compile or warm caches
    step "ncu details: $k" 120 "ncu-$n.log" \
        ncu --clock-control none -k "regex:^${k}" --launch-skip 1 --launch-count 1 \
        --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
        "${train[@]}" --steps 1 --warmup 0
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Memory Throughput|Compute \(SM\) Th|hmma|Shared Memory Config|Dynamic Shared|Static Shared|Warp Cycles Per Issued|Issue Slots Busy|DRAM Throughput|L1/TEX Hit|L2 Hit" \
        "$logs/ncu-$n.log" | sed 's/^ */  /' >> "$summary"
done
