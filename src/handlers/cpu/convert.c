/* Row conversions between f32 and the 16-bit float dtypes, through the process's kernel
 * table (kernels.h: AVX-512, AVX2 + F16C, or portable vectors). bf16 uses integer rounding
 * (the same bits as tern_f32_to_bf16, including for subnormals, which vcvtneps2bf16 would
 * flush). */
#include <string.h>

#include "cpu.h"

void cpu_to_f32(float *dst, const void *src, tern_dtype dtype, size_t n) {
    switch (dtype) {
    case TERN_F32:
        if ((const void *)dst != src) memmove(dst, src, n * sizeof(float));
        return;
    case TERN_BF16: cpu_kernels_convert()->bf16_to_f32(dst, src, n); return;
    case TERN_F16: cpu_kernels_convert()->f16_to_f32(dst, src, n); return;
    case TERN_Q8: cpu_kernels_convert()->q8_to_f32(dst, src, n); return;
    default: return; /* not a float dtype: callers validated */
    }
}

void cpu_from_f32(void *dst, tern_dtype dtype, const float *src, size_t n) {
    switch (dtype) {
    case TERN_F32:
        if (dst != (const void *)src) memmove(dst, src, n * sizeof(float));
        return;
    case TERN_BF16: cpu_kernels_convert()->f32_to_bf16(dst, src, n); return;
    case TERN_F16: cpu_kernels_convert()->f32_to_f16(dst, src, n); return;
    case TERN_Q8: cpu_q8_quantize(dst, src, n); return;
    default: return;
    }
}
