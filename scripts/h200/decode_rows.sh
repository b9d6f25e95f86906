#!/usr/bin/env bash
# Where the cuda handler's GEMV kernels stop paying (bench/h200/NOTES.md run 80): `tern bench
# generate --batch B` (bf16, prompt 16, 256 tokens) for B = 1 2 3 4 8 with
# TERN_CUDA_TUNE=gemv=N (the most rows of A for the GEMV kernels) for N in ROWS_LIMITS
# ("8 2 3"), GPT-2 124M for ROWS_ROUNDS (2) rounds, then Llama-3.2-1B once (limits 8 and 2).
# ROWS_NCU=1 then profiles both families' decoding with Nsight Compute (a 4-token prompt +
# 16 tokens, per forward; run 79), summed by ncu_sum.py.
#   OUT=$OUT bash scripts/h200/decode_rows.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
build_targets tern_cli
gen() { timeout 60 $b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 256 --warmup 2 "$@" \
    2>&1 | grep '^bench' | sed 's/.*median//'; }
for r in $(seq 1 "${ROWS_ROUNDS:-2}"); do
    for B in 1 2 3 4 8; do
        for n in ${ROWS_LIMITS:-8 2 3}; do note "gpt2 round $r batch $B gemv=$n: $(TERN_CUDA_TUNE=gemv=$n gen --batch $B)"; done
    done
done
for B in 1 2 3 4 8; do
    for n in 8 2; do note "llama-3.2-1b batch $B gemv=$n: $(TERN_CUDA_TUNE=gemv=$n gen --batch $B --init llama-3.2-1b)"; done
done
if [ "${ROWS_NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
    for cfg in gpt2 llama-3.2-1b; do
        init=()
        [ $cfg != gpt2 ] && init=(--init $cfg)
        step "ncu: $cfg decoding, a 4-token prompt + 16 tokens" 240 "ncu-$cfg.log" ncu --clock-control none \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv $b/tern bench generate --backend cuda \
            --precision bf16 "${init[@]}" --prompt-tokens 4 --tokens 16 --warmup 0
        note "ncu, $cfg decoding (per forward: the prompt and 16 tokens):"
        python3 scripts/h200/ncu_sum.py "$logs/ncu-$cfg.log" 17 >> "$summary"
    done
fi
