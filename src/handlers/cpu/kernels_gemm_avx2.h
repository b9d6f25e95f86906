/* gemm_f32 (kernels.h) on AVX2 + FMA + F16C: the large-m product for an f32 A and a B in f32,
 * bf16, f16 or q8_0, every B converted to f32 (exactly) as it is packed. Included by
 * kernels_avx2.c only.
 *
 * Blocking, as the AVX-512 kernel's (kernels_gemm_f32.h) with AVX2's 16 registers: k in
 * blocks of KC; per block A's rows are packed once into row panels of MR rows ([kc][MR], each
 * element broadcast to the lanes from memory), then B's columns panel by panel ([kc][NR],
 * 16 KB: in L1 while every row panel runs against it). The tile of 6 rows x 2 vectors of 8
 * sums stays in registers across the block, with the 2 vectors of B and one broadcast of A:
 * 15 of the 16 registers. t takes the tile at the block's end (added to t after the first
 * block). Edges are packed with zeros, so the inner loop never branches; a partial tile goes
 * to t through a small buffer. On the Zen 3, one core, the tile loop alone (panels in L1)
 * ran at 90.5 GFLOP/s of the core's 94 (measured FMA peak); 4 x 3 vectors 64 and 3 x 4 21
 * (GCC spills their accumulators).
 *
 * Packing B: a [k, n] B gives each k a short run of NR columns, ldb apart; an [n, k] B
 * (Llama's layout, q8_0 always) is read 8 rows at a time along k and transposed 8 x 8 in
 * registers. Either way B comes from memory in a prompt: its lines are prefetched two panels
 * ahead by the tile loop (G2_PF_PANELS). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "handlers/cpu/kernels.h"
#include "handlers/cpu/kernels_gemm_pack.h"

#define G2_MR CPU_GEMM_AVX2_MR
#define G2_NV CPU_GEMM_AVX2_NV
#define G2_NR (8 * G2_NV)
#define G2_KC CPU_GEMM_F32_KC

_Static_assert(G2_KC % TERN_Q8_BLOCK == 0 && G2_MR <= CPU_GEMM_F32_MR && G2_NR <= CPU_GEMM_F32_NR,
               "the AVX2 GEMM's blocking fits CPU_GEMM_F32_SCRATCH");

static inline size_t g2_min(size_t a, size_t b) { return a < b ? a : b; }

/* 8 elements of B from element i as f32 (f32, bf16 or f16; `dt` is constant after inlining). */
static inline __attribute__((always_inline)) __m256 g2_load8(const void *b, size_t i, tern_dtype dt) {
    if (dt == TERN_F32) return _mm256_loadu_ps((const float *)b + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)b + i));
    if (dt == TERN_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

/* One element of B as f32. */
static inline float g2_load1(const void *b, size_t i, tern_dtype dt) {
    if (dt == TERN_F32) return ((const float *)b)[i];
    uint16_t h = ((const uint16_t *)b)[i];
    return dt == TERN_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
}

/* 8 weights of a q8_0 row from weight index i (i a multiple of 8) as f32: d * q, exactly. */
static inline __m256 g2_load8_q8(const void *b, size_t i) {
    const unsigned char *blk = (const unsigned char *)b + i / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES;
    uint16_t dh;
    memcpy(&dh, blk, 2);
    __m128i q = _mm_loadl_epi64((const __m128i *)(blk + 2 + i % TERN_Q8_BLOCK));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(dh)));
}

/* B [k, n]: columns [j0, j0 + nr) of k rows [k0, k0 + kc) into the panel [kc][NR]. */
static inline __attribute__((always_inline)) void g2_pack_b_kn(float *bp, const void *b, tern_dtype dt,
                                                                size_t ldb, size_t j0, size_t nr, size_t k0,
                                                                size_t kc) {
    for (size_t p = 0; p < kc; p++) {
        size_t at = (k0 + p) * ldb + j0;
        float *out = bp + p * G2_NR;
        if (nr == G2_NR) {
            for (int v = 0; v < G2_NV; v++) _mm256_storeu_ps(out + 8 * v, g2_load8(b, at + 8 * (size_t)v, dt));
        } else {
            for (size_t c = 0; c < G2_NR; c++) out[c] = c < nr ? g2_load1(b, at + c, dt) : 0;
        }
    }
}

