/* SwiGLU forward and backward, one row per iteration, rows spread over the threads; the
 * sigmoid through cpu_expf so the loops vectorise. */
#include <omp.h>

#include "cpu.h"

/* 1 / (1 + exp(-g)): 0 where exp overflows, 1 where it flushes to 0. */
static inline float sigmoid(float g) { return 1.0f / (1.0f + cpu_expf(-g)); }

tern_error *cpu_swiglu(tern_dev *d, tern_buf out, tern_buf gate, tern_buf up, int rows, int I,
                       int ld) {
    size_t n = (size_t)I, row_bytes = cpu_round64(n * sizeof(float)), per_thread = 3 * row_bytes;
    int threads = (size_t)rows * n > 16384 ? d->threads : 1;
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)threads, (void **)&s), "swiglu"));
#pragma omp parallel num_threads(threads)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *t_g = (float *)mine, *t_u = (float *)(mine + row_bytes), *t_o = (float *)(mine + 2 * row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t src = (size_t)r * (size_t)ld, dst = (size_t)r * n;
            const float *g = cpu_row_in(gate, src, n, t_g), *u = cpu_row_in(up, src, n, t_u);
            float *o = cpu_row_out(out, dst, t_o);
#pragma omp simd
            for (size_t j = 0; j < n; j++) o[j] = g[j] * sigmoid(g[j]) * u[j];
            cpu_row_out_done(out, dst, n, o);
        }
    }
    return NULL;
}

tern_error *cpu_swiglu_backward(tern_dev *d, tern_buf dgate, tern_buf dup, tern_buf dout,
                                tern_buf gate, tern_buf up, int rows, int I, int ld) {
    size_t n = (size_t)I, row_bytes = cpu_round64(n * sizeof(float)), per_thread = 5 * row_bytes;
    int threads = (size_t)rows * n > 16384 ? d->threads : 1;
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)threads, (void **)&s), "swiglu_backward"));
#pragma omp parallel num_threads(threads)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *t_g = (float *)mine, *t_u = (float *)(mine + row_bytes), *t_d = (float *)(mine + 2 * row_bytes);
        float *t_dg = (float *)(mine + 3 * row_bytes), *t_du = (float *)(mine + 4 * row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t src = (size_t)r * (size_t)ld;
            const float *g = cpu_row_in(gate, src, n, t_g), *u = cpu_row_in(up, src, n, t_u);
            const float *dy = cpu_row_in(dout, (size_t)r * n, n, t_d);
            /* dgate may be gate (dup up): each element is read before it is written */
            float *dg = cpu_row_out(dgate, src, t_dg), *du = cpu_row_out(dup, src, t_du);
#pragma omp simd
            for (size_t j = 0; j < n; j++) {
                float gj = g[j], uj = u[j], sj = sigmoid(gj);
                dg[j] = dy[j] * uj * (sj * fmaf(gj, 1.0f - sj, 1.0f));
                du[j] = dy[j] * (gj * sj);
            }
            cpu_row_out_done(dgate, src, n, dg);
            cpu_row_out_done(dup, src, n, du);
        }
    }
    return NULL;
}
