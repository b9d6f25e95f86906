/* matmul for few rows (m <= CPU_SMALL_M), the decoding case: the time is reading B, so B
 * (f32, bf16 or f16) is streamed once, in its own dtype, converted to f32 in registers, and
 * threaded over n. A is packed to dense f32 [m, k] first (it is small).
 *
 * Two kernels, by B's layout:
 *  - B stored [k, n] (not transposed): each unit owns a block of columns; for every 4 rows
 *    of B it adds a[r][kk..kk+3] * B[kk..kk+3, block] into an f32 tile that stays in L1, so
 *    B is read as 4 contiguous streams.
 *  - B stored [n, k] (transposed, e.g. the tied embedding as lm head): each output column is
 *    a dot product of contiguous rows; several B rows at a time, reduced at the end.
 * Both accumulate in f32, then cpu_mm_finish applies alpha, beta, bias and the epilogue. */
#include <omp.h>
#include <string.h>

#include "cpu.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define SMALL_AVX512 1
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Columns per unit of work at most: the f32 tile (m x 512) stays in L1. */
#define UNIT_COLS 512

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Dense f32 copy [m, k] of A's entry e (transposing when A is stored [k, m]). */
static void pack_a(const cpu_mm *mm, int e, float *dst) {
    const tern_matmul_dims *dm = &mm->dims;
    size_t m = (size_t)dm->m, k = (size_t)dm->k, base = (size_t)e * dm->stride_a;
    if (!dm->trans_a) {
        for (size_t i = 0; i < m; i++)
            cpu_to_f32(dst + i * k, cpu_at(mm->a_in, base + i * dm->lda), mm->a_in.dtype, k);
        return;
    }
    float row[CPU_SMALL_M];
    for (size_t kk = 0; kk < k; kk++) {
        cpu_to_f32(row, cpu_at(mm->a_in, base + kk * dm->lda), mm->a_in.dtype, m);
        for (size_t i = 0; i < m; i++) dst[i * k + kk] = row[i];
    }
}

#ifdef SMALL_AVX512

/* 16 elements of B (f32, bf16 or f16) at element index idx, as f32; lanes outside mask are 0
 * and are not read. `dt` is a constant after inlining. */
ALWAYS_INLINE __m512 load16(const void *base, size_t idx, tern_dtype dt, __mmask16 mask) {
    if (dt == TERN_F32) return _mm512_maskz_loadu_ps(mask, (const float *)base + idx);
    __m256i h = _mm256_maskz_loadu_epi16(mask, (const uint16_t *)base + idx);
    if (dt == TERN_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

static __mmask16 tail_mask(size_t count) {
    return count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1u);
}

/* t[r][0..w) = sum over kk of a[r][kk] * B[kk, j0..j0+w), B stored [k, n]. t rows are
 * ldt >= round_up(w, 16) floats. */
ALWAYS_INLINE void kernel_nt(const int R, const tern_dtype dt, const float *a, size_t k,
                             const void *b, size_t ldb, size_t j0, size_t w, float *t, size_t ldt) {
    size_t nvec = ceil_div(w, 16);
    __mmask16 last = tail_mask(w - (nvec - 1) * 16);
    for (int r = 0; r < R; r++) memset(t + (size_t)r * ldt, 0, nvec * 16 * sizeof(float));
    size_t kk = 0;
    for (; kk + 4 <= k; kk += 4) {
        const size_t row0 = kk * ldb + j0;
        for (size_t v = 0; v < nvec; v++) {
            __mmask16 mask = v + 1 == nvec ? last : (__mmask16)0xffff;
            size_t at = row0 + v * 16;
            __m512 b0 = load16(b, at, dt, mask);
            __m512 b1 = load16(b, at + ldb, dt, mask);
            __m512 b2 = load16(b, at + 2 * ldb, dt, mask);
            __m512 b3 = load16(b, at + 3 * ldb, dt, mask);
            for (int r = 0; r < R; r++) {
                const float *ar = a + (size_t)r * k + kk;
                float *tr = t + (size_t)r * ldt + v * 16;
                __m512 acc = _mm512_load_ps(tr);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(ar[0]), b0, acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(ar[1]), b1, acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(ar[2]), b2, acc);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(ar[3]), b3, acc);
                _mm512_store_ps(tr, acc);
            }
        }
    }
    for (; kk < k; kk++) {
        for (size_t v = 0; v < nvec; v++) {
            __mmask16 mask = v + 1 == nvec ? last : (__mmask16)0xffff;
            __m512 b0 = load16(b, kk * ldb + j0 + v * 16, dt, mask);
            for (int r = 0; r < R; r++) {
                float *tr = t + (size_t)r * ldt + v * 16;
                _mm512_store_ps(tr, _mm512_fmadd_ps(_mm512_set1_ps(a[(size_t)r * k + kk]), b0,
                                                    _mm512_load_ps(tr)));
            }
        }
    }
}

