/* Generation with a KV cache: one prefill pass over the prompts, then one-token steps. The
 * step reads its token and position from device buffers, so a handler with graphs replays
 * it without the host re-issuing each operation. */
#include <stdlib.h>
#include <string.h>

#include "instance.h"
#include "../common/decode_loop.h"

static void layout_decode(tern_gpt2 *m, model_pools *p, gpt2_decode *dc) {
    const tern_gpt2_config *cfg = &m->cfg;
    size_t rows = (size_t)dc->B * dc->T, C = (size_t)cfg->n_embd;
    size_t cache_len = (size_t)dc->B * dc->max_T * C; /* [B, NH, max_T, hs] */
    for (int l = 0; l < cfg->n_layer; l++) {
        dc->k_cache[l] = MODEL_FN(take)(p, POOL_ACT, cache_len);
        dc->v_cache[l] = MODEL_FN(take)(p, POOL_ACT, cache_len);
    }
    dc->prompt = MODEL_FN(take)(p, POOL_I32, rows);
    dc->token = MODEL_FN(take)(p, POOL_I32, (size_t)model_token_slots(dc->steps) * dc->B);
    dc->pos = MODEL_FN(take)(p, POOL_I32, (size_t)dc->steps);
    dc->x = MODEL_FN(take)(p, POOL_ACT, rows * C);
    dc->qkv = MODEL_FN(take)(p, POOL_ACT, rows * 3 * C);
    dc->atty = MODEL_FN(take)(p, POOL_ACT, rows * C);
    dc->fch = MODEL_FN(take)(p, POOL_ACT, rows * 4 * C);
    dc->logits = MODEL_FN(take)(p, POOL_ACT, (size_t)dc->B * m->Vp);
}

void GPT2_FN(free_decode)(tern_gpt2 *m) {
    MODEL_FN(pools_free)(m->dev, m->dec.pool);
    free(m->dec.k_cache);
    free(m->dec.v_cache);
    m->dec = (gpt2_decode){0};
    m->epoch++;
}

/* Buffers for B sequences, prefill chunks of up to T rows each, a cache of max_T, and
 * sections of the handler's replay_steps decoding steps. */
static tern_error *ensure_decode(tern_gpt2 *m, int B, int T, int max_T) {
    gpt2_decode *dc = &m->dec;
    int steps = 1;
    TERN_TRY(OP(replay_steps)(m->dev, &steps));
    if (dc->k_cache && dc->B == B && dc->T >= T && dc->max_T == max_T && dc->steps == steps) return NULL;
    GPT2_FN(free_decode)(m);
    int L = m->cfg.n_layer;
    dc->k_cache = calloc((size_t)(L ? L : 1), sizeof *dc->k_cache);
    dc->v_cache = calloc((size_t)(L ? L : 1), sizeof *dc->v_cache);
    if (!dc->k_cache || !dc->v_cache) {
        GPT2_FN(free_decode)(m);
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
        GPT2_FN(free_decode)(m);
        return tern_error_wrap(err, "generation buffers for %d sequences", B);
    }
    layout_decode(m, &p, dc);
    for (int k = 0; k < POOL_COUNT; k++) dc->pool[k] = p.base[k];
    return NULL;
}

/* x[rows, C] = x + in[rows, k] @ w[k, C] + b: a residual update as one product (beta = 1
 * accumulates into x, the bias still added once: no projection output of its own, no add
 * kernel). w is [k, C], or [C, k] in q8_0 (gpt2_decode_w). */
static tern_error *residual(tern_dev *d, tern_buf x, tern_buf in, tern_buf w, tern_buf b, int rows, int k, int C) {
    tern_matmul mm = {.m = rows, .n = C, .k = k, .trans_b = w.dtype == TERN_Q8, .alpha = 1.0f, .beta = 1.0f, .bias = b};
    return OP(matmul)(d, x, in, w, &mm);
}

/* The product epilogue(layernorm(x; ln_w, ln_b) @ w + b) of x [rows, k] into [rows, out]:
 * the layer norm as the product's prologue (where the product stages x anyway: no kernel
 * and no buffer of its own). */
static tern_matmul norm_product(tern_buf ln_w, tern_buf ln_b, float eps, tern_buf w, tern_buf b, int rows, int k,
                                int out, tern_epilogue epilogue) {
    return (tern_matmul){.m = rows, .n = out, .k = k, .trans_b = w.dtype == TERN_Q8, .alpha = 1.0f, .beta = 0.0f,
                         .bias = b, .epilogue = epilogue, .prologue = TERN_PROLOGUE_LAYERNORM,
                         .norm = {ln_w, ln_b, eps}};
}

