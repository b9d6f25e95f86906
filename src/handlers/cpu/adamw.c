/* AdamW with PyTorch's semantics, one vectorised pass over param, grad, m and v (the step
 * is memory-bound: 28 bytes per f32 parameter). */
#include <math.h>

#include "cpu.h"

#define CHUNK 2048

tern_error *cpu_adamw(tern_dev *d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m,
                           tern_buf v, const tern_adamw *h) {
    size_t n = param.len, chunks = (n + CHUNK - 1) / CHUNK;
    /* bias corrections in double: beta^step underflows gracefully, 1 - beta^step is exact
     * enough for any step */
    float bc1 = (float)(1.0 - pow((double)h->beta1, (double)h->step));
    float bc2 = (float)(1.0 - pow((double)h->beta2, (double)h->step));
    float lr = h->lr, b1 = h->beta1, b2 = h->beta2, eps = h->eps, wd = h->weight_decay;
    float gs = h->grad_scale, inv_bc1 = 1.0f / bc1, inv_bc2 = 1.0f / bc2;
    float *p = cpu_ptr(param), *pm = cpu_ptr(m), *pv = cpu_ptr(v);
    bool has_shadow = tern_present(shadow);
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 8)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        float tg[CHUNK];
        const float *g = cpu_row_in(grad, i0, len, tg);
        float *pp = p + i0, *mm = pm + i0, *vv = pv + i0;
#pragma omp simd
        for (size_t i = 0; i < len; i++) {
            float gi = g[i] * gs;
            float mi = fmaf(b1, mm[i], (1.0f - b1) * gi);
            float vi = fmaf(b2, vv[i], (1.0f - b2) * gi * gi);
            mm[i] = mi;
            vv[i] = vi;
            float step = (mi * inv_bc1) / (sqrtf(vi * inv_bc2) + eps);
            pp[i] -= lr * fmaf(wd, pp[i], step);
        }
        if (has_shadow) cpu_from_f32(cpu_at(shadow, i0), shadow.dtype, pp, len);
    }
    return NULL;
}
