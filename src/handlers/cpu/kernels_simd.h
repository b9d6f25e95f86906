/* The body of every kernel table (kernels.h), written once over a small vector vocabulary
 * that each kernels_<isa>.c defines before including this file:
 *
 *   VN                     lanes of one vector of f32
 *   vf                     the vector type
 *   VZERO(), VSET1(x)      all lanes 0, all lanes x
 *   VFMA(a, b, c)          a * b + c lane by lane
 *   VADD(a, b), VHSUM(v)   lane-wise sum; the sum of v's lanes
 *   VMUL(a, b)             lane-wise product
 *   VLOAD_I8(p)            VN int8 (const unsigned char *p) as f32
 *   SCALAR_F16(h)          one f16 (uint16_t) as f32
 *   VLOAD(p), VSTORE(p, v) VN floats, unaligned
 *   VLOAD_BF16(p)          VN bf16 (uint16_t *p) as f32
 *   VLOAD_F16(p)           VN f16 as f32
 *   VSTORE_BF16(p, v)      VN f32 into bf16, rounding to nearest even, NaN quieted as
 *                          tern_f32_to_bf16 does
 *   VSTORE_F16(p, v)       VN f32 into f16, rounding to nearest even
 *   TABLE, TABLE_NAME      the cpu_kernels table to define (kernels.h declares it), and
 *                          its name string
 *   TABLE_GEMM_BF16        (optional) the table's gemm_bf16, defined before this file
 *   TABLE_GEMM_F32         (optional) the table's gemm_f32, likewise
 *   TABLE_GEMM_F32_MATMUL  with TABLE_GEMM_F32: the B dtypes matmul hands it (kernels.h)
 *
 * The weights B are streamed once, in their own dtype, converted to f32 in registers; rows
 * are read start to end in long runs (hardware prefetchers follow a few long streams far
 * better than many short ones). Every sum is in f32 with several independent accumulators,
 * so the loop is bound by memory, not by the latency of one chain of adds. */
#include <string.h>

