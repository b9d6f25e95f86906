/* Generation with a KV cache: one prefill pass over the prompts, then one-token steps. A
 * step reads its tokens and positions from device buffers, so a handler with graphs replays
 * it without the host issuing each operation again. */
#include <stdlib.h>
#include <string.h>

#include "instance.h"
#include "../common/decode_loop.h"

static void layout_decode(tern_llama *m, model_pools *p, llama_decode *dc) {
    const tern_llama_config *cfg = &m->cfg;
    size_t rows = (size_t)dc->B * dc->T, C = (size_t)cfg->hidden, I = (size_t)cfg->intermediate;
    size_t hs = (size_t)cfg->head_dim, qw = (size_t)(cfg->n_head + 2 * cfg->n_kv_head) * hs;
    size_t cache_len = (size_t)dc->B * cfg->n_kv_head * dc->max_T * hs; /* [B, KV, max_T, hs] */
    for (int l = 0; l < cfg->n_layer; l++) {
        dc->k_cache[l] = MODEL_FN(take)(p, POOL_ACT, cache_len);
        dc->v_cache[l] = MODEL_FN(take)(p, POOL_ACT, cache_len);
    }
    dc->prompt = MODEL_FN(take)(p, POOL_I32, rows);
    dc->token = MODEL_FN(take)(p, POOL_I32, (size_t)model_token_slots(dc->steps) * dc->B);
    size_t step_rows = (size_t)dc->steps * dc->B;
    dc->pos = MODEL_FN(take)(p, POOL_I32, rows > step_rows ? rows : step_rows);
    dc->x = MODEL_FN(take)(p, POOL_ACT, rows * C);
    dc->qkv = MODEL_FN(take)(p, POOL_ACT, rows * qw);
    dc->att = MODEL_FN(take)(p, POOL_ACT, rows * (size_t)cfg->n_head * hs);
    dc->a = MODEL_FN(take)(p, POOL_ACT, rows * I);
    dc->logits = MODEL_FN(take)(p, POOL_ACT, (size_t)dc->B * m->Vp);
}

void LLAMA_FN(free_decode)(tern_llama *m) {
    if (m->dev) MODEL_FN(pools_free)(m->dev, m->dec.pool);
    free(m->dec.k_cache);
    free(m->dec.v_cache);
    m->dec = (llama_decode){0};
    m->epoch++;
}

/* Buffers for B sequences, prefill chunks of up to T rows each, and caches of max_T. */
static tern_error *ensure_decode(tern_llama *m, int B, int T, int max_T) {
    llama_decode *dc = &m->dec;
    int steps = 1;
    TERN_TRY(OP(replay_steps)(m->dev, &steps));
    if (dc->k_cache && dc->B == B && dc->T >= T && dc->max_T >= max_T && dc->steps == steps) return NULL;
    LLAMA_FN(free_decode)(m);
    int L = m->cfg.n_layer;
    dc->k_cache = calloc((size_t)(L ? L : 1), sizeof *dc->k_cache);
    dc->v_cache = calloc((size_t)(L ? L : 1), sizeof *dc->v_cache);
    if (!dc->k_cache || !dc->v_cache) {
        LLAMA_FN(free_decode)(m);
        return tern_errorf("out of memory for the KV cache's descriptors");
    }
    dc->B = B;
    dc->T = T;
    dc->max_T = max_T;
    dc->steps = steps;
    model_pools p = {.dtype = {m->flat.adtype, TERN_F32, TERN_I32}};
    layout_decode(m, &p, dc);
    tern_error *err = MODEL_FN(pools_alloc)(m->dev, &p);
    if (err) {
        LLAMA_FN(free_decode)(m);
        return tern_error_wrap(err, "generation buffers for %d sequences of up to %d tokens", B, max_T);
    }
    layout_decode(m, &p, dc);
    for (int k = 0; k < POOL_COUNT; k++) dc->pool[k] = p.base[k];
    return NULL;
}

/* T new positions of each of B sequences, from `tokens` [B T] at the positions in `pos`
 * [B T] (a view of dc->pos: row b T + t at p0 + t, p0 = pos[0]), through every layer,
 * extending the caches; samples each sequence's next token into `next` [B]. */
