#!/usr/bin/env bash
# Batched decoding (issue 24 item 4): GPT-2 124M, bf16, greedy, prompt 16, 512 new tokens, at
# batch B in BATCHES (default "1 8 32"): `tern bench generate --batch B` against the
# hand-written static-KV PyTorch decoder under torch.compile(fullgraph), one CUDA graph a
# step, at the same batch (bench/h200/llama_peers.py fast-pipe; its GPT-2 first checked
# against transformers' GPT2LMHeadModel in float32), alternated ROUNDS times (default 1).
#   OUT=$OUT bash scripts/h200/decode_batch.sh       (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
build_targets tern_cli
step "peer check: the hand-written GPT-2 against transformers (fp32)" 180 peer-check.log \
    python3 bench/h200/llama_peers.py check --config gpt2
note "  $(grep '^peer-check' "$logs/peer-check.log" | tail -1)"
for r in $(seq 1 "${ROUNDS:-1}"); do
    for B in ${BATCHES:-1 8 32}; do
        step "tern gpt2 batch $B, round $r" 120 "tern-$B-$r.log" $b/tern bench generate --backend cuda --precision bf16 \
            --batch "$B" --prompt-tokens 16 --tokens 512 --warmup 2
        note "  $(grep '^bench:' "$logs/tern-$B-$r.log" | tail -1)"
        step "peer gpt2 batch $B, round $r" 240 "peer-$B-$r.log" python3 bench/h200/llama_peers.py decode \
            --config gpt2 --impl fast-pipe --batch "$B" --prompt 16 --tokens 512
        note "  $(grep '^peer:' "$logs/peer-$B-$r.log" | tail -1 | cut -c1-230)"
    done
done
