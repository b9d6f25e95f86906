/* GPT-2's forward and backward passes over a batch of B x T tokens. */
#include <stdlib.h>
#include <string.h>

#include "instance.h"

/* Rows of logits a training pass holds at once (logits_and_loss): m->memory.logit_rows, or
 * by default the BT rows cut into the fewest equal chunks (multiples of 64 rows) within a
 * budget of logits: 2^28 (512 MiB in bf16), or the backward's buffers' backward_len when
 * smaller (below). GPT-2 124M at B=16, T=1024: 4 chunks of 4096 rows; 1.5B: 7 of 2,368.
 * Each chunk after the first reads and writes dwte once more (docs/PERFORMANCE.md,
 * "Training memory", has the cost). */
static int logit_chunk_rows(const tern_gpt2 *m, int BT, size_t backward_len) {
    int rows = m->memory.logit_rows;
    if (rows <= 0) {
        /* 2^28 elements of logits at most; no more than the backward's own buffers, which
         * share their room, when those are 2^26 elements or more (GPT-2 1.5B at B=16,
         * T=1024: 2,368 rows, 119M elements within the backward's 131M, where 4,096 rows
         * took 206M): chunks of at least ~1,300 rows of GPT-2's vocabulary */
        size_t all = (size_t)BT * (size_t)m->Vp, budget = (size_t)1 << 28;
        if (backward_len >= (size_t)1 << 26 && backward_len < budget) budget = backward_len;
        size_t chunks = (all + budget - 1) / budget;
        size_t r = ((size_t)BT + chunks - 1) / chunks;
        size_t cap = budget / (size_t)m->Vp / 64 * 64; /* whole 64-row blocks within budget */
        r = (r + 63) / 64 * 64;
        rows = (int)(cap >= 64 && r > cap ? cap : r);
    }
    return rows < BT ? rows : BT;
}

