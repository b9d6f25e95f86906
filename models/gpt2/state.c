/* The model's parameter, gradient and optimizer buffers on the handler's device, the AdamW
 * step, and this handler's instance table, tern_gpt2_<h>_impl. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

static tern_error *open_model(tern_gpt2 *m) {
    TERN_TRY(OP(open)(m->options, &m->dev));
    const char *name = NULL;
    TERN_TRY(OP(device_name)(m->dev, &name));
    m->device_name = strdup(name ? name : m->backend);
    if (!m->device_name) return tern_errorf("out of memory");
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_flat, &m->master));
    if (m->wdtype != TERN_F32) TERN_TRY(OP(alloc)(m->dev, m->wdtype, m->n_flat, &m->weights));
    return NULL;
}

static tern_error *upload_params(tern_gpt2 *m, const float *flat) {
    TERN_TRY(OP(upload)(m->dev, m->master, flat));
    if (m->weights.len) TERN_TRY(OP(copy)(m->dev, m->weights, m->master));
    return NULL;
}

/* Elements [offset, offset + count) of a flat buffer as f32 on the host. */
static tern_error *read_flat(tern_gpt2 *m, tern_buf flat, size_t offset, size_t count, float *out) {
    return MODEL_FN(read_flat)(m->dev, flat, offset, count, out);
}

/* Elements [offset, offset + count) of a flat buffer from f32 host data. */
static tern_error *write_flat(tern_gpt2 *m, tern_buf flat, size_t offset, size_t count, const float *data) {
    return MODEL_FN(write_flat)(m->dev, flat, offset, count, data);
}

static tern_error *read_gathered(tern_gpt2 *m, tern_buf part, size_t offset, size_t count,
                                 float *out) {
    if (m->shards <= 1) return out ? read_flat(m, part, offset, count, out) : NULL;
    tern_buf all = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_full, &all));
    tern_error *err = OP(copy)(m->dev, tern_view(all, m->shard_off, m->shard_len), part);
    if (!err) err = OP(allgather)(m->dev, all, m->dist);
    if (!err && out) err = read_flat(m, all, offset, count, out);
    tern_error_free(OP(free)(m->dev, &all));
    return err;
}

static tern_error *ensure_optimizer(tern_gpt2 *m) {
    if (m->adam_m.len) return NULL;
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->shard_len, &m->adam_m));
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->shard_len, &m->adam_v));
    TERN_TRY(OP(fill)(m->dev, m->adam_m, 0.0));
    return OP(fill)(m->dev, m->adam_v, 0.0);
}

/* A new buffer of `len` elements of src's dtype: src's elements [from, from + len) as far as
 * src has them, zero after. */
static tern_error *cut(tern_gpt2 *m, tern_buf src, size_t from, size_t len, tern_buf *out) {
    size_t have = from < src.len ? src.len - from : 0;
    if (have > len) have = len;
    TERN_TRY(OP(alloc)(m->dev, src.dtype, len, out));
    tern_error *err = have ? OP(copy)(m->dev, tern_view(*out, 0, have), tern_view(src, from, have)) : NULL;
    if (!err && have < len) err = OP(fill)(m->dev, tern_view(*out, have, len - have), 0.0);
    if (err) tern_error_free(OP(free)(m->dev, out));
    return err;
}

/* The compute weights grow to n_full (a multiple of 64 * shards, so every part starts
 * aligned as every tensor does; usually n_flat already); in bf16 the master shrinks to this
 * rank's part. */
