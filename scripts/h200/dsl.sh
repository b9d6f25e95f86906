#!/usr/bin/env bash
# The kernel DSL on the H200 machine: builds the DSL tests and examples, then runs them with
# TERN_GPU=cuda (NVRTC + the driver), and with TERN_GPU=opencl through NVIDIA's OpenCL when
# an ICD loader and the NVIDIA ICD are there. Logs go to $OUT (default out/); the summary is
# $OUT/dsl-summary.txt. Run from the repository root, after scripts/h200/fetch-debs here.
#
# OpenCL needs the ICD loader and headers, which the machine lacks: put the Debian packages
# ocl-icd-libopencl1, ocl-icd-opencl-dev and opencl-c-headers in .deb/ (or in the folder
# TERN_EXTRA_DEBS names); the NVIDIA ICD file is registered here when missing.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
source scripts/h200/env.sh
if [ -n "${TERN_EXTRA_DEBS:-}" ]; then
    for f in "$TERN_EXTRA_DEBS"/*.deb; do dpkg -x "$f" "$TERN_PFX"; done
fi
summary="$OUT/dsl-summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/dsl-gpu.txt" 2>&1
note "gpu: $(cat "$OUT/dsl-gpu.txt")"

# NVIDIA's OpenCL ICD, registered for the loader if the driver ships it
icd_lib=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/lib64/libnvidia-opencl.so.1 2>/dev/null | head -1)
if [ -n "$icd_lib" ] && [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
    mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
fi
# without an OpenCL device there is nothing to run OpenCL on: build without it (the
# opencl handler would also want CLBlast, which the machine lacks)
ocl_args=(-DTERN_WITH_OPENCL=OFF)
if [ -e /etc/OpenCL/vendors/nvidia.icd ] && [ -e "$TERN_PFX/usr/include/CL/cl.h" ]; then
    ocl_args=(-DOpenCL_INCLUDE_DIR="$TERN_PFX/usr/include"
              -DOpenCL_LIBRARY="$TERN_PFX/usr/lib/x86_64-linux-gnu/libOpenCL.so.1")
fi

targets="test_kernel_ops test_kernel_generic test_kernel_trace test_kernel_emit test_kernel_compile
         test_kernel_interop product matrix_add softmax tiled_matmul"
if ! cmake -S . -B build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_NATIVE=OFF "${ocl_args[@]}" \
        > "$OUT/dsl-configure.log" 2>&1 ||
   ! cmake --build build-h200 -j "$(nproc)" --target $targets > "$OUT/dsl-build.log" 2>&1; then
    note "build: FAILED (see dsl-configure.log, dsl-build.log)"
    exit 1
fi
note "build: ok ($(grep -o 'OpenCL: [a-z]*' "$OUT/dsl-configure.log" | head -1))"

run() { # name, log, command...
    local name=$1 log=$2
    shift 2
    if "$@" > "$OUT/$log" 2>&1; then note "$name: ok"; else note "$name: FAILED (see $log)"; fi
}
export TERN_CACHE_DIR="$PWD/build-h200/kernel-cache"
for gpu in cuda opencl; do
    if [ "$gpu" = opencl ] && [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
        note "opencl: skipped (no NVIDIA OpenCL ICD on this machine)"
        continue
    fi
    export TERN_GPU=$gpu
    run "$gpu test_kernel_ops" "dsl-ops-$gpu.log" build-h200/tests/kernel/test_kernel_ops
    run "$gpu test_kernel_generic" "dsl-generic-$gpu.log" build-h200/tests/kernel/test_kernel_generic
    for ex in product matrix_add softmax tiled_matmul; do
        run "$gpu example $ex" "dsl-$ex-$gpu.log" build-h200/examples/$ex
    done
done
# the second cuda run of a kernel comes from the disk cache
export TERN_GPU=cuda
run "cuda examples again (cubins from the disk cache)" dsl-cache-cuda.log build-h200/examples/softmax
note "cache entries: $(ls "$TERN_CACHE_DIR/cuda" 2>/dev/null | wc -l)"
unset TERN_GPU
run "nvrtc and metal compiles" dsl-compile.log build-h200/tests/kernel/test_kernel_compile
run "trace checks (host)" dsl-trace.log build-h200/tests/kernel/test_kernel_trace
run "interop (wrapped CUDA context and stream)" dsl-interop.log build-h200/tests/kernel/test_kernel_interop
TERN_SOURCE_DIR=$PWD run "emitter golden text" dsl-emit.log build-h200/tests/kernel/test_kernel_emit

# The GPU kernel library's tests (tests/gpu), when present, on the cuda runtime: the DSL's
# runtime under real kernels.
if [ -n "${TERN_DSL_GPU_TESTS:-1}" ] && [ -d tests/gpu ]; then
    gpu_tests=$(cd tests/gpu && ls test_gpu_*.c 2>/dev/null | sed 's/\.c$//' | tr '\n' ' ')
    if [ -n "$gpu_tests" ] && cmake --build build-h200 -j "$(nproc)" --target $gpu_tests > "$OUT/dsl-gpu-build.log" 2>&1; then
        for t in $gpu_tests; do
            TERN_GPU_TEST_RUNTIMES=cuda run "cuda $t" "dsl-$t.log" build-h200/tests/gpu/$t
        done
    else
        note "tests/gpu: not built (see dsl-gpu-build.log)"
    fi
fi
cat "$summary"
