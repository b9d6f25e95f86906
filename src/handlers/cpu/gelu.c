/* GELU (tanh form) forward and backward, elementwise in chunks; see fastmath.h for how it
 * is evaluated. */
#include "cpu.h"

#define CHUNK 1024

tern_error *cpu_gelu(tern_dev *d, tern_buf out, tern_buf x) {
    size_t n = out.len, chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 4)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * CHUNK, len = n - i < CHUNK ? n - i : CHUNK;
        float tx[CHUNK], to[CHUNK];
        const float *px = cpu_row_in(x, i, len, tx);
        float *po = cpu_row_out(out, i, to);
#pragma omp simd
        for (size_t j = 0; j < len; j++) po[j] = cpu_gelu_f32(px[j]);
        cpu_row_out_done(out, i, len, po);
    }
    return NULL;
}

tern_error *cpu_gelu_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf x) {
    size_t n = dx.len, chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 4)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * CHUNK, len = n - i < CHUNK ? n - i : CHUNK;
        float tx[CHUNK], tg[CHUNK], to[CHUNK];
        const float *px = cpu_row_in(x, i, len, tx);
        const float *pg = cpu_row_in(dout, i, len, tg);
        float *po = cpu_row_out(dx, i, to);
#pragma omp simd
        for (size_t j = 0; j < len; j++) po[j] = pg[j] * cpu_gelu_grad_f32(px[j]);
        cpu_row_out_done(dx, i, len, po);
    }
    return NULL;
}