static tern_error *shard(tern_gpt2 *m, int shards, int rank) {
    if (m->grads.len || m->adam_m.len)
        return tern_errorf("ZeRO-1: the optimizer state must be sharded before training starts");
    size_t unit = 64 * (size_t)shards;
    size_t n_full = (m->n_flat + unit - 1) / unit * unit, len = n_full / (size_t)shards;
    size_t off = (size_t)rank * len;
    bool bf16 = m->weights.len > 0;
    tern_buf master = m->master, weights = m->weights;
    tern_buf *compute = bf16 ? &weights : &master;
    tern_error *err = bf16 ? cut(m, m->master, off, len, &master) : NULL;
    if (!err && compute->len != n_full) err = cut(m, *compute, 0, n_full, compute);
    if (err) {
        if (master.mem != m->master.mem) tern_error_free(OP(free)(m->dev, &master));
        return tern_error_wrap(err, "ZeRO-1");
    }
    if (master.mem != m->master.mem) tern_error_free(OP(free)(m->dev, &m->master));
    if (weights.mem != m->weights.mem) tern_error_free(OP(free)(m->dev, &m->weights));
    m->master = master;
    m->weights = weights;
    m->shards = shards;
    m->n_full = n_full;
    m->shard_len = len;
    m->shard_off = off;
    m->epoch++; /* the weights may have moved: replayable decode steps are captured anew */
    return NULL;
}

/* The gradients are zero after zero_grad and the next forward_backward adds to them (the
 * API's promise), but zero_grad clears only what that pass adds into: the first backward
 * pass after it (grads_fresh) writes every other gradient with beta 0, old values unread
 * (NaN included). That saves a fill of every gradient each step (500 MB at 124M in fp32,
 * 0.23 ms on an H200). Every element of the flat gradients [n_full], and who clears or
 * writes it (forward.c's backward and block_backward):
 *   wte [Vp, C]      written by dwte = dlogits^T lnf (all Vp rows: the padding columns of
 *                    dlogits are 0), then embed_backward adds the embedding's part
 *   wpe [max_T, C]   only added into, by embed_backward (rows < T): CLEARED here
 *   per layer l
 *     ln_1.w, ln_1.b     ln_1's layernorm_backward (dw, db; grad_beta 0)
 *     qkv.W, qkv.b       the qkv product's weight gradient (beta 0) and its bias_grad
 *     attproj.W          its weight-gradient product (beta 0)
 *     attproj.b          ln_2's layernorm_backward (dsum: the sum of d(res2) over rows)
 *     ln_2.w, ln_2.b     ln_2's layernorm_backward
 *     fc.W, fc.b         the fc product's weight gradient and its bias_grad
 *     fcproj.W           its weight-gradient product
 *     fcproj.b           the layer norm backward completing d(res3 of l): layer l+1's
 *                        ln_1 (dsum), or ln_f's for the last layer
 *   ln_f.w, ln_f.b   ln_f's layernorm_backward
 *   gaps             between tensors (each starts at a multiple of 64 elements) and ZeRO-1's
 *                    padding [n_flat, n_full): no operation writes them, but norm2 and AdamW
 *                    read them; CLEARED once, when the gradients are allocated (allreduce
 *                    keeps zeros zero).
 * Accumulation over several forward_backward calls: only the first after zero_grad writes
 * (forward.c clears grads_fresh after every pass, replayed ones included); the rest add. With
 * ranks, each rank does the same on its own gradients, and update's allreduce sums them.
 * Readers: until that first pass, the written gradients hold the last step's values
 * (grads_lazy), so whatever reads them in between (read_grad; update's allreduce, norm and
 * AdamW) calls settle_grads first, which clears them all then, once. A training step
 * (zero_grad, forward_backward..., update) never needs it. */
static tern_error *zero_grad(tern_gpt2 *m) {
    if (!m->grads.len) {
        TERN_TRY(OP(alloc)(m->dev, m->adtype, m->n_full, &m->grads));
        m->epoch++; /* a replayable backward pass names the gradients */
        TERN_TRY(OP(fill)(m->dev, m->grads, 0.0)); /* gaps and padding included */
        m->grads_fresh = true;
        m->grads_lazy = false;
        return NULL;
    }
    TERN_TRY(OP(fill)(m->dev, gpt2_tensor_view(&m->cfg, m->grads, GPT2_WPE, 0), 0.0));
    m->grads_fresh = true;
    m->grads_lazy = true;
    return NULL;
}

