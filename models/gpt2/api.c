/* GPT-2's front, compiled once: picks the handler's instance of the model when a model is
 * opened, reads and writes checkpoints, validates arguments, then calls the instance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_internal.h"
#include "tern/rng.h"
#include "tern/safetensors.h"

#include "../common/batch_check.h"
#include "../common/handler_choice.h"
#include "model_handlers.h" /* TERN_MODEL_HANDLERS(X): one X(handler) per built handler */

#define TERN_GPT2_DECLARE_(h) extern const gpt2_impl tern_gpt2_##h##_impl;
TERN_MODEL_HANDLERS(TERN_GPT2_DECLARE_)
#define TERN_GPT2_ENTRY_(h) &tern_gpt2_##h##_impl,
static const gpt2_impl *const instances[] = {TERN_MODEL_HANDLERS(TERN_GPT2_ENTRY_)};

/* The instance of `backend`: a handler's name, then optionally ':' and its options
 * ("cuda:device=1"), which *options points at (NULL without). */
static tern_error *find_instance(const char *backend, const gpt2_impl **out, const char **options) {
    enum { N = sizeof instances / sizeof instances[0] };
    const char *names[N];
    for (size_t i = 0; i < N; i++) names[i] = instances[i]->handler;
    size_t index = 0;
    TERN_TRY(model_choose_handler(backend, names, N, &index, options));
    *out = instances[index];
    return NULL;
}

tern_error *tern_precision_parse(const char *text, tern_precision *out) {
    if (!strcmp(text, "fp32")) *out = TERN_PRECISION_FP32;
    else if (!strcmp(text, "bf16")) *out = TERN_PRECISION_BF16;
    else return tern_errorf("unknown precision '%s' (expected fp32 or bf16)", text);
    return NULL;
}

const char *tern_precision_name(tern_precision p) {
    return p == TERN_PRECISION_BF16 ? "bf16" : "fp32";
}

size_t tern_gpt2_num_params(const tern_gpt2_config *cfg) {
    size_t n = 0;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        size_t len = gpt2_tensor_len(cfg, (gpt2_tensor)k);
        if (k == GPT2_WTE) len = (size_t)cfg->vocab_size * cfg->n_embd; /* without padding */
        n += gpt2_is_layer_kind((gpt2_tensor)k) ? len * (size_t)cfg->n_layer : len;
    }
    return n;
}

/* Two-dimensional tensors (matrices and embeddings) are the ones decayed when decay_all is
 * off, as in GPT-2's usual recipe. */
static bool is_matrix(gpt2_tensor kind) {
    return kind == GPT2_WTE || kind == GPT2_WPE || kind == GPT2_QKVW || kind == GPT2_ATTPROJW ||
           kind == GPT2_FCW || kind == GPT2_FCPROJW;
}

/* Every parameter tensor for the flat state, in the layout's order: its place, the elements
 * a file holds (wte without its padding rows), and whether it is decayed. */
static tern_error *describe_tensors(tern_gpt2 *m) {
    const tern_gpt2_config *cfg = &m->cfg;
    TERN_TRY(model_flat_tensors(&m->flat, 4 + (size_t)GPT2_LAYER_KINDS * cfg->n_layer));
    size_t n = 0;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++, n++) {
            gpt2_tensor_name((gpt2_tensor)k, l, m->flat.names[n], sizeof m->flat.names[n]);
            size_t len = gpt2_tensor_len(cfg, (gpt2_tensor)k);
            m->flat.tensors[n] = (model_tensor){
                .name = m->flat.names[n], .offset = gpt2_tensor_offset(cfg, (gpt2_tensor)k, l), .len = len,
                .count = k == GPT2_WTE ? (size_t)cfg->vocab_size * cfg->n_embd : len,
                .decayed = is_matrix((gpt2_tensor)k)};
        }
    }
    m->flat.n_tensors = n;
    return NULL;
}

/* Whether every layer norm's weights suit the backward from its output, xhat = (y - b) / w,
 * whose error is y's rounding times (|xhat| + |b| / |w|): every |w| >= 1/64 and |b| <= 8
 * |w|, so that it is within ~9 roundings of y. Weights that are not (a pruned channel's 0,
 * a bias that dwarfs its gain) keep the layer norms' inputs instead, as recompute_layernorm
 * does: the same memory, exact, ~1.6% of a step (docs/PERFORMANCE.md). Checked on the
 * weights the model opens with; training from them does not drive the gains to 0 (they are
 * not decayed, and their gradient keeps them where the loss wants them). */
