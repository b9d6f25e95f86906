#!/usr/bin/env bash
# The training step against torch.compile in one short call (bench/h200/NOTES.md, run 29):
# build; tern's step twice; torch.compile's step; the bf16 GEMM peak (for MFU); tern's step
# once more, so that tern's times bracket PyTorch's.   OUT=$OUT bash scripts/h200/compare.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3)
step "tern: train step" 90 tern-1.log "${train[@]}"
step "tern: train step again" 90 tern-2.log "${train[@]}"
step "pytorch: torch.compile train step" 300 pt-compile.log python3 bench/h200/pytorch_gpt2.py compile
step "pytorch: bf16 GEMM peak" 120 pt-gemm.log python3 bench/h200/pytorch_gpt2.py gemm
step "tern: train step, third" 90 tern-3.log "${train[@]}"
grep -h -E '^(bench|baseline):' "$logs"/tern-1.log "$logs"/tern-2.log "$logs"/pt-compile.log "$logs"/pt-gemm.log \
    "$logs"/tern-3.log >> "$summary"
