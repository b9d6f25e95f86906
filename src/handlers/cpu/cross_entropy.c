/* Fused softmax + cross-entropy over rows of logits, with the gradient written in place.
 * Per row: one pass for the max; one pass that stores e = exp(l - max) into an f32 row
 * (the logits row itself when f32 and a gradient is wanted) and sums it; then the
 * gradient pass scales e. A row of 50304 floats is 200 KB and stays in L2 between
 * passes. Sums are taken in f32 blocks of 256 added into a double. */
#include <math.h>
#include <omp.h>

#include "cpu.h"

#define BLOCK 256

tern_error *cpu_cross_entropy(tern_dev *d, tern_buf losses, tern_buf logits, tern_buf targets,
                                   int rows, int V, int Vp, float grad_scale) {
    const int32_t *tgt = cpu_ptr(targets);
    TERN_TRY(tern_validate_indices("cross_entropy", "targets", tgt, (size_t)rows, V));
    size_t vp = (size_t)Vp, v = (size_t)V, row_bytes = cpu_round64(vp * sizeof(float));
    bool in_place = logits.dtype == TERN_F32;
    unsigned char *s = NULL;
    if (!in_place || grad_scale == 0)
        TERN_TRY(tern_error_wrap(cpu_scratch(d, row_bytes * (size_t)d->threads, (void **)&s), "cross_entropy"));
    float *loss_out = cpu_ptr(losses);
#pragma omp parallel num_threads(d->threads) if (rows > 1)
    {
        float *tmp = s ? (float *)(s + row_bytes * (size_t)omp_get_thread_num()) : NULL;
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t at = (size_t)r * vp;
            const float *l = cpu_row_in(logits, at, vp, tmp);
            float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
            for (size_t j = 0; j < v; j++) mx = l[j] > mx ? l[j] : mx;
            float target_logit = l[tgt[r]];
            /* e = exp(l - max): into the logits row when it is f32 and gets the gradient,
             * else into tmp (l is tmp itself for bf16, converted above) */
            float *e = in_place && grad_scale != 0 ? (float *)cpu_ptr(logits) + at : tmp;
            double sum = 0;
            for (size_t j0 = 0; j0 < v; j0 += BLOCK) {
                size_t j1 = j0 + BLOCK < v ? j0 + BLOCK : v;
                float part = 0;
#pragma omp simd reduction(+ : part)
                for (size_t j = j0; j < j1; j++) {
                    e[j] = cpu_expf(l[j] - mx);
                    part += e[j];
                }
                sum += part;
            }
            loss_out[r] = (float)(log(sum) + (double)mx - (double)target_logit);
            if (grad_scale == 0) continue;
            float scale = (float)((double)grad_scale / sum);
#pragma omp simd
            for (size_t j = 0; j < v; j++) e[j] *= scale;
            e[tgt[r]] -= grad_scale;
            for (size_t j = v; j < vp; j++) e[j] = 0;
            if (!in_place) cpu_from_f32(cpu_at(logits, at), logits.dtype, e, vp);
        }
    }
    return NULL;
}