/* t[r][j - j0] = dot(a[r][0..k), B[j, 0..k)) for j in [j0, j0 + w), B stored [n, k]. NQ rows
 * of B at a time (R * NQ accumulators). */
ALWAYS_INLINE void kernel_t(const int R, const int NQ, const tern_dtype dt, const float *a,
                            size_t k, const void *b, size_t ldb, size_t j0, size_t w, float *t,
                            size_t ldt) {
    size_t kfull = k / 16 * 16;
    __mmask16 last = tail_mask(k - kfull);
    for (size_t j = 0; j < w; j += (size_t)NQ) {
        size_t rows[8];
        for (int q = 0; q < NQ; q++) /* past the block's end: repeat its last row, unused */
            rows[q] = (j0 + (j + (size_t)q < w ? j + (size_t)q : w - 1)) * ldb;
        __m512 acc[CPU_SMALL_M][4];
        for (int r = 0; r < R; r++)
            for (int q = 0; q < NQ; q++) acc[r][q] = _mm512_setzero_ps();
        for (size_t kk = 0; kk < kfull; kk += 16) {
            __m512 bq[4];
            for (int q = 0; q < NQ; q++) bq[q] = load16(b, rows[q] + kk, dt, 0xffff);
            for (int r = 0; r < R; r++) {
                __m512 ar = _mm512_loadu_ps(a + (size_t)r * k + kk);
                for (int q = 0; q < NQ; q++) acc[r][q] = _mm512_fmadd_ps(ar, bq[q], acc[r][q]);
            }
        }
        if (kfull < k) {
            __m512 bq[4];
            for (int q = 0; q < NQ; q++) bq[q] = load16(b, rows[q] + kfull, dt, last);
            for (int r = 0; r < R; r++) {
                __m512 ar = _mm512_maskz_loadu_ps(last, a + (size_t)r * k + kfull);
                for (int q = 0; q < NQ; q++) acc[r][q] = _mm512_fmadd_ps(ar, bq[q], acc[r][q]);
            }
        }
        for (int r = 0; r < R; r++)
            for (int q = 0; q < NQ && j + (size_t)q < w; q++)
                t[(size_t)r * ldt + j + (size_t)q] = _mm512_reduce_add_ps(acc[r][q]);
    }
}

/* Instantiates the kernels for a constant row count and B dtype. */
#define SMALL_CASES(R)                                                                          \
    case R:                                                                                     \
        if (trans_b) {                                                                          \
            if (dt == TERN_F32) kernel_t(R, R <= 4 ? 4 : 2, TERN_F32, a, k, b, ldb, j0, w, t, ldt);   \
            else if (dt == TERN_BF16) kernel_t(R, R <= 4 ? 4 : 2, TERN_BF16, a, k, b, ldb, j0, w, t, ldt); \
            else kernel_t(R, R <= 4 ? 4 : 2, TERN_F16, a, k, b, ldb, j0, w, t, ldt);              \
        } else {                                                                                \
            if (dt == TERN_F32) kernel_nt(R, TERN_F32, a, k, b, ldb, j0, w, t, ldt);             \
            else if (dt == TERN_BF16) kernel_nt(R, TERN_BF16, a, k, b, ldb, j0, w, t, ldt);      \
            else kernel_nt(R, TERN_F16, a, k, b, ldb, j0, w, t, ldt);                           \
        }                                                                                       \
        break;

