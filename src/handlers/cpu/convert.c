/* Row conversions between f32 and the 16-bit float dtypes. bf16 uses integer rounding
 * (the same bits as tern_f32_to_bf16, including for subnormals, which vcvtneps2bf16 would
 * flush); f16 uses F16C where the build has it. */
#include <string.h>

#include "cpu.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define CPU_AVX512 1
#endif

static void bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
#ifdef CPU_AVX512
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(w));
    }
#endif
    for (; i < n; i++) dst[i] = tern_bf16_to_f32(src[i]);
}

static void f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
#ifdef CPU_AVX512
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    const __m512i round = _mm512_set1_epi32(0x7fff);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(round, lsb)), 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, abs_mask), inf);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(b, 16), quiet);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
#endif
    for (; i < n; i++) dst[i] = tern_f32_to_bf16(src[i]);
}

static void f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
#ifdef CPU_AVX512
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = tern_f16_to_f32(src[i]);
}

static void f32_to_f16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
#ifdef CPU_AVX512
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
#endif
    for (; i < n; i++) dst[i] = tern_f32_to_f16(src[i]);
}

void cpu_to_f32(float *dst, const void *src, tern_dtype dtype, size_t n) {
    switch (dtype) {
    case TERN_F32:
        if ((const void *)dst != src) memmove(dst, src, n * sizeof(float));
        return;
    case TERN_BF16: bf16_to_f32(dst, src, n); return;
    case TERN_F16: f16_to_f32(dst, src, n); return;
    default: return; /* not a float dtype: callers validated */
    }
}

void cpu_from_f32(void *dst, tern_dtype dtype, const float *src, size_t n) {
    switch (dtype) {
    case TERN_F32:
        if (dst != (const void *)src) memmove(dst, src, n * sizeof(float));
        return;
    case TERN_BF16: f32_to_bf16(dst, src, n); return;
    case TERN_F16: f32_to_f16(dst, src, n); return;
    default: return;
    }
}
