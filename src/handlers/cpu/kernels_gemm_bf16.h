/* gemm_bf16 (kernels.h) on AVX-512 BF16: vdpbf16ps multiplies 16 pairs of bf16 by 16 pairs
 * and adds each pair's two exact products into an f32 lane, so a lane's k runs two at a time.
 * Included by kernels_avx512bf16.c only (compiled with -mavx512bf16).
 *
 * Blocking: k in blocks of KC; per block, A's rows are packed once into row panels of MR rows
 * (each k pair of a row one 32-bit word, broadcast to the lanes from memory), then B's columns
 * are packed panel by panel (NR columns, each k pair of a column one 32-bit word: rows kk and
 * kk + 1 interleaved), and every row panel runs against the panel while it is in L1
 * (KC x NR bf16: 36 KB). The tile of MR x NR sums (8 x 3 vectors: 24 of the 32 registers)
 * stays in registers across the block; t takes it at the block's end (added to t after the
 * first block). Edges (m, n not multiples of the tile, k odd) are packed with zeros, so the
 * inner loop never branches; masked stores keep t's outside untouched. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "handlers/cpu/kernels.h"

#define GB_MR CPU_GEMM_BF16_MR
#define GB_NR CPU_GEMM_BF16_NR
#define GB_NV (GB_NR / 16) /* vectors of 16 f32 lanes across a tile */
#define GB_KC CPU_GEMM_BF16_KC

_Static_assert(GB_NR % 16 == 0 && GB_KC % 2 == 0, "the bf16 GEMM's blocking");

static inline size_t gb_min(size_t a, size_t b) { return a < b ? a : b; }

/* A(i, kk), A(i, kk + 1) as one 32-bit word, the first in the low half; kk + 1 == k2 (the
 * block's end, k odd) gives a zero high half. */