/* Lays out the activations of a B x T pass (see model_pools). */
static void layout_acts(tern_gpt2 *m, model_pools *p, gpt2_acts *a, size_t saved_len,
                        bool with_grad) {
    size_t BT = (size_t)a->B * a->T, C = (size_t)m->cfg.n_embd;
    a->tokens = MODEL_FN(take)(p, POOL_I32, BT);
    a->targets = MODEL_FN(take)(p, POOL_I32, BT);
    a->x0 = MODEL_FN(take)(p, POOL_ACT, BT * C);
    /* fch_gelu [BT, 4C]: a layer's own when the backward reads it; one for all layers in a
     * forward-only layout, or when the backward recomputes it (m->memory.recompute_gelu) */
    bool shared_gelu = !with_grad || m->memory.recompute_gelu;
    a->gelu_shared = shared_gelu;
    tern_buf gelu_all = shared_gelu ? MODEL_FN(take)(p, POOL_ACT, BT * 4 * C) : tern_none();
    /* The layer norms' backward reads either their outputs ln1, ln2, lnf [BT, C] (by default:
     * kept per layer, as the weight gradients after them read them anyway; xhat = (y - b) /
     * w) or their inputs res2, res3 [BT, C] (m->memory.recompute_layernorm, or weights that
     * do not suit the outputs' form: m->ln_inputs_kept; exact for any weights; each layer
     * norm's backward writes its output again, for the weight gradient after it, into one
     * buffer shared by all); the other kind is one buffer (ln_all) or two (the residual
     * stream: x0 and stream) that every layer reuses. A forward-only layout keeps neither.
     * Either way 14 [BT, C] a layer rather than 16. */
    bool keep_out = with_grad && !m->memory.recompute_layernorm && !m->ln_inputs_kept;
    bool keep_in = with_grad && !keep_out;
    a->ln_shared = !keep_out;
    tern_buf ln_all = keep_out ? tern_none() : MODEL_FN(take)(p, POOL_ACT, BT * C);
    tern_buf stream = keep_in ? tern_none() : MODEL_FN(take)(p, POOL_ACT, BT * C);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gpt2_layer_acts *la = &a->layers[l];
        la->ln1 = keep_out ? MODEL_FN(take)(p, POOL_ACT, BT * C) : ln_all;
        la->ln1_mean = MODEL_FN(take)(p, POOL_F32, BT);
        la->ln1_rstd = MODEL_FN(take)(p, POOL_F32, BT);
        la->qkv = MODEL_FN(take)(p, POOL_ACT, BT * 3 * C);
        la->atty = MODEL_FN(take)(p, POOL_ACT, BT * C);
        la->att_saved = saved_len ? MODEL_FN(take)(p, POOL_F32, saved_len) : tern_none();
        la->res2 = keep_in ? MODEL_FN(take)(p, POOL_ACT, BT * C) : stream;
        la->ln2 = keep_out ? MODEL_FN(take)(p, POOL_ACT, BT * C) : ln_all;
        la->ln2_mean = MODEL_FN(take)(p, POOL_F32, BT);
        la->ln2_rstd = MODEL_FN(take)(p, POOL_F32, BT);
        la->fch = MODEL_FN(take)(p, POOL_ACT, BT * 4 * C);
        la->fch_gelu = shared_gelu ? gelu_all : MODEL_FN(take)(p, POOL_ACT, BT * 4 * C);
        /* the stream: x0 -> res2 in stream -> res3 over x0, which ln1 no longer needs */
        la->res3 = keep_in ? MODEL_FN(take)(p, POOL_ACT, BT * C) : a->x0;
    }
    /* lnf [BT, C]: the layer norms' shared buffer too when they share one (the backward
     * then writes every layer's ln_2 again, the last one's included) */
    a->lnf = keep_out ? MODEL_FN(take)(p, POOL_ACT, BT * C) : ln_all;
    a->lnf_mean = MODEL_FN(take)(p, POOL_F32, BT);
    a->lnf_rstd = MODEL_FN(take)(p, POOL_F32, BT);
    /* The backward's buffers share one room with the logits, by when each is live:
     *   [0, C)    dln [BT, C] (from the output projection's backward on), and datty [BT, C]
     *             in each block's attention part until dln is written over it;
     *   [C, 2C)   dres [BT, C] (from the final layer norm's backward on);
     *   [2C, 6C)  dfch [BT, 4C] in the MLP part, dqkv [BT, 3C] in the attention part;
     * in units of BT C elements, each slot a multiple of 64 elements. The logits
     * [logit_rows, Vp] take the room from C on: logits_and_loss writes dln while they live,
     * and nothing else until it has taken their gradient into dln. GPT-2 1.5B at B=16,
     * T=1024: 157M elements, where separate dln and datty and logits of 4,096 rows took
     * 262M (0.2 GiB more). */
    size_t slot = (BT * C + 63) / 64 * 64;
    size_t backward_len = slot + (BT * 4 * C + 63) / 64 * 64; /* from C on: dres, dfch|dqkv */
    a->logit_rows = with_grad ? logit_chunk_rows(m, (int)BT, backward_len) : (int)BT;
    size_t logits_len = (size_t)a->logit_rows * (size_t)m->Vp;
    size_t from_c = with_grad && backward_len > logits_len ? backward_len : logits_len;
    tern_buf room = MODEL_FN(take)(p, POOL_ACT, (with_grad ? slot : 0) + from_c);
    a->logits = tern_view(room, with_grad ? slot : 0, logits_len);
    a->losses = MODEL_FN(take)(p, POOL_F32, BT);
    a->has_grad_buffers = with_grad;
    if (!with_grad) return;
    a->dln = tern_view(room, 0, BT * C);
    a->datty = tern_view(room, 0, BT * C);
    a->dres = tern_view(room, slot, BT * C);
    a->dfch = tern_view(room, 2 * slot, BT * 4 * C);
    a->dqkv = tern_view(room, 2 * slot, BT * 3 * C);
}

void GPT2_FN(free_acts)(tern_gpt2 *m) {
    MODEL_FN(pools_free)(m->dev, m->acts.pool);
    free(m->acts.layers);
    m->acts = (gpt2_acts){0};
    m->epoch++; /* replayable passes named these buffers */
}

