/* Layer normalisation, forward and backward, one row per iteration, rows spread over the
 * threads. Statistics are computed in f32 with 16 partial sums, variance in two passes. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

tern_error *cpu_layernorm(tern_dev *d, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x,
                               tern_buf w, tern_buf b, int rows, int C, float eps) {
    size_t c = (size_t)C, row_bytes = cpu_round64(c * sizeof(float));
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, row_bytes * (2 + 2 * (size_t)d->threads), (void **)&s), "layernorm"));
    float *w32 = (float *)s, *b32 = (float *)(s + row_bytes);
    cpu_to_f32(w32, cpu_ptr(w), w.dtype, c);
    cpu_to_f32(b32, cpu_ptr(b), b.dtype, c);
    float *mean_out = tern_present(mean) ? cpu_ptr(mean) : NULL;
    float *rstd_out = tern_present(rstd) ? cpu_ptr(rstd) : NULL;
#pragma omp parallel num_threads(d->threads) if ((size_t)rows * c > 16384)
    {
        unsigned char *mine = s + row_bytes * (2 + 2 * (size_t)omp_get_thread_num());
        float *t_in = (float *)mine, *t_out = (float *)(mine + row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)r * c;
            const float *xr = cpu_row_in(x, at, c, t_in);
            float mu = cpu_sum(xr, c) / (float)C;
            float ss = 0;
#pragma omp simd reduction(+ : ss)
            for (size_t j = 0; j < c; j++) ss += (xr[j] - mu) * (xr[j] - mu);
            float var = ss / (float)C;
            float rs = 1.0f / sqrtf(var + eps);
            float *o = cpu_row_out(out, at, t_out);
#pragma omp simd
            for (size_t j = 0; j < c; j++) o[j] = fmaf((xr[j] - mu) * rs, w32[j], b32[j]);
            cpu_row_out_done(out, at, c, o);
            if (mean_out) mean_out[r] = mu;
            if (rstd_out) rstd_out[r] = rs;
        }
    }
    return NULL;
}

tern_error *cpu_layernorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum,
                                   tern_buf out, tern_buf dout, tern_buf x, tern_buf w, tern_buf b,
                                   tern_buf mean, tern_buf rstd, int rows, int C, float grad_beta) {
    size_t c = (size_t)C, row_bytes = cpu_round64(c * sizeof(float));
    int threads = (size_t)rows * c > 16384 ? d->threads : 1;
    bool with_dsum = tern_present(dsum), with_out = tern_present(out);
    /* mean absent: x is the forward's output y, xhat = (y - b) / w (effect.h) */
    bool from_out = !tern_present(mean);
    /* shared: w and b as f32 (b with out or from_out), and 1 / w (from_out, after the
     * threads' parts); per thread: the partial sums of dw, db and dsum ([3, C]), and four
     * row buffers */
    size_t per_thread = 7 * row_bytes;
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, 3 * row_bytes + per_thread * (size_t)threads, (void **)&s),
                             "layernorm_backward"));
    float *w32 = (float *)s, *b32 = (float *)(s + row_bytes);
    cpu_to_f32(w32, cpu_ptr(w), w.dtype, c);
    if (with_out || from_out) cpu_to_f32(b32, cpu_ptr(b), b.dtype, c);
    unsigned char *parts = s + 2 * row_bytes; /* the threads' parts, per_thread bytes each */
    const float *mean32 = from_out ? NULL : cpu_ptr(mean), *rstd32 = cpu_ptr(rstd);
    /* from_out: each row's xhat is made in its own buffer from 1 / w (in the row buffer
     * t_out, which from_out leaves free: out is absent) */
    float *rw32 = NULL;
    if (from_out) {
        rw32 = (float *)(parts + per_thread * (size_t)threads);
        for (size_t j = 0; j < c; j++) {
            float wj = fabsf(w32[j]) < 1e-6f ? copysignf(1e-6f, w32[j]) : w32[j];
            rw32[j] = 1.0f / wj;
        }
    }
    for (int t = 0; t < threads; t++) /* OpenMP may give fewer threads: zero every partial */
        memset(parts + per_thread * (size_t)t, 0, 3 * row_bytes);