static void small_block(int m, bool trans_b, tern_dtype dt, const float *a, size_t k,
                        const void *b, size_t ldb, size_t j0, size_t w, float *t, size_t ldt) {
    switch (m) {
        SMALL_CASES(1)
        SMALL_CASES(2)
        SMALL_CASES(3)
        SMALL_CASES(4)
        SMALL_CASES(5)
        SMALL_CASES(6)
        SMALL_CASES(7)
        SMALL_CASES(8)
    default: break;
    }
}

#else /* portable fallback */

static float load1(const void *base, size_t idx, tern_dtype dt) {
    if (dt == TERN_F32) return ((const float *)base)[idx];
    uint16_t h = ((const uint16_t *)base)[idx];
    return dt == TERN_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
}

static void small_block(int m, bool trans_b, tern_dtype dt, const float *a, size_t k,
                        const void *b, size_t ldb, size_t j0, size_t w, float *t, size_t ldt) {
    for (int r = 0; r < m; r++) memset(t + (size_t)r * ldt, 0, w * sizeof(float));
    if (trans_b) {
        for (size_t j = 0; j < w; j++)
            for (int r = 0; r < m; r++) {
                float s = 0;
                for (size_t kk = 0; kk < k; kk++) s += a[(size_t)r * k + kk] * load1(b, (j0 + j) * ldb + kk, dt);
                t[(size_t)r * ldt + j] = s;
            }
        return;
    }
    for (size_t kk = 0; kk < k; kk++)
        for (size_t j = 0; j < w; j++) {
            float bv = load1(b, kk * ldb + j0 + j, dt);
            for (int r = 0; r < m; r++) t[(size_t)r * ldt + j] += a[(size_t)r * k + kk] * bv;
        }
}

#endif

tern_error *cpu_matmul_small(tern_dev *d, const cpu_mm *mm) {
    const tern_matmul_dims *dm = &mm->dims;
    size_t m = (size_t)dm->m, n = (size_t)dm->n, k = (size_t)dm->k;
    /* blocks per entry: a multiple of the thread count, each at most UNIT_COLS wide */
    size_t threads = (size_t)d->threads;
    size_t blocks = threads * ceil_div(n, threads * UNIT_COLS);
    size_t w = ceil_div(ceil_div(n, blocks), 16) * 16;
    blocks = ceil_div(n, w);
    size_t units = (size_t)dm->batch * blocks;
    size_t ldt = w; /* a multiple of 16: tile rows stay 64-byte aligned */
    size_t a_bytes = cpu_round64((size_t)dm->batch * m * k * sizeof(float));
    size_t t_bytes = cpu_round64(m * ldt * sizeof(float));
    unsigned char *scratch;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, a_bytes + t_bytes * threads, (void **)&scratch), "matmul"));
    float *a32 = (float *)scratch;
    int nthreads = units < threads ? (int)units : (int)threads;
#pragma omp parallel num_threads(nthreads)
    {
#pragma omp for schedule(static)
        for (int e = 0; e < dm->batch; e++) pack_a(mm, e, a32 + (size_t)e * m * k);
        float *t = (float *)(scratch + a_bytes + t_bytes * (size_t)omp_get_thread_num());
#pragma omp for schedule(static)
        for (size_t u = 0; u < units; u++) {
            int e = (int)(u / blocks);
            size_t j0 = (u % blocks) * w, wj = n - j0 < w ? n - j0 : w;
            const void *b = cpu_at(mm->b, (size_t)e * dm->stride_b);
            small_block(dm->m, dm->trans_b, mm->b.dtype, a32 + (size_t)e * m * k, k, b, dm->ldb,
                        j0, wj, t, ldt);
            cpu_mm_finish(mm, e, 0, dm->m, (int)j0, (int)(j0 + wj), t, ldt, true);
        }
    }
    return NULL;
}