/* Makes the activations fit a B x T pass (reallocating when the shape changes): with_grad
 * with the backward's buffers, all_logits with room for every row's logits (a pass without
 * targets, whose logits are its result). */
static tern_error *ensure_acts(tern_gpt2 *m, int B, int T, bool with_grad, bool all_logits) {
    gpt2_acts *a = &m->acts;
    if (a->layers && a->B == B && a->T == T && (a->has_grad_buffers || !with_grad) &&
        (!all_logits || a->logit_rows == B * T) &&
        a->memory.logit_rows == m->memory.logit_rows &&
        a->memory.recompute_gelu == m->memory.recompute_gelu &&
        a->memory.recompute_layernorm == m->memory.recompute_layernorm)
        return NULL;
    GPT2_FN(free_acts)(m);
    size_t saved_len = 0;
    TERN_TRY(OP(attention_saved_len)(m->dev, B, T, m->cfg.n_head, &saved_len));
    a->layers = calloc((size_t)m->cfg.n_layer, sizeof *a->layers);
    if (!a->layers) return tern_errorf("out of memory for %d layers' activations", m->cfg.n_layer);
    a->B = B;
    a->T = T;
    a->memory = m->memory;
    model_pools p = {.dtype = {m->flat.adtype, TERN_F32, TERN_I32}};
    layout_acts(m, &p, a, saved_len, with_grad);
    tern_error *err = MODEL_FN(pools_alloc)(m->dev, &p);
    if (err) {
        GPT2_FN(free_acts)(m);
        return tern_error_wrap(err, "activations for B=%d, T=%d", B, T);
    }
    layout_acts(m, &p, a, saved_len, with_grad);
    for (int k = 0; k < POOL_COUNT; k++) a->pool[k] = p.base[k];
    return NULL;
}

/* One transformer block: x [BT, C] -> la->res3 [BT, C]. */
static tern_error *block_forward(tern_gpt2 *m, int l, tern_buf x, gpt2_layer_acts *la) {
    tern_dev *d = m->dev;
    const gpt2_acts *a = &m->acts;
    int B = a->B, T = a->T, BT = B * T, C = m->cfg.n_embd, NH = m->cfg.n_head;
    float eps = m->cfg.ln_eps;

    /* attention: res2 = x + proj(attention(ln_1(x))) */
    /* ln1 [BT, C] = ln_1(x [BT, C]) */
    TERN_TRY(OP(layernorm)(d, la->ln1, la->ln1_mean, la->ln1_rstd, x, gpt2_w(m, GPT2_LN1W, l),
                           gpt2_w(m, GPT2_LN1B, l), BT, C, eps));
    /* qkv [BT, 3C] = ln1 @ W_qkv [C, 3C] + b_qkv */
    TERN_TRY(GPT2_FN(linear)(d, la->qkv, la->ln1, gpt2_w(m, GPT2_QKVW, l), gpt2_w(m, GPT2_QKVB, l),
                             BT, C, 3 * C, TERN_EPILOGUE_NONE, tern_none()));
    /* atty [BT, C] = attention(qkv) */
    TERN_TRY(OP(attention)(d, la->atty, la->att_saved, la->qkv, B, T, NH, NH, C / NH));
    /* res2 [BT, C] = x + atty @ W_attproj [C, C] + b_attproj */
    TERN_TRY(GPT2_FN(residual_linear)(d, la->res2, x, la->atty, gpt2_w(m, GPT2_ATTPROJW, l),
                                      gpt2_w(m, GPT2_ATTPROJB, l), BT, C, C));

    /* MLP: res3 = res2 + proj(gelu(fc(ln_2(res2)))) */
    /* ln2 [BT, C] = ln_2(res2) */
    TERN_TRY(OP(layernorm)(d, la->ln2, la->ln2_mean, la->ln2_rstd, la->res2,
                           gpt2_w(m, GPT2_LN2W, l), gpt2_w(m, GPT2_LN2B, l), BT, C, eps));
    /* fch [BT, 4C] = ln2 @ W_fc [C, 4C] + b_fc;  fch_gelu [BT, 4C] = gelu(fch) */
    TERN_TRY(GPT2_FN(linear)(d, la->fch_gelu, la->ln2, gpt2_w(m, GPT2_FCW, l), gpt2_w(m, GPT2_FCB, l),
                             BT, C, 4 * C, TERN_EPILOGUE_GELU, la->fch));
    /* res3 [BT, C] = res2 + fch_gelu @ W_fcproj [4C, C] + b_fcproj */
    TERN_TRY(GPT2_FN(residual_linear)(d, la->res3, la->res2, la->fch_gelu, gpt2_w(m, GPT2_FCPROJW, l),
                                      gpt2_w(m, GPT2_FCPROJB, l), BT, 4 * C, C));
    return NULL;
}