static bool layernorms_suit_outputs(const tern_gpt2_config *cfg, const float *flat) {
    const gpt2_tensor kinds[3][2] = {{GPT2_LN1W, GPT2_LN1B}, {GPT2_LN2W, GPT2_LN2B}, {GPT2_LNFW, GPT2_LNFB}};
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < (k < 2 ? cfg->n_layer : 1); l++) {
            const float *w = flat + gpt2_tensor_offset(cfg, kinds[k][0], l);
            const float *b = flat + gpt2_tensor_offset(cfg, kinds[k][1], l);
            for (int j = 0; j < cfg->n_embd; j++)
                if (!(fabsf(w[j]) >= 1.0f / 64) || !(fabsf(b[j]) <= 8 * fabsf(w[j]))) return false;
        }
    return true;
}

/* A model on `backend` with its parameters uploaded from the host array `flat`. */
static tern_error *open_with(const char *backend, const tern_gpt2_config *cfg,
                             tern_precision precision, const float *flat, tern_gpt2 **out) {
    tern_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return tern_errorf("out of memory");
    const char *options = NULL;
    tern_error *err = find_instance(backend, &m->impl, &options);
    if (!err && options && !(m->options = strdup(options))) err = tern_errorf("out of memory");
    if (err) {
        free(m);
        return err;
    }
    m->backend = m->impl->handler;
    m->cfg = *cfg;
    m->Vp = gpt2_padded_vocab(cfg->vocab_size);
    m->precision = precision;
    m->ln_inputs_kept = !layernorms_suit_outputs(cfg, flat);
    model_flat_init(&m->flat, m->impl->flat, precision, gpt2_flat_len(cfg));
    if (!(err = describe_tensors(m)) && !(err = m->impl->open(m, flat))) {
        *out = m;
        return NULL;
    }
    tern_gpt2_free(m);
    return tern_error_wrap(err, "%s backend", backend);
}

/* Finds parameter `name` in either key layout: save_pretrained's ("transformer." prefix) or
 * the hub's (none). */
static const tern_tensor_info *find_param(const tern_safetensors *f, const char *name) {
    char prefixed[128];
    snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
    const tern_tensor_info *t = tern_safetensors_find(f, prefixed);
    return t ? t : tern_safetensors_find(f, name);
}

/* The layer index of a tensor named "[transformer.]h.<l>.<rest>", or -1 for other names. */
static long layer_of(const char *name) {
    if (!strncmp(name, "transformer.", 12)) name += 12;
    if (name[0] != 'h' || name[1] != '.' || name[2] < '0' || name[2] > '9') return -1;
    long l = 0;
    const char *p = name + 2;
    for (; *p >= '0' && *p <= '9' && l < 1L << 30; p++)
        l = l * 10 + (*p - '0');
    return *p == '.' ? l : -1;
}

/* A config naming fewer layers than the file holds would drop the rest without a word. */
static tern_error *check_layer_count(const tern_safetensors *f, const char *path, int n_layer) {
    long most = -1;
    for (size_t i = 0; i < tern_safetensors_count(f); i++) {
        long l = layer_of(tern_safetensors_at(f, i)->name);
        if (l > most) most = l;
    }
    if (most >= n_layer)
        return tern_errorf("%s holds %ld layers but config.json names %d: the config does not "
                           "match these weights", path, most + 1, n_layer);
    return NULL;
}

/* Reads every parameter of `cfg` from the safetensors file into the flat host array; each
 * must be finite. */
