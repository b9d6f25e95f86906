/* The Llama family's forward and backward passes over a batch of B x T tokens. */
#include <stdlib.h>
#include <string.h>

#include "instance.h"

/* Widths of a config: QW the fused qkv row, AW the attention output row. */
#define QW(cfg) (((cfg)->n_head + 2 * (cfg)->n_kv_head) * (cfg)->head_dim)
#define AW(cfg) ((cfg)->n_head * (cfg)->head_dim)

static void layout_acts(tern_llama *m, model_pools *p, llama_acts *a, size_t saved_len, bool with_grad) {
    const tern_llama_config *cfg = &m->cfg;
    size_t BT = (size_t)a->B * a->T, C = (size_t)cfg->hidden, I = (size_t)cfg->intermediate;
    size_t qw = (size_t)QW(cfg), aw = (size_t)AW(cfg);
    a->tokens = MODEL_FN(take)(p, POOL_I32, BT);
    a->targets = MODEL_FN(take)(p, POOL_I32, BT);
    a->pos = MODEL_FN(take)(p, POOL_I32, BT);
    a->x0 = MODEL_FN(take)(p, POOL_ACT, BT * C);
    for (int l = 0; l < cfg->n_layer; l++) {
        llama_layer_acts *la = &a->layers[l];
        la->h1 = MODEL_FN(take)(p, POOL_ACT, BT * C);
        la->rrms1 = MODEL_FN(take)(p, POOL_F32, BT);
        la->qkv = MODEL_FN(take)(p, POOL_ACT, BT * qw);
        la->att = MODEL_FN(take)(p, POOL_ACT, BT * aw);
        la->saved = saved_len ? MODEL_FN(take)(p, POOL_F32, saved_len) : tern_none();
        la->x_mid = MODEL_FN(take)(p, POOL_ACT, BT * C);
        la->h2 = MODEL_FN(take)(p, POOL_ACT, BT * C);
        la->rrms2 = MODEL_FN(take)(p, POOL_F32, BT);
        la->gu = MODEL_FN(take)(p, POOL_ACT, BT * 2 * I);
        la->a = MODEL_FN(take)(p, POOL_ACT, BT * I);
        la->x_out = MODEL_FN(take)(p, POOL_ACT, BT * C);
    }
    a->hf = MODEL_FN(take)(p, POOL_ACT, BT * C);
    a->rrmsf = MODEL_FN(take)(p, POOL_F32, BT);
    a->logits = MODEL_FN(take)(p, POOL_ACT, BT * (size_t)m->Vp);
    a->losses = MODEL_FN(take)(p, POOL_F32, BT);
    a->has_grad_buffers = with_grad;
    if (!with_grad) return;
    a->dres = MODEL_FN(take)(p, POOL_ACT, BT * C);
    a->dh = MODEL_FN(take)(p, POOL_ACT, BT * C);
    a->datt = MODEL_FN(take)(p, POOL_ACT, BT * aw);
    a->dqkv = MODEL_FN(take)(p, POOL_ACT, BT * qw);
    a->da = MODEL_FN(take)(p, POOL_ACT, BT * I);
    a->dgu = MODEL_FN(take)(p, POOL_ACT, BT * 2 * I);
}

void LLAMA_FN(free_acts)(tern_llama *m) {
    if (m->dev) MODEL_FN(pools_free)(m->dev, m->acts.pool);
    free(m->acts.layers);
    m->acts = (llama_acts){0};
    m->epoch++;
}