/* Gradient of a linear layer y = x @ w + b, given dy [rows, out], in two products:
 * linear_dx: dx [rows, in] = dy @ w^T (overwritten).
 * linear_dx_gelu: the same taken on through the GELU that made x = gelu(pre), pre [rows, in]:
 * dpre = gelu'(pre) * (dy @ w^T), and db_pre [in] (+)= the sum of dpre's rows: the bias
 * gradient of the layer whose output pre is (GPT-2's fc), in the same product.
 * linear_dw: dw [in, out] += x^T @ dy, db [out] += sum of dy (in the same product: its bias
 * gradient), or = when grad_beta is 0 (the gradients were just zeroed: nothing to read
 * back). db may be absent: the residual projections' bias gradients come from the layer
 * norm backward that makes their dy (see block_backward). */
static tern_error *linear_dx(tern_dev *d, tern_buf dx, tern_buf dy, tern_buf w, int rows, int in, int out) {
    tern_matmul dx_mm = {.m = rows, .n = in, .k = out, .trans_b = true, .alpha = 1, .beta = 0};
    return OP(matmul)(d, dx, dy, w, &dx_mm);
}

static tern_error *linear_dx_gelu(tern_dev *d, tern_buf dpre, tern_buf db_pre, tern_buf dy, tern_buf w, tern_buf pre,
                                  int rows, int in, int out, float grad_beta) {
    tern_matmul dx_mm = {.m = rows, .n = in, .k = out, .trans_b = true, .alpha = 1, .beta = 0,
                         .epilogue = TERN_EPILOGUE_GELU_BACKWARD, .aux = pre, .col_sums = db_pre,
                         .col_sums_beta = grad_beta};
    return OP(matmul)(d, dpre, dy, w, &dx_mm);
}

static tern_error *linear_dw(tern_dev *d, tern_buf dw, tern_buf db, tern_buf dy, tern_buf x, int rows, int in,
                             int out, float grad_beta) {
    tern_matmul dw_mm = {.m = in, .n = out, .k = rows, .trans_a = true, .alpha = 1, .beta = grad_beta,
                         .bias_grad = db};
    return OP(matmul)(d, dw, x, dy, &dw_mm);
}

/* A layer norm's backward (dx [BT, C] += ...; its weights' gradients dw, db [C], and dsum
 * [C], see effect.h): from its output y [BT, C] when the layout keeps the outputs (xhat =
 * (y - b) / w), else from its input x [BT, C] and its mean, writing y again into the shared
 * buffer when y is given (the weight gradient after it reads it). */
static tern_error *layernorm_backward(tern_gpt2 *m, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum, tern_buf y,
                                      tern_buf x, gpt2_tensor w_kind, gpt2_tensor b_kind, int l, tern_buf mean,
                                      tern_buf rstd, float gb) {
    const gpt2_acts *a = &m->acts;
    int BT = a->B * a->T, C = m->cfg.n_embd;
    tern_buf w = gpt2_w(m, w_kind, l), b = gpt2_w(m, b_kind, l);
    if (!a->ln_shared)
        return OP(layernorm_backward)(m->dev, dx, dw, db, dsum, tern_none(), a->dln, y, w, b, tern_none(), rstd, BT,
                                      C, gb);
    return OP(layernorm_backward)(m->dev, dx, dw, db, dsum, y, a->dln, x, w, b, mean, rstd, BT, C, gb);
}

