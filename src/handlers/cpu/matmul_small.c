/* matmul for few rows (m <= CPU_SMALL_M), the decoding case: the time is reading B, so B
 * (f32, bf16 or f16) is streamed once, in its own dtype, converted to f32 in registers, in
 * long sequential runs (hardware prefetchers follow one long stream far better than several
 * short interleaved ones: 3x on the tied lm head). A is packed to dense f32 [m, k] first.
 *
 * Two kernels, by B's layout:
 *  - B stored [n, k] (transposed; e.g. the tied embedding as lm head): output column j is the
 *    dot product of A's rows with row j of B; the units are blocks of rows of B, each row read
 *    start to end with U partial accumulators per row of A (one row of B at a time for one
 *    row of A), reduced at the end.
 *  - B stored [k, n] (Hugging Face's Conv1D): the units are k-splits; each streams whole rows
 *    of B (in column blocks of at most NT_BLOCK when n is huge), adding a[r][kk] * B[kk, :]
 *    into the split's own f32 partial [m, n]; then the partials are summed in split order
 *    per column chunk.
 * A q8_0 B (always [n, k], effect.h) takes the first on int8 activations: each thread
 * quantizes A's rows per block of 32 once per product (q8_quantize_a; a few KB), then the
 * kernel sums each block's 32 int8 products exactly and scales them once (llama.cpp's
 * q8_0 x q8_0). Measured against dequantizing the weights to f32 in registers with f32
 * activations (the kernel this replaced): docs/PERFORMANCE.md.
 * Both accumulate in f32; cpu_mm_finish then applies alpha, beta, bias and the epilogue.
 * The units of both are handed out by work stealing (steal.h): each thread takes its own
 * contiguous share front to back, then the back of the other's; every unit writes only its
 * own outputs or its own partial sums, so the result does not depend on who ran it.
 * The kernels themselves are the device's table (kernels.h), this file only plans the work. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"
#include "steal.h"

/* Rows of B per unit of work at most ([n, k] layout): the f32 tile (m x 512) stays in L1. */
#define UNIT_COLS 512
/* Columns per pass over a k-range ([k, n] layout): the partial tile (m x 4096) stays in L2. */
#define NT_BLOCK 4096
/* Rows of B per k-split at least ([k, n] layout). */
#define NT_MIN_ROWS 64
/* Units of work per thread at least (when the sizes allow), so a thread that finishes first
 * has some to take from the other: [n, k] blocks of rows, [k, n] k-splits (each its own
 * partial sums, added in split order). Whole decode on the Zen 5, alternating token by token
 * against one static share a thread: bf16 2-4%, fp32 0-11% faster (docs/PERFORMANCE.md). */
#define T_UNITS_PER_THREAD 8
#define NT_SPLITS_PER_THREAD 4

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

/* B stored [n, k]: units are blocks of rows of B (output columns), finished one by one. */
static tern_error *small_t(tern_dev *d, const cpu_mm *mm) {
    const tern_matmul_dims *dm = &mm->dims;
    size_t m = (size_t)dm->m, n = (size_t)dm->n, k = (size_t)dm->k;
    /* blocks per entry: a multiple of the thread count, each at most UNIT_COLS rows */
    size_t threads = (size_t)d->threads;
    size_t blocks = threads * ceil_div(n, threads * UNIT_COLS);
    if (blocks < threads * T_UNITS_PER_THREAD) blocks = threads * T_UNITS_PER_THREAD;
    size_t w = ceil_div(ceil_div(n, blocks), 16) * 16;
    blocks = ceil_div(n, w);
    size_t units = (size_t)dm->batch * blocks;
    size_t ldt = w;
    /* per thread: its own packed A (a few KB: repacking beats a barrier) and its tile */
    bool q8 = mm->b.dtype == TERN_Q8;
    size_t a_bytes = cpu_round64(m * k * sizeof(float)), t_bytes = cpu_round64(m * ldt * sizeof(float));
    size_t q_bytes = q8 ? cpu_round64(CPU_Q8A_BYTES(m, k)) : 0, per = a_bytes + t_bytes + q_bytes;
    unsigned char *scratch;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per * threads, (void **)&scratch), "matmul"));
    int nthreads = units < threads ? (int)units : (int)threads;
    cpu_steal plan;
    cpu_steal_init(&plan, nthreads, units);