#include "handlers/cpu/kernels.h"
#include "tern/half.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Software prefetch of B, this many bytes ahead of the loads. On a 2-core Zen 5 the hardware
 * prefetchers alone left the q8_0 and bf16 lm heads ([n, k]) at a third of the memory's speed
 * and the [k, n] products well below it; these distances were the best of 4-24 KB there
 * (docs/PERFORMANCE.md; 4 and 16 KB for PF_T_BYTES, 6 and 24 KB for PF_NT_BYTES measured
 * again with one row at a time: within 3%). Into L1 (prefetcht0: A, t and the distance fit
 * Zen 5's 48 KB L1): the whole decode, alternating token by token, fp32 4-8% faster than
 * prefetcht1 (into L2), bf16 and q8_0 level within 2%; prefetchnta fp32 3-5% faster, bf16
 * 5-8% slower. For one row of A every kernel reads B's rows one at a time, one sequential
 * stream a thread; for more, the [n, k] kernels read two rows side by side, each prefetched
 * PF_T_BYTES ahead, which together cover the next bytes of the contiguous block of rows. */
#define PF_T_BYTES 8192
#define PF_NT_BYTES 12288
#define PREFETCH(p, ahead) __builtin_prefetch((const char *)(p) + (ahead), 0, 3)

/* One element of B (f32, bf16 or f16) as f32. */
ALWAYS_INLINE float load1(const void *b, size_t i, tern_dtype dt) {
    if (dt == TERN_F32) return ((const float *)b)[i];
    uint16_t h = ((const uint16_t *)b)[i];
    return dt == TERN_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
}

/* VN elements of B from element i, as f32. `dt` is a constant after inlining. */
ALWAYS_INLINE vf loadv(const void *b, size_t i, tern_dtype dt) {
    if (dt == TERN_F32) return VLOAD((const float *)b + i);
    if (dt == TERN_BF16) return VLOAD_BF16((const uint16_t *)b + i);
    return VLOAD_F16((const uint16_t *)b + i);
}

/* ---- B stored [n, k]: one dot product per output column ---- */

/* Columns j .. j + C of t (C = 1 or 2: rows j0 + j .. of B) for R rows of A, U accumulators
 * per row and column along k; with C = 2 each vector of A loaded feeds two products. */
ALWAYS_INLINE void kernel_t_cols(const int R, const int C, const int U, const tern_dtype dt, const float *a,
                                 size_t k, const void *b, size_t ldb, size_t j0, size_t j, float *t,
                                 size_t ldt) {
    const size_t step = (size_t)VN * (size_t)U;
    const size_t kfull = k / step * step, kvec = k / VN * VN;
    const size_t es = dt == TERN_F32 ? 4 : 2;
    size_t row[2];
    for (int c = 0; c < C; c++) row[c] = (j0 + j + (size_t)c) * ldb;
    vf acc[2][CPU_SMALL_M][4];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int u = 0; u < U; u++) acc[c][r][u] = VZERO();
    for (size_t kk = 0; kk < kfull; kk += step) {
        vf bv[2][4];
        for (int c = 0; c < C; c++)
            for (int u = 0; u < U; u++) bv[c][u] = loadv(b, row[c] + kk + (size_t)(VN * u), dt);
        for (int c = 0; c < C; c++) { /* each 64 bytes of the step's runs, PF_T_BYTES ahead */
            const char *pc = (const char *)b + (row[c] + kk) * es;
            for (size_t off = 0; off < step * es; off += 64) PREFETCH(pc + off, PF_T_BYTES);
        }
        for (int r = 0; r < R; r++)
            for (int u = 0; u < U; u++) {
                vf av = VLOAD(a + (size_t)r * k + kk + (size_t)(VN * u));
                for (int c = 0; c < C; c++) acc[c][r][u] = VFMA(av, bv[c][u], acc[c][r][u]);
            }
    }
    for (size_t kk = kfull; kk < kvec; kk += VN) {
        vf bv[2];
        for (int c = 0; c < C; c++) bv[c] = loadv(b, row[c] + kk, dt);
        for (int r = 0; r < R; r++) {
            vf av = VLOAD(a + (size_t)r * k + kk);
            for (int c = 0; c < C; c++) acc[c][r][0] = VFMA(av, bv[c], acc[c][r][0]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) {
            vf sum = acc[c][r][0];
            for (int u = 1; u < U; u++) sum = VADD(sum, acc[c][r][u]);
            float x = VHSUM(sum);
            for (size_t kk = kvec; kk < k; kk++) x += a[(size_t)r * k + kk] * load1(b, row[c] + kk, dt);
            t[(size_t)r * ldt + j + (size_t)c] = x;
        }
}

/* Columns j0 .. j0 + w of t for R rows of A. One row of A (decoding batch 1): B's rows one at
 * a time, one sequential stream (whole decode on the Zen 5, alternating token by token:
 * bf16 9-11%, fp32 2-6% faster than two rows side by side; docs/PERFORMANCE.md). More rows:
 * two columns together (not measured against one). */
ALWAYS_INLINE void kernel_t(const int R, const int U, const tern_dtype dt, const float *a, size_t k,
                            const void *b, size_t ldb, size_t j0, size_t w, float *t, size_t ldt) {
    size_t j = 0;
    if (R > 1)
        for (; j + 2 <= w; j += 2) kernel_t_cols(R, 2, U, dt, a, k, b, ldb, j0, j, t, ldt);
    for (; j < w; j++) kernel_t_cols(R, 1, U, dt, a, k, b, ldb, j0, j, t, ldt);
}

/* ---- B stored [k, n]: rows of B scaled by A's entries and added into t ---- */

/* G rows of B at a time: each vector of t is loaded and stored once per G rows instead of
 * once per row, which keeps the loop on the loads of B rather than on t's stores. */
ALWAYS_INLINE void kernel_nt_rows(const int R, const int G, const tern_dtype dt, const float *a,
                                  size_t k, const void *b, size_t ldb, size_t kk, size_t j0,
                                  size_t w, float *t, size_t ldt) {
    vf ar[CPU_SMALL_M][4];
    for (int r = 0; r < R; r++)
        for (int g = 0; g < G; g++) ar[r][g] = VSET1(a[(size_t)r * k + kk + (size_t)g]);
    const size_t wvec = w / VN * VN;
    for (size_t v = 0; v < wvec; v += VN) {
        vf bv[4];
        for (int g = 0; g < G; g++) bv[g] = loadv(b, (kk + (size_t)g) * ldb + j0 + v, dt);
        const size_t es = dt == TERN_F32 ? 4 : 2;
        if ((v * es) % 64 < VN * es) /* once per 64 bytes of each row */
            for (int g = 0; g < G; g++) PREFETCH((const char *)b + ((kk + (size_t)g) * ldb + j0 + v) * es, PF_NT_BYTES);
        for (int r = 0; r < R; r++) {
            float *tr = t + (size_t)r * ldt + v;
            vf acc = VLOAD(tr);
            for (int g = 0; g < G; g++) acc = VFMA(ar[r][g], bv[g], acc);
            VSTORE(tr, acc);
        }
    }
    for (size_t v = wvec; v < w; v++)
        for (int g = 0; g < G; g++) {
            float bx = load1(b, (kk + (size_t)g) * ldb + j0 + v, dt);
            for (int r = 0; r < R; r++) t[(size_t)r * ldt + v] += a[(size_t)r * k + kk + (size_t)g] * bx;
        }
}

ALWAYS_INLINE void kernel_nt(const int R, const tern_dtype dt, const float *a, size_t k,
                             const void *b, size_t ldb, size_t k0, size_t k1, size_t j0,
                             size_t w, float *t, size_t ldt) {
    size_t kk = k0;
    /* One row of A (decoding batch 1): B's rows one at a time, so B is read as one
     * sequential stream (with the prefetch above: the bf16 decode step's products 8.2-9.0 ->
     * 5.5-5.6 ms on the Zen 5); t's extra loads and stores stay in L1. More rows: G = 4, each
     * vector of t loaded and stored once per 4 rows of B (not measured against G = 1). */
    if (R > 1)
        for (; kk + 4 <= k1; kk += 4) kernel_nt_rows(R, 4, dt, a, k, b, ldb, kk, j0, w, t, ldt);
    for (; kk < k1; kk++) kernel_nt_rows(R, 1, dt, a, k, b, ldb, kk, j0, w, t, ldt);
}

/* ---- q8_0 B stored [n, k] (effect.h: blocks of 32 int8 and an f16 scale along k), with
 * int8 activations (q8_quantize_a): llama.cpp's q8_0 x q8_0 product ---- */

/* A's rows quantized per block of 32 (kernels.h says what): plain C that each table's flags
 * vectorise. ISO C mode does not contract x * id + 0.5 into an FMA, so every table writes
 * the same bytes. */
static void q8_quantize_a(int m, const float *a, size_t k, void *aq) {
    const size_t blocks = (size_t)m * (k / TERN_Q8_BLOCK);
    int8_t *q = aq;
    float *d = (float *)((unsigned char *)aq + (size_t)m * k);
    for (size_t b = 0; b < blocks; b++) {
        const float *x = a + b * TERN_Q8_BLOCK;
        int8_t *qb = q + b * TERN_Q8_BLOCK;
        float amax = 0, zero = 0;
        for (int i = 0; i < TERN_Q8_BLOCK; i++) {
            float v = x[i] < 0 ? -x[i] : x[i];
            amax = v > amax ? v : amax;
            zero += x[i] * 0.0f; /* NaN when some x[i] is infinite or NaN */
        }
        if (zero != 0.0f) { /* not finite: NaN out, as the f32 product would */
            memset(qb, 0, TERN_Q8_BLOCK);
            d[b] = __builtin_nanf("");
            continue;
        }
        float db = amax / 127.0f, id = db > 0 ? 1.0f / db : 0.0f;
        d[b] = db;
        for (int i = 0; i < TERN_Q8_BLOCK; i++) {
            float v = x[i] * id;
            v += v < 0 ? -0.5f : 0.5f; /* then truncated: to nearest, ties away from zero */
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            qb[i] = (int8_t)(int32_t)v;
        }
    }
}

/* Columns j .. j + C of t for R rows of A, from the quantized A (qa: int8 [R, k]; da: R rows
 * of k / 32 scales): each block's 32 products summed exactly in int32 (Q8_FMA), converted to
 * f32 and multiplied by d_b d_a once, accumulated in f32. The ISA supplies:
 *   q8acc, Q8_ZERO(), Q8_HSUM(acc)   the f32 accumulator (lanes of partial sums)
 *   q8w, Q8_W(p)                     32 weights at p, ready for Q8_FMA (e.g. |w| and w)
 *   q8a, Q8_A(p)                     32 activations at p
 *   Q8_FMA(acc, w, a, s)             acc + (sum of w[i] a[i]) s, the sum exact */
ALWAYS_INLINE void kernel_t_q8_cols(const int R, const int C, const int8_t *qa, const float *da,
                                     size_t k, const unsigned char *rows, size_t row_bytes,
                                     size_t j, float *t, size_t ldt) {
    const size_t blocks = k / TERN_Q8_BLOCK;
    q8acc acc[2][CPU_SMALL_M];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) acc[c][r] = Q8_ZERO();
    for (size_t q = 0; q < blocks; q++) {
        q8w wv[2];
        float dw[2];
        for (int c = 0; c < C; c++) {
            const unsigned char *blk = rows + (j + (size_t)c) * row_bytes + q * TERN_Q8_BLOCK_BYTES;
            uint16_t dh;
            memcpy(&dh, blk, 2);
            dw[c] = SCALAR_F16(dh);
            wv[c] = Q8_W(blk + 2);
            PREFETCH(blk, PF_T_BYTES);
        }
        for (int r = 0; r < R; r++) {
            q8a av = Q8_A(qa + (size_t)r * k + q * TERN_Q8_BLOCK);
            float dr = da[(size_t)r * blocks + q];
            for (int c = 0; c < C; c++) acc[c][r] = Q8_FMA(acc[c][r], wv[c], av, dw[c] * dr);
        }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) t[(size_t)r * ldt + j + (size_t)c] = Q8_HSUM(acc[c][r]);
}

ALWAYS_INLINE void kernel_t_q8(const int R, const void *aq, size_t k, const void *b, size_t ldb,
                                size_t j0, size_t w, float *t, size_t ldt) {
    const size_t row_bytes = ldb / TERN_Q8_BLOCK * TERN_Q8_BLOCK_BYTES;
    const unsigned char *rows = (const unsigned char *)b + j0 * row_bytes;
    const int8_t *qa = aq;
    const float *da = (const float *)((const unsigned char *)aq + (size_t)R * k);
    size_t j = 0;
    /* one row of A: B's rows one at a time, as kernel_t (q8-all whole decode 15-21% faster
     * than two side by side on the Zen 5) */
    if (R > 1)
        for (; j + 2 <= w; j += 2) kernel_t_q8_cols(R, 2, qa, da, k, rows, row_bytes, j, t, ldt);
    for (; j < w; j++) kernel_t_q8_cols(R, 1, qa, da, k, rows, row_bytes, j, t, ldt);
}

static void small_t_q8(int m, const void *aq, size_t k, const void *b, size_t ldb, size_t j0,
                        size_t w, float *t, size_t ldt) {
    switch (m) {
    case 1: kernel_t_q8(1, aq, k, b, ldb, j0, w, t, ldt); break;
    case 2: kernel_t_q8(2, aq, k, b, ldb, j0, w, t, ldt); break;
    case 3: kernel_t_q8(3, aq, k, b, ldb, j0, w, t, ldt); break;
    case 4: kernel_t_q8(4, aq, k, b, ldb, j0, w, t, ldt); break;
    case 5: kernel_t_q8(5, aq, k, b, ldb, j0, w, t, ldt); break;
    case 6: kernel_t_q8(6, aq, k, b, ldb, j0, w, t, ldt); break;
    case 7: kernel_t_q8(7, aq, k, b, ldb, j0, w, t, ldt); break;
    case 8: kernel_t_q8(8, aq, k, b, ldb, j0, w, t, ldt); break;
    default: break;
    }
}

/* Instantiates a kernel for each constant row count and B dtype. */
#define SMALL_CASES(R, CALL)                                                                 \
    case R:                                                                                  \
        if (dt == TERN_F32) CALL(R, TERN_F32);                                               \
        else if (dt == TERN_BF16) CALL(R, TERN_BF16);                                        \
        else CALL(R, TERN_F16);                                                              \
        break;
#define SMALL_SWITCH(CALL)                                                                   \
    switch (m) {                                                                             \
        SMALL_CASES(1, CALL)                                                                 \
        SMALL_CASES(2, CALL)                                                                 \
        SMALL_CASES(3, CALL)                                                                 \
        SMALL_CASES(4, CALL)                                                                 \
        SMALL_CASES(5, CALL)                                                                 \
        SMALL_CASES(6, CALL)                                                                 \
        SMALL_CASES(7, CALL)                                                                 \
        SMALL_CASES(8, CALL)                                                                 \
    default: break;                                                                          \
    }

static void small_t(int m, tern_dtype dt, const float *a, size_t k, const void *b, size_t ldb,
                    size_t j0, size_t w, float *t, size_t ldt) {
    /* accumulators: 2 columns x R rows x U must fit the register file with the loads */
#define CALL_T(R, DT) kernel_t(R, R == 1 ? 4 : R == 2 ? 2 : 1, DT, a, k, b, ldb, j0, w, t, ldt)
    SMALL_SWITCH(CALL_T)
#undef CALL_T
}

static void small_nt(int m, tern_dtype dt, const float *a, size_t k, const void *b, size_t ldb,
                     size_t k0, size_t k1, size_t j0, size_t w, float *t, size_t ldt) {
#define CALL_NT(R, DT) kernel_nt(R, DT, a, k, b, ldb, k0, k1, j0, w, t, ldt)
    SMALL_SWITCH(CALL_NT)
#undef CALL_NT
}

#include "kernels_attention.h"

/* ---- row conversions ---- */

static void bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + VN <= n; i += VN) VSTORE(dst + i, VLOAD_BF16(src + i));
    for (; i < n; i++) dst[i] = tern_bf16_to_f32(src[i]);
}