/* y[rows, out] = norm_product's */
static tern_error *norm_linear(tern_dev *d, tern_buf y, tern_buf x, tern_buf ln_w, tern_buf ln_b, float eps,
                               tern_buf w, tern_buf b, int rows, int k, int out, tern_epilogue epilogue) {
    tern_matmul mm = norm_product(ln_w, ln_b, eps, w, b, rows, k, out, epilogue);
    return OP(matmul)(d, y, x, w, &mm);
}

/* Runs T new positions of each of B sequences through the model, from the tokens in
 * `tokens` [B*T] at positions pos[0] .. (pos: [1] i32, a view of dc->pos), extending the KV
 * cache, and samples each sequence's next token into `next` [B]. */
static tern_error *run_positions(tern_gpt2 *m, tern_buf tokens, tern_buf pos, tern_buf next, int T,
                                 const tern_gpt2_sampling *s) {
    tern_dev *d = m->dev;
    gpt2_decode *dc = &m->dec;
    const tern_gpt2_config *cfg = &m->cfg;
    int B = dc->B, rows = B * T, C = cfg->n_embd, NH = cfg->n_head;
    float eps = cfg->ln_eps;
    size_t n = (size_t)rows * C;
    tern_buf x = tern_view(dc->x, 0, n);
    tern_buf qkv = tern_view(dc->qkv, 0, 3 * n), atty = tern_view(dc->atty, 0, n);
    tern_buf fch = tern_view(dc->fch, 0, 4 * n);

    TERN_TRY(OP(embed)(d, x, tokens, gpt2_w(m, GPT2_WTE, 0), gpt2_w(m, GPT2_WPE, 0), pos, B, T, C));
    for (int l = 0; l < cfg->n_layer; l++) {
        /* x = x + proj(attention(qkv)), qkv = ln_1(x) @ w_qkv + b: one call, the q|k|v product
         * and the attention as the projection's prologue */
        tern_buf wqkv = gpt2_decode_w(m, GPT2_QKVW, l), wproj = gpt2_decode_w(m, GPT2_ATTPROJW, l);
        tern_matmul qkv_mm = norm_product(gpt2_w(m, GPT2_LN1W, l), gpt2_w(m, GPT2_LN1B, l), eps, wqkv,
                                          gpt2_w(m, GPT2_QKVB, l), rows, C, 3 * C, TERN_EPILOGUE_NONE);
        tern_matmul proj = {.m = rows, .n = C, .k = C, .trans_b = wproj.dtype == TERN_Q8, .alpha = 1.0f, .beta = 1.0f,
                            .bias = gpt2_w(m, GPT2_ATTPROJB, l), .prologue = TERN_PROLOGUE_ATTENTION,
                            .att = {dc->k_cache[l], dc->v_cache[l], qkv, pos, B, T, NH, NH, C / NH, dc->max_T,
                                    &qkv_mm, x, wqkv}};
        TERN_TRY(OP(matmul)(d, x, atty, wproj, &proj)); /* atty = attention; x += atty wproj + b */
        /* x = x + proj(gelu(fc(ln_2(x)))) */
        TERN_TRY(norm_linear(d, fch, x, gpt2_w(m, GPT2_LN2W, l), gpt2_w(m, GPT2_LN2B, l), eps,
                             gpt2_decode_w(m, GPT2_FCW, l), gpt2_w(m, GPT2_FCB, l), rows, C, 4 * C,
                             TERN_EPILOGUE_GELU));
        TERN_TRY(residual(d, x, fch, gpt2_decode_w(m, GPT2_FCPROJW, l), gpt2_w(m, GPT2_FCPROJB, l), rows, 4 * C, C));
    }
    /* logits [B, Vp] = ln_f(x) @ wte^T of each sequence's last row (row b*T + T-1): A's rows
     * are T*C apart. */
    tern_buf last_rows = tern_view(x, (size_t)(T - 1) * C, (size_t)(B - 1) * T * C + C);
    tern_matmul logits_mm = {.m = B, .n = m->Vp, .k = C, .trans_b = true, .lda = T * C, .alpha = 1, .beta = 0,
                             .prologue = TERN_PROLOGUE_LAYERNORM,
                             .norm = {gpt2_w(m, GPT2_LNFW, 0), gpt2_w(m, GPT2_LNFB, 0), eps}};
    TERN_TRY(OP(matmul)(d, dc->logits, last_rows, gpt2_decode_w(m, GPT2_WTE, 0), &logits_mm));
    return OP(sample)(d, next, dc->logits, B, cfg->vocab_size, m->Vp, s->temperature, s->top_k, s->seed, pos);
}

