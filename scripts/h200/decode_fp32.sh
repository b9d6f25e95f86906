#!/usr/bin/env bash
# GPT-2 124M fp32 decoding (batch 1, prompt 16, 512 tokens), this tree's build (A, as
# decode_ab.sh left it in build-h200) against the old tree's (B, /tmp/tern-ab-old) and A's
# variants (FP32_VARIANTS: TERN_CUDA_TUNE values), alternated FP32_ROUNDS times (2). Run
# after decode_ab.sh in the same call (it builds both).
#   OUT=$OUT bash scripts/h200/decode_ab.sh; OUT=$OUT bash scripts/h200/decode_fp32.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
gen=(bench generate --backend cuda --precision fp32 --prompt-tokens 16 --tokens 512 --warmup 2)
for r in $(seq 1 "${FP32_ROUNDS:-2}"); do
    for side in A B ${FP32_VARIANTS:-}; do
        bin=$b/tern env=()
        [ $side = B ] && bin=/tmp/tern-ab-old/build-h200/tern
        [ $side != A ] && [ $side != B ] && env=("TERN_CUDA_TUNE=$side")
        log="fp32-${side//[=,]/-}-$r.log"
        step "generate gpt2 fp32 $side, round $r" 90 "$log" env TERN_CACHE_DIR=/tmp/kc32-${side:0:1} "${env[@]}" \
            "$bin" "${gen[@]}"
        note "  fp32 $side: $(grep '^bench:' "$logs/$log" | tail -1)"
    done
done
