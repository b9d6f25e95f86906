#!/usr/bin/env bash
# Issue 24: where the joined q|k|v product's time goes (run after join.sh), GPT-2 124M bf16
# decoding, the default (joined) against ac_join=0:
#   1. the decoding kernels each builds (their dumped sources' names: the joined one has
#      spec n[9] = 4);
#   2. the graph's time on the GPU a replay (graph_timing=1; 8 tokens a replay);
#   3. Nsight Compute's kernel durations of a 4-token prompt and 16 tokens, per token.
#   OUT=$OUT bash scripts/h200/join_probe.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_targets tern_cli
g=(bench generate --backend cuda --precision bf16 --prompt-tokens 16 --warmup 2)
for v in ac_join=1 ac_join=0; do
    rm -rf /tmp/kd && mkdir -p /tmp/kd
    TERN_KERNEL_DUMP_DIR=/tmp/kd TERN_CACHE_DIR=/tmp/kc-probe TERN_CUDA_TUNE=$v $b/tern "${g[@]}" --tokens 16 > /dev/null 2>&1
    note "$v kernels: $(ls /tmp/kd | grep '\.cu$' | grep -E 'attention_cached|gemv' | sed 's/-[0-9a-f]*\.cu$//' | sort -u | tr '\n' ' ')"
    TERN_CUDA_TUNE=$v,graph_timing=1 $b/tern "${g[@]}" --tokens 512 > "$logs/gt-$v.log" 2>&1
    note "$v: $(grep '^bench:' "$logs/gt-$v.log" | sed 's/.*token [0-9.]* ms, //'); graph on the GPU, median $(grep '^graph replay:' \
        "$logs/gt-$v.log" | awk '{print $3}' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') ms a replay"
    if command -v ncu > /dev/null; then
        TERN_CUDA_TUNE=$v step "ncu $v" 240 "ncu-$v.log" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
            $b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 4 --tokens 16 --warmup 0
        python3 scripts/h200/ncu_sum.py "$logs/ncu-$v.log" 17 >> "$summary"
    fi
done