/* Backward through one block. On entry a->dres holds d(loss)/d(res3); on return,
 * d(loss)/d(x), the block's input. Parameter gradients are accumulated, or written when the
 * gradients were just zeroed (gb = 0: see zero_grad in state.c for who writes which).
 *
 * The residual projections' bias gradients: res3 = res2 + fch_gelu @ W_fcproj + b_fcproj, so
 * d(b_fcproj) = sum over rows of d(res3), and likewise d(b_attproj) = sum of d(res2). Each of
 * those residual gradients is completed by a layer norm's backward (d(res2) += ln_2's part,
 * d(x) += ln_1's part, d(res3 of the last layer) = ln_f's part), which also sums its result
 * over the rows into `dsum`: so ln_2's backward yields d(b_attproj) of this layer, ln_1's
 * d(b_fcproj) of the layer before (x is its res3), and the projections' own weight-gradient
 * products need no bias gradient (no pass of their own over d(res)). */
static tern_error *block_backward(tern_gpt2 *m, int l, tern_buf x, const gpt2_layer_acts *la) {
    tern_dev *d = m->dev;
    const gpt2_acts *a = &m->acts;
    const tern_gpt2_config *cfg = &m->cfg;
    int B = a->B, T = a->T, BT = B * T, C = cfg->n_embd, NH = cfg->n_head;
    float gb = m->grads_fresh ? 0.0f : 1.0f; /* the parameters' gradients: write or accumulate */
#define G(kind) gpt2_tensor_view(cfg, m->flat.grads, kind, l)
    /* [C]: d(b_fcproj) of the layer whose res3 is x (absent for layer 0: x is the embedding) */
    tern_buf dfcproj_b_prev = l ? gpt2_tensor_view(cfg, m->flat.grads, GPT2_FCPROJB, l - 1) : tern_none();

    /* MLP. d(res2) = d(res3) + the path through ln_2, fc, gelu and the projection. */
    /* dfch [BT, 4C] = gelu'(fch) * (dres [BT, C] @ W_fcproj^T): through the projection and the
     * GELU, and d(b_fc) [4C] = the sum of dfch's rows with it; d(W_fcproj) [4C, C] =
     * fch_gelu^T @ dres. d(b_fcproj) [C] = sum of dres: already
     * summed by the layer norm backward that completed dres (ln_f's or layer l+1's ln_1's). */
    /* fch_gelu [BT, 4C] = gelu(fch), again, when the layers share it (the last layer's is
     * still there from the forward pass) */
    if (a->gelu_shared && l != cfg->n_layer - 1) TERN_TRY(OP(gelu)(d, la->fch_gelu, la->fch));
    TERN_TRY(linear_dx_gelu(d, a->dfch, G(GPT2_FCB), a->dres, gpt2_w(m, GPT2_FCPROJW, l), la->fch, BT, 4 * C, C,
                            gb));
    TERN_TRY(linear_dw(d, G(GPT2_FCPROJW), tern_none(), a->dres, la->fch_gelu, BT, 4 * C, C, gb));
    /* dln [BT, C] = dfch @ W_fc^T */
    TERN_TRY(linear_dx(d, a->dln, a->dfch, gpt2_w(m, GPT2_FCW, l), BT, C, 4 * C));
    /* dres [BT, C] += ln_2's backward of dln: now d(res2). d(ln_2 w), d(ln_2 b) [C], and
     * dsum: d(b_attproj) [C] = sum over rows of d(res2). From ln2, its output; or, when the
     * layer norms share their output (m->memory.recompute_layernorm), from res2, writing
     * ln2 = ln_2(res2) again for d(W_fc) below (the last layer's too: ln_f's output was
     * written there after it). */
    TERN_TRY(layernorm_backward(m, a->dres, G(GPT2_LN2W), G(GPT2_LN2B), G(GPT2_ATTPROJB), la->ln2, la->res2,
                                GPT2_LN2W, GPT2_LN2B, l, la->ln2_mean, la->ln2_rstd, gb));
    /* d(W_fc) [C, 4C] = ln2^T @ dfch (d(b_fc): with dfch above) */
    TERN_TRY(linear_dw(d, G(GPT2_FCW), tern_none(), a->dfch, la->ln2, BT, C, 4 * C, gb));

    /* Attention. d(x) = d(res2) + the path through ln_1, qkv, attention and the projection. */
    /* datty [BT, C] = dres @ W_attproj^T; d(W_attproj) [C, C]. d(b_attproj): summed above. */
    TERN_TRY(linear_dx(d, a->datty, a->dres, gpt2_w(m, GPT2_ATTPROJW, l), BT, C, C));
    TERN_TRY(linear_dw(d, G(GPT2_ATTPROJW), tern_none(), a->dres, la->atty, BT, C, C, gb));
    /* dqkv [BT, 3C] = the gradient of qkv through the attention */
    TERN_TRY(OP(attention_backward)(d, a->dqkv, a->datty, la->qkv, la->atty, la->att_saved, B, T,
                                    NH, NH, C / NH));
    /* dln [BT, C] = dqkv @ W_qkv^T */
    TERN_TRY(linear_dx(d, a->dln, a->dqkv, gpt2_w(m, GPT2_QKVW, l), BT, C, 3 * C));
    /* dres [BT, C] += ln_1's backward of dln: now d(x). d(ln_1 w), d(ln_1 b) [C], and dsum:
     * d(b_fcproj) of layer l-1 [C] = sum over rows of d(x) = d(res3 of layer l-1). From ln1;
     * or, when the layer norms share their output, from x, writing ln1 = ln_1(x) again for
     * d(W_qkv) below. */
    TERN_TRY(layernorm_backward(m, a->dres, G(GPT2_LN1W), G(GPT2_LN1B), dfcproj_b_prev, la->ln1, x, GPT2_LN1W,
                                GPT2_LN1B, l, la->ln1_mean, la->ln1_rstd, gb));
    /* d(W_qkv) [C, 3C] = ln1^T @ dqkv, d(b_qkv) [3C] */
    TERN_TRY(linear_dw(d, G(GPT2_QKVW), G(GPT2_QKVB), a->dqkv, la->ln1, BT, C, 3 * C, gb));
#undef G
    return NULL;
}