/* Makes the activations fit a B x T pass; the positions t of each row are uploaded once. */
static tern_error *ensure_acts(tern_llama *m, int B, int T, bool with_grad) {
    llama_acts *a = &m->acts;
    if (a->layers && a->B == B && a->T == T && (a->has_grad_buffers || !with_grad)) return NULL;
    LLAMA_FN(free_acts)(m);
    size_t saved_len = 0;
    TERN_TRY(OP(attention_saved_len)(m->dev, B, T, m->cfg.n_head, &saved_len));
    a->layers = calloc((size_t)m->cfg.n_layer, sizeof *a->layers);
    if (!a->layers) return tern_errorf("out of memory for %d layers' activations", m->cfg.n_layer);
    a->B = B;
    a->T = T;
    model_pools p = {.dtype = {m->flat.adtype, TERN_F32, TERN_I32}};
    layout_acts(m, &p, a, saved_len, with_grad);
    tern_error *err = MODEL_FN(pools_alloc)(m->dev, &p);
    if (err) {
        LLAMA_FN(free_acts)(m);
        return tern_error_wrap(err, "activations for B=%d, T=%d", B, T);
    }
    layout_acts(m, &p, a, saved_len, with_grad);
    for (int k = 0; k < POOL_COUNT; k++) a->pool[k] = p.base[k];
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    if (!pos) err = tern_errorf("out of memory for %d positions", B * T);
    for (int r = 0; pos && r < B * T; r++) pos[r] = r % T;
    if (pos) err = OP(upload)(m->dev, a->pos, pos);
    free(pos);
    if (err) LLAMA_FN(free_acts)(m);
    return err;
}

/* One decoder layer: x [BT, C] -> la->x_out [BT, C]. */
static tern_error *layer_forward(tern_llama *m, int l, tern_buf x, llama_layer_acts *la) {
    tern_dev *d = m->dev;
    const tern_llama_config *cfg = &m->cfg;
    const llama_acts *a = &m->acts;
    int B = a->B, T = a->T, BT = B * T, C = cfg->hidden, I = cfg->intermediate;
    int NH = cfg->n_head, KV = cfg->n_kv_head, hs = cfg->head_dim, qw = QW(cfg), aw = AW(cfg);
    tern_buf wqkv = llama_fused_view(cfg, llama_weights(m), LLAMA_Q, LLAMA_V, l);
    tern_buf bqkv = llama_fused_view(cfg, llama_weights(m), LLAMA_QB, LLAMA_VB, l);
    tern_buf wgu = llama_fused_view(cfg, llama_weights(m), LLAMA_GATE, LLAMA_UP, l);
    tern_buf bgu = llama_fused_view(cfg, llama_weights(m), LLAMA_GATEB, LLAMA_UPB, l);

    /* attention: x_mid = x + attention(rope(rmsnorm(x) Wqkv^T)) Wo^T */
    /* h1 [BT, C] = rmsnorm(x) w_in;  rrms1 [BT] */
    TERN_TRY(OP(rmsnorm)(d, la->h1, la->rrms1, x, llama_w(m, LLAMA_LN1, l), BT, C, cfg->rms_eps));
    /* qkv [BT, QW] = h1 @ Wqkv^T + bqkv */
    TERN_TRY(LLAMA_FN(linear)(d, la->qkv, la->h1, wqkv, bqkv, BT, C, qw));
    /* the NH query and KV key heads of each row rotated in place by their position */
    TERN_TRY(OP(rope)(d, la->qkv, la->qkv, a->pos, m->inv_freq, BT, NH + KV, hs, qw));
    /* att [BT, NH hs] = causal attention, query head h on key/value head h / (NH / KV) */
    TERN_TRY(OP(attention)(d, la->att, la->saved, la->qkv, B, T, NH, KV, hs));
    /* x_mid [BT, C] = x + att @ Wo^T + bo */
    TERN_TRY(LLAMA_FN(residual_linear)(d, la->x_mid, x, la->att, llama_w(m, LLAMA_O, l),
                                       llama_w(m, LLAMA_OB, l), BT, aw, C));

    /* MLP: x_out = x_mid + swiglu(rmsnorm(x_mid) Wgu^T) Wd^T */
    TERN_TRY(OP(rmsnorm)(d, la->h2, la->rrms2, la->x_mid, llama_w(m, LLAMA_LN2, l), BT, C, cfg->rms_eps));
    /* gu [BT, 2I] = h2 @ [Wg; Wu]^T + [bg; bu]: gate in columns [0, I), up in [I, 2I) */
    TERN_TRY(LLAMA_FN(linear)(d, la->gu, la->h2, wgu, bgu, BT, C, 2 * I));
    /* a [BT, I] = silu(gate) up */
    size_t n = (size_t)BT * 2 * I;
    TERN_TRY(OP(swiglu)(d, la->a, tern_view(la->gu, 0, n), tern_view(la->gu, (size_t)I, n - (size_t)I), BT, I,
                        2 * I));
    /* x_out [BT, C] = x_mid + a @ Wd^T + bd */
    return LLAMA_FN(residual_linear)(d, la->x_out, la->x_mid, la->a, llama_w(m, LLAMA_DOWN, l),
                                     llama_w(m, LLAMA_DOWNB, l), BT, I, C);
}

