/* The model's device, its gradients' clearing, the rotary frequencies, and this handler's
 * instance table, tern_llama_<h>_impl; the parameters, moments and AdamW step are the flat
 * state's (models/common/flat_state.h). */
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
    m->flat.dev = m->dev;
    TERN_TRY(m->flat.ops->open(&m->flat, flat));
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, (size_t)m->cfg.head_dim / 2, &m->inv_freq));
    return OP(upload)(m->dev, m->inv_freq, inv_freq);
}

/* Every gradient zero, the gaps between tensors (and ZeRO-1's padding) included: backward
 * passes add into them. */
static tern_error *zero_grad(tern_llama *m) {
    if (!m->flat.grads.len) {
        TERN_TRY(m->flat.ops->alloc_grads(&m->flat)); /* zeroed */
        m->epoch++; /* a replayable backward pass names the gradients */
        return NULL;
    }
    return OP(fill)(m->dev, m->flat.grads, 0.0);
}

static tern_error *forward(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                           float loss_scale, bool backward, float *mean_loss) {
    if (backward && !m->flat.grads.len) TERN_TRY(zero_grad(m));
    return LLAMA_FN(forward)(m, x, y, B, T, loss_scale, backward, mean_loss);
}

/* Decoding's matrices in q8_0 (llama_q8_offset's layout), each quantized from the compute
 * weights by the effect (models/common/quantize.c); HF Linear's [out, in] is already the
 * effect's q8_0 layout. */
static tern_error *quantize_q8(tern_llama *m, bool lm_head) {
    const tern_llama_config *cfg = &m->cfg;
    size_t C = (size_t)cfg->hidden, head = (size_t)m->Vp * C;
    if (lm_head && C % TERN_Q8_BLOCK)
        return tern_errorf("q8_0 weights: the lm head's rows (%zu) are not whole blocks of %d", C, TERN_Q8_BLOCK);
    size_t len = llama_q8_offset(cfg, LLAMA_Q8_QKV, cfg->n_layer) + (lm_head ? head : 0);
    if (len == 0) return tern_errorf("q8_0 weights: no matrix of this model has rows of whole blocks of %d", TERN_Q8_BLOCK);
    tern_buf q8 = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_Q8, len, &q8));
    tern_error *err = NULL;
    for (int l = 0; l < cfg->n_layer && !err; l++)
        for (int k = 0; k < LLAMA_Q8_MATS && !err; k++) {
            if (!llama_q8_takes(cfg, (llama_q8_mat)k)) continue;
            size_t rows, cols;
            llama_q8_shape(cfg, (llama_q8_mat)k, &rows, &cols);
            err = MODEL_FN(quantize_q8)(m->dev, llama_decode_w(m, (llama_q8_mat)k, l), rows, cols, false,
                                        tern_view(q8, llama_q8_offset(cfg, (llama_q8_mat)k, l), rows * cols));
        }
    if (!err && lm_head)
        err = MODEL_FN(quantize_q8)(m->dev, llama_w(m, llama_head_kind(cfg), 0), (size_t)m->Vp, C, false,
                                    tern_view(q8, llama_q8_offset(cfg, LLAMA_Q8_QKV, cfg->n_layer), head));
    if (err) {
        tern_error_free(OP(free)(m->dev, &q8));
        return tern_error_wrap(err, "q8_0 weights");
    }
    tern_error_free(OP(free)(m->dev, &m->q8));
    m->q8 = q8;
    m->q8_head = lm_head;
    m->epoch++; /* decoding's buffers moved */
    return NULL;
}

static void close_model(tern_llama *m) {
    if (!m->dev) return;
    LLAMA_FN(free_acts)(m);
    LLAMA_FN(free_decode)(m);
    m->flat.ops->free(&m->flat);
    tern_error_free(OP(free)(m->dev, &m->q8));
    tern_error_free(OP(free)(m->dev, &m->inv_freq)); /* freeing cannot be retried */
    tern_error_free(OP(close)(m->dev));
    m->dev = NULL;
}

const llama_impl TERN_CAT3(tern_llama_, TERN_HANDLER, _impl) = {
    .handler = TERN_HANDLER_NAME,
    .flat = &MODEL_FN(flat_ops),
    .open = open_model,
    .forward = forward,
    .zero_grad = zero_grad,
    .generate = LLAMA_FN(generate),
    .quantize_q8 = quantize_q8,
    .close = close_model,
};
