/* The kernel table for AVX-512 F + BW + VL, 16 lanes (compiled with those flags whatever the
 * build's -march; used only where the processor reports them). */
#include <immintrin.h>
#include <stdint.h>

#define VN 16
typedef __m512 vf;
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VMUL(a, b) _mm512_mul_ps(a, b)
#define VLOAD_I8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define SCALAR_F16(h) _cvtsh_ss(h)
#define VHSUM(v) _mm512_reduce_add_ps(v)
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps(p, v)
#define VLOAD_BF16(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load_u16x16(p)), 16))
#define VLOAD_F16(p) _mm512_cvtph_ps(load_u16x16(p))
#define VSTORE_BF16(p, v) store_bf16x16(p, v)
#define VSTORE_F16(p, v) \
    _mm256_storeu_si256((__m256i *)(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define TABLE cpu_kernels_avx512
#define TABLE_NAME "avx512"

static inline __m256i load_u16x16(const uint16_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Round to nearest even on the integer bits (vcvtneps2bf16 would flush subnormals, and is
 * AVX-512 BF16 only); NaN keeps its top bits and is quieted. */
static inline void store_bf16x16(uint16_t *p, __m512 v) {
    __m512i b = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

/* int8 dot products for q8_0 (kernels_simd.h's Q8_*), one 32-byte block at a time as in
 * kernels_avx2.c (AVX-512 BW has no byte sign instruction): the weights' signs move onto the
 * activations so that maddubs (unsigned by signed bytes) sees |w| (a sign w) = w a; madd adds
 * the 16-bit pairs into 8 int32 lanes. No saturation: 2 * 128 * 127 < 2^15. */
typedef __m256 q8acc;
typedef struct {
    __m256i w, abs;
} q8w;
typedef __m256i q8a;
#define Q8_ZERO() _mm256_setzero_ps()
#define Q8_HSUM(v) hsum8(v)
#define Q8_W(p) q8_w(p)
#define Q8_A(p) _mm256_loadu_si256((const __m256i *)(p))
#define Q8_FMA(acc, w, a, s) q8_fma(acc, w, a, s)

static inline float hsum8(__m256 v) {
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

#include "kernels_simd.h"
