#!/usr/bin/env bash
# The GPU figures of docs/PERFORMANCE.md, tern and PyTorch in one run on the H200 machine:
# scripts/h200/final.sh does the build, the checks, these timings and the default model in
# one call; this is the timing part alone, for a machine where build-h200 exists.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/h200/env.sh
b=build-h200
$b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3 | grep '^bench:'
python3 bench/h200/pytorch_gpt2.py train
python3 bench/h200/pytorch_gpt2.py compile
python3 bench/h200/pytorch_gpt2.py gemm
$b/tern bench generate --backend cuda --precision bf16 --tokens 512 | grep '^bench:'
python3 bench/h200/pytorch_gpt2.py generate --tokens 256