static void f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + VN <= n; i += VN) VSTORE_BF16(dst + i, VLOAD(src + i));
    for (; i < n; i++) dst[i] = tern_f32_to_bf16(src[i]);
}

static void f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + VN <= n; i += VN) VSTORE(dst + i, VLOAD_F16(src + i));
    for (; i < n; i++) dst[i] = tern_f16_to_f32(src[i]);
}

static void f32_to_f16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + VN <= n; i += VN) VSTORE_F16(dst + i, VLOAD(src + i));
    for (; i < n; i++) dst[i] = tern_f32_to_f16(src[i]);
}

static void q8_to_f32(float *dst, const void *src, size_t n) {
    const unsigned char *blk = src;
    for (size_t b = 0; b < n / TERN_Q8_BLOCK; b++, blk += TERN_Q8_BLOCK_BYTES) {
        uint16_t dh;
        memcpy(&dh, blk, 2);
        vf dv = VSET1(SCALAR_F16(dh));
        for (int u = 0; u < TERN_Q8_BLOCK / VN; u++)
            VSTORE(dst + b * TERN_Q8_BLOCK + (size_t)(VN * u), VMUL(VLOAD_I8(blk + 2 + VN * u), dv));
    }
}

const cpu_kernels TABLE = {
    .name = TABLE_NAME,
    .small_t = small_t,
    .small_nt = small_nt,
    .small_t_q8 = small_t_q8,
    .q8_quantize_a = q8_quantize_a,
    .bf16_to_f32 = bf16_to_f32,
    .f32_to_bf16 = f32_to_bf16,
    .f16_to_f32 = f16_to_f32,
    .f32_to_f16 = f32_to_f16,
    .q8_to_f32 = q8_to_f32,
    .attn_scores = attn_scores,
    .attn_values = attn_values,
#ifdef TABLE_GEMM_BF16
    .gemm_bf16 = TABLE_GEMM_BF16,
#endif
#ifdef TABLE_GEMM_F32
    .gemm_f32 = TABLE_GEMM_F32,
#endif
#ifdef TABLE_GEMM_F32_MATMUL
    .gemm_f32_matmul = TABLE_GEMM_F32_MATMUL,
#endif
};