/* Gradient of y = x @ w^T + b (w [out, in]) given dy [rows, out], added into the
 * parameters' gradients: dx [rows, in] = dy @ w (overwritten), dw [out, in] += dy^T @ x,
 * db [out] += the column sums of dy (when the layer has a bias). */
static tern_error *linear_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dy,
                                   tern_buf x, tern_buf w, int rows, int in, int out) {
    tern_matmul dx_mm = {.m = rows, .n = in, .k = out, .alpha = 1, .beta = 0};
    TERN_TRY(OP(matmul)(d, dx, dy, w, &dx_mm));
    tern_matmul dw_mm = {.m = out, .n = in, .k = rows, .trans_a = true, .alpha = 1, .beta = 1};
    TERN_TRY(OP(matmul)(d, dw, dy, x, &dw_mm));
    return db.len ? OP(sum_rows)(d, db, dy, rows, out, 1.0f) : NULL;
}

/* Backward through layer l. On entry a->dres holds d(loss)/d(x_out); on return
 * d(loss)/d(x), the layer's input. Parameter gradients are added into m->flat.grads. */
static tern_error *layer_backward(tern_llama *m, int l, tern_buf x, const llama_layer_acts *la) {
    tern_dev *d = m->dev;
    const tern_llama_config *cfg = &m->cfg;
    const llama_acts *a = &m->acts;
    int B = a->B, T = a->T, BT = B * T, C = cfg->hidden, I = cfg->intermediate;
    int NH = cfg->n_head, KV = cfg->n_kv_head, hs = cfg->head_dim, qw = QW(cfg), aw = AW(cfg);
    tern_buf w = llama_weights(m), g = m->flat.grads;
#define G(kind) llama_tensor_view(cfg, g, kind, l)

    /* MLP. d(x_mid) = d(x_out) + the path through rmsnorm, the products and swiglu. */
    /* da [BT, I] = dres @ Wd; d(Wd) [C, I] += dres^T @ a; d(bd) [C] */
    TERN_TRY(linear_backward(d, a->da, G(LLAMA_DOWN), G(LLAMA_DOWNB), a->dres, la->a,
                             llama_w(m, LLAMA_DOWN, l), BT, I, C));
    /* dgu [BT, 2I] = d(gate) | d(up) */
    size_t n = (size_t)BT * 2 * I;
    TERN_TRY(OP(swiglu_backward)(d, tern_view(a->dgu, 0, n), tern_view(a->dgu, (size_t)I, n - (size_t)I), a->da,
                                 tern_view(la->gu, 0, n), tern_view(la->gu, (size_t)I, n - (size_t)I), BT, I,
                                 2 * I));
    /* dh [BT, C] = dgu @ Wgu; d(Wgu) [2I, C] += dgu^T @ h2; d(bgu) [2I] */
    TERN_TRY(linear_backward(d, a->dh, llama_fused_view(cfg, g, LLAMA_GATE, LLAMA_UP, l),
                             llama_fused_view(cfg, g, LLAMA_GATEB, LLAMA_UPB, l), a->dgu, la->h2,
                             llama_fused_view(cfg, w, LLAMA_GATE, LLAMA_UP, l), BT, C, 2 * I));
    /* dres [BT, C] += rmsnorm's backward of dh: now d(x_mid); d(w_post) [C] += */
    TERN_TRY(OP(rmsnorm_backward)(d, a->dres, G(LLAMA_LN2), a->dh, la->x_mid, llama_w(m, LLAMA_LN2, l),
                                  la->rrms2, BT, C, 1.0f));

    /* Attention. d(x) = d(x_mid) + the path through rmsnorm, qkv, rope and attention. */
    /* datt [BT, NH hs] = dres @ Wo; d(Wo) [C, NH hs] += dres^T @ att; d(bo) [C] */
    TERN_TRY(linear_backward(d, a->datt, G(LLAMA_O), G(LLAMA_OB), a->dres, la->att, llama_w(m, LLAMA_O, l),
                             BT, aw, C));
    /* dqkv [BT, QW] = the gradient of the rotated qkv, then of qkv (rotated back) */
    TERN_TRY(OP(attention_backward)(d, a->dqkv, a->datt, la->qkv, la->att, la->saved, B, T, NH, KV, hs));
    TERN_TRY(OP(rope_backward)(d, a->dqkv, a->dqkv, a->pos, m->inv_freq, BT, NH + KV, hs, qw));
    /* dh [BT, C] = dqkv @ Wqkv; d(Wqkv) [QW, C] += dqkv^T @ h1; d(bqkv) [QW] */
    TERN_TRY(linear_backward(d, a->dh, llama_fused_view(cfg, g, LLAMA_Q, LLAMA_V, l),
                             llama_fused_view(cfg, g, LLAMA_QB, LLAMA_VB, l), a->dqkv, la->h1,
                             llama_fused_view(cfg, w, LLAMA_Q, LLAMA_V, l), BT, C, qw));
    /* dres [BT, C] += rmsnorm's backward of dh: now d(x); d(w_in) [C] += */
    return OP(rmsnorm_backward)(d, a->dres, G(LLAMA_LN1), a->dh, x, llama_w(m, LLAMA_LN1, l), la->rrms1, BT, C,
                                1.0f);
#undef G
}

