/* The Llama family's front, compiled once: picks the handler's instance when a model is
 * opened, reads Hugging Face checkpoints, validates arguments, then calls the instance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_json.h"
#include "llama_internal.h"
#include "tern/rng.h"
#include "tern/weights.h"

#include "../common/batch_check.h"
#include "../common/handler_choice.h"
#include "model_handlers.h" /* TERN_MODEL_HANDLERS(X): one X(handler) per built handler */

#define TERN_LLAMA_DECLARE_(h) extern const llama_impl tern_llama_##h##_impl;
TERN_MODEL_HANDLERS(TERN_LLAMA_DECLARE_)
#define TERN_LLAMA_ENTRY_(h) &tern_llama_##h##_impl,
static const llama_impl *const instances[] = {TERN_MODEL_HANDLERS(TERN_LLAMA_ENTRY_)};

/* The instance of `backend` ("cuda" or "cuda:device=1": *options then points after ':'). */
static tern_error *find_instance(const char *backend, const llama_impl **out, const char **options) {
    enum { N = sizeof instances / sizeof instances[0] };
    const char *names[N];
    for (size_t i = 0; i < N; i++) names[i] = instances[i]->handler;
    size_t index = 0;
    TERN_TRY(model_choose_handler(backend, names, N, &index, options));
    *out = instances[index];
    return NULL;
}

/* Every tensor cfg has, for the flat state, in the layout's order: its place, the elements a
 * file holds (V rows, not Vp) and whether it is decayed (matrices and embeddings). */
static tern_error *describe_tensors(tern_llama *m) {
    const tern_llama_config *cfg = &m->cfg;
    TERN_TRY(model_flat_tensors(&m->flat, 3 + (size_t)(LLAMA_TENSOR_KINDS - LLAMA_FIRST_LAYER_KIND) * cfg->n_layer));
    size_t n = 0;
    for (int k = 0; k < LLAMA_TENSOR_KINDS; k++) {
        if (!llama_has_tensor(cfg, (llama_tensor)k)) continue;
        int layers = llama_is_layer_kind((llama_tensor)k) ? cfg->n_layer : 1;
        size_t rows, cols;
        llama_tensor_shape(cfg, (llama_tensor)k, &rows, &cols);
        for (int l = 0; l < layers; l++, n++) {
            llama_tensor_name((llama_tensor)k, l, m->flat.names[n], sizeof m->flat.names[n]);
            m->flat.tensors[n] = (model_tensor){.name = m->flat.names[n],
                                                .offset = llama_tensor_offset(cfg, (llama_tensor)k, l),
                                                .len = llama_tensor_len(cfg, (llama_tensor)k),
                                                .count = cols ? rows * cols : rows,
                                                .decayed = llama_is_matrix((llama_tensor)k)};
        }
    }
    m->flat.n_tensors = n;
    return NULL;
}

/* A model on `backend` with its parameters from the host array flat [n_flat]. */
static tern_error *open_with(const char *backend, const tern_llama_config *cfg, tern_precision precision,
                             const float *flat, tern_llama **out) {
    double inv64[TERN_LLAMA_MAX_HEAD_DIM / 2];
    float inv32[TERN_LLAMA_MAX_HEAD_DIM / 2];
    TERN_TRY(tern_llama_rope_inv_freq(cfg, inv64, (size_t)cfg->head_dim / 2));
    for (int j = 0; j < cfg->head_dim / 2; j++) inv32[j] = (float)inv64[j]; /* rounded once */
    tern_llama *m = calloc(1, sizeof *m);
    if (!m) return tern_errorf("out of memory");
    const char *options = NULL;
    tern_error *err = find_instance(backend, &m->impl, &options);
    if (!err && options && !(m->options = strdup(options))) err = tern_errorf("out of memory");
    if (err) {
        free(m->options);
        free(m);
        return err;
    }
    m->backend = m->impl->handler;
    m->cfg = *cfg;
    m->Vp = llama_padded_vocab(cfg->vocab_size);
    m->precision = precision;
    model_flat_init(&m->flat, m->impl->flat, precision, llama_flat_len(cfg));
    if (!(err = describe_tensors(m)) && !(err = m->impl->open(m, flat, inv32))) {
        *out = m;
        return NULL;
    }
    tern_llama_free(m);
    return tern_error_wrap(err, "%s backend", backend);
}

/* Tensors a checkpoint may hold that the model does not use: the rotary frequencies older
 * transformers saved, and lm_head when tied (some exporters store the copy). */