/* The gradients of a pass's loss, added into m->flat.grads (written instead where the gradients
 * were just zeroed: m->grads_fresh; zero_grad in state.c lists who writes each gradient). */
static tern_error *backward(tern_gpt2 *m) {
    tern_dev *d = m->dev;
    const gpt2_acts *a = &m->acts;
    const tern_gpt2_config *cfg = &m->cfg;
    int B = a->B, T = a->T, C = cfg->n_embd, L = cfg->n_layer;
    float gb = m->grads_fresh ? 0.0f : 1.0f; /* the parameters' gradients: write or accumulate */
    tern_buf dwte = gpt2_tensor_view(cfg, m->flat.grads, GPT2_WTE, 0);

    /* a->dln [BT, C] already holds d(loss)/d(lnf): logits_and_loss took the loss's gradient
     * through the output projection (and wrote dwte's part of it). */
    /* Final layer norm: dres [BT, C] = d(loss)/d(residual out of the last block), its part
     * only (0 + ln_f's backward of dln). d(ln_f w), d(ln_f b) [C], and dsum: d(b_fcproj) of
     * the last layer [C] = sum over rows of dres (absent without layers). */
    tern_buf last = L ? a->layers[L - 1].res3 : a->x0;
    tern_buf dfcproj_b_last = L ? gpt2_tensor_view(cfg, m->flat.grads, GPT2_FCPROJB, L - 1) : tern_none();
    TERN_TRY(OP(fill)(d, a->dres, 0.0));
    /* from lnf, its output; or from the last block's output, writing nothing back (the
     * logits' products are done) */
    TERN_TRY(layernorm_backward(m, a->dres, gpt2_tensor_view(cfg, m->flat.grads, GPT2_LNFW, 0),
                                gpt2_tensor_view(cfg, m->flat.grads, GPT2_LNFB, 0), dfcproj_b_last,
                                a->ln_shared ? tern_none() : a->lnf, last, GPT2_LNFW, GPT2_LNFB, 0, a->lnf_mean,
                                a->lnf_rstd, gb));
    for (int l = L - 1; l >= 0; l--) {
        tern_buf x = l ? a->layers[l - 1].res3 : a->x0;
        TERN_TRY(block_backward(m, l, x, &a->layers[l]));
    }
    /* dres is d(x0): dwte[tokens] += its rows, dwpe[t] += its sums over the batch (wpe's
     * gradient is only added into: zero_grad clears it) */
    return OP(embed_backward)(d, dwte, gpt2_tensor_view(cfg, m->flat.grads, GPT2_WPE, 0), a->dres,
                              a->tokens, B, T, C);
}