#pragma omp parallel num_threads(threads)
    {
        unsigned char *mine = parts + per_thread * (size_t)omp_get_thread_num();
        float *dw_part = (float *)mine, *db_part = (float *)(mine + row_bytes);
        float *ds_part = (float *)(mine + 2 * row_bytes);
        float *t_dout = (float *)(mine + 3 * row_bytes), *t_x = (float *)(mine + 4 * row_bytes);
        float *t_dx = (float *)(mine + 5 * row_bytes), *t_out = (float *)(mine + 6 * row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)r * c;
            const float *g = cpu_row_in(dout, at, c, t_dout);
            const float *xr = cpu_row_in(x, at, c, t_x);
            float mu = 0, rs = rstd32[r];
            if (from_out) { /* xhat into t_out, and x read as xhat with mu 0, rstd 1 */
#pragma omp simd
                for (size_t j = 0; j < c; j++) t_out[j] = (xr[j] - b32[j]) * rw32[j];
                xr = t_out;
            } else {
                mu = mean32[r];
            }
            float xs = from_out ? 1.0f : rs; /* xhat = (xr - mu) xs */
            /* dnorm = w * dout; the two means of the normalisation's Jacobian */
            float s_mean = 0, s_norm = 0;
#pragma omp simd reduction(+ : s_mean, s_norm)
            for (size_t j = 0; j < c; j++) {
                float xhat = (xr[j] - mu) * xs, dnorm = w32[j] * g[j];
                s_mean += dnorm;
                s_norm += dnorm * xhat;
                dw_part[j] = fmaf(g[j], xhat, dw_part[j]);
                db_part[j] += g[j];
            }
            if (with_out) { /* the forward's output, as cpu_layernorm computes it */
                float *y = cpu_row_out(out, at, t_out);
#pragma omp simd
                for (size_t j = 0; j < c; j++) y[j] = fmaf((xr[j] - mu) * rs, w32[j], b32[j]);
                cpu_row_out_done(out, at, c, y);
            }
            float dnorm_mean = s_mean / (float)C;
            float dnorm_norm_mean = s_norm / (float)C;
            float *o = cpu_row_out(dx, at, t_dx);
            if (dx.dtype != TERN_F32) cpu_to_f32(o, cpu_at(dx, at), dx.dtype, c);
#pragma omp simd
            for (size_t j = 0; j < c; j++) {
                float xhat = (xr[j] - mu) * xs;
                o[j] += (w32[j] * g[j] - dnorm_mean - xhat * dnorm_norm_mean) * rs;
            }
            /* dsum sums the updated dx as computed (in f32, before a bf16 dx rounds it) */
            if (with_dsum) {
#pragma omp simd
                for (size_t j = 0; j < c; j++) ds_part[j] += o[j];
            }
            cpu_row_out_done(dx, at, c, o);
        }
    }
    /* dw = grad_beta dw + the sum of the partials, db and dsum likewise, in thread order
     * (deterministic); grad_beta 0 reads nothing back. Thread 0's row buffers are free now
     * and hold the totals. */
    unsigned char *t0 = parts;
    float *total = (float *)(t0 + 3 * row_bytes), *cur = (float *)(t0 + 4 * row_bytes);
    float *res = (float *)(t0 + 5 * row_bytes);
    for (int which = 0; which < (with_dsum ? 3 : 2); which++) {
        tern_buf acc = which == 0 ? dw : which == 1 ? db : dsum;
        for (size_t j = 0; j < c; j++) {
            float v = 0;
            for (int t = 0; t < threads; t++)
                v += ((const float *)(t0 + per_thread * (size_t)t + (size_t)which * row_bytes))[j];
            total[j] = v;
        }
        if (grad_beta != 0.0f) {
            const float *old = cpu_row_in(acc, 0, c, cur);
            for (size_t j = 0; j < c; j++) res[j] = fmaf(grad_beta, old[j], total[j]);
        } else {
            memcpy(res, total, c * sizeof *res);
        }
        cpu_from_f32(cpu_ptr(acc), acc.dtype, res, c);
    }
    return NULL;
}
