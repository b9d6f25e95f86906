/* RMS normalisation, forward and backward, one row per iteration, rows spread over the
 * threads (as layernorm.c). Sums of squares in f32 with 16 partial sums. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

tern_error *cpu_rmsnorm(tern_dev *d, tern_buf out, tern_buf rrms, tern_buf x, tern_buf w, int rows,
                        int C, float eps) {
    size_t c = (size_t)C, row_bytes = cpu_round64(c * sizeof(float));
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, row_bytes * (1 + 2 * (size_t)d->threads), (void **)&s), "rmsnorm"));
    float *w32 = (float *)s;
    cpu_to_f32(w32, cpu_ptr(w), w.dtype, c);
    float *rrms_out = tern_present(rrms) ? cpu_ptr(rrms) : NULL;
#pragma omp parallel num_threads(d->threads) if ((size_t)rows * c > 16384)
    {
        unsigned char *mine = s + row_bytes * (1 + 2 * (size_t)omp_get_thread_num());
        float *t_in = (float *)mine, *t_out = (float *)(mine + row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)r * c;
            const float *xr = cpu_row_in(x, at, c, t_in);
            float rs = 1.0f / sqrtf(cpu_dot(xr, xr, c) / (float)C + eps);
            float *o = cpu_row_out(out, at, t_out);
#pragma omp simd
            for (size_t j = 0; j < c; j++) o[j] = xr[j] * rs * w32[j];
            cpu_row_out_done(out, at, c, o);
            if (rrms_out) rrms_out[r] = rs;
        }
    }
    return NULL;
}

tern_error *cpu_rmsnorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf dout, tern_buf x,
                                 tern_buf w, tern_buf rrms, int rows, int C, float grad_beta) {
    size_t c = (size_t)C, row_bytes = cpu_round64(c * sizeof(float));
    int threads = (size_t)rows * c > 16384 ? d->threads : 1;
    /* shared: w as f32; per thread: its partial dw and three row buffers */
    size_t per_thread = 4 * row_bytes;
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, row_bytes + per_thread * (size_t)threads, (void **)&s),
                             "rmsnorm_backward"));
    float *w32 = (float *)s;
    cpu_to_f32(w32, cpu_ptr(w), w.dtype, c);
    const float *rrms32 = cpu_ptr(rrms);
    for (int t = 0; t < threads; t++) /* OpenMP may give fewer threads: zero every partial */
        memset(s + row_bytes + per_thread * (size_t)t, 0, row_bytes);
#pragma omp parallel num_threads(threads)
    {
        unsigned char *mine = s + row_bytes + per_thread * (size_t)omp_get_thread_num();
        float *dw_part = (float *)mine, *t_dout = (float *)(mine + row_bytes);
        float *t_x = (float *)(mine + 2 * row_bytes), *t_dx = (float *)(mine + 3 * row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)r * c;
            const float *g = cpu_row_in(dout, at, c, t_dout);
            const float *xr = cpu_row_in(x, at, c, t_x);
            float rs = rrms32[r], s_norm = 0;
#pragma omp simd reduction(+ : s_norm)
            for (size_t j = 0; j < c; j++) {
                float xhat = xr[j] * rs;
                s_norm += w32[j] * g[j] * xhat;
                dw_part[j] = fmaf(g[j], xhat, dw_part[j]);
            }
            float m = s_norm / (float)C;
            float *o = cpu_row_out(dx, at, t_dx);
            if (dx.dtype != TERN_F32) cpu_to_f32(o, cpu_at(dx, at), dx.dtype, c);
#pragma omp simd
            for (size_t j = 0; j < c; j++) o[j] += (w32[j] * g[j] - xr[j] * rs * m) * rs;
            cpu_row_out_done(dx, at, c, o);
        }
    }
    /* dw = grad_beta dw + the partials in thread order (deterministic); thread 0's row
     * buffers are free now */
    unsigned char *t0 = s + row_bytes;
    float *total = (float *)(t0 + row_bytes), *cur = (float *)(t0 + 2 * row_bytes);
    for (size_t j = 0; j < c; j++) {
        float v = 0;
        for (int t = 0; t < threads; t++) v += ((const float *)(t0 + per_thread * (size_t)t))[j];
        total[j] = v;
    }
    if (grad_beta != 0.0f) {
        const float *old = cpu_row_in(dw, 0, c, cur);
        for (size_t j = 0; j < c; j++) total[j] = fmaf(grad_beta, old[j], total[j]);
    }
    cpu_from_f32(cpu_ptr(dw), dw.dtype, total, c);
    return NULL;
}