/* The output projection and the loss, a->logit_rows rows at a time (all BT rows but in a
 * training layout, where no more than those rows of logits [BT, Vp] exist at once: 1.6 GB
 * of bf16 logits for GPT-2 at B=16, T=1024). Per chunk of rows r:
 *   logits [R, Vp] = lnf[r] [R, C] @ wte^T   (the output projection is tied to wte [Vp, C])
 *   losses[r] [R]; with grad_scale != 0 logits becomes d(loss)/d(logits) * grad_scale, and
 *   with_backward takes it on through the projection at once:
 *   dln[r] [R, C] = dlogits @ wte [Vp, C];  dwte [Vp, C] (+)= dlogits^T @ lnf[r]
 * (dwte's first writer in the pass: written by the first chunk when the gradients are
 * fresh; embed_backward adds the embedding's part last). a->logits_first and
 * a->logits_kept say which rows' logits the pass leaves readable: the last chunk's, none
 * after a backward (their gradient is there). */
static tern_error *logits_and_loss(tern_gpt2 *m, bool with_targets, bool with_backward,
                                   float grad_scale) {
    tern_dev *d = m->dev;
    const tern_gpt2_config *cfg = &m->cfg;
    gpt2_acts *a = &m->acts;
    int BT = a->B * a->T, C = cfg->n_embd, R = a->logit_rows;
    size_t Vp = (size_t)m->Vp, uC = (size_t)C;
    tern_buf wte = gpt2_w(m, GPT2_WTE, 0);
    tern_buf dwte = with_backward ? gpt2_tensor_view(cfg, m->flat.grads, GPT2_WTE, 0) : tern_none();
    float gb = m->grads_fresh ? 0.0f : 1.0f;
    for (int r0 = 0; r0 < BT; r0 += R) {
        int rows = BT - r0 < R ? BT - r0 : R;
        size_t first = (size_t)r0, n = (size_t)rows;
        tern_buf logits = tern_view(a->logits, 0, n * Vp), lnf = tern_view(a->lnf, first * uC, n * uC);
        tern_matmul logits_mm = {.m = rows, .n = m->Vp, .k = C, .trans_b = true, .alpha = 1, .beta = 0};
        TERN_TRY(OP(matmul)(d, logits, lnf, wte, &logits_mm));
        a->logits_first = r0;
        a->logits_kept = rows;
        if (!with_targets) continue;
        TERN_TRY(OP(cross_entropy)(d, tern_view(a->losses, first, n), logits,
                                   tern_view(a->targets, first, n), rows, cfg->vocab_size, m->Vp,
                                   grad_scale));
        if (!with_backward) continue;
        a->logits_kept = 0;
        tern_matmul dlnf_mm = {.m = rows, .n = C, .k = m->Vp, .alpha = 1, .beta = 0};
        TERN_TRY(OP(matmul)(d, tern_view(a->dln, first * uC, n * uC), logits, wte, &dlnf_mm));
        tern_matmul dwte_mm = {.m = m->Vp, .n = C, .k = rows, .trans_a = true, .alpha = 1,
                               .beta = r0 ? 1.0f : gb};
        TERN_TRY(OP(matmul)(d, dwte, logits, lnf, &dwte_mm));
    }
    return NULL;
}

/* The pass after the uploads: embedding, blocks, logits; with targets the losses (and
 * d(loss)/d(logits) when grad_scale != 0); with_backward the gradients. */
