#!/usr/bin/env bash
# The H200 checks and the figures of docs/PERFORMANCE.md in one call: build; the GPU checks
# (fixture in fp32 and bf16, cuda against cpu at 124M, the out-of-bounds kernel, out of
# memory, `make gpt2 BACKEND=cuda`); then tern against PyTorch in the same run (bf16 GEMM
# peak, the training step eager and compiled, generation against Hugging Face).
# Run from the repository root with .deb and .fixtures carried (scripts/h200/fetch-debs):
#   OUT=$OUT bash scripts/h200/final.sh        (scripts/h200/train.sh: resume, default model)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
build_tern
export TERN_TEST_HANDLER=cuda

# ---- checks ----
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
for bt in 4x128 2x512; do
    TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=${bt%x*} TERN_CROSS_T=${bt#*x} \
        step "cuda against cpu, GPT-2 124M, B x T = $bt" 240 cross-$bt.log $b/tests/gpt2/test_cross_handler
done
check_errors
step "make gpt2 BACKEND=cuda (fixture model)" 120 make-gpt2.log \
    make gpt2 BUILD=$b BACKEND=cuda MODEL=.fixtures/fixtures/gpt2-tiny-a TOKENS=20 TEMPERATURE=0

# ---- tern against PyTorch, same run ----
step "pytorch: bf16 GEMM peak" 120 pt-gemm.log python3 bench/h200/pytorch_gpt2.py gemm
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 20 --warmup 5)
step "tern: train step" 120 tern-train.log "${train[@]}"
step "pytorch: eager train step" 180 pt-train.log python3 bench/h200/pytorch_gpt2.py train
step "pytorch: torch.compile train step" 400 pt-compile.log python3 bench/h200/pytorch_gpt2.py compile
step "tern: train step again" 120 tern-train2.log "${train[@]}"
gen=($b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
step "tern: generate bf16 (graphs)" 60 tern-gen.log "${gen[@]}"
TERN_CUDA_NO_GRAPHS=1 step "tern: generate bf16 (no graphs)" 60 tern-gen-nographs.log "${gen[@]}"
step "tern: generate fp32 (graphs)" 60 tern-gen-fp32.log $b/tern bench generate --backend cuda --tokens 512 --warmup 2
step "hf: generate" 240 pt-gen.log python3 bench/h200/pytorch_gpt2.py generate --tokens 256
grep -h -E '^(bench|baseline):|checks (passed|failed)|: loss|as expected' "$logs"/*.log >> "$summary" 2>/dev/null
