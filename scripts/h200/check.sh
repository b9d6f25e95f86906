#!/usr/bin/env bash
# One call on the H200 machine: build tern with the cuda handler, run the GPU checks, then
# the timings against PyTorch in the same run. Logs go to $OUT; a summary is printed last.
#   scripts/h200/check.sh [checks|bench|all]        (default all)
# Run from the repository root after scripts/h200/fetch-debs here (device runs carry .deb
# and .fixtures).
set -uo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
OUT=${OUT:-out}
mkdir -p "$OUT"
source scripts/h200/env.sh
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
run() { # name, timeout seconds, log, command...
    local name=$1 limit=$2 log=$3 start=$SECONDS
    shift 3
    if timeout "$limit" "$@" > "$OUT/$log" 2>&1; then
        note "ok   $name ($((SECONDS - start)) s)"
    else
        note "FAIL $name ($((SECONDS - start)) s; exit $?; see $log): $(tail -2 "$OUT/$log" | tr '\n' ' ' | cut -c1-300)"
    fi
}

note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
note "cpu: $(nproc) cores; nvcc: $(nvcc --version 2>/dev/null | tail -1)"

# NVIDIA's OpenCL ICD, for the opencl handler and runtime
icd=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -1)
if [ -n "$icd" ] && [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
    mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
fi
export OCL_ICD_VENDORS=/etc/OpenCL/vendors

start=$SECONDS
if ! cmake -S . -B build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON \
        -DOpenCL_INCLUDE_DIR="$TERN_PFX/usr/include" \
        -DOpenCL_LIBRARY="$TERN_PFX/usr/lib/x86_64-linux-gnu/libOpenCL.so.1" \
        > "$OUT/configure.log" 2>&1 ||
   ! cmake --build build-h200 -j "$(nproc)" > "$OUT/build.log" 2>&1; then
    note "FAIL build ($((SECONDS - start)) s): $(grep -m3 -E 'error|Error' "$OUT/build.log" "$OUT/configure.log" | cut -c1-300)"
    cat "$summary"
    exit 1
fi
note "ok   build ($((SECONDS - start)) s): $(grep -o 'tern: [A-Za-z ]*: [a-z]*' "$OUT/configure.log" | tr '\n' ';')"
b=build-h200
export TERN_CACHE_DIR=$PWD/$b/kernel-cache
$b/tern info > "$OUT/info.log" 2>&1; note "$(grep -E '^  (cuda|opencl)' "$OUT/info.log" | tr -s ' ' | tr '\n' ';')"

if [ "$what" != bench ]; then
    export TERN_GPU=cuda
    run "dsl: kernel ops on cuda" 300 dsl-ops.log $b/tests/kernel/test_kernel_ops
    for ex in product matrix_add softmax tiled_matmul; do
        run "dsl: example $ex on cuda" 60 ex-$ex.log $b/examples/$ex
    done
    unset TERN_GPU
    for t in $b/tests/ops/test_ops*; do
        [ -x "$t" ] && TERN_TEST_HANDLER=cuda run "ops: $(basename "$t") on cuda" 300 "$(basename "$t").log" "$t"
    done
    TERN_TEST_HANDLER=cuda run "gpt2 fixture, cuda fp32" 300 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 run "gpt2 fixture, cuda bf16" 300 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=4 TERN_CROSS_T=128 \
        run "cuda against cpu, GPT-2 124M" 600 cross-124M.log $b/tests/gpt2/test_cross_handler
    if [ -e /etc/OpenCL/vendors/nvidia.icd ] && [ -x $b/tests/gpt2/test_gpt2_fixture ] &&
       grep -q '^  opencl *built in; device' "$OUT/info.log"; then
        TERN_TEST_HANDLER=opencl run "gpt2 fixture, opencl (NVIDIA) fp32" 600 fixture-opencl.log $b/tests/gpt2/test_gpt2_fixture
    fi
    model=.fixtures/fixtures/gpt2-tiny-a
    run "make gpt2 BACKEND=cuda (fixture model)" 120 generate.log \
        $b/tern generate --backend cuda --model "$model" --prompt "The capital of France is" --tokens 20 --temperature 0
    # Out of memory is an error, not a crash: 2 TB of activations.
    if $b/tern bench train --backend cuda --batch 2048 --seq 1024 --steps 1 > "$OUT/oom.log" 2>&1; then
        note "FAIL out-of-memory run succeeded?"
    else
        note "ok   out of memory reported: $(tail -1 "$OUT/oom.log" | cut -c1-200)"
    fi
fi

if [ "$what" != checks ]; then
    export PYTHONUNBUFFERED=1
    run "bench: pytorch bf16 gemm peak" 120 pt-gemm.log python3 bench/h200/pytorch_gpt2.py gemm
    run "bench: tern train cuda bf16 B=16 T=1024" 300 tern-train.log \
        $b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 10 --warmup 3
    run "bench: pytorch eager train" 300 pt-train.log python3 bench/h200/pytorch_gpt2.py train
    run "bench: pytorch compile train" 400 pt-compile.log python3 bench/h200/pytorch_gpt2.py compile
    run "bench: tern generate cuda bf16 (graphs)" 120 tern-gen.log \
        $b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 1
    TERN_CUDA_TUNE=graphs=0 run "bench: tern generate cuda bf16 (no graphs)" 120 tern-gen-nographs.log \
        $b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 1
    run "bench: tern generate cuda fp32" 120 tern-gen-fp32.log \
        $b/tern bench generate --backend cuda --tokens 512 --warmup 1
    run "bench: hf generate" 300 pt-gen.log python3 bench/h200/pytorch_gpt2.py generate --tokens 256
    grep -h -E '^(bench|baseline):' "$OUT"/*.log | tee -a "$summary"
fi
echo "==== summary ===="
cat "$summary"