/* The 8 x 8 block rows r[0..7] transposed in place: r[i] becomes column i. */
static inline __attribute__((always_inline)) void g2_transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3, then 4-7 */
        __m256 *u = t + 4 * h, *o = s + 4 * h;
        o[0] = _mm256_shuffle_ps(u[0], u[2], 0x44);
        o[1] = _mm256_shuffle_ps(u[0], u[2], 0xee);
        o[2] = _mm256_shuffle_ps(u[1], u[3], 0x44);
        o[3] = _mm256_shuffle_ps(u[1], u[3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x31);
    }
}

/* B [n, k]: rows [j0, j0 + nr) (the panel's columns) over k [k0, k0 + kc) into the panel
 * [kc][NR], 8 rows by 8 k at a time; rows past nr zero. q8_0 needs k0 and kc multiples of
 * 32. */
static inline __attribute__((always_inline)) void g2_pack_b_nk(float *bp, const void *b, tern_dtype dt,
                                                                size_t ldb, size_t j0, size_t nr, size_t k0,
                                                                size_t kc) {
    for (size_t g = 0; g < G2_NR; g += 8) { /* 8 columns of the panel */
        size_t rows = nr > g ? g2_min(8, nr - g) : 0;
        size_t p = 0;
        for (; p + 8 <= kc; p += 8) {
            __m256 x[8];
            for (size_t r = 0; r < 8; r++) {
                size_t at = (j0 + g + r) * ldb + k0 + p;
                x[r] = r >= rows ? _mm256_setzero_ps() : dt == TERN_Q8 ? g2_load8_q8(b, at) : g2_load8(b, at, dt);
            }
            g2_transpose8(x);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(bp + (p + (size_t)i) * G2_NR + g, x[i]);
        }
        for (; p < kc; p++) /* k's last few (not for q8_0: kc is a multiple of 32) */
            for (size_t r = 0; r < 8; r++)
                bp[p * G2_NR + g + r] = r < rows ? g2_load1(b, (j0 + g + r) * ldb + k0 + p, dt) : 0;
    }
}

static void g2_pack_b(float *bp, const void *b, tern_dtype dt, size_t ldb, bool trans_b, size_t j0, size_t nr,
                      size_t k0, size_t kc) {
    /* one copy of each loop per dtype, so the conversion is known inside it */
    switch (dt) {
    case TERN_F32:
        if (trans_b) g2_pack_b_nk(bp, b, TERN_F32, ldb, j0, nr, k0, kc);
        else g2_pack_b_kn(bp, b, TERN_F32, ldb, j0, nr, k0, kc);
        break;
    case TERN_BF16:
        if (trans_b) g2_pack_b_nk(bp, b, TERN_BF16, ldb, j0, nr, k0, kc);
        else g2_pack_b_kn(bp, b, TERN_BF16, ldb, j0, nr, k0, kc);
        break;
    case TERN_F16:
        if (trans_b) g2_pack_b_nk(bp, b, TERN_F16, ldb, j0, nr, k0, kc);
        else g2_pack_b_kn(bp, b, TERN_F16, ldb, j0, nr, k0, kc);
        break;
    default: /* q8_0: [n, k] only */
        g2_pack_b_nk(bp, b, TERN_Q8, ldb, j0, nr, k0, kc);
        break;
    }
}

/* Where B's lines are prefetched: the panel PF_PANELS ahead of the one being multiplied, one
 * line per k step of the panel's first tile, at pf + (p % NR) * across + (p / NR) * along
 * (g2_prefetch_plan). Spread over the tile rather than issued in a burst by the packing (which
 * measured no better than none: the misses a core keeps in flight are few), they arrive while
 * the FMAs run: single thread, 64 x 1152 x 768 f32 [k, n] from memory, 1.83-1.88 -> 1.53-1.60
 * ms (distances 3, 4 and 6 panels, and prefetcht1/t2, within the noise of 2). */
#define G2_PF_PANELS 2

typedef struct g2_prefetch {
    const char *pf;
    size_t across, along;
} g2_prefetch;

/* The lines of the panel of columns [j, j + NR) over k [k0, k0 + kc): for a [k, n] B its k
 * rows' runs (one line each), for an [n, k] B its NR rows' runs of kc elements. */
