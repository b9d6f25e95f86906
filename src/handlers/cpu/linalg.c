/* sum_rows, add and norm2. Rows of bf16 are converted through small f32 buffers; f32 is
 * used in place. */
#include <math.h>
#include <omp.h>

#include "cpu.h"

/* Elements per chunk of the elementwise loops (the f32 buffers live on the stack). */
#define CHUNK 1024
/* Columns per block of sum_rows. */
#define COL_BLOCK 256

tern_error *cpu_sum_rows(tern_dev *d, tern_buf out, tern_buf x, int rows, int cols, float beta) {
    int blocks = (cols + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (blocks > 1 && (long)rows * cols > 32768)
    for (int blk = 0; blk < blocks; blk++) {
        size_t j0 = (size_t)blk * COL_BLOCK;
        size_t w = (size_t)cols - j0 < COL_BLOCK ? (size_t)cols - j0 : COL_BLOCK;
        double acc[COL_BLOCK] = {0};
        float tmp[COL_BLOCK];
        for (int r = 0; r < rows; r++) {
            const float *xr = cpu_row_in(x, (size_t)r * (size_t)cols + j0, w, tmp);
            for (size_t j = 0; j < w; j++) acc[j] += xr[j];
        }
        float res[COL_BLOCK];
        if (beta != 0) { /* beta == 0: out is not read (it may hold NaN) */
            const float *o = cpu_row_in(out, j0, w, tmp);
            for (size_t j = 0; j < w; j++) res[j] = (float)(acc[j] + (double)beta * o[j]);
        } else {
            for (size_t j = 0; j < w; j++) res[j] = (float)acc[j];
        }
        cpu_from_f32(cpu_at(out, j0), out.dtype, res, w);
    }
    return NULL;
}

tern_error *cpu_add(tern_dev *d, tern_buf out, tern_buf a, tern_buf b) {
    size_t n = out.len, chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 16)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * CHUNK, len = n - i < CHUNK ? n - i : CHUNK;
        float ta[CHUNK], tb[CHUNK], to[CHUNK];
        const float *pa = cpu_row_in(a, i, len, ta), *pb = cpu_row_in(b, i, len, tb);
        float *po = cpu_row_out(out, i, to);
        for (size_t j = 0; j < len; j++) po[j] = pa[j] + pb[j];
        cpu_row_out_done(out, i, len, po);
    }
    return NULL;
}

/* Sum of squares of elements [i0, i1), in double, with 8 partial sums so the loop
 * vectorises without reassociating one running sum. */
static double sum_squares(tern_buf x, size_t i0, size_t i1) {
    double total = 0;
    float tmp[CHUNK];
    for (size_t i = i0; i < i1; i += CHUNK) {
        size_t len = i1 - i < CHUNK ? i1 - i : CHUNK;
        const float *p = cpu_row_in(x, i, len, tmp);
        double part[8] = {0};
        size_t j = 0;
        for (; j + 8 <= len; j += 8)
            for (int q = 0; q < 8; q++) part[q] += (double)p[j + q] * (double)p[j + q];
        for (; j < len; j++) part[0] += (double)p[j] * (double)p[j];
        total += ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    }
    return total;
}

tern_error *cpu_norm2(tern_dev *d, tern_buf x, double *out) {
    size_t n = x.len;
    int threads = n >= 65536 ? d->threads : 1;
    double *part;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, (size_t)threads * 64, (void **)&part), "norm2"));
    for (int t = 0; t < threads; t++) part[t * 8] = 0; /* OpenMP may give fewer threads */
    /* per-thread partial sums added in thread order: the same result on every run */
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t per = (n + (size_t)nt - 1) / (size_t)nt;
        size_t i0 = per * (size_t)t < n ? per * (size_t)t : n;
        size_t i1 = i0 + per < n ? i0 + per : n;
        part[t * 8] = sum_squares(x, i0, i1);
    }
    double total = 0;
    for (int t = 0; t < threads; t++) total += part[t * 8];
    *out = sqrt(total);
    return NULL;
}