#pragma omp parallel num_threads(nthreads)
    {
        int me = omp_get_thread_num();
        unsigned char *mine = scratch + per * (size_t)me;
        float *a32 = (float *)mine, *t = (float *)(mine + a_bytes);
        void *aq = mine + a_bytes + t_bytes;
        size_t packed = SIZE_MAX;
        for (long next; (next = cpu_steal_next(&plan, me)) >= 0;) {
            size_t u = (size_t)next;
            size_t e = u / blocks, j0 = (u % blocks) * w, wj = n - j0 < w ? n - j0 : w;
            if (e != packed) {
                pack_a(mm, (int)e, a32), packed = e;
                if (q8) d->kern->q8_quantize_a(dm->m, a32, k, aq);
            }
            const void *b = cpu_at(mm->b, e * dm->stride_b);
            if (q8) d->kern->small_t_q8(dm->m, aq, k, b, dm->ldb, j0, wj, t, ldt);
            else d->kern->small_t(dm->m, mm->b.dtype, a32, k, b, dm->ldb, j0, wj, t, ldt);
            cpu_mm_finish(mm, (int)e, 0, dm->m, (int)j0, (int)(j0 + wj), t, ldt, true);
        }
    }
    return NULL;
}

/* B stored [k, n]: k is split among the threads (each streams whole rows of B into its own
 * partial sums), then the partials are added and finished per column chunk. */
static tern_error *small_nt(tern_dev *d, const cpu_mm *mm) {
    const tern_matmul_dims *dm = &mm->dims;
    size_t m = (size_t)dm->m, n = (size_t)dm->n, k = (size_t)dm->k, batch = (size_t)dm->batch;
    size_t threads = (size_t)d->threads;
    size_t want = threads * NT_SPLITS_PER_THREAD;
    size_t splits = k / NT_MIN_ROWS < want ? k / NT_MIN_ROWS : want;
    if (splits < 1) splits = 1;
    size_t rows_per = ceil_div(k, splits);
    splits = ceil_div(k, rows_per);
    /* too few k-splits to occupy every thread: split the columns as well */
    size_t col_chunks = ceil_div(threads, splits), cw = ceil_div(ceil_div(n, col_chunks), 16) * 16;
    col_chunks = ceil_div(n, cw);
    size_t n_pad = ceil_div(n, 16) * 16;
    size_t part = m * n_pad; /* floats of one partial [m, n_pad] */
    /* per thread: its own packed A (repacking beats a barrier); then the partials */
    size_t a_bytes = cpu_round64(m * k * sizeof(float));
    size_t p_bytes = cpu_round64(batch * splits * part * sizeof(float));
    unsigned char *scratch;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, a_bytes * threads + p_bytes, (void **)&scratch), "matmul"));
    float *partials = (float *)(scratch + a_bytes * threads);
    size_t units = batch * splits * col_chunks;
    size_t finish_chunks = ceil_div(n, UNIT_COLS);
    size_t units2 = batch * finish_chunks;
    size_t most = units > units2 ? units : units2;
    int nthreads = most < threads ? (int)most : (int)threads;
    cpu_steal plan;
    cpu_steal_init(&plan, nthreads, units);
#pragma omp parallel num_threads(nthreads)
    {
        int me = omp_get_thread_num();
        float *a32 = (float *)(scratch + a_bytes * (size_t)me);
        size_t packed = SIZE_MAX;
        for (long next; (next = cpu_steal_next(&plan, me)) >= 0;) {
            size_t u = (size_t)next;
            size_t e = u / (splits * col_chunks), s = (u / col_chunks) % splits, c = u % col_chunks;
            size_t k0 = s * rows_per, k1 = k0 + rows_per < k ? k0 + rows_per : k;
            size_t c0 = c * cw, c1 = c0 + cw < n ? c0 + cw : n;
            if (e != packed) pack_a(mm, (int)e, a32), packed = e;
            float *p = partials + (e * splits + s) * part;
            for (size_t r = 0; r < m; r++) memset(p + r * n_pad + c0, 0, (ceil_div(c1, 16) * 16 - c0) * sizeof(float));
            const void *b = cpu_at(mm->b, e * dm->stride_b);
            for (size_t j0 = c0; j0 < c1; j0 += NT_BLOCK) {
                size_t wj = c1 - j0 < NT_BLOCK ? c1 - j0 : NT_BLOCK;
                d->kern->small_nt(dm->m, mm->b.dtype, a32, k, b, dm->ldb, k0, k1, j0, wj, p + j0, n_pad);
            }
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (size_t u = 0; u < units2; u++) {
            size_t e = u / finish_chunks, j0 = (u % finish_chunks) * UNIT_COLS;
            size_t j1 = j0 + UNIT_COLS < n ? j0 + UNIT_COLS : n;
            float *p0 = partials + e * splits * part;
            for (size_t s = 1; s < splits; s++) { /* in split order: deterministic */
                const float *ps = partials + (e * splits + s) * part;
                for (size_t r = 0; r < m; r++)
                    for (size_t j = j0; j < j1; j++) p0[r * n_pad + j] += ps[r * n_pad + j];
            }
            cpu_mm_finish(mm, (int)e, 0, dm->m, (int)j0, (int)j1, p0 + j0, n_pad, true);
        }
    }
    return NULL;
}

tern_error *cpu_matmul_small(tern_dev *d, const cpu_mm *mm) {
    return mm->dims.trans_b ? small_t(d, mm) : small_nt(d, mm);
}
