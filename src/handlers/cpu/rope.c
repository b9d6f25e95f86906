/* The rotate-half rotary embedding, forward and backward, one row (b, t) per iteration: the
 * row's cos and sin are computed once and serve every head. */
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "cpu.h"

/* sign +1: the forward rotation; -1: its inverse (the backward). */
static tern_error *rope_rows(tern_dev *d, const char *op, tern_buf out, tern_buf x, tern_buf pos,
                             tern_buf inv_freq, int rows, int heads, int head_dim, int stride,
                             float sign) {
    size_t half = (size_t)head_dim / 2, width = (size_t)heads * (size_t)head_dim;
    size_t trig_bytes = cpu_round64(2 * half * sizeof(float)), row_bytes = cpu_round64(width * sizeof(float));
    size_t per_thread = trig_bytes + 2 * row_bytes;
    int threads = (size_t)rows * width > 16384 ? d->threads : 1;
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)threads, (void **)&s), "%s", op));
    const int32_t *p = cpu_ptr(pos);
    const float *f = cpu_ptr(inv_freq);
#pragma omp parallel num_threads(threads)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *cs = (float *)mine, *sn = cs + half;
        float *t_in = (float *)(mine + trig_bytes), *t_out = (float *)(mine + trig_bytes + row_bytes);
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            float at = (float)p[r];
            for (size_t j = 0; j < half; j++) {
                float a = at * f[j]; /* one f32 product, as transformers */
                cs[j] = cosf(a);
                sn[j] = sign * sinf(a);
            }
            size_t base = (size_t)r * (size_t)stride;
            const float *xr = cpu_row_in(x, base, width, t_in);
            float *o = cpu_row_out(out, base, t_out);
            for (int h = 0; h < heads; h++) {
                const float *xh = xr + (size_t)h * (size_t)head_dim;
                float *oh = o + (size_t)h * (size_t)head_dim;
#pragma omp simd
                for (size_t j = 0; j < half; j++) {
                    float x1 = xh[j], x2 = xh[j + half];
                    oh[j] = x1 * cs[j] - x2 * sn[j];
                    oh[j + half] = x2 * cs[j] + x1 * sn[j];
                }
            }
            cpu_row_out_done(out, base, width, o);
        }
    }
    return NULL;
}

tern_error *cpu_rope(tern_dev *d, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq,
                     int rows, int heads, int head_dim, int stride) {
    return rope_rows(d, "rope", out, x, pos, inv_freq, rows, heads, head_dim, stride, 1.0f);
}

tern_error *cpu_rope_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf pos,
                              tern_buf inv_freq, int rows, int heads, int head_dim, int stride) {
    return rope_rows(d, "rope_backward", dx, dout, pos, inv_freq, rows, heads, head_dim, stride, -1.0f);
}
