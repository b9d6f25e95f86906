/* Token + position embedding, forward and backward (wpe absent: the token embedding only,
 * as Llama). Token ids and the start position are read on the host and checked before any
 * row is touched. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"

/* Channels per block of embed_backward's token table: threads own disjoint channel blocks,
 * so repeated tokens never race. */
#define CH_BLOCK 64

tern_error *cpu_embed(tern_dev *d, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe,
                           tern_buf pos, int B, int T, int C) {
    size_t bt = (size_t)B * (size_t)T, c = (size_t)C;
    size_t vocab = wte.len / c, max_t = wpe.len / c;
    const int32_t *tok = cpu_ptr(tokens);
    TERN_TRY(tern_validate_indices("embed", "tokens", tok, bt, (int64_t)vocab));
    bool table = tern_present(wpe); /* absent: no position table, pos unused */
    long p0 = table && tern_present(pos) ? *(const int32_t *)cpu_ptr(pos) : 0;
    if (table && (p0 < 0 || (size_t)p0 + (size_t)T > max_t))
        return tern_errorf("embed: positions %ld .. %ld are out of range of wpe's %zu rows", p0,
                           p0 + T - 1, max_t);
    float *tmp;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, (size_t)d->threads * 3 * cpu_round64(c * sizeof(float)),
                                         (void **)&tmp), "embed"));
    size_t stride = 3 * cpu_round64(c * sizeof(float)) / sizeof(float);
#pragma omp parallel num_threads(d->threads) if (bt * c > 16384)
    {
        float *mine = tmp + stride * (size_t)omp_get_thread_num();
        float *t_wte = mine, *t_wpe = mine + stride / 3, *t_out = mine + 2 * (stride / 3);
#pragma omp for schedule(static)
        for (size_t i = 0; i < bt; i++) {
            size_t t = i % (size_t)T;
            const float *e = cpu_row_in(wte, (size_t)tok[i] * c, c, t_wte);
            float *o = cpu_row_out(out, i * c, t_out);
            if (table) {
                const float *p = cpu_row_in(wpe, ((size_t)p0 + t) * c, c, t_wpe);
                for (size_t j = 0; j < c; j++) o[j] = e[j] + p[j];
            } else {
                for (size_t j = 0; j < c; j++) o[j] = e[j];
            }
            cpu_row_out_done(out, i * c, c, o);
        }
    }
    return NULL;
}

/* dst[0..n) += src[0..n) for float rows of any float dtype, through f32 buffers. */
static void accumulate(tern_buf dst, size_t at, const float *src, size_t n, float *tmp) {
    float *row = cpu_row_out(dst, at, tmp);
    if (dst.dtype != TERN_F32) cpu_to_f32(row, cpu_at(dst, at), dst.dtype, n);
    for (size_t j = 0; j < n; j++) row[j] += src[j];
    cpu_row_out_done(dst, at, n, row);
}

static int by_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* dwte[token] += the sum of the token's rows of dout, summed in f32 in row order and added
 * once (as the GPU core does): a bf16 dwte is rounded once per token, not once per row. */
static tern_error *embed_backward_wte(tern_dev *d, tern_buf dwte, tern_buf dout, const int32_t *tok, size_t bt,
                                      size_t c) {
    /* the rows ordered by (token, row): token << 32 | row (tokens are validated, >= 0; rows
     * fit 32 bits, B*T being an int) */
    uint64_t *order = malloc((bt ? bt : 1) * sizeof *order);
    if (!order) return tern_errorf("embed_backward: out of memory for %zu rows", bt);
    for (size_t i = 0; i < bt; i++) order[i] = (uint64_t)(uint32_t)tok[i] << 32 | (uint64_t)i;
    qsort(order, bt, sizeof *order, by_key);
    size_t blocks = (c + CH_BLOCK - 1) / CH_BLOCK;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (bt * c > 16384)
    for (size_t blk = 0; blk < blocks; blk++) {
        size_t c0 = blk * CH_BLOCK, w = c - c0 < CH_BLOCK ? c - c0 : CH_BLOCK;
        float t_in[CH_BLOCK], t_acc[CH_BLOCK], sum[CH_BLOCK];
        for (size_t p = 0; p < bt;) {
            uint64_t v = order[p] >> 32;
            for (size_t j = 0; j < w; j++) sum[j] = 0.0f;
            for (; p < bt && order[p] >> 32 == v; p++) {
                const float *g = cpu_row_in(dout, (size_t)(order[p] & 0xffffffffu) * c + c0, w, t_in);
                for (size_t j = 0; j < w; j++) sum[j] += g[j];
            }
            accumulate(dwte, (size_t)v * c + c0, sum, w, t_acc);
        }
    }
    free(order);
    return NULL;
}

tern_error *cpu_embed_backward(tern_dev *d, tern_buf dwte, tern_buf dwpe, tern_buf dout,
                                    tern_buf tokens, int B, int T, int C) {
    size_t bt = (size_t)B * (size_t)T, c = (size_t)C;
    const int32_t *tok = cpu_ptr(tokens);
    if (tern_present(dwte))
        TERN_TRY(tern_validate_indices("embed_backward", "tokens", tok, bt, (int64_t)(dwte.len / c)));
    size_t blocks = (c + CH_BLOCK - 1) / CH_BLOCK;
    if (tern_present(dwte)) TERN_TRY(embed_backward_wte(d, dwte, dout, tok, bt, c));
    if (tern_present(dwpe)) {
        size_t tt = (size_t)T;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (bt * c > 16384)
        for (size_t pb = 0; pb < tt * blocks; pb++) {
            size_t t = pb / blocks, c0 = (pb % blocks) * CH_BLOCK;
            size_t w = c - c0 < CH_BLOCK ? c - c0 : CH_BLOCK;
            float t_in[CH_BLOCK], t_acc[CH_BLOCK], sum[CH_BLOCK] = {0};
            for (size_t b = 0; b < (size_t)B; b++) {
                const float *g = cpu_row_in(dout, (b * tt + t) * c + c0, w, t_in);
                for (size_t j = 0; j < w; j++) sum[j] += g[j];
            }
            accumulate(dwpe, t * c + c0, sum, w, t_acc);
        }
    }
    return NULL;
}