/* The replayable one-token step: identified by everything its operations take from the host. */
static uint64_t step_key(const tern_gpt2 *m, const tern_gpt2_sampling *s) {
    uint32_t temperature_bits;
    memcpy(&temperature_bits, &s->temperature, sizeof temperature_bits);
    uint64_t h = gpt2_key_mix(0x67707432ull, m->epoch);
    h = gpt2_key_mix(h, (uint64_t)m->dec.B);
    h = gpt2_key_mix(h, temperature_bits);
    h = gpt2_key_mix(h, (uint64_t)(int64_t)s->top_k);
    return gpt2_key_mix(h, s->seed);
}

/* What the shared decoding loop (models/common/decode_loop.h) calls back. */
typedef struct gpt2_steps {
    tern_gpt2 *m;
    const tern_gpt2_sampling *s;
    tern_gpt2_on_token on_token;
    void *user;
} gpt2_steps;

/* pos[j] = p + j for the k steps of a section. */
static tern_error *step_positions(void *ctx, int p, int k) {
    gpt2_steps *g = ctx;
    int32_t host[64];
    if (k > (int)(sizeof host / sizeof host[0])) return tern_errorf("generate: %d steps a section (at most 64)", k);
    for (int j = 0; j < k; j++) host[j] = p + j;
    return OP(upload)(g->m->dev, tern_view(g->m->dec.pos, 0, (size_t)k), host);
}

static tern_error *step_queue(void *ctx, int j, tern_buf in, tern_buf out) {
    gpt2_steps *g = ctx;
    return run_positions(g->m, in, tern_view(g->m->dec.pos, (size_t)j, 1), out, 1, g->s);
}

static tern_error *step_take(void *ctx, const int32_t *tokens, bool *stop) {
    gpt2_steps *g = ctx;
    (void)stop; /* GPT-2 stops only when on_token says so */
    return g->on_token ? g->on_token(g->user, tokens, g->m->dec.B) : NULL;
}

tern_error *GPT2_FN(generate)(tern_gpt2 *m, const int32_t *prompt, int B, int T0, int n_new,
                              const tern_gpt2_sampling *s, tern_gpt2_on_token on_token,
                              void *user, float *prefill_logits) {
    tern_dev *d = m->dev;
    int V = m->cfg.vocab_size;
    TERN_TRY(ensure_decode(m, B, T0, m->cfg.max_seq));
    gpt2_decode *dc = &m->dec;
    /* Prefill: the whole prompts at positions 0 .. T0-1, then the first new tokens (slot 0). */
    tern_buf prompt_buf = tern_view(dc->prompt, 0, (size_t)B * T0);
    gpt2_steps g = {m, s, on_token, user};
    TERN_TRY(OP(upload)(d, prompt_buf, prompt));
    TERN_TRY(step_positions(&g, 0, 1));
    TERN_TRY(run_positions(m, prompt_buf, tern_view(dc->pos, 0, 1), tern_view(dc->token, 0, (size_t)B), T0, s));
    if (prefill_logits) {
        size_t row_len = (size_t)m->Vp;
        float *row = malloc(row_len * sizeof *row);
        if (!row) return tern_errorf("out of memory for a row of logits");
        tern_error *err = NULL;
        for (int b = 0; b < B && !err; b++) {
            tern_buf logits_b = tern_view(dc->logits, (size_t)b * row_len, row_len);
            tern_buf as_f32 = tern_none();
            if (m->flat.adtype == TERN_F32) {
                err = OP(download)(d, row, logits_b);
            } else if (!(err = OP(alloc)(d, TERN_F32, row_len, &as_f32))) {
                if (!(err = OP(copy)(d, as_f32, logits_b))) err = OP(download)(d, row, as_f32);
                tern_error_free(OP(free)(d, &as_f32));
            }
            if (!err) memcpy(prefill_logits + (size_t)b * V, row, (size_t)V * sizeof *row);
        }
        free(row);
        if (err) return err;
    }

    /* One-token steps, in sections of the handler's replay_steps */
    model_decode_loop dl = {.dev = d, .B = B, .K = dc->steps, .token = dc->token, .key = step_key(m, s),
                            .model = &g, .positions = step_positions, .step = step_queue, .take = step_take};
    return MODEL_FN(decode_loop)(&dl, T0, n_new);
}
