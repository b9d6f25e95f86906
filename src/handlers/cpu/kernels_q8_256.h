/* The q8_0 int8 dot products (kernels_simd.h's Q8_*) of the avx2 and avx512 tables, both on
 * 256-bit vectors, one 32-byte block at a time (AVX-512 BW has no byte sign instruction):
 * maddubs multiplies unsigned by signed bytes, so the weights' signs move onto the
 * activations (|w| (a sign w) = w a), then madd adds the 16-bit pairs into 8 int32 lanes.
 * Neither saturates: |w| <= 128 and |a| <= 127, so a pair is at most 2 * 128 * 127 < 2^15.
 * Included by kernels_avx2.c and kernels_avx512.c, each compiled with its own target flags. */
#ifndef TERN_CPU_KERNELS_Q8_256_H
#define TERN_CPU_KERNELS_Q8_256_H

#include <immintrin.h>

typedef __m256 q8acc;
typedef struct {
    __m256i w, abs;
} q8w;
typedef __m256i q8a;
#define Q8_ZERO() _mm256_setzero_ps()
#define Q8_HSUM(v) q8_hsum(v)
#define Q8_W(p) q8_w(p)
#define Q8_A(p) _mm256_loadu_si256((const __m256i *)(p))
#define Q8_FMA(acc, w, a, s) q8_fma(acc, w, a, s)

static inline float q8_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline q8w q8_w(const unsigned char *p) {
    __m256i w = _mm256_loadu_si256((const __m256i *)p);
    return (q8w){w, _mm256_abs_epi8(w)};
}

static inline __m256 q8_fma(__m256 acc, q8w w, __m256i a, float s) {
    __m256i p16 = _mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(a, w.w));
    __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(s), acc);
}

#endif