static tern_error *run_pass(tern_gpt2 *m, bool with_targets, bool with_backward, float grad_scale) {
    tern_dev *d = m->dev;
    const tern_gpt2_config *cfg = &m->cfg;
    gpt2_acts *a = &m->acts;
    int B = a->B, T = a->T, BT = B * T, C = cfg->n_embd;
    /* x0 [BT, C] = wte[tokens] + wpe[t] */
    TERN_TRY(OP(embed)(d, a->x0, a->tokens, gpt2_w(m, GPT2_WTE, 0), gpt2_w(m, GPT2_WPE, 0),
                       tern_none(), B, T, C));
    tern_buf residual = a->x0;
    for (int l = 0; l < cfg->n_layer; l++) {
        TERN_TRY(block_forward(m, l, residual, &a->layers[l]));
        residual = a->layers[l].res3;
    }
    TERN_TRY(OP(layernorm)(d, a->lnf, a->lnf_mean, a->lnf_rstd, residual, gpt2_w(m, GPT2_LNFW, 0),
                           gpt2_w(m, GPT2_LNFB, 0), BT, C, cfg->ln_eps));
    TERN_TRY(logits_and_loss(m, with_targets, with_backward, grad_scale));
    return with_backward ? backward(m) : NULL;
}

/* run_pass's arguments, for MODEL_FN(section) */
typedef struct pass_args {
    tern_gpt2 *m;
    bool with_targets, with_backward;
    float grad_scale;
} pass_args;

static tern_error *queue_pass(void *ctx) {
    const pass_args *p = ctx;
    return run_pass(p->m, p->with_targets, p->with_backward, p->grad_scale);
}

/* A pass's replayable section is identified by everything its operations take from the host:
 * the buffers (the epoch changes whenever they move), the shape and the scalars. */
static uint64_t pass_key(const tern_gpt2 *m, bool with_targets, bool with_backward, float grad_scale) {
    uint32_t scale_bits;
    memcpy(&scale_bits, &grad_scale, sizeof scale_bits);
    uint64_t h = gpt2_key_mix(0x70617373ull, m->epoch);
    h = gpt2_key_mix(h, (uint64_t)m->acts.B << 32 | (uint64_t)m->acts.T);
    h = gpt2_key_mix(h, (uint64_t)m->grads_fresh << 2 | (uint64_t)with_targets << 1 | with_backward);
    return gpt2_key_mix(h, scale_bits);
}

tern_error *GPT2_FN(forward)(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                             float loss_scale, bool with_backward, float *mean_loss) {
    tern_dev *d = m->dev;
    TERN_TRY(ensure_acts(m, B, T, with_backward && y, !y));
    gpt2_acts *a = &m->acts;
    int BT = B * T;
    bool with_targets = y != NULL;
    with_backward = with_backward && with_targets;
    float grad_scale = with_backward ? loss_scale / (float)BT : 0.0f;

    TERN_TRY(OP(upload)(d, a->tokens, x));
    if (with_targets) TERN_TRY(OP(upload)(d, a->targets, y));
    /* The pass as one replayable section: on the cuda handler, a CUDA graph replays its
     * several hundred launches as one (docs/gpu.md). */
    uint64_t key = pass_key(m, with_targets, with_backward, grad_scale);
    pass_args pass = {m, with_targets, with_backward, grad_scale};
    TERN_TRY(MODEL_FN(section)(d, key, queue_pass, &pass));
    if (with_backward) {
        /* The pass wrote the gradients (those it writes when fresh: all but wpe's, which
         * zero_grad cleared); the next one adds to them. Set here, not in backward(): a
         * replayed section skips run_pass's host code, and a replayed fresh pass must still
         * make the next pass of an accumulation add (its own replay key). */
        m->grads_fresh = false;
        m->grads_lazy = false;
    }
    if (!with_targets) return NULL;

    float *losses = malloc((size_t)BT * sizeof *losses);
    if (!losses) return tern_errorf("out of memory for %d losses", BT);
    tern_error *err = OP(download)(d, losses, a->losses);
    if (!err && mean_loss) {
        double sum = 0;
        for (int i = 0; i < BT; i++) sum += losses[i];
        *mean_loss = (float)(sum / BT);
    }
    free(losses);
    return err;
}
