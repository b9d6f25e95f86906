/* AdamW with PyTorch's semantics, one vectorised pass over param, grad, m and v (the step
 * is memory-bound: 28 bytes per f32 parameter). The parameter is f32, or split into a u16
 * low half (param) and a bf16 high half (shadow): tern_f32_split in tern/half.h. */
#include <math.h>

#include "cpu.h"

#define CHUNK 2048

/* The step's coefficients, computed once per call. */
typedef struct adamw_k {
    float lr, b1, b2, eps, wd, gs, inv_bc1, inv_bc2;
} adamw_k;

/* The update of len parameters p, moments m and v from gradients g (already f32). Both
 * parameter forms run exactly this, so their f32 results are the same bits. */
static inline void adamw_chunk(const adamw_k *k, float *restrict p, float *restrict m, float *restrict v,
                               const float *restrict g, size_t len) {
    float lr = k->lr, b1 = k->b1, b2 = k->b2, eps = k->eps, wd = k->wd, gs = k->gs;
    float inv_bc1 = k->inv_bc1, inv_bc2 = k->inv_bc2;
#pragma omp simd
    for (size_t i = 0; i < len; i++) {
        float gi = g[i] * gs;
        float mi = fmaf(b1, m[i], (1.0f - b1) * gi);
        float vi = fmaf(b2, v[i], (1.0f - b2) * gi * gi);
        m[i] = mi;
        v[i] = vi;
        float step = (mi * inv_bc1) / (sqrtf(vi * inv_bc2) + eps);
        p[i] -= lr * fmaf(wd, p[i], step);
    }
}

/* The split parameter's halves to f32 [len] and back (the encoding of tern/half.h, spelled
 * out on whole arrays so that the loops vectorise). */
static inline void join_chunk(float *restrict out, const uint16_t *restrict hi, const uint16_t *restrict lo,
                              size_t len) {
#pragma omp simd
    for (size_t i = 0; i < len; i++) {
        uint32_t bits = ((uint32_t)hi[i] << 16) + lo[i] - 0x8000u;
        memcpy(&out[i], &bits, sizeof bits);
    }
}

static inline void split_chunk(uint16_t *restrict hi, uint16_t *restrict lo, const float *restrict x, size_t len) {
#pragma omp simd
    for (size_t i = 0; i < len; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        bits += 0x8000u;
        hi[i] = (uint16_t)(bits >> 16);
        lo[i] = (uint16_t)bits;
    }
}

tern_error *cpu_adamw(tern_dev *d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m,
                           tern_buf v, const tern_adamw *h) {
    size_t n = param.len, chunks = (n + CHUNK - 1) / CHUNK;
    /* bias corrections in double: beta^step underflows gracefully, 1 - beta^step is exact
     * enough for any step */
    float bc1 = (float)(1.0 - pow((double)h->beta1, (double)h->step));
    float bc2 = (float)(1.0 - pow((double)h->beta2, (double)h->step));
    adamw_k k = {.lr = h->lr, .b1 = h->beta1, .b2 = h->beta2, .eps = h->eps, .wd = h->weight_decay,
                 .gs = h->grad_scale, .inv_bc1 = 1.0f / bc1, .inv_bc2 = 1.0f / bc2};
    float *pm = cpu_ptr(m), *pv = cpu_ptr(v);
    bool split = param.dtype == TERN_U16, has_shadow = tern_present(shadow);
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 8)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        float tg[CHUNK];
        const float *g = cpu_row_in(grad, i0, len, tg);
        if (split) { /* param: low halves [n] u16; shadow: high halves [n] bf16 */
            float tp[CHUNK];
            uint16_t *lo = (uint16_t *)cpu_at(param, i0), *hi = (uint16_t *)cpu_at(shadow, i0);
            join_chunk(tp, hi, lo, len);
            adamw_chunk(&k, tp, pm + i0, pv + i0, g, len);
            split_chunk(hi, lo, tp, len);
        } else {
            float *p = (float *)cpu_at(param, i0);
            adamw_chunk(&k, p, pm + i0, pv + i0, g, len);
            if (has_shadow) cpu_from_f32(cpu_at(shadow, i0), shadow.dtype, p, len);
        }
    }
    return NULL;
}
