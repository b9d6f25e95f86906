/* The new pieces together against the independent fixture llama-tiny-a (PyTorch +
 * transformers, float64): its config.json and model.safetensors read by tern, then a Llama
 * forward and backward pass written here from the cpu handler's ops (the existing matmul and
 * cross_entropy, and the new rmsnorm, rope, swiglu and grouped-query attention bodies) in
 * f32. It checks the ops' semantics are transformers' (rotate-half pairs, the inverse
 * frequencies, key/value head sharing, RMSNorm's epsilon and weight, SwiGLU's order, the tied
 * output layer), before models/llama exists.
 *
 * Tolerances as the fixture's README suggests for f32: logits and losses 1e-4 relative
 * (elementwise, with a floor of 1% of the tensor's largest), gradients 1e-3 relative to each
 * tensor's norm. */
#include "llama_ops_test.h"
#include <cjson/cJSON.h>

#include "tern/file.h"
#include "tern/llama_config.h"
#include "tern/weights.h"

typedef struct layer {
    tern_buf wqkv, wo, wgu, wd, ln1, ln2;               /* fused [q; k; v] and [gate; up] */
    tern_buf x_in, h, qkv, att, saved, x_mid, h2, gu, a, r1, r2; /* activations */
    tern_buf dwqkv, dwo, dwgu, dwd, dln1, dln2;
} layer;

static lt_cpu cpu;

/* c = beta c + op(a) op(b), op(a) [m, k], op(b) [k, n] */
static void mm(tern_buf c, tern_buf a, tern_buf b, int m, int n, int k, bool ta, bool tb, float beta) {
    tern_matmul p = {0};
    p.m = m, p.n = n, p.k = k, p.trans_a = ta, p.trans_b = tb, p.batch = 1, p.alpha = 1, p.beta = beta;
    CHECK_OK(cpu.ops->matmul(cpu.d, c, a, b, &p));
}

static tern_buf zeros(size_t n) {
    tern_buf b = lt_buf(&cpu, TERN_F32, NULL, n);
    CHECK_OK(cpu.ops->fill(cpu.d, b, 0.0));
    return b;
}

/* The named weights as one f32 buffer, stacked in order (a fused matrix: [q; k; v]). */
static tern_buf weights(const tern_weights *w, const char *const *names, int count, size_t *len) {
    size_t total = 0;
    const tern_tensor_info *t[3];
    for (int i = 0; i < count; i++) {
        CHECK_OK(tern_weights_get(w, names[i], &t[i]));
        if (!t[i]) return tern_none();
        total += t[i]->count;
    }
    float *host = malloc(total * sizeof *host);
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        CHECK_OK(tern_tensor_convert(t[i], TERN_F32, host + at));
        at += t[i]->count;
    }
    tern_buf b = lt_buf(&cpu, TERN_F32, host, total);
    free(host);
    if (len) *len = total;
    return b;
}

static double norm_error(const float *got, const float *want, size_t n) { return check_rel_error(got, want, n); }

/* What the cached forward needs of the model. */
typedef struct model {
    int C, I, V, NH, KV, hd, L, max_T;
    float eps;
    layer *ly;
    tern_buf emb, lnf, invb, *k_cache, *v_cache;
    const float *emb_host;
} model;

/* n tokens at positions p0 .. p0 + n - 1 of one sequence through the cached path (rope at
 * those positions, attention_cached over the caches); the greedy token after the last. */
