#!/usr/bin/env bash
# Run 105 of bench/h200/NOTES.md: cuda's default of 8 decoding steps a graph against one
# (TERN_CUDA_TUNE=replay_steps=1): brown-mini's ids equal (fp32, bf16, temperature 0.8), then
# `tern bench generate` bf16 of GPT-2 124M and Llama-3.2-1B alternated two rounds, each with
# the fast-pipe peer (bench/h200/llama_peers.py) in the same round.
#   OUT=$OUT bash scripts/h200/sections_default.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_targets tern_cli
for prec in fp32 bf16; do
    a=(generate --model models/brown-mini --prompt "The jury said" --tokens 100 --temperature 0.8
       --backend cuda --precision $prec --ids)
    $b/tern "${a[@]}" > "$OUT/d.txt" 2>&1
    TERN_CUDA_TUNE=replay_steps=1 $b/tern "${a[@]}" > "$OUT/one.txt" 2>&1
    if [ -s "$OUT/d.txt" ] && cmp -s "$OUT/d.txt" "$OUT/one.txt"; then note "ok   ids $prec: the default = replay_steps=1"
    else note "FAIL ids $prec"; fi
done
g=(bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2)
for r in 1 2; do
    for cfg in gpt2 llama-3.2-1b; do
        i=()
        [ $cfg = gpt2 ] || i=(--init $cfg)
        note "r$r $cfg default: $($b/tern "${g[@]}" "${i[@]}" 2>&1 | grep '^bench:' | sed 's/.*token [0-9.]* ms, //')"
        note "r$r $cfg replay_steps=1: $(TERN_CUDA_TUNE=replay_steps=1 $b/tern "${g[@]}" "${i[@]}" 2>&1 |
            grep '^bench:' | sed 's/.*token [0-9.]* ms, //')"
        note "r$r $cfg peer: $(python3 bench/h200/llama_peers.py decode --config $cfg --impl fast-pipe --batch 1 \
            --prompt 16 --tokens 512 2>&1 | grep '^peer:' | sed 's/.*tokens=512: //' | cut -c1-120)"
    done
done
