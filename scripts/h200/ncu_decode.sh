#!/usr/bin/env bash
# Where a decoded token's GPU time goes, per kernel: Nsight Compute's durations and DRAM reads
# of batch-1 bf16 decoding (a 4-token prompt and 16 new tokens, so 17 forwards), for each shape
# of NCU_CONFIGS (default "gpt2 llama-3.2-1b"), summed by kernel name per forward
# (ncu_sum.py). ncu runs the kernels one at a time (no overlapped launches, clocks as they
# are), so the durations are each kernel alone: their sum exceeds the graph's time on the
# GPU; with TERN_CUDA_TUNE=graph_timing=1, `tern bench generate` gives that time beside.
# NCU_VARIANTS (TERN_CUDA_TUNE values, e.g. "ac_splits=1 ac_splits=8") repeats both for each,
# after the defaults, so a knob's effect shows in the graph's time and in its kernels' own.
#   OUT=$OUT bash scripts/h200/ncu_decode.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
build_targets tern_cli
command -v ncu > /dev/null || { note "FAIL no ncu on this machine"; exit 1; }
for cfg in ${NCU_CONFIGS:-gpt2 llama-3.2-1b}; do
    init=(--init "$cfg")
    [ "$cfg" = gpt2 ] && init=()
    for tune in default ${NCU_VARIANTS:-}; do
        extra=""
        [ "$tune" != default ] && extra=",$tune"
        tag="$cfg-${tune//[=,]/-}"
        step "generate $cfg ($tune), graph timing" 120 "gen-$tag.log" env TERN_CUDA_TUNE="graph_timing=1$extra" \
            $b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2 "${init[@]}"
        note "  $cfg ($tune): $(grep '^bench:' "$logs/gen-$tag.log" | tail -1 | cut -c1-160)"
        note "  $cfg ($tune): graph on the GPU, median $(grep '^graph replay:' "$logs/gen-$tag.log" | awk '{print $3}' |
            sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') ms"
        env=()
        [ "$tune" != default ] && env=("TERN_CUDA_TUNE=$tune")
        step "ncu: $cfg decoding ($tune), a 4-token prompt + 16 tokens" 300 "ncu-$tag.log" env "${env[@]}" \
            ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
            $b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 4 --tokens 16 --warmup 0 "${init[@]}"
        note "ncu, $cfg decoding ($tune; per forward: the prompt and 16 tokens):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-$tag.log" 17 >> "$summary"
    done
done
