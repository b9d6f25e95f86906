/* The AVX-512 F + BW + VL vector vocabulary of kernels_simd.h, 16 lanes: shared by the
 * avx512 table (kernels_avx512.c) and the avx512bf16 one (kernels_avx512bf16.c), each compiled
 * with its own flags. */
#ifndef TERN_HANDLERS_CPU_KERNELS_AVX512_H
#define TERN_HANDLERS_CPU_KERNELS_AVX512_H

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

#endif