static inline uint32_t gb_pair_a(const uint16_t *a, size_t lda, bool trans_a, size_t i, size_t kk,
                                 size_t k2) {
    uint16_t lo, hi = 0;
    if (!trans_a) {
        lo = a[i * lda + kk];
        if (kk + 1 < k2) hi = a[i * lda + kk + 1];
    } else {
        lo = a[kk * lda + i];
        if (kk + 1 < k2) hi = a[(kk + 1) * lda + i];
    }
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* Rows [0, m) and k [k0, k0 + kc) of A into row panels: panel ib holds kp = ceil(kc / 2)
 * pairs of MR words ([kp][MR], rows past m zero), panels kp * MR words apart. */
static void gb_pack_a(uint32_t *ap, const uint16_t *a, size_t lda, bool trans_a, size_t m, size_t k0,
                      size_t kc) {
    size_t kp = (kc + 1) / 2, k2 = k0 + kc;
    for (size_t i0 = 0; i0 < m; i0 += GB_MR) {
        uint32_t *panel = ap + (i0 / GB_MR) * kp * GB_MR;
        size_t rows = gb_min(GB_MR, m - i0);
        if (!trans_a) {
            for (size_t r = 0; r < rows; r++) {
                const uint16_t *row = a + (i0 + r) * lda + k0;
                size_t p = 0;
                for (; p < kc / 2; p++) { /* two bf16 of a row: one unaligned 32-bit load */
                    uint32_t w;
                    memcpy(&w, row + 2 * p, 4);
                    panel[p * GB_MR + r] = w;
                }
                if (p < kp) panel[p * GB_MR + r] = row[2 * p]; /* k odd: high half zero */
            }
        } else {
            for (size_t p = 0; p < kp; p++)
                for (size_t r = 0; r < rows; r++)
                    panel[p * GB_MR + r] = gb_pair_a(a, lda, true, i0 + r, k0 + 2 * p, k2);
        }
        for (size_t r = rows; r < GB_MR; r++)
            for (size_t p = 0; p < kp; p++) panel[p * GB_MR + r] = 0;
    }
}

/* Columns [j0, j0 + nr) (nr <= NR) and k [k0, k0 + kc) of B into one panel: [kp][NR] words,
 * word (p, j) = B(k0 + 2p, j0 + j) | B(k0 + 2p + 1, j0 + j) << 16; columns past nr and the
 * odd k's partner zero. */
static void gb_pack_b(uint16_t *bp, const uint16_t *b, size_t ldb, bool trans_b, size_t j0, size_t nr,
                      size_t k0, size_t kc) {
    size_t kp = (kc + 1) / 2;
    if (!trans_b) {
        /* B [k, n]: rows kk and kk + 1 side by side, 16 columns at a time, interleaved by one
         * two-source permute (word j of the result = element j of each row) */
        const __m512i idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                             39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
        for (size_t p = 0; p < kp; p++) {
            const uint16_t *r0 = b + (k0 + 2 * p) * ldb + j0;
            bool second = 2 * p + 1 < kc;
            /* the next panel's part of both rows (B comes from memory in a prompt: it is
             * on its way while this panel is multiplied; a prefetch never faults) */
            for (size_t r = 0; r < 2; r++)
                for (size_t c = GB_NR; c < 2 * GB_NR; c += 32) __builtin_prefetch(r0 + r * ldb + c, 0, 3);
            for (size_t v = 0; v < GB_NV; v++) {
                size_t c = 16 * v, have = nr > c ? gb_min(16, nr - c) : 0;
                __mmask32 mask = (__mmask32)((1u << have) - 1);
                __m512i x0 = _mm512_maskz_loadu_epi16(mask, r0 + c);
                __m512i x1 = second ? _mm512_maskz_loadu_epi16(mask, r0 + ldb + c) : _mm512_setzero_si512();
                _mm512_storeu_si512(bp + 2 * (p * GB_NR + c), _mm512_permutex2var_epi16(x0, idx, x1));
            }
        }
        return;
    }
    /* B [n, k]: a column's pairs are adjacent already; the panel is their transpose */
    uint32_t *w = (uint32_t *)bp;
    for (size_t j = 0; j < nr; j++) {
        const uint16_t *col = b + (j0 + j) * ldb + k0;
        /* the same k of the next panel's row j: B comes from memory (a prefetch never faults) */
        for (size_t c = 0; c < kc; c += 32) __builtin_prefetch(col + GB_NR * ldb + c, 0, 3);
        size_t p = 0;
        for (; p < kc / 2; p++) {
            uint32_t x;
            memcpy(&x, col + 2 * p, 4);
            w[p * GB_NR + j] = x;
        }
        if (p < kp) w[p * GB_NR + j] = col[2 * p];
    }
    for (size_t j = nr; j < GB_NR; j++)
        for (size_t p = 0; p < kp; p++) w[p * GB_NR + j] = 0;
}

/* One tile: t[r, c] (+)= sum over the block's kp pairs of panel row r times panel column c,
 * for r < rows, c < cols. */
static inline __attribute__((always_inline)) void gb_tile(size_t kp, const uint32_t *ap, const uint16_t *bp,
                                                          float *t, size_t ldt, bool add, size_t rows,
                                                          size_t cols) {
    __m512 acc[GB_MR][GB_NV];
    for (int r = 0; r < GB_MR; r++)
        for (int v = 0; v < GB_NV; v++) acc[r][v] = _mm512_setzero_ps();
    for (size_t p = 0; p < kp; p++) {
        __m512bh bv[GB_NV];
        for (int v = 0; v < GB_NV; v++) bv[v] = (__m512bh)_mm512_loadu_si512(bp + 2 * (p * GB_NR + 16 * v));
        for (int r = 0; r < GB_MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[p * GB_MR + r]);
            for (int v = 0; v < GB_NV; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
        }
    }
    if (rows == GB_MR && cols == GB_NR) {
        for (int r = 0; r < GB_MR; r++)
            for (int v = 0; v < GB_NV; v++) {
                float *o = t + (size_t)r * ldt + 16 * v;
                _mm512_storeu_ps(o, add ? _mm512_add_ps(_mm512_loadu_ps(o), acc[r][v]) : acc[r][v]);
            }
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (int v = 0; v < GB_NV; v++) {
            size_t c = 16 * (size_t)v, have = cols > c ? gb_min(16, cols - c) : 0;
            __mmask16 mask = (__mmask16)((1u << have) - 1);
            float *o = t + r * ldt + c;
            __m512 x = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, o), acc[r][v]) : acc[r][v];
            _mm512_mask_storeu_ps(o, mask, x);
        }
}

static void gemm_bf16(size_t m, size_t n, size_t k, const uint16_t *a, size_t lda, bool trans_a,
                      const uint16_t *b, size_t ldb, bool trans_b, float *t, size_t ldt, void *scratch) {
    size_t m_pad = (m + GB_MR - 1) / GB_MR * GB_MR;
    uint32_t *ap = scratch;
    uint16_t *bp = (uint16_t *)((unsigned char *)scratch + (m_pad * GB_KC * 2 + 63) / 64 * 64);
    if (k == 0) { /* an empty sum */
        for (size_t i = 0; i < m; i++) memset(t + i * ldt, 0, n * sizeof(float));
        return;
    }
    for (size_t k0 = 0; k0 < k; k0 += GB_KC) {
        size_t kc = gb_min(GB_KC, k - k0), kp = (kc + 1) / 2;
        gb_pack_a(ap, a, lda, trans_a, m, k0, kc);
        for (size_t j0 = 0; j0 < n; j0 += GB_NR) {
            size_t nr = gb_min(GB_NR, n - j0);
            gb_pack_b(bp, b, ldb, trans_b, j0, nr, k0, kc);
            for (size_t i0 = 0; i0 < m; i0 += GB_MR)
                gb_tile(kp, ap + (i0 / GB_MR) * kp * GB_MR, bp, t + i0 * ldt + j0, ldt, k0 > 0,
                        gb_min(GB_MR, m - i0), nr);
        }
    }
}