static bool ignored(const tern_llama_config *cfg, const char *name) {
    const char *suffix = ".rotary_emb.inv_freq";
    size_t n = strlen(name), s = strlen(suffix);
    if (n > s && !strcmp(name + n - s, suffix)) return true;
    return cfg->tie_word_embeddings && !strcmp(name, "lm_head.weight");
}

/* Every tensor of cfg from the folder's weights into the flat host array (zero elsewhere). */
static tern_error *read_weights(const tern_weights *w, const char *dir, const tern_llama_config *cfg,
                                float *flat) {
    for (size_t i = 0; i < tern_weights_count(w); i++) {
        const char *name = tern_weights_at(w, i)->name;
        llama_tensor k;
        int l;
        if (!ignored(cfg, name) && !llama_tensor_parse(cfg, name, &k, &l))
            return tern_errorf("%s: tensor %s is not part of the model config.json describes", dir, name);
    }
    char name[128];
    for (int k = 0; k < LLAMA_TENSOR_KINDS; k++) {
        if (!llama_has_tensor(cfg, (llama_tensor)k)) continue;
        int layers = llama_is_layer_kind((llama_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++) {
            llama_tensor_name((llama_tensor)k, l, name, sizeof name);
            const tern_tensor_info *t = NULL;
            TERN_TRY(tern_weights_get(w, name, &t));
            size_t rows, cols;
            llama_tensor_shape(cfg, (llama_tensor)k, &rows, &cols);
            if (cols ? (t->ndim != 2 || t->shape[0] != (int64_t)rows || t->shape[1] != (int64_t)cols)
                     : (t->ndim != 1 || t->shape[0] != (int64_t)rows))
                return tern_errorf("%s: tensor %s has the wrong shape for config.json (expected [%zu%s%.0zu])", dir,
                                   name, rows, cols ? ", " : "", cols);
            float *dst = flat + llama_tensor_offset(cfg, (llama_tensor)k, l);
            TERN_TRY(tern_tensor_convert(t, TERN_F32, dst));
            for (size_t i = 0; i < t->count; i++)
                if (!isfinite(dst[i]))
                    return tern_errorf("%s: tensor %s holds a value that is not finite (%g at element %zu)", dir,
                                       name, dst[i], i);
        }
    }
    return NULL;
}

tern_error *tern_llama_load(const char *backend, const char *dir, tern_precision precision, tern_llama **out) {
    *out = NULL;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return tern_errorf("model folder name too long: %.64s...", dir);
    tern_llama_config cfg;
    TERN_TRY(tern_llama_config_read(path, &cfg));
    tern_weights *w = NULL;
    TERN_TRY(tern_weights_open(dir, &w));
    size_t n = llama_flat_len(&cfg);
    float *flat = calloc(n, sizeof *flat); /* zero: padding rows and gaps stay zero */
    tern_error *err = flat ? read_weights(w, dir, &cfg, flat) : tern_errorf("out of memory for %zu parameters", n);
    tern_weights_close(w);
    if (!err) err = open_with(backend, &cfg, precision, flat, out);
    free(flat);
    return err;
}

/* A standard normal from two uniforms of the counter-based stream (Box-Muller). */
static float normal(uint64_t seed, uint64_t i) {
    float u1 = tern_uniform(seed, (uint32_t)(2 * i)), u2 = tern_uniform(seed, (uint32_t)(2 * i + 1));
    return sqrtf(-2.0f * logf(1.0f - u1)) * cosf(6.2831853f * u2);
}

tern_error *tern_llama_init(const char *backend, const tern_llama_config *cfg, uint64_t seed,
                            tern_precision precision, tern_llama **out) {
    *out = NULL;
    TERN_TRY(tern_llama_config_validate(cfg));
    size_t n = llama_flat_len(cfg);
    float *flat = calloc(n, sizeof *flat);
    if (!flat) return tern_errorf("out of memory for %zu parameters", n);
    uint64_t draw = 0; /* one stream over every tensor, in the layout's order */
    for (int k = 0; k < LLAMA_TENSOR_KINDS; k++) {
        if (!llama_has_tensor(cfg, (llama_tensor)k)) continue;
        int layers = llama_is_layer_kind((llama_tensor)k) ? cfg->n_layer : 1;
        size_t rows, cols;
        llama_tensor_shape(cfg, (llama_tensor)k, &rows, &cols);
        size_t len = cols ? rows * cols : rows; /* without the vocabulary's padding rows */
        for (int l = 0; l < layers; l++) {
            float *t = flat + llama_tensor_offset(cfg, (llama_tensor)k, l);
            if (k == LLAMA_NORM || k == LLAMA_LN1 || k == LLAMA_LN2) {
                for (size_t i = 0; i < len; i++) t[i] = 1.0f;
            } else if (llama_is_matrix((llama_tensor)k)) {
                /* each value is its place's in the stream: the same on any number of threads
                 * (Llama-3.2-1B's 1.2e9 draws took ~30 s on one) */
#pragma omp parallel for schedule(static)
                for (size_t i = 0; i < len; i++) t[i] = 0.02f * normal(seed, draw + i);
                draw += len;
            } /* biases: zero */
        }
    }
    tern_error *err = open_with(backend, cfg, precision, flat, out);
    free(flat);
    return err;
}

void tern_llama_free(tern_llama *m) {
    if (!m) return;
    if (m->impl) m->impl->close(m);
    model_flat_free_tensors(&m->flat);
    free(m->device_name);
    free(m->options);
    free(m);
}

const tern_llama_config *tern_llama_get_config(const tern_llama *m) { return &m->cfg; }
const char *tern_llama_backend(const tern_llama *m) { return m->backend; }
const char *tern_llama_device_name(const tern_llama *m) { return m->device_name; }
int tern_llama_step(const tern_llama *m) { return m->flat.step; }

/* Token ids come from outside (prompts, data files): checked here, once, for every handler. */
static tern_error *check_batch(const tern_llama *m, const int32_t *x, const int32_t *y, int B, int T) {
    return model_check_batch(m->cfg.max_seq, m->cfg.vocab_size, x, y, B, T);
}

tern_error *tern_llama_forward(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T, float *mean_loss) {
    TERN_TRY(check_batch(m, x, y, B, T));
    return m->impl->forward(m, x, y, B, T, 1.0f, false, mean_loss);
}

/* q8_0 weights are for decoding only: there is no gradient through them. */
static tern_error *refuse_q8_training(const tern_llama *m) {
    if (!m->q8.len) return NULL;
    return tern_errorf("training with q8_0 weights is not supported (they are for decoding; load the model again "
                       "without them)");
}

tern_error *tern_llama_quantize_q8(tern_llama *m, bool lm_head) {
    if (!m) return tern_errorf("tern_llama_quantize_q8: no model");
    return m->impl->quantize_q8(m, lm_head);
}

tern_error *tern_llama_forward_backward(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                                        float loss_scale, float *mean_loss) {
    if (!y) return tern_errorf("forward_backward needs targets");
    TERN_TRY(refuse_q8_training(m));
    TERN_TRY(check_batch(m, x, y, B, T));
    /* With ranks, this rank's share of the global batch's mean: 1/world of its own mean. */
    float loss = 0;
    TERN_TRY(m->impl->forward(m, x, y, B, T, model_flat_rank_loss_scale(&m->flat, loss_scale), true, &loss));
    TERN_TRY(model_flat_mean_across_ranks(&m->flat, &loss));
    if (mean_loss) *mean_loss = loss;
    return NULL;
}

tern_error *tern_llama_set_dist(tern_llama *m, tern_dist *comm) { return model_flat_set_dist(&m->flat, comm); }

tern_error *tern_llama_shard_optimizer(tern_llama *m) {
    bool moved = false;
    TERN_TRY(model_flat_shard_optimizer(&m->flat, &moved));
    if (moved) m->epoch++; /* the weights may have moved: replayable sections are captured anew */
    return NULL;
}

tern_error *tern_llama_sum_across_ranks(tern_llama *m, float *value) {
    return m->flat.ops->sum_across_ranks(&m->flat, value);
}

size_t tern_llama_optimizer_bytes(const tern_llama *m) { return model_flat_optimizer_bytes(&m->flat); }

tern_error *tern_llama_zero_grad(tern_llama *m) { return m->impl->zero_grad(m); }

tern_error *tern_llama_update(tern_llama *m, const tern_gpt2_adamw *h, float *grad_norm) {
    TERN_TRY(refuse_q8_training(m));
    if (!(h->lr >= 0) || !(h->beta1 >= 0 && h->beta1 < 1) || !(h->beta2 >= 0 && h->beta2 < 1) || !(h->eps > 0) ||
        !(h->weight_decay >= 0))
        return tern_errorf("AdamW hyper-parameters out of range (lr %g, betas %g %g, eps %g, weight decay %g)", h->lr,
                           h->beta1, h->beta2, h->eps, h->weight_decay);
    return m->flat.ops->update(&m->flat, h, grad_norm);
}

/* The flat place of parameter `name`, checking that count matches its size. */
static tern_error *locate(const tern_llama *m, const char *name, size_t count, size_t *offset) {
    llama_tensor k;
    int l;
    if (!llama_tensor_parse(&m->cfg, name, &k, &l)) return tern_errorf("no parameter called '%s'", name);
    size_t rows, cols;
    llama_tensor_shape(&m->cfg, k, &rows, &cols);
    size_t len = cols ? rows * cols : rows;
    if (count != len) return tern_errorf("%s has %zu elements, not %zu", name, len, count);
    *offset = llama_tensor_offset(&m->cfg, k, l);
    return NULL;
}

tern_error *tern_llama_read_param(tern_llama *m, const char *name, float *out, size_t count) {
    size_t offset = 0;
    TERN_TRY(locate(m, name, count, &offset));
    return model_flat_read_params(&m->flat, offset, count, out);
}

tern_error *tern_llama_read_grad(tern_llama *m, const char *name, float *out, size_t count) {
    size_t offset = 0;
    TERN_TRY(locate(m, name, count, &offset));
    if (!m->flat.grads.len) return tern_errorf("no gradients yet: run forward_backward first");
    return m->flat.ops->read(&m->flat, m->flat.grads, offset, count, out);
}

tern_error *tern_llama_read_logits(tern_llama *m, int row, int rows, float *out) {
    const llama_acts *a = &m->acts;
    int BT = a->B * a->T, V = m->cfg.vocab_size;
    if (!a->layers) return tern_errorf("no logits yet: run a forward pass first");
    if (row < 0 || rows < 0 || row > BT - rows)
        return tern_errorf("logit rows %d..%d are outside the %d rows of the last pass", row, row + rows, BT);
    for (int r = 0; r < rows; r++)
        TERN_TRY(m->flat.ops->read(&m->flat, a->logits, (size_t)(row + r) * m->Vp, (size_t)V, out + (size_t)r * V));
    return NULL;
}

tern_error *tern_llama_read_losses(tern_llama *m, float *out) {
    const llama_acts *a = &m->acts;
    if (!a->layers) return tern_errorf("no losses yet: run a forward pass with targets first");
    return m->flat.ops->read(&m->flat, a->losses, 0, (size_t)a->B * a->T, out);
}

tern_error *tern_llama_generate(tern_llama *m, const int32_t *prompt, int B, int T0, int n_new,
                                const tern_gpt2_sampling *sampling, bool stop_at_eos, tern_gpt2_on_token on_token,
                                void *user) {
    if (n_new < 0) return tern_errorf("cannot generate %d tokens", n_new);
    TERN_TRY(check_batch(m, prompt, NULL, B, T0));
    if ((long)T0 + n_new > m->cfg.max_seq)
        return tern_errorf("a prompt of %d tokens plus %d new ones exceeds the model's context of %d tokens", T0,
                           n_new, m->cfg.max_seq);
    if (!(sampling->temperature >= 0) || !isfinite(sampling->temperature))
        return tern_errorf("temperature %g must be a finite number >= 0", sampling->temperature);
    if (n_new == 0) return NULL;
    return m->impl->generate(m, prompt, B, T0, n_new, sampling, stop_at_eos, on_token, user, NULL);
}

tern_error *tern_llama_prefill_logits(tern_llama *m, const int32_t *prompt, int B, int T0, float *out) {
    TERN_TRY(check_batch(m, prompt, NULL, B, T0));
    tern_gpt2_sampling greedy = {0};
    return m->impl->generate(m, prompt, B, T0, 0, &greedy, false, NULL, NULL, out);
}

tern_error *tern_llama_is_family(const char *dir, bool *out) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return tern_errorf("model folder name too long: %.64s...", dir);
    cJSON *root = NULL;
    TERN_TRY(tern_cj_read(path, &root));
    const cJSON *type = NULL;
    tern_error *err = tern_cj_find(root, path, "model_type", &type);
    *out = !err && cJSON_IsString(type) &&
           (!strcmp(type->valuestring, "llama") || !strcmp(type->valuestring, "qwen2"));
    cJSON_Delete(root);
    return err;
}
