#!/bin/sh
# Builds the kernel benchmark and the GPU core tests straight from the sources, without
# libtern's other dependencies (OpenBLAS, cJSON, PCRE2), for GPU machines that have only a
# compiler and the CUDA toolkit. The tests then compare against the core on the host
# interpreter (TERN_GPU_TEST_REFERENCE=host) instead of the cpu handler.
#
#   bench/opencl/standalone.sh OUTDIR      (from the repository root)
set -e
out=${1:?usage: standalone.sh OUTDIR}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
# the safetensors reader needs cJSON: stand-ins that report its absence
cat > "$out/no_safetensors.c" <<'STUB'
#include "tern/safetensors.h"
tern_error *tern_safetensors_open(const char *path, tern_safetensors **out) {
    (void)out;
    return tern_errorf("%s: safetensors are not built into this standalone program", path);
}
void tern_safetensors_close(tern_safetensors *f) { (void)f; }
const tern_tensor_info *tern_safetensors_find(const tern_safetensors *f, const char *name) {
    (void)f, (void)name;
    return 0;
}
tern_error *tern_tensor_convert(const tern_tensor_info *t, tern_dtype to, void *dst) {
    (void)t, (void)to, (void)dst;
    return tern_errorf("safetensors are not built into this standalone program");
}
STUB
cc=${CC:-cc}
flags="-O2 -std=c11 -D_POSIX_C_SOURCE=200809L -DTERN_HAVE_CUDA -DGT_NO_CPU -Iinclude -Isrc -Itests -I$cuda/include"
common="src/kernels/*.c src/gpu_core/*.c src/handlers/validate.c src/dsl/*.c src/core/error.c src/core/dtype.c $out/no_safetensors.c"
libs="-L$cuda/lib64 -lnvrtc -ldl -lm -lpthread -fopenmp"
mkdir -p "$out/obj"
# one object per source, named after its path (several folders have an attention.c)
for f in $common; do echo "$f"; done | xargs -P "$(nproc)" -I{} sh -c \
    "$cc $flags -c {} -o \"$out/obj/\$(echo {} | tr / _).o\""
$cc $flags -o "$out/bench_kernels" bench/opencl/bench_kernels.c "$out"/obj/*.o $libs
for t in elementwise rows attention; do
    $cc $flags -o "$out/test_gpu_$t" tests/gpu/test_gpu_$t.c "$out"/obj/*.o $libs
done
rm -rf "$out/obj"