static tern_error *read_weights(const char *path, const tern_gpt2_config *cfg, float *flat) {
    tern_safetensors *f = NULL;
    TERN_TRY(tern_safetensors_open(path, &f));
    tern_error *err = check_layer_count(f, path, cfg->n_layer);
    char name[96];
    for (int k = 0; k < GPT2_TENSOR_KINDS && !err; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers && !err; l++) {
            gpt2_tensor_name((gpt2_tensor)k, l, name, sizeof name);
            const tern_tensor_info *t = find_param(f, name);
            size_t rows, cols;
            gpt2_tensor_shape(cfg, (gpt2_tensor)k, &rows, &cols);
            if (k == GPT2_WTE) rows = (size_t)cfg->vocab_size; /* stored unpadded */
            if (!t) {
                err = tern_errorf("%s: tensor %s is missing", path, name);
            } else if (!t->supported || !tern_dtype_is_float(t->dtype)) {
                err = tern_errorf("%s: tensor %s has dtype %s; expected F32, F16 or BF16", path,
                                  t->name, t->dtype_name);
            } else if (cols ? (t->ndim != 2 || t->shape[0] != (int64_t)rows ||
                               t->shape[1] != (int64_t)cols)
                            : (t->ndim != 1 || t->shape[0] != (int64_t)rows)) {
                err = tern_errorf("%s: tensor %s has the wrong shape for this config (expected "
                                  "[%zu%s%.0zu])", path, t->name, rows, cols ? ", " : "", cols);
            } else {
                float *dst = flat + gpt2_tensor_offset(cfg, (gpt2_tensor)k, l);
                err = tern_tensor_convert(t, TERN_F32, dst);
                for (size_t i = 0; !err && i < t->count; i++)
                    if (!isfinite(dst[i]))
                        err = tern_errorf("%s: tensor %s holds a value that is not finite (%g at "
                                          "element %zu)", path, t->name, dst[i], i);
            }
        }
    }
    tern_safetensors_close(f);
    return err;
}

static char *join_path(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

tern_error *tern_gpt2_load(const char *backend, const char *dir, tern_precision precision,
                           tern_gpt2 **out) {
    *out = NULL;
    char *config_path = join_path(dir, "config.json");
    char *weights_path = join_path(dir, "model.safetensors");
    float *flat = NULL;
    tern_gpt2_config cfg;
    tern_error *err = NULL;
    if (!config_path || !weights_path) {
        err = tern_errorf("out of memory");
        goto done;
    }
    if ((err = tern_gpt2_config_read(config_path, &cfg))) goto done;
    size_t n = gpt2_flat_len(&cfg);
    flat = calloc(n, sizeof *flat); /* zero: the padding rows and gaps stay zero */
    if (!flat) {
        err = tern_errorf("out of memory for %zu parameters", n);
        goto done;
    }
    if ((err = read_weights(weights_path, &cfg, flat))) goto done;
    err = open_with(backend, &cfg, precision, flat, out);
done:
    free(flat);
    free(config_path);
    free(weights_path);
    return err;
}

/* A standard normal from two uniforms of the counter-based stream (Box-Muller). */
static float normal(uint64_t seed, uint64_t i) {
    float u1 = tern_uniform(seed, (uint32_t)(2 * i)), u2 = tern_uniform(seed, (uint32_t)(2 * i + 1));
    return sqrtf(-2.0f * logf(1.0f - u1)) * cosf(6.2831853f * u2);
}

tern_error *tern_gpt2_init(const char *backend, const tern_gpt2_config *cfg, uint64_t seed,
                           tern_precision precision, tern_gpt2 **out) {
    *out = NULL;
    size_t n = gpt2_flat_len(cfg);
    float *flat = calloc(n, sizeof *flat);
    if (!flat) return tern_errorf("out of memory for %zu parameters", n);
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)cfg->n_layer);
    uint64_t draw = 0; /* one stream over all tensors, in a fixed order */
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++) {
            float *t = flat + gpt2_tensor_offset(cfg, (gpt2_tensor)k, l);
            size_t len = gpt2_tensor_len(cfg, (gpt2_tensor)k);
            if (k == GPT2_WTE) len = (size_t)cfg->vocab_size * cfg->n_embd;
            switch (k) {
            case GPT2_LN1W: case GPT2_LN2W: case GPT2_LNFW:
                for (size_t i = 0; i < len; i++) t[i] = 1.0f;
                break;
            case GPT2_WTE: case GPT2_WPE: case GPT2_QKVW: case GPT2_FCW:
            case GPT2_ATTPROJW: case GPT2_FCPROJW: {
                float s = (k == GPT2_ATTPROJW || k == GPT2_FCPROJW) ? proj_std : std;
                #pragma omp parallel for
                for (size_t i = 0; i < len; i++) t[i] = s * normal(seed, draw + i);
                draw += len;
                break;
            }
            default: break; /* biases: zero */
            }
        }
    }
    tern_error *err = open_with(backend, cfg, precision, flat, out);
    free(flat);
    return err;
}

