#!/usr/bin/env bash
# Probes for issue 24's decoding (before any kernel is built on them), with tern's own token
# time in the same call for scale:
#   1. bench/h200/sync_probe.cu: what a dependency level between all groups costs as a kernel
#      boundary (plain, or with programmatic dependent launch) against a grid-wide barrier
#      inside one persistent kernel, at 768 and 3072 floats a level, 32 / 96 / all groups;
#   2. bench/h200/lmhead_probe.cu: how fast the logits product's 77 MB can stream (a plain
#      read, tern's GEMV_T layout, resident groups walking rows), then tern's layout through
#      an L2 access policy window over the persisting lines (run 139);
#   3. `tern bench generate` GPT-2 124M bf16 (graph_timing=1: the graph's time on the GPU).
#   OUT=$OUT bash scripts/h200/sync_probe.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 540
for p in sync_probe lmhead_probe; do
    step "nvcc $p" 120 "nvcc-$p.log" nvcc -O3 -arch=sm_90a -o /tmp/$p bench/h200/$p.cu
done
step "sync_probe, 48 levels" 120 sync.log /tmp/sync_probe 48 200
grep -E '^(n |sync_probe)' "$logs/sync.log" >> "$summary"
step "lmhead_probe" 120 lmhead.log /tmp/lmhead_probe 200
grep -vE '^$' "$logs/lmhead.log" >> "$summary"
if [ -z "${PROBE_NO_TERN:-}" ]; then
    build_targets tern_cli
    for r in 1 2; do
        step "tern generate gpt2 bf16, round $r" 120 gen-$r.log env TERN_CUDA_TUNE=graph_timing=1 \
            $b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2
        note "  $(grep '^bench:' "$logs/gen-$r.log" | tail -1 | cut -c1-160)"
        note "  graph on the GPU, median $(grep '^graph replay:' "$logs/gen-$r.log" | awk '{print $3}' |
            sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') ms"
    done
fi
