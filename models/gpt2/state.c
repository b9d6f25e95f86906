/* The model's parameter, gradient and optimizer buffers on the handler's device, the AdamW
 * step, and this handler's instance table, tern_gpt2_<h>_impl. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

static tern_error *open_model(tern_gpt2 *m) {
    TERN_TRY(OP(open)(&m->dev));
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
static tern_error *write_flat(tern_gpt2 *m, tern_buf flat, size_t offset, size_t count,
                              const float *data) {
    tern_buf part = tern_view(flat, offset, count);
    if (part.dtype == TERN_F32) return OP(upload)(m->dev, part, data);
    tern_buf tmp = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, count, &tmp));
    tern_error *err = OP(upload)(m->dev, tmp, data);
    if (!err) err = OP(copy)(m->dev, part, tmp);
    tern_error_free(OP(free)(m->dev, &tmp));
    return err;
}

static tern_error *ensure_optimizer(tern_gpt2 *m) {
    if (m->adam_m.len) return NULL;
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_flat, &m->adam_m));
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, m->n_flat, &m->adam_v));
    TERN_TRY(OP(fill)(m->dev, m->adam_m, 0.0));
    return OP(fill)(m->dev, m->adam_v, 0.0);
}

static tern_error *zero_grad(tern_gpt2 *m) {
    if (!m->grads.len) TERN_TRY(OP(alloc)(m->dev, m->adtype, m->n_flat, &m->grads));
    return OP(fill)(m->dev, m->grads, 0.0);
}

/* *value summed over the ranks of m->dist, through the effect's allreduce. */
static tern_error *sum_across_ranks(tern_gpt2 *m, float *value) {
    if (m->world <= 1) return NULL;
    if (!m->dist_scalar.len) TERN_TRY(OP(alloc)(m->dev, TERN_F32, 1, &m->dist_scalar));
    TERN_TRY(OP(upload)(m->dev, m->dist_scalar, value));
    TERN_TRY(OP(allreduce)(m->dev, m->dist_scalar, m->dist));
    return OP(download)(m->dev, value, m->dist_scalar);
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

static tern_error *update(tern_gpt2 *m, const tern_gpt2_adamw *h, float *grad_norm) {
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
    if (h->decay_all) return OP(adamw)(d, m->master, m->weights, m->grads, m->adam_m, m->adam_v, &hp);

    const tern_gpt2_config *cfg = &m->cfg;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++) {
            size_t off = gpt2_tensor_offset(cfg, (gpt2_tensor)k, l);
            size_t len = gpt2_tensor_len(cfg, (gpt2_tensor)k);
            hp.weight_decay = is_matrix((gpt2_tensor)k) ? h->weight_decay : 0.0f;
            tern_buf shadow = m->weights.len ? tern_view(m->weights, off, len) : tern_none();
            TERN_TRY(OP(adamw)(d, tern_view(m->master, off, len), shadow,
                               tern_view(m->grads, off, len), tern_view(m->adam_m, off, len),
                               tern_view(m->adam_v, off, len), &hp));
        }
    }
    return NULL;
}

static void close_model(tern_gpt2 *m) {
    if (!m->dev) return;
    GPT2_FN(free_acts)(m);
    GPT2_FN(free_decode)(m);
    tern_buf *owned[] = {&m->master, &m->weights, &m->grads, &m->adam_m, &m->adam_v,
                         &m->dist_scalar};
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
    .ensure_optimizer = ensure_optimizer,
    .forward = forward,
    .zero_grad = zero_grad,
    .sum_across_ranks = sum_across_ranks,
    .update = update,
    .generate = GPT2_FN(generate),
    .close = close_model,
};
