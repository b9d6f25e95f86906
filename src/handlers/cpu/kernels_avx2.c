/* The kernel table for AVX2 + FMA + F16C, 8 lanes (compiled with exactly those flags, AVX-512
 * off, whatever the build's -march; used only where the processor reports them), with
 * gemm_f32, the large-m product (kernels_gemm_avx2.h), which converts bf16, f16 and q8_0 B. */
#include <immintrin.h>
#include <stdint.h>

#define VN 8
typedef __m256 vf;
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VMUL(a, b) _mm256_mul_ps(a, b)
#define VLOAD_I8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define SCALAR_F16(h) _cvtsh_ss(h)
#define VHSUM(v) hsum8(v)
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps(p, v)
#define VLOAD_BF16(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_u16x8(p)), 16))
#define VLOAD_F16(p) _mm256_cvtph_ps(load_u16x8(p))
#define VSTORE_BF16(p, v) store_bf16x8(p, v)
#define VSTORE_F16(p, v) \
    _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define TABLE cpu_kernels_avx2
#define TABLE_NAME "avx2"
#define TABLE_GEMM_F32 gemm_f32
/* f32 B stays on OpenBLAS: its sgemm was level or ahead there on the Zen 3 (PERFORMANCE.md) */
#define TABLE_GEMM_F32_MATMUL (1u << TERN_BF16 | 1u << TERN_F16 | 1u << TERN_Q8)

static inline __m128i load_u16x8(const uint16_t *p) { return _mm_loadu_si128((const __m128i *)p); }

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Round to nearest even on the integer bits, as tern_f32_to_bf16 (subnormals kept); NaN
 * keeps its top bits and is quieted. */
static inline void store_bf16x8(uint16_t *p, __m256 v) {
    __m256i b = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    /* |b| > inf as signed 32-bit integers: both sides are non-negative */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, quiet, nan);
    /* every lane is <= 0xffff, so the unsigned-saturating pack is exact */
    __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128((__m128i *)p, h);
}

#include "tern/half.h"

#include "kernels_gemm_avx2.h"
#include "kernels_q8_256.h"
#include "kernels_simd.h"