/* The gradients of the pass's loss, added into m->flat.grads. a->logits holds d(loss)/d(logits). */
static tern_error *backward(tern_llama *m) {
    tern_dev *d = m->dev;
    const tern_llama_config *cfg = &m->cfg;
    const llama_acts *a = &m->acts;
    int B = a->B, T = a->T, BT = B * T, C = cfg->hidden, L = cfg->n_layer;
    llama_tensor head = llama_head_kind(cfg);
    tern_buf dembed = llama_tensor_view(cfg, m->flat.grads, LLAMA_EMBED, 0);

    /* logits [BT, Vp] = hf @ head^T: dh [BT, C] = dlogits @ head [Vp, C];
     * d(head) [Vp, C] += dlogits^T @ hf (the embedding's gradient when tied) */
    tern_matmul dh_mm = {.m = BT, .n = C, .k = m->Vp, .alpha = 1, .beta = 0};
    TERN_TRY(OP(matmul)(d, a->dh, a->logits, llama_w(m, head, 0), &dh_mm));
    tern_matmul dhead_mm = {.m = m->Vp, .n = C, .k = BT, .trans_a = true, .alpha = 1, .beta = 1};
    TERN_TRY(OP(matmul)(d, llama_tensor_view(cfg, m->flat.grads, head, 0), a->logits, a->hf, &dhead_mm));
    /* dres [BT, C] = the final rmsnorm's backward of dh; d(w_norm) [C] += */
    tern_buf last = L ? a->layers[L - 1].x_out : a->x0;
    TERN_TRY(OP(fill)(d, a->dres, 0.0));
    TERN_TRY(OP(rmsnorm_backward)(d, a->dres, llama_tensor_view(cfg, m->flat.grads, LLAMA_NORM, 0), a->dh, last,
                                  llama_w(m, LLAMA_NORM, 0), a->rrmsf, BT, C, 1.0f));
    for (int l = L - 1; l >= 0; l--)
        TERN_TRY(layer_backward(m, l, l ? a->layers[l - 1].x_out : a->x0, &a->layers[l]));
    /* dres is d(x0): d(embed)[tokens] += its rows (no position table) */
    return OP(embed_backward)(d, dembed, tern_none(), a->dres, a->tokens, B, T, C);
}

