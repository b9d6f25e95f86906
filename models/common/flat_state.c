/* The flat-parameter training state's operations on this handler (flat_state.h):
 * model_<h>_flat_ops. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "flat_state.h"
#include "tern/half.h"

#define OP(name) TERN_OP(name)

/* Host elements a split or a join of the bf16 master goes through at a time: bounded
 * scratch, not a second copy of the parameters. */
#define SPLIT_CHUNK ((size_t)1 << 20)

/* bf16: the host params [n_flat] split (tern_f32_split) into the compute weights (the high
 * halves) and the master (the low halves), uploaded a chunk at a time. */
static tern_error *upload_split(model_flat *f, const float *params) {
    size_t chunk = f->n_flat < SPLIT_CHUNK ? f->n_flat : SPLIT_CHUNK;
    uint16_t *hi = malloc(2 * (chunk ? chunk : 1) * sizeof *hi); /* [chunk] high halves, [chunk] low */
    if (!hi) return tern_errorf("out of memory splitting the master weights");
    uint16_t *lo = hi + chunk;
    tern_error *err = NULL;
    for (size_t at = 0; !err && at < f->n_flat; at += chunk) {
        size_t len = f->n_flat - at < chunk ? f->n_flat - at : chunk;
        for (size_t i = 0; i < len; i++) tern_f32_split(params[at + i], &hi[i], &lo[i]);
        err = OP(upload)(f->dev, tern_view(f->weights, at, len), hi);
        if (!err) err = OP(upload)(f->dev, tern_view(f->master, at, len), lo);
    }
    free(hi);
    return err;
}

/* fp32: the master is the compute weights. bf16: the f32 master is kept as the bf16 compute
 * weights (its high halves) and a u16 master of its low halves, 4 bytes a parameter in all
 * instead of 6, exactly (tern_f32_split; adamw steps the two together). The buffers are
 * f's, freed with it on failure too. */
static tern_error *open_flat(model_flat *f, const float *params) {
    if (f->wdtype == TERN_F32) {
        TERN_TRY(OP(alloc)(f->dev, TERN_F32, f->n_flat, &f->master));
        return OP(upload)(f->dev, f->master, params);
    }
    TERN_TRY(OP(alloc)(f->dev, TERN_U16, f->n_flat, &f->master));
    TERN_TRY(OP(alloc)(f->dev, f->wdtype, f->n_flat, &f->weights));
    return upload_split(f, params);
}

static tern_error *read_flat(model_flat *f, tern_buf flat, size_t offset, size_t count, float *out) {
    return MODEL_FN(read_flat)(f->dev, flat, offset, count, out);
}

static tern_error *write_flat(model_flat *f, tern_buf flat, size_t offset, size_t count, const float *data) {
    return MODEL_FN(write_flat)(f->dev, flat, offset, count, data);
}

static tern_error *read_gathered(model_flat *f, tern_buf part, size_t offset, size_t count, float *out) {
    if (f->shards <= 1) return out ? read_flat(f, part, offset, count, out) : NULL;
    tern_buf all = tern_none();
    TERN_TRY(OP(alloc)(f->dev, TERN_F32, f->n_full, &all));
    tern_error *err = OP(copy)(f->dev, tern_view(all, f->shard_off, f->shard_len), part);
    if (!err) err = OP(allgather)(f->dev, all, f->dist);
    if (!err && out) err = read_flat(f, all, offset, count, out);
    tern_error_free(OP(free)(f->dev, &all));
    return err;
}

/* bf16: the f32 parameters [offset, offset + count) joined on the host from the compute
 * weights (the high halves) and `lo`, the low halves of the whole flat layout, a chunk of
 * each downloaded at a time. */
static tern_error *download_joined(model_flat *f, tern_buf lo, size_t offset, size_t count, float *out) {
    size_t chunk = count < SPLIT_CHUNK ? count : SPLIT_CHUNK;
    uint16_t *hi_host = malloc(2 * (chunk ? chunk : 1) * sizeof *hi_host); /* [chunk] high halves, [chunk] low */
    if (!hi_host) return tern_errorf("out of memory reading the master weights");
    uint16_t *lo_host = hi_host + chunk;
    tern_error *err = NULL;
    for (size_t at = 0; !err && at < count; at += chunk) {
        size_t len = count - at < chunk ? count - at : chunk;
        err = OP(download)(f->dev, hi_host, tern_view(f->weights, offset + at, len));
        if (!err) err = OP(download)(f->dev, lo_host, tern_view(lo, offset + at, len));
        for (size_t i = 0; !err && i < len; i++) out[at + i] = tern_f32_join(hi_host[i], lo_host[i]);
    }
    free(hi_host);
    return err;
}