static int cached_next(const model *m, const int32_t *ids, int n, int p0) {
    int C = m->C, I = m->I, QW = (m->NH + 2 * m->KV) * m->hd, AW = m->NH * m->hd;
    float *x0 = malloc((size_t)n * C * sizeof *x0);
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    for (int t = 0; t < n; t++) {
        memcpy(x0 + (size_t)t * C, m->emb_host + (size_t)ids[t] * C, (size_t)C * sizeof *x0);
        pos[t] = p0 + t;
    }
    tern_buf x = lt_buf(&cpu, TERN_F32, x0, (size_t)n * C), posb = lt_buf_i32(&cpu, pos, (size_t)n);
    tern_buf p0b = lt_buf_i32(&cpu, &p0, 1), h = zeros((size_t)n * C), r = zeros((size_t)n);
    tern_buf qkv = zeros((size_t)n * QW), att = zeros((size_t)n * AW), gu = zeros((size_t)n * 2 * I);
    tern_buf a = zeros((size_t)n * I), logits = zeros((size_t)m->V);
    for (int l = 0; l < m->L; l++) {
        const layer *y = &m->ly[l];
        CHECK_OK(cpu.ops->rmsnorm(cpu.d, h, r, x, y->ln1, n, C, m->eps));
        mm(qkv, h, y->wqkv, n, QW, C, false, true, 0);
        CHECK_OK(cpu.ops->rope(cpu.d, qkv, qkv, posb, m->invb, n, m->NH + m->KV, m->hd, QW));
        CHECK_OK(tern_validate_attention_cached(NULL, att, m->k_cache[l], m->v_cache[l], qkv, p0b, 1, n, m->NH, m->KV,
                                                    m->hd, m->max_T));
        CHECK_OK(cpu.ops->attention_cached(cpu.d, att, m->k_cache[l], m->v_cache[l], qkv, p0b, 1, n, m->NH, m->KV,
                                          m->hd, m->max_T));
        mm(x, att, y->wo, n, C, AW, false, true, 1);
        CHECK_OK(cpu.ops->rmsnorm(cpu.d, h, r, x, y->ln2, n, C, m->eps));
        mm(gu, h, y->wgu, n, 2 * I, C, false, true, 0);
        CHECK_OK(cpu.ops->swiglu(cpu.d, a, tern_view(gu, 0, (size_t)n * 2 * I), tern_view(gu, (size_t)I, (size_t)n * 2 * I - (size_t)I),
                            n, I, 2 * I));
        mm(x, a, y->wd, n, C, I, false, true, 1);
    }
    tern_buf last = tern_view(x, (size_t)(n - 1) * C, (size_t)C), hl = tern_view(h, 0, (size_t)C);
    CHECK_OK(cpu.ops->rmsnorm(cpu.d, hl, tern_none(), last, m->lnf, 1, C, m->eps));
    mm(logits, hl, m->emb, 1, m->V, C, false, true, 0);
    float *lg = lt_get(&cpu, logits);
    int best = 0;
    for (int v = 1; v < m->V; v++)
        if (lg[v] > lg[best]) best = v;
    free(lg), free(x0), free(pos);
    tern_buf *bs[] = {&x, &posb, &p0b, &h, &r, &qkv, &att, &gu, &a, &logits};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) lt_free(&cpu, bs[i]);
    return best;
}

/* The fixture's greedy continuations (full recomputation in float64 by transformers) through
 * the cached path: the prompt at once, then one token at a time. */
static void test_greedy(model *m, const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(tern_read_file(path, &text, &len));
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    const cJSON *greedy = cJSON_GetObjectItemCaseSensitive(root, "greedy"), *g;
    int prompts = 0;
    cJSON_ArrayForEach(g, greedy) {
        const cJSON *pi = cJSON_GetObjectItemCaseSensitive(g, "prompt_ids"), *ni = cJSON_GetObjectItemCaseSensitive(g, "new_ids");
        int np = cJSON_GetArraySize(pi), nn = cJSON_GetArraySize(ni);
        m->max_T = np + nn;
        tern_buf kc[8], vc[8];
        size_t nc = (size_t)m->KV * m->max_T * m->hd;
        for (int l = 0; l < m->L; l++) kc[l] = zeros(nc), vc[l] = zeros(nc);
        m->k_cache = kc, m->v_cache = vc;
        int32_t ids[512];
        int i = 0, same = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, pi) ids[i++] = v->valueint;
        int next = cached_next(m, ids, np, 0);
        i = 0;
        cJSON_ArrayForEach(v, ni) {
            same += next == v->valueint;
            if (next != v->valueint) break; /* the rest would follow another path */
            ids[np + i] = next;
            if (++i < nn) next = cached_next(m, ids + np + i - 1, 1, np + i - 1);
        }
        CHECKF(same == nn, "greedy prompt %d: the first %d of %d tokens match", prompts, same, nn);
        for (int l = 0; l < m->L; l++) lt_free(&cpu, &kc[l]), lt_free(&cpu, &vc[l]);
        prompts++;
    }
    CHECKF(prompts == 4, "%d greedy prompts", prompts);
    printf("llama-tiny-a greedy: %d prompts through the KV cache\n", prompts);
    cJSON_Delete(root);
    free(text);
}

