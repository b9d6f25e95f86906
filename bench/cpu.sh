#!/usr/bin/env bash
# GPT-2 124M (random weights) on the cpu handler, the two figures of docs/PERFORMANCE.md:
#   a training step, B=4, T=64, fp32;  generation, batch 1, bf16 weights, with the KV cache.
# usage: bench/cpu.sh [BUILD_DIR]   (run on an otherwise idle machine: two OpenMP threads
# that share their cores with other jobs wait on each other, and times grow several-fold)
set -euo pipefail
build=${1:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/tern" bench train --init gpt2 --batch 4 --seq 64 --steps 5 --warmup 1 | grep '^bench:'
"$build/tern" bench generate --init gpt2 --precision bf16 --prompt-tokens 16 --tokens 64 --warmup 1 | grep '^bench:'
"$build/tern" bench generate --init gpt2 --prompt-tokens 16 --tokens 64 --warmup 1 | grep '^bench:'
