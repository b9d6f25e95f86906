#!/usr/bin/env bash
# The H200 checks and the figures of docs/PERFORMANCE.md in one call (under the 10-minute
# limit of a call): build; the GPU checks (the DSL zoo on CUDA, the fixture in fp32 and
# bf16, cuda against cpu at 124M, the attention op suite, the out-of-bounds kernel, out of
# memory, `make gpt2 BACKEND=cuda`); then tern against PyTorch in the same run (bf16 GEMM
# peak, the training step compiled, generation against Hugging Face), with the
# variants the defaults were chosen against; last, Nsight Compute's kernel durations of one
# training step and of decoding.
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
TERN_GPU=cuda step "dsl: kernel zoo on cuda" 120 dsl-ops.log $b/tests/kernel/test_kernel_ops
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
step "ops: test_ops_attention on cuda" 200 ops-attention.log $b/tests/ops/test_ops_attention
check_errors
step "make gpt2 BACKEND=cuda (fixture model)" 120 make-gpt2.log \
    make gpt2 BUILD=$b BACKEND=cuda MODEL=.fixtures/fixtures/gpt2-tiny-a TOKENS=20 TEMPERATURE=0

# ---- tern against PyTorch, same run ----
step "pytorch: bf16 GEMM peak" 120 pt-gemm.log python3 bench/h200/pytorch_gpt2.py gemm
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 20 --warmup 5)
step "tern: train step" 120 tern-train.log "${train[@]}"
# PyTorch eager (109.0 ms in run 11) is left out to keep the call under 10 minutes
step "pytorch: torch.compile train step" 300 pt-compile.log python3 bench/h200/pytorch_gpt2.py compile
step "tern: train step again" 120 tern-train2.log "${train[@]}"
gen=($b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
step "tern: generate bf16 (graphs)" 60 tern-gen.log "${gen[@]}"
TERN_CUDA_TUNE=pdl=0 step "tern: generate bf16 (graphs, no PDL)" 60 tern-gen-nopdl.log "${gen[@]}"
TERN_CUDA_TUNE=graphs=0 step "tern: generate bf16 (no graphs)" 60 tern-gen-nographs.log "${gen[@]}"
step "tern: generate fp32 (graphs)" 60 tern-gen-fp32.log $b/tern bench generate --backend cuda --tokens 512 --warmup 2
step "hf: generate" 240 pt-gen.log python3 bench/h200/pytorch_gpt2.py generate --tokens 128
grep -h -E '^(bench|baseline):|checks (passed|failed)|: loss|as expected' "$logs"/*.log >> "$summary" 2>/dev/null

# ---- where the time goes ----
if command -v ncu > /dev/null; then
    step "ncu: one train step (+1 warm-up)" 120 ncu-train.log \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv "${train[@]}" --steps 1 --warmup 1
    note "ncu, train step (per step):"; python3 scripts/h200/ncu_sum.py "$logs/ncu-train.log" 2 >> "$summary"
    step "ncu: decoding 8 tokens, no graphs" 120 ncu-gen.log env TERN_CUDA_TUNE=graphs=0 \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        $b/tern bench generate --backend cuda --precision bf16 --tokens 8 --warmup 0
    note "ncu, decoding (per token, prefill included):"; python3 scripts/h200/ncu_sum.py "$logs/ncu-gen.log" 8 >> "$summary"
fi