int main(void) {
    cpu.ops = tern_handler_ops("cpu");
    CHECK_OK(cpu.ops->open(NULL, &cpu.d));
    const char *shared = getenv("TERN_SHARED_DIR");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/fixtures/llama-tiny-a", shared ? shared : "../shared");
    snprintf(path, sizeof path, "%s/config.json", dir);
    tern_llama_config cfg;
    tern_weights *w = NULL;
    CHECK_OK(tern_llama_config_read(path, &cfg));
    CHECK_OK(tern_weights_open(dir, &w));
    tern_safetensors *exf = NULL;
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    CHECK_OK(tern_safetensors_open(path, &exf));
    if (!w || !exf) return check_summary("test_llama_fixture");
    const int B = 4, T = 64, BT = B * T, C = cfg.hidden, I = cfg.intermediate, V = cfg.vocab_size;
    const int NH = cfg.n_head, KV = cfg.n_kv_head, hd = cfg.head_dim, L = cfg.n_layer;
    const int QW = (NH + 2 * KV) * hd, AW = NH * hd;
    const float eps = cfg.rms_eps;
    CHECK(cfg.tie_word_embeddings && !cfg.qkv_bias && !cfg.mlp_bias);

    /* inputs, positions, inverse frequencies */
    const tern_tensor_info *ti = tern_safetensors_find(exf, "inputs"), *tt = tern_safetensors_find(exf, "targets");
    int32_t *tokens = malloc((size_t)BT * 4), *pos = malloc((size_t)BT * 4);
    CHECK_OK(tern_tensor_convert(ti, TERN_I32, tokens));
    for (int r = 0; r < BT; r++) pos[r] = r % T;
    double inv64[512];
    float inv32[512];
    CHECK_OK(tern_llama_rope_inv_freq(&cfg, inv64, 512));
    for (int j = 0; j < hd / 2; j++) inv32[j] = (float)inv64[j];
    tern_buf posb = lt_buf_i32(&cpu, pos, (size_t)BT), invb = lt_buf(&cpu, TERN_F32, inv32, (size_t)hd / 2);
    int32_t *targets = malloc((size_t)BT * 4);
    CHECK_OK(tern_tensor_convert(tt, TERN_I32, targets));
    tern_buf tgt = lt_buf_i32(&cpu, targets, (size_t)BT);

    /* weights */
    const char *emb_name[] = {"model.embed_tokens.weight"}, *norm_name[] = {"model.norm.weight"};
    tern_buf emb = weights(w, emb_name, 1, NULL), lnf = weights(w, norm_name, 1, NULL);
    float *emb_host = lt_get(&cpu, emb);
    layer *ly = calloc((size_t)L, sizeof *ly);
    char n[6][3][96];
    for (int l = 0; l < L; l++) {
        const char *p[6][3] = {{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, {"self_attn.o_proj"},
                               {"mlp.gate_proj", "mlp.up_proj"}, {"mlp.down_proj"}, {"input_layernorm"},
                               {"post_attention_layernorm"}};
        const char *names[6][3];
        int counts[6] = {3, 1, 2, 1, 1, 1};
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < counts[i]; j++) {
                snprintf(n[i][j], sizeof n[i][j], "model.layers.%d.%s.weight", l, p[i][j]);
                names[i][j] = n[i][j];
            }
        ly[l].wqkv = weights(w, names[0], 3, NULL), ly[l].wo = weights(w, names[1], 1, NULL);
        ly[l].wgu = weights(w, names[2], 2, NULL), ly[l].wd = weights(w, names[3], 1, NULL);
        ly[l].ln1 = weights(w, names[4], 1, NULL), ly[l].ln2 = weights(w, names[5], 1, NULL);
    }

    /* ---- forward ---- */
    float *x0 = malloc((size_t)BT * C * sizeof *x0);
    for (int r = 0; r < BT; r++) memcpy(x0 + (size_t)r * C, emb_host + (size_t)tokens[r] * C, (size_t)C * sizeof *x0);
    tern_buf x = lt_buf(&cpu, TERN_F32, x0, (size_t)BT * C);
    size_t ns = 0;
    CHECK_OK(cpu.ops->attention_saved_len(cpu.d, B, T, NH, &ns));
    for (int l = 0; l < L; l++) {
        layer *y = &ly[l];
        y->x_in = lt_buf(&cpu, TERN_F32, NULL, (size_t)BT * C);
        CHECK_OK(cpu.ops->copy(cpu.d, y->x_in, x));
        y->h = zeros((size_t)BT * C), y->r1 = zeros((size_t)BT), y->r2 = zeros((size_t)BT);
        y->qkv = zeros((size_t)BT * QW), y->att = zeros((size_t)BT * AW), y->saved = zeros(ns);
        y->h2 = zeros((size_t)BT * C), y->gu = zeros((size_t)BT * 2 * I), y->a = zeros((size_t)BT * I);
        y->x_mid = zeros((size_t)BT * C);
        CHECK_OK(cpu.ops->rmsnorm(cpu.d, y->h, y->r1, x, y->ln1, BT, C, eps));
        mm(y->qkv, y->h, y->wqkv, BT, QW, C, false, true, 0);
        /* q and k heads of each row, in place */
        CHECK_OK(tern_validate_rope(NULL, y->qkv, y->qkv, posb, invb, BT, NH + KV, hd, QW));
        CHECK_OK(cpu.ops->rope(cpu.d, y->qkv, y->qkv, posb, invb, BT, NH + KV, hd, QW));
        CHECK_OK(cpu.ops->attention(cpu.d, y->att, y->saved, y->qkv, B, T, NH, KV, hd));
        mm(x, y->att, y->wo, BT, C, AW, false, true, 1);
        CHECK_OK(cpu.ops->copy(cpu.d, y->x_mid, x));
        CHECK_OK(cpu.ops->rmsnorm(cpu.d, y->h2, y->r2, x, y->ln2, BT, C, eps));
        mm(y->gu, y->h2, y->wgu, BT, 2 * I, C, false, true, 0);
        tern_buf gate = tern_view(y->gu, 0, (size_t)BT * 2 * I), up = tern_view(y->gu, (size_t)I, (size_t)BT * 2 * I - (size_t)I);
        CHECK_OK(tern_validate_swiglu(NULL, y->a, gate, up, BT, I, 2 * I));
        CHECK_OK(cpu.ops->swiglu(cpu.d, y->a, gate, up, BT, I, 2 * I));
        mm(x, y->a, y->wd, BT, C, I, false, true, 1);
    }
    tern_buf xf = zeros((size_t)BT * C), rf = zeros((size_t)BT), logits = zeros((size_t)BT * V), losses = zeros((size_t)BT);
    CHECK_OK(cpu.ops->rmsnorm(cpu.d, xf, rf, x, lnf, BT, C, eps));
    mm(logits, xf, emb, BT, V, C, false, true, 0);
    float *lg = lt_get(&cpu, logits);
    float got4[4 * 4096], want4[4 * 4096];
    const tern_tensor_info *e1 = tern_safetensors_find(exf, "logits_b0_last4"), *e2 = tern_safetensors_find(exf, "logits_blast_first4");
    CHECK(e1 && e2 && V == 4096);
    CHECK_OK(tern_tensor_convert(e1, TERN_F32, want4));
    for (int r = 0; r < 4; r++) memcpy(got4 + r * V, lg + (size_t)(T - 4 + r) * V, (size_t)V * sizeof *lg);
    double want64[4 * 4096];
    for (int i = 0; i < 4 * V; i++) want64[i] = want4[i];
    double err = lt_error(got4, want64, (size_t)4 * V, 0.01);
    CHECKF(err <= 1e-4, "logits of batch 0, last 4 positions: error %.3g", err);
    CHECK_OK(tern_tensor_convert(e2, TERN_F32, want4));
    for (int r = 0; r < 4; r++) memcpy(got4 + r * V, lg + (size_t)((B - 1) * T + r) * V, (size_t)V * sizeof *lg);
    for (int i = 0; i < 4 * V; i++) want64[i] = want4[i];
    double err2 = lt_error(got4, want64, (size_t)4 * V, 0.01);
    CHECKF(err2 <= 1e-4, "logits of the last batch, first 4 positions: error %.3g", err2);
    free(lg);
    CHECK_OK(cpu.ops->cross_entropy(cpu.d, losses, logits, tgt, BT, V, V, 1.0f / (float)BT));
    float *ls = lt_get(&cpu, losses), *want_l = malloc((size_t)BT * sizeof *want_l);
    CHECK_OK(tern_tensor_convert(tern_safetensors_find(exf, "losses"), TERN_F32, want_l));
    double *wl = malloc((size_t)BT * sizeof *wl), mean = 0;
    for (int r = 0; r < BT; r++) wl[r] = want_l[r], mean += ls[r];
    mean /= BT;
    double el = lt_error(ls, wl, (size_t)BT, 0.01);
    CHECKF(el <= 1e-4, "losses: error %.3g", el);
    CHECKF(fabs(mean - 5.72017272605587) <= 1e-4 * 5.72, "mean loss %.9g, want 5.72017272605587", mean);
    printf("llama-tiny-a forward: logits error %.3g, %.3g; losses %.3g; mean loss %.9g\n", err, err2, el, mean);

    /* ---- backward (logits now hold dL/dlogits of the mean loss) ---- */
    tern_buf demb = zeros((size_t)V * C), dxf = zeros((size_t)BT * C), dlnf = zeros((size_t)C), dx = zeros((size_t)BT * C);
    mm(dxf, logits, emb, BT, C, V, false, false, 0);
    mm(demb, logits, xf, V, C, BT, true, false, 0);
    CHECK_OK(cpu.ops->rmsnorm_backward(cpu.d, dx, dlnf, dxf, x, lnf, rf, BT, C, 0));
    tern_buf da = zeros((size_t)BT * I), dgu = zeros((size_t)BT * 2 * I), dh = zeros((size_t)BT * C);
    tern_buf datt = zeros((size_t)BT * AW), dqkv = zeros((size_t)BT * QW);
    for (int l = L - 1; l >= 0; l--) {
        layer *y = &ly[l];
        y->dwd = zeros((size_t)C * I), y->dwgu = zeros((size_t)2 * I * C), y->dwo = zeros((size_t)C * AW);
        y->dwqkv = zeros((size_t)QW * C), y->dln1 = zeros((size_t)C), y->dln2 = zeros((size_t)C);
        /* MLP: x_out = x_mid + swiglu(h2 Wgu^T) Wd^T */
        mm(da, dx, y->wd, BT, I, C, false, false, 0);
        mm(y->dwd, dx, y->a, C, I, BT, true, false, 0);
        tern_buf gate = tern_view(y->gu, 0, (size_t)BT * 2 * I), up = tern_view(y->gu, (size_t)I, (size_t)BT * 2 * I - (size_t)I);
        tern_buf dgate = tern_view(dgu, 0, (size_t)BT * 2 * I), dup = tern_view(dgu, (size_t)I, (size_t)BT * 2 * I - (size_t)I);
        CHECK_OK(tern_validate_swiglu_backward(NULL, dgate, dup, da, gate, up, BT, I, 2 * I));
        CHECK_OK(cpu.ops->swiglu_backward(cpu.d, dgate, dup, da, gate, up, BT, I, 2 * I));
        mm(dh, dgu, y->wgu, BT, C, 2 * I, false, false, 0);
        mm(y->dwgu, dgu, y->h2, 2 * I, C, BT, true, false, 0);
        CHECK_OK(cpu.ops->rmsnorm_backward(cpu.d, dx, y->dln2, dh, y->x_mid, y->ln2, y->r2, BT, C, 0));
        /* attention: x_mid = x_in + attention(rope(h Wqkv^T)) Wo^T */
        mm(datt, dx, y->wo, BT, AW, C, false, false, 0);
        mm(y->dwo, dx, y->att, C, AW, BT, true, false, 0);
        CHECK_OK(cpu.ops->attention_backward(cpu.d, dqkv, datt, y->qkv, y->att, y->saved, B, T, NH, KV, hd));
        CHECK_OK(cpu.ops->rope_backward(cpu.d, dqkv, dqkv, posb, invb, BT, NH + KV, hd, QW));
        mm(dh, dqkv, y->wqkv, BT, C, QW, false, false, 0);
        mm(y->dwqkv, dqkv, y->h, QW, C, BT, true, false, 0);
        CHECK_OK(cpu.ops->rmsnorm_backward(cpu.d, dx, y->dln1, dh, y->x_in, y->ln1, y->r1, BT, C, 0));
    }
    /* the embedding's rows, tied to the output layer */
    float *dxh = lt_get(&cpu, dx), *de = lt_get(&cpu, demb);
    for (int r = 0; r < BT; r++)
        for (int c = 0; c < C; c++) de[(size_t)tokens[r] * C + c] += dxh[(size_t)r * C + c];

    /* every gradient against the fixture's, relative to its norm */
    double worst = 0;
    int checked = 0;
    for (size_t i = 0; i < tern_safetensors_count(exf); i++) {
        const tern_tensor_info *t = tern_safetensors_at(exf, i);
        if (strncmp(t->name, "grad.", 5) != 0) continue;
        const char *pn = t->name + 5;
        float *want = malloc(t->count * sizeof *want), *got = NULL, *all = NULL;
        CHECK_OK(tern_tensor_convert(t, TERN_F32, want));
        int l = -1;
        char part[64] = "";
        if (strcmp(pn, "model.embed_tokens.weight") == 0) got = de;
        else if (strcmp(pn, "model.norm.weight") == 0) got = all = lt_get(&cpu, dlnf);
        else if (sscanf(pn, "model.layers.%d.%63s", &l, part) == 2 && l >= 0 && l < L) {
            layer *y = &ly[l];
            size_t q = (size_t)NH * hd * C, k = (size_t)KV * hd * C, g = (size_t)I * C;
            struct { const char *name; tern_buf b; size_t at; } map[] = {
                {"self_attn.q_proj.weight", y->dwqkv, 0}, {"self_attn.k_proj.weight", y->dwqkv, q},
                {"self_attn.v_proj.weight", y->dwqkv, q + k}, {"self_attn.o_proj.weight", y->dwo, 0},
                {"mlp.gate_proj.weight", y->dwgu, 0}, {"mlp.up_proj.weight", y->dwgu, g},
                {"mlp.down_proj.weight", y->dwd, 0}, {"input_layernorm.weight", y->dln1, 0},
                {"post_attention_layernorm.weight", y->dln2, 0}};
            for (size_t m = 0; m < sizeof map / sizeof map[0]; m++)
                if (strcmp(part, map[m].name) == 0) {
                    all = lt_get(&cpu, map[m].b);
                    got = all + map[m].at;
                }
        }
        CHECKF(got != NULL, "no gradient for %s", pn);
        if (got) {
            double e = norm_error(got, want, t->count);
            worst = fmax(worst, e);
            CHECKF(e <= 1e-3, "gradient of %s: error %.3g relative to its norm", pn, e);
            checked++;
        }
        free(want), free(all);
    }
    CHECKF(checked == 2 + 9 * L, "%d gradients checked", checked);
    printf("llama-tiny-a backward: %d gradients, worst error %.3g relative to the tensor's norm\n", checked, worst);

    model mdl = {C, I, V, NH, KV, hd, L, 0, eps, ly, emb, lnf, invb, NULL, NULL, emb_host};
    CHECK(L <= 8);
    test_greedy(&mdl, dir);

    free(dxh), free(de), free(x0), free(tokens), free(pos), free(targets), free(emb_host), free(ls), free(want_l), free(wl);
    for (int l = 0; l < L; l++) {
        tern_buf *bs[] = {&ly[l].wqkv, &ly[l].wo, &ly[l].wgu, &ly[l].wd, &ly[l].ln1, &ly[l].ln2, &ly[l].x_in,
                          &ly[l].h, &ly[l].qkv, &ly[l].att, &ly[l].saved, &ly[l].x_mid, &ly[l].h2, &ly[l].gu,
                          &ly[l].a, &ly[l].r1, &ly[l].r2, &ly[l].dwqkv, &ly[l].dwo, &ly[l].dwgu, &ly[l].dwd,
                          &ly[l].dln1, &ly[l].dln2};
        for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) lt_free(&cpu, bs[i]);
    }
    tern_buf *rest[] = {&posb, &invb, &tgt, &emb, &lnf, &x, &xf, &rf, &logits, &losses, &demb, &dxf, &dlnf, &dx,
                        &da, &dgu, &dh, &datt, &dqkv};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) lt_free(&cpu, rest[i]);
    free(ly);
    tern_weights_close(w);
    tern_safetensors_close(exf);
    CHECK_OK(cpu.ops->close(cpu.d));
    return check_summary("test_llama_fixture");
}