static g2_prefetch g2_prefetch_plan(const void *b, tern_dtype dt, size_t ldb, bool trans_b, size_t j, size_t k0) {
    const char *base = b;
    if (dt == TERN_Q8) /* [n, k]: ldb and k0 multiples of 32 */
        return (g2_prefetch){base + (j * ldb + k0) / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES,
                             ldb / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES, 64};
    size_t es = dt == TERN_F32 ? 4 : 2;
    if (trans_b) return (g2_prefetch){base + (j * ldb + k0) * es, ldb * es, 64};
    return (g2_prefetch){base + (k0 * ldb + j) * es, ldb * es, G2_NR * ldb * es};
}

/* One tile: t[r, c] (+)= sum over the block's kc of panel row r times panel column c, for
 * r < rows, c < cols; one line of B prefetched a k step as pf says (a prefetch never
 * faults: past B's end it does nothing). */
static inline __attribute__((always_inline)) void g2_tile(size_t kc, const float *ap, const float *bp, float *t,
                                                          size_t ldt, bool add, size_t rows, size_t cols,
                                                          g2_prefetch pf) {
    __m256 acc[G2_MR][G2_NV];
    for (int r = 0; r < G2_MR; r++)
        for (int v = 0; v < G2_NV; v++) acc[r][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (size_t p = 0; p < kc; p++) {
        __m256 bv[G2_NV];
        __builtin_prefetch(pf.pf + p % G2_NR * pf.across + p / G2_NR * pf.along, 0, 3);
        for (int v = 0; v < G2_NV; v++) bv[v] = _mm256_loadu_ps(bp + p * G2_NR + 8 * v);
        for (int r = 0; r < G2_MR; r++) {
            __m256 av = _mm256_broadcast_ss(ap + p * G2_MR + r);
            for (int v = 0; v < G2_NV; v++) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
    if (rows == G2_MR && cols == G2_NR) {
        for (int r = 0; r < G2_MR; r++)
            for (int v = 0; v < G2_NV; v++) {
                float *o = t + (size_t)r * ldt + 8 * v;
                _mm256_storeu_ps(o, add ? _mm256_add_ps(_mm256_loadu_ps(o), acc[r][v]) : acc[r][v]);
            }
        return;
    }
    float part[G2_MR][G2_NR];
    for (int r = 0; r < G2_MR; r++)
        for (int v = 0; v < G2_NV; v++) _mm256_storeu_ps(part[r] + 8 * v, acc[r][v]);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) t[r * ldt + c] = add ? t[r * ldt + c] + part[r][c] : part[r][c];
}

static void gemm_f32(size_t m, size_t n, size_t k, const float *a, size_t lda, bool trans_a, const void *b,
                     tern_dtype bdt, size_t ldb, bool trans_b, float *t, size_t ldt, void *scratch) {
    size_t m_pad = (m + G2_MR - 1) / G2_MR * G2_MR;
    float *ap = scratch;
    float *bp = (float *)((unsigned char *)scratch + (m_pad * G2_KC * 4 + 63) / 64 * 64);
    if (k == 0) { /* an empty sum */
        for (size_t i = 0; i < m; i++) memset(t + i * ldt, 0, n * sizeof(float));
        return;
    }
    for (size_t k0 = 0; k0 < k; k0 += G2_KC) {
        size_t kc = g2_min(G2_KC, k - k0);
        gemm_pack_a_f32(ap, a, lda, trans_a, m, k0, kc, G2_MR);
        for (size_t j0 = 0; j0 < n; j0 += G2_NR) {
            size_t nr = g2_min(G2_NR, n - j0);
            g2_pack_b(bp, b, bdt, ldb, trans_b, j0, nr, k0, kc);
            g2_prefetch ahead = g2_prefetch_plan(b, bdt, ldb, trans_b, j0 + G2_PF_PANELS * G2_NR, k0);
            g2_prefetch none = {(const char *)bp, 0, 0}; /* the other tiles: a line in L1 */
            for (size_t i0 = 0; i0 < m; i0 += G2_MR)
                g2_tile(kc, ap + (i0 / G2_MR) * kc * G2_MR, bp, t + i0 * ldt + j0, ldt, k0 > 0,
                        g2_min(G2_MR, m - i0), nr, i0 == 0 ? ahead : none);
        }
    }
}