/* The f32 parameters [offset, offset + count) on the host (model_flat_read_params). In bf16
 * with ZeRO-1 the low halves are gathered from the ranks first (collective; out NULL: this
 * rank only gives its part); the compute weights are whole on every rank already. */
static tern_error *read_params(model_flat *f, size_t offset, size_t count, float *out) {
    if (!f->weights.len) return out ? read_flat(f, f->master, offset, count, out) : NULL; /* fp32 */
    if (f->shards <= 1) return out ? download_joined(f, f->master, offset, count, out) : NULL;
    tern_buf all = tern_none(); /* [n_full] u16: every rank's low halves */
    TERN_TRY(OP(alloc)(f->dev, TERN_U16, f->n_full, &all));
    tern_error *err = OP(copy)(f->dev, tern_view(all, f->shard_off, f->shard_len), f->master);
    /* allgather takes f32 or bf16 and moves bf16 as its 16 bits, untouched (effects.md):
     * the low halves travel relabelled as bf16. */
    tern_buf bits = all;
    bits.dtype = TERN_BF16;
    if (!err) err = OP(allgather)(f->dev, bits, f->dist);
    if (!err && out) err = download_joined(f, all, offset, count, out);
    tern_error_free(OP(free)(f->dev, &all));
    return err;
}

static tern_error *ensure_optimizer(model_flat *f) {
    if (f->adam_m.len) return NULL;
    TERN_TRY(OP(alloc)(f->dev, TERN_F32, f->shard_len, &f->adam_m));
    TERN_TRY(OP(alloc)(f->dev, TERN_F32, f->shard_len, &f->adam_v));
    TERN_TRY(OP(fill)(f->dev, f->adam_m, 0.0));
    return OP(fill)(f->dev, f->adam_v, 0.0);
}

/* A new buffer of `len` elements of src's dtype: src's elements [from, from + len) as far as
 * src has them, zero after (for the bf16 master's u16 low halves 0x8000, zero's low half:
 * tern_f32_split(0) is hi 0, lo 0x8000). */
static tern_error *cut(model_flat *f, tern_buf src, size_t from, size_t len, tern_buf *out) {
    size_t have = from < src.len ? src.len - from : 0;
    if (have > len) have = len;
    double zero = src.dtype == TERN_U16 ? 0x8000 : 0.0;
    TERN_TRY(OP(alloc)(f->dev, src.dtype, len, out));
    tern_error *err = have ? OP(copy)(f->dev, tern_view(*out, 0, have), tern_view(src, from, have)) : NULL;
    if (!err && have < len) err = OP(fill)(f->dev, tern_view(*out, have, len - have), zero);
    if (err) tern_error_free(OP(free)(f->dev, out));
    return err;
}

/* The compute weights grow to n_full (a multiple of 64 * shards, so every part starts
 * aligned as every tensor does; usually n_flat already); in bf16 the master shrinks to this
 * rank's part. */
static tern_error *shard(model_flat *f, int shards, int rank) {
    if (f->grads.len || f->adam_m.len)
        return tern_errorf("ZeRO-1: the optimizer state must be sharded before training starts");
    size_t unit = 64 * (size_t)shards;
    size_t n_full = (f->n_flat + unit - 1) / unit * unit, len = n_full / (size_t)shards;
    size_t off = (size_t)rank * len;
    bool bf16 = f->weights.len > 0;
    tern_buf master = f->master, weights = f->weights;
    tern_buf *compute = bf16 ? &weights : &master;
    tern_error *err = bf16 ? cut(f, f->master, off, len, &master) : NULL;
    if (!err && compute->len != n_full) err = cut(f, *compute, 0, n_full, compute);
    if (err) {
        if (master.mem != f->master.mem) tern_error_free(OP(free)(f->dev, &master));
        return tern_error_wrap(err, "ZeRO-1");
    }
    if (master.mem != f->master.mem) tern_error_free(OP(free)(f->dev, &f->master));
    if (weights.mem != f->weights.mem) tern_error_free(OP(free)(f->dev, &f->weights));
    f->master = master;
    f->weights = weights;
    f->shards = shards;
    f->n_full = n_full;
    f->shard_len = len;
    f->shard_off = off;
    return NULL;
}