void tern_gpt2_free(tern_gpt2 *m) {
    if (!m) return;
    if (m->impl) m->impl->close(m);
    model_flat_free_tensors(&m->flat);
    free(m->device_name);
    free(m->options);
    free(m);
}

const tern_gpt2_config *tern_gpt2_get_config(const tern_gpt2 *m) { return &m->cfg; }
const char *tern_gpt2_backend(const tern_gpt2 *m) { return m->backend; }
const char *tern_gpt2_device_name(const tern_gpt2 *m) { return m->device_name; }
int tern_gpt2_step(const tern_gpt2 *m) { return m->flat.step; }

tern_error *tern_gpt2_sum_across_ranks(tern_gpt2 *m, float *value) {
    if (!m || !value) return tern_errorf("tern_gpt2_sum_across_ranks: no model or value");
    return m->flat.ops->sum_across_ranks(&m->flat, value);
}

/* Token ids come from outside (prompts, data files): checked here, once, for every handler. */
static tern_error *check_batch(const tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T) {
    return model_check_batch(m->cfg.max_seq, m->cfg.vocab_size, x, y, B, T);
}

tern_error *tern_gpt2_forward(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                              float *mean_loss) {
    TERN_TRY(check_batch(m, x, y, B, T));
    return m->impl->forward(m, x, y, B, T, 1.0f, false, mean_loss);
}

/* q8_0 weights are for decoding only: there is no gradient through them. */
static tern_error *refuse_q8_training(const tern_gpt2 *m) {
    if (!m->q8.len) return NULL;
    return tern_errorf("training with q8_0 weights is not supported (they are for decoding; load the "
                       "model without them to train)");
}

tern_error *tern_gpt2_quantize_q8(tern_gpt2 *m, bool lm_head) {
    if (!m) return tern_errorf("tern_gpt2_quantize_q8: no model");
    return m->impl->quantize_q8(m, lm_head);
}

tern_error *tern_gpt2_forward_backward(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B,
                                       int T, float loss_scale, float *mean_loss) {
    TERN_TRY(refuse_q8_training(m));
    if (!y) return tern_errorf("forward_backward needs targets");
    TERN_TRY(check_batch(m, x, y, B, T));
    /* With ranks, this rank's share of the global batch's mean: 1/world of its own mean (a
     * power of two for the usual world sizes, so the scaling itself is exact). */
    float loss = 0;
    TERN_TRY(m->impl->forward(m, x, y, B, T, model_flat_rank_loss_scale(&m->flat, loss_scale), true, &loss));
    TERN_TRY(model_flat_mean_across_ranks(&m->flat, &loss));
    if (mean_loss) *mean_loss = loss;
    return NULL;
}

tern_error *tern_gpt2_set_dist(tern_gpt2 *m, tern_dist *comm) { return model_flat_set_dist(&m->flat, comm); }

tern_error *tern_gpt2_shard_optimizer(tern_gpt2 *m) {
    bool moved = false;
    TERN_TRY(model_flat_shard_optimizer(&m->flat, &moved));
    if (moved) m->epoch++; /* the weights may have moved: replayable decode steps are captured anew */
    return NULL;
}

size_t tern_gpt2_optimizer_bytes(const tern_gpt2 *m) { return model_flat_optimizer_bytes(&m->flat); }

tern_error *tern_gpt2_zero_grad(tern_gpt2 *m) { return m->impl->zero_grad(m); }

tern_error *tern_gpt2_update(tern_gpt2 *m, const tern_gpt2_adamw *h, float *grad_norm) {
    TERN_TRY(refuse_q8_training(m));
    if (!(h->lr >= 0) || !(h->beta1 >= 0 && h->beta1 < 1) || !(h->beta2 >= 0 && h->beta2 < 1) ||
        !(h->eps > 0) || !(h->weight_decay >= 0))
        return tern_errorf("AdamW hyper-parameters out of range (lr %g, betas %g %g, eps %g, "
                           "weight decay %g)", h->lr, h->beta1, h->beta2, h->eps, h->weight_decay);
    return m->impl->update(m, h, grad_norm);
}