static tern_error *run_positions(tern_llama *m, tern_buf tokens, tern_buf pos, tern_buf next, int T,
                                 const tern_gpt2_sampling *s) {
    tern_dev *d = m->dev;
    llama_decode *dc = &m->dec;
    const tern_llama_config *cfg = &m->cfg;
    int B = dc->B, rows = B * T, C = cfg->hidden, I = cfg->intermediate;
    int NH = cfg->n_head, KV = cfg->n_kv_head, hs = cfg->head_dim, qw = (NH + 2 * KV) * hs;
    float eps = cfg->rms_eps;
    size_t r = (size_t)rows;
    tern_buf x = tern_view(dc->x, 0, r * C);
    tern_buf qkv = tern_view(dc->qkv, 0, r * qw), att = tern_view(dc->att, 0, r * NH * hs);
    tern_buf a = tern_view(dc->a, 0, r * I);
    tern_buf w = llama_weights(m);

    /* x [rows, C] = embed[tokens] */
    TERN_TRY(OP(embed)(d, x, tokens, llama_w(m, LLAMA_EMBED, 0), tern_none(), tern_none(), B, T, C));
    for (int l = 0; l < cfg->n_layer; l++) {
        /* x = x + attention(rope(rmsnorm(x) Wqkv^T)) Wo^T, over the cache (the norm as the
         * product stages x, q and k rotated as it finishes; the attention as Wo's prologue) */
        TERN_TRY(LLAMA_FN(norm_linear_rope)(d, qkv, x, llama_w(m, LLAMA_LN1, l), eps, llama_decode_w(m, LLAMA_Q8_QKV, l),
                                            llama_fused_view(cfg, w, LLAMA_QB, LLAMA_VB, l), rows, C, qw, pos,
                                            m->inv_freq, NH + KV, hs));
        tern_matmul o_proj = {.m = rows, .n = C, .k = NH * hs, .trans_b = true, .alpha = 1, .beta = 1,
                              .bias = llama_w(m, LLAMA_OB, l), .prologue = TERN_PROLOGUE_ATTENTION,
                              .att = {dc->k_cache[l], dc->v_cache[l], qkv, pos, B, T, NH, KV, hs, dc->max_T}};
        TERN_TRY(OP(matmul)(d, x, att, llama_decode_w(m, LLAMA_Q8_O, l), &o_proj)); /* att = attention; x += ... */
        /* x = x + swiglu(rmsnorm(x) Wgu^T) Wd^T */
        TERN_TRY(LLAMA_FN(norm_linear_swiglu)(d, a, x, llama_w(m, LLAMA_LN2, l), eps, llama_decode_w(m, LLAMA_Q8_GU, l),
                                              llama_fused_view(cfg, w, LLAMA_GATEB, LLAMA_UPB, l), rows, C, I));
        TERN_TRY(LLAMA_FN(residual_linear)(d, x, x, a, llama_decode_w(m, LLAMA_Q8_DOWN, l), llama_w(m, LLAMA_DOWNB, l), rows,
                                           I, C));
    }
    /* logits [B, Vp] = rmsnorm(x) @ head^T of each sequence's last row (b T + T - 1): A's rows
     * are T C apart */
    tern_buf last_rows = tern_view(x, (size_t)(T - 1) * C, (size_t)(B - 1) * T * C + C);
    tern_matmul logits_mm = {.m = B, .n = m->Vp, .k = C, .trans_b = true, .lda = T * C, .alpha = 1, .beta = 0,
                             .prologue = TERN_PROLOGUE_RMSNORM, .norm = {llama_w(m, LLAMA_NORM, 0), tern_none(), eps}};
    TERN_TRY(OP(matmul)(d, dc->logits, last_rows, llama_decode_head(m), &logits_mm));
    return OP(sample)(d, next, dc->logits, B, cfg->vocab_size, m->Vp, s->temperature, s->top_k, s->seed,
                      tern_view(pos, 0, 1));
}

static uint64_t step_key(const tern_llama *m, const tern_gpt2_sampling *s) {
    uint32_t temperature_bits;
    memcpy(&temperature_bits, &s->temperature, sizeof temperature_bits);
    uint64_t h = llama_key_mix(0x6c6c616d6132ull, m->epoch);
    h = llama_key_mix(h, (uint64_t)m->dec.B);
    h = llama_key_mix(h, temperature_bits);
    h = llama_key_mix(h, (uint64_t)(int64_t)s->top_k);
    return llama_key_mix(h, s->seed);
}

/* The positions of B sequences of T rows starting at p0: row b T + t at p0 + t. */
static tern_error *set_pos(tern_llama *m, int32_t *host, int T, int p0) {
    int B = m->dec.B;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) host[b * T + t] = p0 + t;
    return OP(upload)(m->dev, tern_view(m->dec.pos, 0, (size_t)B * T), host);
}

static bool is_eos(const tern_llama_config *cfg, int32_t id) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_token_ids[i] == id) return true;
    return false;
}

