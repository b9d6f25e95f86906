#!/usr/bin/env bash
# What the next H200 call measures first (bench/h200/NOTES.md, "prepared for the next run"),
# in one call of at most CALL_SECONDS (570): the warpgroup products and the flash kernels on
# them (wgmma.sh: checks on cuda, bench_wgmma, one round of the training variants), then GPT-2
# 1.5B's peak memory and step at the default, with --recompute layernorm (now written again
# by the layer norms' backward: one row write, not a pass) and with --recompute gelu, and its
# step by operation (memory.sh). Steps that would run past the call's end are skipped with a note.
#   OUT=$OUT bash scripts/h200/next.sh          (carry .deb .fixtures; see fetch-debs for the
#   64 MiB the device tool takes)
set -uo pipefail
cd "$(dirname "$0")/../.."
export CALL_END=$(($(date +%s) + ${CALL_SECONDS:-570}))
WGMMA_NCU=0 WGMMA_ROUNDS=${WGMMA_ROUNDS:-1} bash scripts/h200/wgmma.sh
MEM_SMALL=0 MEM_CHOICES=${MEM_CHOICES:-none layernorm gelu} MEM_PROFILE=1 bash scripts/h200/memory.sh