/* The flat-buffer place of parameter `name`, checking that `count` matches its size. */
static tern_error *locate(const tern_gpt2 *m, const char *name, size_t count, size_t *offset) {
    *offset = 0;
    gpt2_tensor kind;
    int layer;
    if (!gpt2_tensor_parse(&m->cfg, name, &kind, &layer))
        return tern_errorf("no parameter called '%s'", name);
    size_t len = gpt2_tensor_len(&m->cfg, kind);
    if (kind == GPT2_WTE) len = (size_t)m->cfg.vocab_size * m->cfg.n_embd;
    if (count != len) return tern_errorf("%s has %zu elements, not %zu", name, len, count);
    *offset = gpt2_tensor_offset(&m->cfg, kind, layer);
    return NULL;
}

tern_error *tern_gpt2_read_param(tern_gpt2 *m, const char *name, float *out, size_t count) {
    size_t offset;
    TERN_TRY(locate(m, name, count, &offset));
    return model_flat_read_params(&m->flat, offset, count, out);
}

tern_error *tern_gpt2_read_grad(tern_gpt2 *m, const char *name, float *out, size_t count) {
    size_t offset;
    TERN_TRY(locate(m, name, count, &offset));
    if (!m->flat.grads.len) return tern_errorf("no gradients yet: run forward_backward first");
    TERN_TRY(m->impl->settle_grads(m)); /* right after zero_grad: zeros */
    return m->flat.ops->read(&m->flat, m->flat.grads, offset, count, out);
}

tern_error *tern_gpt2_read_logits(tern_gpt2 *m, int row, int rows, float *out) {
    const gpt2_acts *a = &m->acts;
    int BT = a->B * a->T, V = m->cfg.vocab_size;
    if (!a->layers) return tern_errorf("no logits yet: run a forward pass first");
    if (row < 0 || rows < 0 || row + rows > BT)
        return tern_errorf("logit rows %d..%d are outside the %d rows of the last pass", row, row + rows, BT);
    if (rows && (row < a->logits_first || row + rows > a->logits_first + a->logits_kept))
        return tern_errorf("the last pass kept the logits of rows %d..%d only, not %d..%d (a "
                           "training pass keeps none; tern_gpt2_forward without targets keeps all)",
                           a->logits_first, a->logits_first + a->logits_kept, row, row + rows);
    for (int r = 0; r < rows; r++)
        TERN_TRY(m->flat.ops->read(&m->flat, a->logits, (size_t)(row - a->logits_first + r) * m->Vp,
                                   (size_t)V, out + (size_t)r * V));
    return NULL;
}

tern_error *tern_gpt2_set_memory(tern_gpt2 *m, const tern_gpt2_memory *memory) {
    if (!memory) return tern_errorf("set_memory: no settings given");
    if (memory->logit_rows < 0)
        return tern_errorf("set_memory: logit_rows %d is negative (0 chooses)", memory->logit_rows);
    m->memory = *memory; /* the next pass lays its activations out anew (ensure_acts) */
    return NULL;
}

tern_error *tern_gpt2_read_losses(tern_gpt2 *m, float *out) {
    const gpt2_acts *a = &m->acts;
    if (!a->layers) return tern_errorf("no losses yet: run a forward pass with targets first");
    return m->flat.ops->read(&m->flat, a->losses, 0, (size_t)a->B * a->T, out);
}

tern_error *tern_gpt2_generate(tern_gpt2 *m, const int32_t *prompt, int B, int T0, int n_new,
                               const tern_gpt2_sampling *sampling, tern_gpt2_on_token on_token,
                               void *user) {
    if (n_new < 0) return tern_errorf("cannot generate %d tokens", n_new);
    TERN_TRY(check_batch(m, prompt, NULL, B, T0));
    if ((long)T0 + n_new > m->cfg.max_seq)
        return tern_errorf("a prompt of %d tokens plus %d new ones exceeds the model's context "
                           "of %d tokens", T0, n_new, m->cfg.max_seq);
    if (!(sampling->temperature >= 0) || !isfinite(sampling->temperature))
        return tern_errorf("temperature %g must be a finite number >= 0", sampling->temperature);
    if (n_new == 0) return NULL;
    return m->impl->generate(m, prompt, B, T0, n_new, sampling, on_token, user, NULL);
}

tern_error *tern_gpt2_prefill_logits(tern_gpt2 *m, const int32_t *prompt, int B, int T0,
                                     float *out) {
    TERN_TRY(check_batch(m, prompt, NULL, B, T0));
    tern_gpt2_sampling greedy = {0};
    return m->impl->generate(m, prompt, B, T0, 0, &greedy, NULL, NULL, out);
}