/* Logits [B, V] of the prefill, as f32, into out. */
static tern_error *read_prefill_logits(tern_llama *m, float *out) {
    int B = m->dec.B, V = m->cfg.vocab_size;
    tern_buf tmp = tern_none();
    TERN_TRY(OP(alloc)(m->dev, TERN_F32, (size_t)B * m->Vp, &tmp));
    float *row = malloc((size_t)B * m->Vp * sizeof *row);
    tern_error *err = row ? OP(copy)(m->dev, tmp, m->dec.logits) : tern_errorf("out of memory");
    if (!err) err = OP(download)(m->dev, row, tmp);
    for (int b = 0; !err && b < B; b++) memcpy(out + (size_t)b * V, row + (size_t)b * m->Vp, (size_t)V * sizeof *out);
    free(row);
    tern_error_free(OP(free)(m->dev, &tmp));
    return err;
}

/* What the shared decoding loop (models/common/decode_loop.h) calls back. */
typedef struct llama_steps {
    tern_llama *m;
    const tern_gpt2_sampling *s;
    bool stop_at_eos;
    bool *ended; /* [B]: the sequences that have made an end-of-sequence token */
    int32_t *pos; /* [max(B T0, steps B)]: the positions, on the host */
    tern_gpt2_on_token on_token;
    void *user;
} llama_steps;

/* The B rows of step j of a section at position p + j, for the k steps from position p. */
static tern_error *step_positions(void *ctx, int p, int k) {
    llama_steps *g = ctx;
    int B = g->m->dec.B;
    for (int j = 0; j < k; j++)
        for (int b = 0; b < B; b++) g->pos[j * B + b] = p + j;
    return OP(upload)(g->m->dev, tern_view(g->m->dec.pos, 0, (size_t)k * B), g->pos);
}

static tern_error *step_queue(void *ctx, int j, tern_buf in, tern_buf out) {
    llama_steps *g = ctx;
    size_t B = (size_t)g->m->dec.B;
    return run_positions(g->m, in, tern_view(g->m->dec.pos, (size_t)j * B, B), out, 1, g->s);
}

/* Hands the tokens over; stops (with stop_at_eos) once every sequence has ended. */
static tern_error *step_take(void *ctx, const int32_t *tokens, bool *stop) {
    llama_steps *g = ctx;
    int B = g->m->dec.B, still = 0;
    if (g->on_token) TERN_TRY(g->on_token(g->user, tokens, B));
    for (int b = 0; b < B; b++) {
        g->ended[b] = g->ended[b] || is_eos(&g->m->cfg, tokens[b]);
        still += !g->ended[b];
    }
    *stop = g->stop_at_eos && !still;
    return NULL;
}

tern_error *LLAMA_FN(generate)(tern_llama *m, const int32_t *prompt, int B, int T0, int n_new,
                               const tern_gpt2_sampling *s, bool stop_at_eos,
                               tern_gpt2_on_token on_token, void *user, float *prefill_logits) {
    tern_dev *d = m->dev;
    int max_T = T0 + (n_new > 1 ? n_new - 1 : 0); /* the last token is sampled, never fed back */
    TERN_TRY(ensure_decode(m, B, T0, max_T));
    llama_decode *dc = &m->dec;
    size_t pos_len = (size_t)B * (T0 > dc->steps ? T0 : dc->steps);
    int32_t *pos = malloc(pos_len * sizeof *pos);
    bool *ended = calloc((size_t)B, sizeof *ended);
    tern_error *err = NULL;
    if (!pos || !ended) {
        err = tern_errorf("out of memory for %d sequences", B);
        goto done;
    }
    /* Prefill: the whole prompts at positions 0 .. T0 - 1, then the first new tokens (slot 0). */
    tern_buf prompt_buf = tern_view(dc->prompt, 0, (size_t)B * T0);
    if ((err = OP(upload)(d, prompt_buf, prompt)) || (err = set_pos(m, pos, T0, 0)) ||
        (err = run_positions(m, prompt_buf, tern_view(dc->pos, 0, (size_t)B * T0), tern_view(dc->token, 0, (size_t)B),
                             T0, s)))
        goto done;
    if (prefill_logits && (err = read_prefill_logits(m, prefill_logits))) goto done;

    /* One-token steps, in sections of the handler's replay_steps */
    llama_steps g = {m, s, stop_at_eos, ended, pos, on_token, user};
    model_decode_loop dl = {.dev = d, .B = B, .K = dc->steps, .token = dc->token, .key = step_key(m, s),
                            .model = &g, .positions = step_positions, .step = step_queue, .take = step_take};
    err = MODEL_FN(decode_loop)(&dl, T0, n_new);
done:
    free(pos);
    free(ended);
    return err;
}