static tern_error *settle_grads(tern_gpt2 *m) {
    if (!m->grads_lazy) return NULL;
    TERN_TRY(OP(fill)(m->dev, m->grads, 0.0));
    m->grads_lazy = false; /* still fresh: the next backward writes them anyway */
    return NULL;
}

/* *value summed over the ranks of m->dist, through the effect's allreduce. */
static tern_error *sum_across_ranks(tern_gpt2 *m, float *value) {
    return m->world > 1 ? MODEL_FN(sum_across_ranks)(m->dev, m->dist, &m->dist_scalar, value) : NULL;
}

static tern_error *forward(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                           float loss_scale, bool backward, float *mean_loss) {
    if (backward && !m->grads.len) TERN_TRY(zero_grad(m));
    return GPT2_FN(forward)(m, x, y, B, T, loss_scale, backward, mean_loss);
}

/* Two-dimensional tensors (matrices and embeddings) are the ones decayed when decay_all is
 * off, as in GPT-2's usual recipe. */
static bool is_matrix(gpt2_tensor kind) {
    return kind == GPT2_WTE || kind == GPT2_WPE || kind == GPT2_QKVW || kind == GPT2_ATTPROJW ||
           kind == GPT2_FCW || kind == GPT2_FCPROJW;
}

/* AdamW on elements [start, start + len) of the flat layout, as far as they lie in this
 * rank's part (all of them without ZeRO-1). */
static tern_error *adamw_range(tern_gpt2 *m, size_t start, size_t len, const tern_adamw *hp) {
    size_t lo = start > m->shard_off ? start : m->shard_off;
    size_t end = start + len, part_end = m->shard_off + m->shard_len;
    size_t hi = end < part_end ? end : part_end;
    if (lo >= hi) return NULL;
    size_t n = hi - lo, in_part = lo - m->shard_off;
    tern_buf shadow = m->weights.len ? tern_view(m->weights, lo, n) : tern_none();
    tern_buf master = tern_view(m->master, gpt2_master_sharded(m) ? in_part : lo, n);
    return OP(adamw)(m->dev, master, shadow, tern_view(m->grads, lo, n),
                     tern_view(m->adam_m, in_part, n), tern_view(m->adam_v, in_part, n), hp);
}

/* AdamW on this rank's part, tensor by tensor when only matrices are decayed. */
static tern_error *adamw_part(tern_gpt2 *m, const tern_gpt2_adamw *h, tern_adamw *hp) {
    if (h->decay_all) return adamw_range(m, 0, m->n_full, hp);
    const tern_gpt2_config *cfg = &m->cfg;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++) {
            hp->weight_decay = is_matrix((gpt2_tensor)k) ? h->weight_decay : 0.0f;
            TERN_TRY(adamw_range(m, gpt2_tensor_offset(cfg, (gpt2_tensor)k, l),
                                 gpt2_tensor_len(cfg, (gpt2_tensor)k), hp));
        }
    }
    return NULL;
}

static tern_error *update(tern_gpt2 *m, const tern_gpt2_adamw *h, float *grad_norm) {
    tern_dev *d = m->dev;
    if (!m->grads.len) return tern_errorf("update before any backward pass: no gradients");
    TERN_TRY(settle_grads(m)); /* right after zero_grad: a step on zero gradients */
    TERN_TRY(ensure_optimizer(m));
    /* Data parallelism: each rank holds d(its loss / world); their sum is the gradient of the
     * global batch's mean loss, the same on every rank, so every rank takes the same step. */
    tern_buf grads = tern_view(m->grads, 0, m->n_flat); /* without ZeRO-1's zero padding */
    if (m->world > 1) TERN_TRY(OP(allreduce)(d, grads, m->dist));
    double norm = 0;
    TERN_TRY(OP(norm2)(d, grads, &norm));
    if (grad_norm) *grad_norm = (float)norm;
    if (!isfinite(norm)) return tern_errorf("the gradient norm is %g: training diverged", norm);
    /* PyTorch's clip_grad_norm_: scale by clip / (norm + 1e-6) when that is below 1. */
    float scale = 1.0f;
    if (h->clip > 0 && norm + 1e-6 > h->clip) scale = (float)(h->clip / (norm + 1e-6));

    m->step++;
    tern_adamw hp = {.lr = h->lr, .beta1 = h->beta1, .beta2 = h->beta2, .eps = h->eps,
                     .weight_decay = h->weight_decay, .step = m->step, .grad_scale = scale};
    TERN_TRY(adamw_part(m, h, &hp));
    /* ZeRO-1: each rank updated its part of the compute weights; every rank gets them all. */
    return m->shards > 1 ? OP(allgather)(d, gpt2_weights(m), m->dist) : NULL;
}

