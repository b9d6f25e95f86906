#!/usr/bin/env bash
# Where the cuda handler's time goes, and the checks that were never run on the H200:
# the out-of-bounds kernel and out-of-memory errors, the bf16 fixture; then the training
# step with cuBLASLt's heuristic choice against timed algorithm choice, a steady-state
# per-operation profile of the step and of decoding, and (when ncu can read the GPU)
# per-kernel durations of the decode step. Run from the repository root, .deb and
# .fixtures carried:  OUT=$OUT bash scripts/h200/perf.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
build_tern
export TERN_TEST_HANDLER=cuda

check_errors
TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
# causal blocks of 128 positions: T = 512 (four whole blocks), T = 300 (a short last block;
# bf16 rows take the looping softmax there)
for bt in ${CROSS_SHAPES-2x512 3x300}; do
    TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=${bt%x*} TERN_CROSS_T=${bt#*x} \
        step "cuda against cpu, GPT-2 124M, B x T = $bt" 240 cross-$bt.log $b/tests/gpt2/test_cross_handler
done

train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024)
if [ -z "${SKIP_TRAIN:-}" ]; then
    TERN_CUDA_TUNE=gemm_tune=0 step "train step, heuristic algorithms" 90 train-heuristic.log "${train[@]}" --steps 10 --warmup 3
    step "train step, timed algorithms (first run: tunes)" 120 train-tune1.log "${train[@]}" --steps 10 --warmup 3
    step "train step, timed algorithms (from the cache)" 90 train-tune2.log "${train[@]}" --steps 10 --warmup 3
    TERN_CUDA_TUNE=profile=1 step "profile of the train step" 90 profile-train.log "${train[@]}" --steps 3 --warmup 1
fi
gen=($b/tern bench generate --backend cuda --precision bf16)
step "generate bf16, graphs" 60 gen.log "${gen[@]}" --tokens 512 --warmup 1
TERN_CUDA_TUNE=gemv=0 step "generate bf16, graphs, cuBLASLt for the small products" 60 gen-nogemv.log "${gen[@]}" --tokens 512 --warmup 1
TERN_CUDA_TUNE=graphs=0 step "generate bf16, no graphs" 60 gen-nographs.log "${gen[@]}" --tokens 512 --warmup 1
TERN_CUDA_TUNE=graphs=0,profile=1 step "profile of decoding (no graphs)" 60 profile-gen.log \
    "${gen[@]}" --tokens 64 --warmup 1
if command -v ncu > /dev/null; then
    TERN_CUDA_TUNE=graphs=0 step "ncu: kernel durations of decoding" 150 ncu-gen.log \
        ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 600 --launch-count 400 \
        "${gen[@]}" --tokens 12 --warmup 0
fi
grep -h -E '^(bench|baseline):|checks (passed|failed)|: loss' "$logs"/*.log >> "$summary" 2>/dev/null
