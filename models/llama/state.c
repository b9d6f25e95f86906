/* The model's parameter, gradient and optimizer buffers on the handler's device, the AdamW
 * step, and this handler's instance table, tern_llama_<h>_impl. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

/* The device, the parameters from the host array flat [n_flat] (f32), and the rotary
 * inverse frequencies inv_freq [hs / 2]. */
static tern_error *open_model(tern_llama *m, const float *flat, const float *inv_freq) {
    TERN_TRY(OP(open)(m->options, &m->dev));
    const char *name = NULL;
    TERN_TRY(OP(device_name)(m->dev, &name));
    m->device_name = strdup(name ? name : m->backend);
    if (!m->device_name) return tern_errorf("out of memory");
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_flat, &m->master));
    TERN_TRY(OP(upload)(m->dev, m->master, flat));
    if (m->wdtype != TERN_F32) {
        TERN_TRY(OP(alloc)(m->dev, m->wdtype, m->n_flat, &m->weights));
        TERN_TRY(OP(copy)(m->dev, m->weights, m->master));
    }
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, (size_t)m->cfg.head_dim / 2, &m->inv_freq));
    return OP(upload)(m->dev, m->inv_freq, inv_freq);
}

/* Elements [offset, offset + count) of a flat buffer as f32 on the host. */
static tern_error *read_flat(tern_llama *m, tern_buf flat, size_t offset, size_t count, float *out) {
    tern_buf part = tern_view(flat, offset, count);
    if (part.dtype == TERN_F32) return OP(download)(m->dev, out, part);
    tern_buf tmp = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, count, &tmp));
    tern_error *err = OP(copy)(m->dev, tmp, part);
    if (!err) err = OP(download)(m->dev, out, tmp);
    tern_error_free(OP(free)(m->dev, &tmp));
    return err;
}

/* Elements [offset, offset + count) of a flat buffer from f32 host data. */
static tern_error *write_flat(tern_llama *m, tern_buf flat, size_t offset, size_t count, const float *data) {
    tern_buf part = tern_view(flat, offset, count);
    if (part.dtype == TERN_F32) return OP(upload)(m->dev, part, data);
    tern_buf tmp = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, count, &tmp));
    tern_error *err = OP(upload)(m->dev, tmp, data);
    if (!err) err = OP(copy)(m->dev, part, tmp);
    tern_error_free(OP(free)(m->dev, &tmp));
    return err;
}

static tern_error *ensure_optimizer(tern_llama *m) {
    if (m->adam_m.len) return NULL;
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_flat, &m->adam_m));
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_flat, &m->adam_v));
    TERN_TRY(OP(fill)(m->dev, m->adam_m, 0.0));
    return OP(fill)(m->dev, m->adam_v, 0.0);
}

/* *value summed over the ranks of m->dist, through the effect's allreduce. */
static tern_error *sum_across_ranks(tern_llama *m, float *value) {
    if (m->world <= 1) return NULL;
    if (!m->dist_scalar.len) TERN_TRY(OP(alloc)(m->dev, TERN_F32, 1, &m->dist_scalar));
    TERN_TRY(OP(upload)(m->dev, m->dist_scalar, value));
    TERN_TRY(OP(allreduce)(m->dev, m->dist_scalar, m->dist));
    return OP(download)(m->dev, value, m->dist_scalar);
}

/* Every gradient zero, the gaps between tensors included: backward passes add into them. */
static tern_error *zero_grad(tern_llama *m) {
    if (!m->grads.len) {
        TERN_TRY(OP(alloc)(m->dev, m->adtype, m->n_flat, &m->grads));
        m->epoch++;
    }
    return OP(fill)(m->dev, m->grads, 0.0);
}

static tern_error *forward(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                           float loss_scale, bool backward, float *mean_loss) {
    if (backward && !m->grads.len) TERN_TRY(zero_grad(m));
    return LLAMA_FN(forward)(m, x, y, B, T, loss_scale, backward, mean_loss);
}

static tern_error *adamw_range(tern_llama *m, size_t start, size_t len, const tern_adamw *hp) {
    tern_buf shadow = m->weights.len ? tern_view(m->weights, start, len) : tern_none();
    return OP(adamw)(m->dev, tern_view(m->master, start, len), shadow, tern_view(m->grads, start, len),
                     tern_view(m->adam_m, start, len), tern_view(m->adam_v, start, len), hp);
}

static tern_error *update(tern_llama *m, const tern_gpt2_adamw *h, float *grad_norm) {
    tern_dev *d = m->dev;
    if (!m->grads.len) return tern_errorf("update before any backward pass: no gradients");
    TERN_TRY(ensure_optimizer(m));
    /* Data parallelism: each rank holds d(its loss / world); their sum is the gradient of the
     * global batch's mean loss, the same on every rank, so every rank takes the same step. */
    if (m->world > 1) TERN_TRY(OP(allreduce)(d, m->grads, m->dist));
    double norm = 0;
    TERN_TRY(OP(norm2)(d, m->grads, &norm));
    if (grad_norm) *grad_norm = (float)norm;
    if (!isfinite(norm)) return tern_errorf("the gradient norm is %g: training diverged", norm);
    /* PyTorch's clip_grad_norm_: scale by clip / (norm + 1e-6) when that is below 1. */
    float scale = 1.0f;
    if (h->clip > 0 && norm + 1e-6 > h->clip) scale = (float)(h->clip / (norm + 1e-6));
    m->step++;
    tern_adamw hp = {.lr = h->lr, .beta1 = h->beta1, .beta2 = h->beta2, .eps = h->eps,
                     .weight_decay = h->weight_decay, .step = m->step, .grad_scale = scale};
    if (h->decay_all) return adamw_range(m, 0, m->n_flat, &hp);
    const tern_llama_config *cfg = &m->cfg;
    for (int k = 0; k < LLAMA_TENSOR_KINDS; k++) {
        if (!llama_has_tensor(cfg, (llama_tensor)k)) continue;
        int layers = llama_is_layer_kind((llama_tensor)k) ? cfg->n_layer : 1;
        hp.weight_decay = llama_is_matrix((llama_tensor)k) ? h->weight_decay : 0.0f;
        for (int l = 0; l < layers; l++)
            TERN_TRY(adamw_range(m, llama_tensor_offset(cfg, (llama_tensor)k, l),
                                 llama_tensor_len(cfg, (llama_tensor)k), &hp));
    }
    return NULL;
}

static void close_model(tern_llama *m) {
    if (!m->dev) return;
    LLAMA_FN(free_acts)(m);
    LLAMA_FN(free_decode)(m);
    tern_buf *owned[] = {&m->master, &m->weights, &m->grads, &m->adam_m, &m->adam_v, &m->inv_freq, &m->dist_scalar};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) tern_error_free(OP(free)(m->dev, owned[i]));
    tern_error_free(OP(close)(m->dev));
    m->dev = NULL;
}

const llama_impl TERN_CAT3(tern_llama_, TERN_HANDLER, _impl) = {
    .handler = TERN_HANDLER_NAME,
    .open = open_model,
    .read_flat = read_flat,
    .write_flat = write_flat,
    .ensure_optimizer = ensure_optimizer,
    .sum_across_ranks = sum_across_ranks,
    .forward = forward,
    .zero_grad = zero_grad,
    .update = update,
    .generate = LLAMA_FN(generate),
    .close = close_model,
};
