/* The model's device, its gradients' clearing, the AdamW step on the flat state
 * (models/common/flat_state.h), and this handler's instance table, tern_gpt2_<h>_impl. */
#include <stdlib.h>
#include <string.h>

#include "instance.h"

static tern_error *open_model(tern_gpt2 *m, const float *params) {
    TERN_TRY(OP(open)(m->options, &m->dev));
    const char *name = NULL;
    TERN_TRY(OP(device_name)(m->dev, &name));
    m->device_name = strdup(name ? name : m->backend);
    if (!m->device_name) return tern_errorf("out of memory");
    m->flat.dev = m->dev;
    return m->flat.ops->open(&m->flat, params);
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
    if (!m->flat.grads.len) {
        TERN_TRY(m->flat.ops->alloc_grads(&m->flat)); /* zeroed: gaps and padding included */
        m->epoch++; /* a replayable backward pass names the gradients */
        m->grads_fresh = true;
        m->grads_lazy = false;
        return NULL;
    }
    TERN_TRY(OP(fill)(m->dev, gpt2_tensor_view(&m->cfg, m->flat.grads, GPT2_WPE, 0), 0.0));
    m->grads_fresh = true;
    m->grads_lazy = true;
    return NULL;
}

static tern_error *settle_grads(tern_gpt2 *m) {
    if (!m->grads_lazy) return NULL;
    TERN_TRY(OP(fill)(m->dev, m->flat.grads, 0.0));
    m->grads_lazy = false; /* still fresh: the next backward writes them anyway */
    return NULL;
}

static tern_error *forward(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                           float loss_scale, bool backward, float *mean_loss) {
    if (backward && !m->flat.grads.len) TERN_TRY(zero_grad(m));
    return GPT2_FN(forward)(m, x, y, B, T, loss_scale, backward, mean_loss);
}

static tern_error *update(tern_gpt2 *m, const tern_gpt2_adamw *h, float *grad_norm) {
    if (!m->flat.grads.len) return tern_errorf("update before any backward pass: no gradients");
    TERN_TRY(settle_grads(m)); /* right after zero_grad: a step on zero gradients */
    return m->flat.ops->update(&m->flat, h, grad_norm);
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
    m->flat.ops->free(&m->flat);
    tern_error_free(OP(free)(m->dev, &m->q8));
    tern_error_free(OP(close)(m->dev));
    m->dev = NULL;
}

const gpt2_impl TERN_CAT3(tern_gpt2_, TERN_HANDLER, _impl) = {
    .handler = TERN_HANDLER_NAME,
    .flat = &MODEL_FN(flat_ops),
    .open = open_model,
    .forward = forward,
    .zero_grad = zero_grad,
    .settle_grads = settle_grads,
    .update = update,
    .generate = GPT2_FN(generate),
    .quantize_q8 = quantize_q8,
    .close = close_model,
};