static tern_error *alloc_grads(model_flat *f) {
    TERN_TRY(OP(alloc)(f->dev, f->adtype, f->n_full, &f->grads));
    return OP(fill)(f->dev, f->grads, 0.0);
}

static tern_error *sum_across_ranks(model_flat *f, float *value) {
    return f->world > 1 ? MODEL_FN(sum_across_ranks)(f->dev, f->dist, &f->dist_scalar, value) : NULL;
}

/* AdamW on elements [start, start + len) of the flat layout, as far as they lie in this
 * rank's part (all of them without ZeRO-1). */
static tern_error *adamw_range(model_flat *f, size_t start, size_t len, const tern_adamw *hp) {
    size_t lo = start > f->shard_off ? start : f->shard_off;
    size_t end = start + len, part_end = f->shard_off + f->shard_len;
    size_t hi = end < part_end ? end : part_end;
    if (lo >= hi) return NULL;
    size_t n = hi - lo, in_part = lo - f->shard_off;
    tern_buf shadow = f->weights.len ? tern_view(f->weights, lo, n) : tern_none();
    tern_buf master = tern_view(f->master, model_flat_master_sharded(f) ? in_part : lo, n);
    return OP(adamw)(f->dev, master, shadow, tern_view(f->grads, lo, n), tern_view(f->adam_m, in_part, n),
                     tern_view(f->adam_v, in_part, n), hp);
}

static tern_error *update(model_flat *f, const tern_gpt2_adamw *h, float *grad_norm) {
    tern_dev *d = f->dev;
    if (!f->grads.len) return tern_errorf("update before any backward pass: no gradients");
    TERN_TRY(ensure_optimizer(f));
    /* Data parallelism: each rank holds d(its loss / world); their sum is the gradient of the
     * global batch's mean loss, the same on every rank, so every rank takes the same step. */
    tern_buf grads = tern_view(f->grads, 0, f->n_flat); /* without ZeRO-1's zero padding */
    if (f->world > 1) TERN_TRY(OP(allreduce)(d, grads, f->dist));
    double norm = 0;
    TERN_TRY(OP(norm2)(d, grads, &norm));
    if (grad_norm) *grad_norm = (float)norm;
    if (!isfinite(norm)) return tern_errorf("the gradient norm is %g: training diverged", norm);
    /* PyTorch's clip_grad_norm_: scale by clip / (norm + 1e-6) when that is below 1. */
    float scale = 1.0f;
    if (h->clip > 0 && norm + 1e-6 > h->clip) scale = (float)(h->clip / (norm + 1e-6));

    f->step++;
    tern_adamw hp = {.lr = h->lr, .beta1 = h->beta1, .beta2 = h->beta2, .eps = h->eps,
                     .weight_decay = h->weight_decay, .step = f->step, .grad_scale = scale};
    if (h->decay_all) {
        TERN_TRY(adamw_range(f, 0, f->n_full, &hp));
    } else { /* tensor by tensor: only matrices and embeddings are decayed */
        for (size_t t = 0; t < f->n_tensors; t++) {
            hp.weight_decay = f->tensors[t].decayed ? h->weight_decay : 0.0f;
            TERN_TRY(adamw_range(f, f->tensors[t].offset, f->tensors[t].len, &hp));
        }
    }
    /* ZeRO-1: each rank updated its part of the compute weights; every rank gets them all. */
    return f->shards > 1 ? OP(allgather)(d, model_flat_weights(f), f->dist) : NULL;
}

static void free_flat(model_flat *f) {
    if (!f->dev) return;
    tern_buf *owned[] = {&f->master, &f->weights, &f->grads, &f->adam_m, &f->adam_v, &f->dist_scalar};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        tern_error_free(OP(free)(f->dev, owned[i])); /* freeing cannot be retried */
}

const model_flat_ops MODEL_FN(flat_ops) = {
    .open = open_flat,
    .read = read_flat,
    .write = write_flat,
    .read_gathered = read_gathered,
    .read_params = read_params,
    .ensure_optimizer = ensure_optimizer,
    .shard = shard,
    .alloc_grads = alloc_grads,
    .sum_across_ranks = sum_across_ranks,
    .update = update,
    .free = free_flat,
};