/* Decoding's matrices in q8_0 (gpt2_q8_offset's layout), each quantized from the compute
 * weights by the effect (models/common/quantize.c). */
static tern_error *quantize_q8(tern_gpt2 *m, bool lm_head) {
    const tern_gpt2_config *cfg = &m->cfg;
    static const gpt2_tensor mats[] = {GPT2_QKVW, GPT2_ATTPROJW, GPT2_FCW, GPT2_FCPROJW};
    size_t len = gpt2_q8_offset(cfg, GPT2_WTE, 0) + (lm_head ? gpt2_tensor_len(cfg, GPT2_WTE) : 0);
    tern_buf q8 = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_Q8, len, &q8));
    tern_error *err = NULL;
    for (int l = 0; l < cfg->n_layer && !err; l++)
        for (size_t i = 0; i < sizeof mats / sizeof mats[0] && !err; i++) {
            size_t rows, cols; /* [in, out] */
            gpt2_tensor_shape(cfg, mats[i], &rows, &cols);
            err = MODEL_FN(quantize_q8)(m->dev, gpt2_w(m, mats[i], l), rows, cols, true,
                                        tern_view(q8, gpt2_q8_offset(cfg, mats[i], l), rows * cols));
        }
    if (!err && lm_head) /* wte [Vp, C] is already [out, in] */
        err = MODEL_FN(quantize_q8)(m->dev, gpt2_w(m, GPT2_WTE, 0), (size_t)m->Vp, (size_t)cfg->n_embd,
                                    false, tern_view(q8, gpt2_q8_offset(cfg, GPT2_WTE, 0),
                                                     gpt2_tensor_len(cfg, GPT2_WTE)));
    if (err) {
        tern_error_free(OP(free)(m->dev, &q8));
        return tern_error_wrap(err, "q8_0 weights");
    }
    tern_error_free(OP(free)(m->dev, &m->q8));
    m->q8 = q8;
    m->q8_lm = lm_head;
    m->epoch++; /* decoding's buffers moved */
    return NULL;
}

static void close_model(tern_gpt2 *m) {
    if (!m->dev) return;
    GPT2_FN(free_acts)(m);
    GPT2_FN(free_decode)(m);
    tern_buf *owned[] = {&m->master, &m->weights, &m->grads, &m->adam_m, &m->adam_v,
                         &m->dist_scalar, &m->q8};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        tern_error_free(OP(free)(m->dev, owned[i]));
    tern_error_free(OP(close)(m->dev));
    m->dev = NULL;
}

const gpt2_impl TERN_CAT3(tern_gpt2_, TERN_HANDLER, _impl) = {
    .handler = TERN_HANDLER_NAME,
    .open = open_model,
    .upload_params = upload_params,
    .read_flat = read_flat,
    .write_flat = write_flat,
    .read_gathered = read_gathered,
    .ensure_optimizer = ensure_optimizer,
    .shard = shard,
    .forward = forward,
    .zero_grad = zero_grad,
    .settle_grads = settle_grads,
    .sum_across_ranks = sum_across_ranks,
    .update = update,
    .generate = GPT2_FN(generate),
    .quantize_q8 = quantize_q8,
    .close = close_model,
};