static tern_error *run_pass(tern_llama *m, bool with_targets, bool with_backward, float grad_scale) {
    tern_dev *d = m->dev;
    const tern_llama_config *cfg = &m->cfg;
    llama_acts *a = &m->acts;
    int B = a->B, T = a->T, BT = B * T, C = cfg->hidden;
    /* x0 [BT, C] = embed[tokens] */
    TERN_TRY(OP(embed)(d, a->x0, a->tokens, llama_w(m, LLAMA_EMBED, 0), tern_none(), tern_none(), B, T, C));
    tern_buf x = a->x0;
    for (int l = 0; l < cfg->n_layer; l++) {
        TERN_TRY(layer_forward(m, l, x, &a->layers[l]));
        x = a->layers[l].x_out;
    }
    /* hf [BT, C] = rmsnorm(x) w_norm; logits [BT, Vp] = hf @ head^T */
    TERN_TRY(OP(rmsnorm)(d, a->hf, a->rrmsf, x, llama_w(m, LLAMA_NORM, 0), BT, C, cfg->rms_eps));
    tern_matmul logits_mm = {.m = BT, .n = m->Vp, .k = C, .trans_b = true, .alpha = 1, .beta = 0};
    TERN_TRY(OP(matmul)(d, a->logits, a->hf, llama_w(m, llama_head_kind(cfg), 0), &logits_mm));
    if (!with_targets) return NULL;
    /* losses [BT]; logits become d(loss)/d(logits) * grad_scale */
    TERN_TRY(OP(cross_entropy)(d, a->losses, a->logits, a->targets, BT, cfg->vocab_size, m->Vp, grad_scale));
    return with_backward ? backward(m) : NULL;
}

static uint64_t pass_key(const tern_llama *m, bool with_targets, bool with_backward, float grad_scale) {
    uint32_t scale_bits;
    memcpy(&scale_bits, &grad_scale, sizeof scale_bits);
    uint64_t h = llama_key_mix(0x6c6c616d61ull, m->epoch);
    h = llama_key_mix(h, (uint64_t)m->acts.B << 32 | (uint64_t)m->acts.T);
    h = llama_key_mix(h, (uint64_t)with_targets << 1 | with_backward);
    return llama_key_mix(h, scale_bits);
}

/* run_pass's arguments, for MODEL_FN(section) */
typedef struct pass_args {
    tern_llama *m;
    bool with_targets, with_backward;
    float grad_scale;
} pass_args;

static tern_error *queue_pass(void *ctx) {
    const pass_args *p = ctx;
    return run_pass(p->m, p->with_targets, p->with_backward, p->grad_scale);
}

tern_error *LLAMA_FN(forward)(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                              float loss_scale, bool with_backward, float *mean_loss) {
    tern_dev *d = m->dev;
    TERN_TRY(ensure_acts(m, B, T, with_backward));
    llama_acts *a = &m->acts;
    int BT = B * T;
    bool with_targets = y != NULL;
    with_backward = with_backward && with_targets;
    float grad_scale = with_backward ? loss_scale / (float)BT : 0.0f;
    TERN_TRY(OP(upload)(d, a->tokens, x));
    if (with_targets) TERN_TRY(OP(upload)(d, a->targets, y));
    /* The pass as one replayable section (a CUDA graph on the cuda handler). */
    uint64_t key = pass_key(m, with_targets, with_backward, grad_scale);
    pass_args pass = {m, with_targets, with_backward, grad_scale};
    TERN_TRY(MODEL_FN(section)(d, key, queue_pass, &pass));
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
