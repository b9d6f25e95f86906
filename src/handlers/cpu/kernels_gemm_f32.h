/* gemm_f32 (kernels.h) on AVX-512: the large-m f32 product, blocked as gemm_bf16
 * (kernels_gemm_bf16.h) with one f32 per word: k in blocks of KC; per block A's rows packed
 * into row panels of MR rows ([kc][MR], each element broadcast to the lanes from memory) and
 * B's columns into panels of NR columns ([kc][NR]; a q8_0 B dequantized there, exactly); the MR x NR tile (8 x 3 vectors, 24 of the
 * 32 registers) takes one FMA per vector per k. Each panel's rows are prefetched while the
 * panel before is packed: in a prompt B comes from memory. Included by the AVX-512 tables'
 * files. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "handlers/cpu/kernels.h"
#include "handlers/cpu/kernels_gemm_pack.h"

#define GF_MR CPU_GEMM_F32_MR
#define GF_NR CPU_GEMM_F32_NR
#define GF_NV (GF_NR / 16)
#define GF_KC CPU_GEMM_F32_KC

_Static_assert(GF_NR % 16 == 0, "the f32 GEMM's blocking");

static inline size_t gf_min(size_t a, size_t b) { return a < b ? a : b; }

/* kc weights of a q8_0 row from the block at blk (kc a multiple of 32): d * q, exactly. */
static void gf_q8_line(float *line, const unsigned char *blk, size_t kc) {
    for (size_t c = 0; c < kc; c += TERN_Q8_BLOCK, blk += TERN_Q8_BLOCK_BYTES) {
        uint16_t dh;
        memcpy(&dh, blk, 2);
        __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
        for (int h = 0; h < 2; h++) {
            __m128i q = _mm_loadu_si128((const __m128i *)(blk + 2 + 16 * h));
            _mm512_storeu_ps(line + c + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
        }
    }
}

/* Columns [j0, j0 + nr) (nr <= NR) and k [k0, k0 + kc) of B into one panel [kc][NR], columns
 * past nr zero. B is f32, or q8_0 (always [n, k], k0 and kc multiples of 32: dequantized). */
static void gf_pack_b(float *bp, const void *b, tern_dtype bdt, size_t ldb, bool trans_b, size_t j0, size_t nr,
                      size_t k0, size_t kc) {
    if (!trans_b) {
        const float *bf = b;
        for (size_t p = 0; p < kc; p++) {
            const float *row = bf + (k0 + p) * ldb + j0;
            /* the next panel's part of this row (a prefetch never faults) */
            for (size_t c = GF_NR; c < 2 * GF_NR; c += 16) __builtin_prefetch(row + c, 0, 3);
            for (size_t v = 0; v < GF_NV; v++) {
                size_t c = 16 * v, have = nr > c ? gf_min(16, nr - c) : 0;
                __mmask16 mask = (__mmask16)((1u << have) - 1);
                _mm512_storeu_ps(bp + p * GF_NR + c, _mm512_maskz_loadu_ps(mask, row + c));
            }
        }
        return;
    }
    /* B [n, k]: the panel is the transpose of nr rows of B */
    float line[GF_KC];
    for (size_t j = 0; j < GF_NR; j++) {
        if (j >= nr) {
            for (size_t p = 0; p < kc; p++) bp[p * GF_NR + j] = 0;
            continue;
        }
        size_t at = (j0 + j) * ldb + k0; /* element index of B(k0, j0 + j) */
        /* the same k of the next panel's row j: B comes from memory (a prefetch never faults) */
        const char *next = bdt == TERN_Q8 ? (const char *)b + (at + GF_NR * ldb) / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES
                                          : (const char *)((const float *)b + at + GF_NR * ldb);
        size_t row_bytes = bdt == TERN_Q8 ? kc / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES : kc * 4;
        for (size_t c = 0; c < row_bytes; c += 64) __builtin_prefetch(next + c, 0, 3);
        const float *col = (const float *)b + at;
        if (bdt == TERN_Q8) {
            gf_q8_line(line, (const unsigned char *)b + at / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES, kc);
            col = line;
        }
        for (size_t p = 0; p < kc; p++) bp[p * GF_NR + j] = col[p];
    }
}

/* One tile: t[r, c] (+)= sum over the block's kc of panel row r times panel column c, for
 * r < rows, c < cols. */
static inline __attribute__((always_inline)) void gf_tile(size_t kc, const float *ap, const float *bp, float *t,
                                                          size_t ldt, bool add, size_t rows, size_t cols) {
    __m512 acc[GF_MR][GF_NV];
    for (int r = 0; r < GF_MR; r++)
        for (int v = 0; v < GF_NV; v++) acc[r][v] = _mm512_setzero_ps();
    for (size_t p = 0; p < kc; p++) {
        __m512 bv[GF_NV];
        for (int v = 0; v < GF_NV; v++) bv[v] = _mm512_loadu_ps(bp + p * GF_NR + 16 * v);
        for (int r = 0; r < GF_MR; r++) {
            __m512 av = _mm512_set1_ps(ap[p * GF_MR + r]);
            for (int v = 0; v < GF_NV; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
    if (rows == GF_MR && cols == GF_NR) {
        for (int r = 0; r < GF_MR; r++)
            for (int v = 0; v < GF_NV; v++) {
                float *o = t + (size_t)r * ldt + 16 * v;
                _mm512_storeu_ps(o, add ? _mm512_add_ps(_mm512_loadu_ps(o), acc[r][v]) : acc[r][v]);
            }
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (int v = 0; v < GF_NV; v++) {
            size_t c = 16 * (size_t)v, have = cols > c ? gf_min(16, cols - c) : 0;
            __mmask16 mask = (__mmask16)((1u << have) - 1);
            float *o = t + r * ldt + c;
            __m512 x = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, o), acc[r][v]) : acc[r][v];
            _mm512_mask_storeu_ps(o, mask, x);
        }
}

static void gemm_f32(size_t m, size_t n, size_t k, const float *a, size_t lda, bool trans_a, const void *b,
                     tern_dtype bdt, size_t ldb, bool trans_b, float *t, size_t ldt, void *scratch) {
    size_t m_pad = (m + GF_MR - 1) / GF_MR * GF_MR;
    float *ap = scratch;
    float *bp = (float *)((unsigned char *)scratch + (m_pad * GF_KC * 4 + 63) / 64 * 64);
    if (k == 0) { /* an empty sum */
        for (size_t i = 0; i < m; i++) memset(t + i * ldt, 0, n * sizeof(float));
        return;
    }
    for (size_t k0 = 0; k0 < k; k0 += GF_KC) {
        size_t kc = gf_min(GF_KC, k - k0);
        gemm_pack_a_f32(ap, a, lda, trans_a, m, k0, kc, GF_MR);
        for (size_t j0 = 0; j0 < n; j0 += GF_NR) {
            size_t nr = gf_min(GF_NR, n - j0);
            gf_pack_b(bp, b, bdt, ldb, trans_b, j0, nr, k0, kc);
            for (size_t i0 = 0; i0 < m; i0 += GF_MR)
                gf_tile(kc, ap + (i0 / GF_MR) * kc * GF_MR, bp, t + i0 * ldt + j0, ldt, k0 > 0,
                        gf_min(GF_MR, m - i0), nr);
        }
    }
}
