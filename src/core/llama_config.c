/* Reading, checking and writing the Llama family's config.json (see tern/llama_config.h). */
#include "tern/llama_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_json.h"
#include "core/display.h"
#include "tern/file.h"

const char *tern_llama_family_name(tern_llama_family f) {
    return f == TERN_LLAMA_FAMILY_QWEN2 ? "qwen2" : "llama";
}

/* An int field (the limits fit int). */
static tern_error *read_int(const cJSON *obj, const char *source, const char *key, int lo, int hi,
                            bool required, int *out, bool *present) {
    long long v = 0;
    bool here = false;
    TERN_TRY(tern_cj_int(obj, source, key, key, lo, hi, required, true, &v, &here));
    if (here) *out = (int)v;
    if (present) *present = here;
    return NULL;
}

/* rope_scaling (or transformers 5's rope_parameters): null, "default" or "llama3". `field`
 * names the object in messages. */
static tern_error *read_rope_scaling(const cJSON *item, const char *source, const char *field,
                                     tern_llama_rope_scaling *out) {
    memset(out, 0, sizeof *out);
    if (!item || cJSON_IsNull(item)) return NULL;
    char buf[96];
    if (!cJSON_IsObject(item))
        return tern_errorf("%s: %s: must be null or an object, got %s", source, field,
                           tern_cj_describe(item, buf, sizeof buf, false));
    const cJSON *rope_type, *old_type;
    TERN_TRY(tern_cj_find(item, source, "rope_type", &rope_type));
    TERN_TRY(tern_cj_find(item, source, "type", &old_type));
    if (rope_type && !cJSON_IsString(rope_type))
        return tern_errorf("%s: %s.rope_type: must be a string, got %s", source, field,
                           tern_cj_describe(rope_type, buf, sizeof buf, false));
    if (old_type && !cJSON_IsString(old_type))
        return tern_errorf("%s: %s.type: must be a string, got %s", source, field,
                           tern_cj_describe(old_type, buf, sizeof buf, false));
    if (rope_type && old_type && strcmp(rope_type->valuestring, old_type->valuestring) != 0)
        return tern_errorf("%s: %s: rope_type and type disagree", source, field);
    const cJSON *type = rope_type ? rope_type : old_type;
    if (!type) return tern_errorf("%s: %s.rope_type: missing", source, field);
    if (strcmp(type->valuestring, "default") == 0) return NULL;
    if (strcmp(type->valuestring, "llama3") != 0)
        return tern_errorf("%s: %s.rope_type: %s is not supported (tern reads \"default\" and "
                           "\"llama3\")",
                           source, field, tern_cj_describe(type, buf, sizeof buf, true));
    char name[64];
    out->llama3 = true;
    snprintf(name, sizeof name, "%s.factor", field);
    TERN_TRY(tern_cj_number(item, source, "factor", name, 0, true, 1e6, true, &out->factor, NULL));
    snprintf(name, sizeof name, "%s.low_freq_factor", field);
    TERN_TRY(tern_cj_number(item, source, "low_freq_factor", name, 0, true, 1e6, true,
                            &out->low_freq_factor, NULL));
    snprintf(name, sizeof name, "%s.high_freq_factor", field);
    TERN_TRY(tern_cj_number(item, source, "high_freq_factor", name, 0, true, 1e6, true,
                            &out->high_freq_factor, NULL));
    if (!(out->high_freq_factor > out->low_freq_factor))
        return tern_errorf("%s: %s.high_freq_factor: %.17g must exceed low_freq_factor (%.17g)",
                           source, field, out->high_freq_factor, out->low_freq_factor);
    snprintf(name, sizeof name, "%s.original_max_position_embeddings", field);
    long long L = 0;
    TERN_TRY(tern_cj_int(item, source, "original_max_position_embeddings", name, 1,
                         TERN_LLAMA_MAX_SEQ, true, false, &L, NULL));
    out->original_max_position = (int)L;
    return NULL;
}

/* rope_theta and rope_scaling, or transformers 5's rope_parameters holding both. */
static tern_error *read_rope(const cJSON *root, const char *source, tern_llama_config *cfg) {
    const cJSON *params, *scaling;
    TERN_TRY(tern_cj_find(root, source, "rope_parameters", &params));
    TERN_TRY(tern_cj_find(root, source, "rope_scaling", &scaling));
    cfg->rope_theta = 10000.0;
    if (params && !cJSON_IsNull(params)) {
        if (scaling && !cJSON_IsNull(scaling))
            return tern_errorf("%s: rope_scaling: given with rope_parameters (one of them, please)",
                               source);
        TERN_TRY(read_rope_scaling(params, source, "rope_parameters", &cfg->rope_scaling));
        TERN_TRY(tern_cj_number(params, source, "rope_theta", "rope_parameters.rope_theta", 1,
                                true, 1e12, false, &cfg->rope_theta, NULL));
    } else {
        TERN_TRY(read_rope_scaling(scaling, source, "rope_scaling", &cfg->rope_scaling));
    }
    TERN_TRY(tern_cj_number(root, source, "rope_theta", "rope_theta", 1, true, 1e12, false,
                            &cfg->rope_theta, NULL));
    double partial = 1;
    TERN_TRY(tern_cj_number(root, source, "partial_rotary_factor", "partial_rotary_factor", 0,
                            true, 1, false, &partial, NULL));
    if (partial != 1)
        return tern_errorf("%s: partial_rotary_factor: %.17g is not supported (tern rotates the "
                           "whole head)",
                           source, partial);
    return NULL;
}

/* One token id of eos_token_id, in [0, vocab_size). */
static tern_error *eos_id(const cJSON *item, const char *source, int vocab, int *out) {
    char buf[40];
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!cJSON_IsNumber(item) || v != floor(v) || v < 0 || v >= vocab)
        return tern_errorf("%s: eos_token_id: must be integers in [0, %d], got %s", source,
                           vocab - 1, tern_cj_describe(item, buf, sizeof buf, false));
    *out = (int)v;
    return NULL;
}

/* bos_token_id (an integer or null) and eos_token_id (an integer, a list or null). */
static tern_error *read_special_ids(const cJSON *root, const char *source, tern_llama_config *cfg) {
    long long v = -1;
    TERN_TRY(tern_cj_int(root, source, "bos_token_id", "bos_token_id", 0, cfg->vocab_size - 1,
                         false, true, &v, NULL));
    cfg->bos_token_id = (int)v;
    const cJSON *eos;
    cfg->n_eos = 0;
    TERN_TRY(tern_cj_find(root, source, "eos_token_id", &eos));
    if (!eos || cJSON_IsNull(eos)) return NULL;
    if (!cJSON_IsArray(eos)) {
        cfg->n_eos = 1;
        return eos_id(eos, source, cfg->vocab_size, &cfg->eos_token_ids[0]);
    }
    for (const cJSON *item = eos->child; item; item = item->next) {
        if (cfg->n_eos == TERN_LLAMA_MAX_EOS)
            return tern_errorf("%s: eos_token_id: more than %d ids", source, TERN_LLAMA_MAX_EOS);
        TERN_TRY(eos_id(item, source, cfg->vocab_size, &cfg->eos_token_ids[cfg->n_eos]));
        cfg->n_eos++;
    }
    return NULL;
}

/* What tern does not implement: sliding-window attention and mixtures of experts. */
static tern_error *refuse_unsupported(const cJSON *root, const char *source) {
    bool sliding = false;
    TERN_TRY(tern_cj_bool(root, source, "use_sliding_window", &sliding));
    if (sliding)
        return tern_errorf("%s: use_sliding_window: true is not supported (tern's attention is "
                           "full causal attention)",
                           source);
    const cJSON *types;
    char buf[96];
    TERN_TRY(tern_cj_find(root, source, "layer_types", &types));
    if (types && !cJSON_IsNull(types)) {
        if (!cJSON_IsArray(types))
            return tern_errorf("%s: layer_types: must be a list, got %s", source,
                               tern_cj_describe(types, buf, sizeof buf, false));
        int i = 0;
        for (const cJSON *t = types->child; t; t = t->next, i++)
            if (!cJSON_IsString(t) || strcmp(t->valuestring, "full_attention") != 0)
                return tern_errorf("%s: layer_types[%d]: %s is not supported (tern's attention is "
                                   "\"full_attention\")",
                                   source, i, tern_cj_describe(t, buf, sizeof buf, true));
    }
    static const char *const moe[] = {"num_experts", "num_local_experts", "num_experts_per_tok",
                                      "moe_intermediate_size", "shared_expert_intermediate_size"};
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        const cJSON *item;
        TERN_TRY(tern_cj_find(root, source, moe[i], &item));
        if (item && !cJSON_IsNull(item) && !(cJSON_IsNumber(item) && item->valuedouble == 0))
            return tern_errorf("%s: %s: mixtures of experts are not supported (got %s)", source,
                               moe[i], tern_cj_describe(item, buf, sizeof buf, false));
    }
    return NULL;
}

static tern_error *read_config(const cJSON *root, const char *source, tern_llama_config *cfg) {
    char quoted[96];
    const cJSON *item;

    TERN_TRY(tern_cj_find(root, source, "model_type", &item));
    if (!item) return tern_errorf("%s: model_type: missing", source);
    if (cJSON_IsString(item) && strcmp(item->valuestring, "llama") == 0)
        cfg->family = TERN_LLAMA_FAMILY_LLAMA;
    else if (cJSON_IsString(item) && strcmp(item->valuestring, "qwen2") == 0)
        cfg->family = TERN_LLAMA_FAMILY_QWEN2;
    else
        return tern_errorf("%s: model_type: must be \"llama\" or \"qwen2\", got %s", source,
                           tern_cj_describe(item, quoted, sizeof quoted, true));

    TERN_TRY(tern_cj_find(root, source, "hidden_act", &item));
    if (item && !(cJSON_IsString(item) && strcmp(item->valuestring, "silu") == 0))
        return tern_errorf("%s: hidden_act: must be \"silu\" (SwiGLU), got %s", source,
                           tern_cj_describe(item, quoted, sizeof quoted, true));

    TERN_TRY(read_int(root, source, "num_hidden_layers", 1, TERN_LLAMA_MAX_LAYER, true,
                      &cfg->n_layer, NULL));
    TERN_TRY(read_int(root, source, "hidden_size", 1, TERN_LLAMA_MAX_HIDDEN, true, &cfg->hidden,
                      NULL));
    TERN_TRY(read_int(root, source, "intermediate_size", 1, TERN_LLAMA_MAX_INTERMEDIATE, true,
                      &cfg->intermediate, NULL));
    TERN_TRY(read_int(root, source, "num_attention_heads", 1, TERN_LLAMA_MAX_HIDDEN, true,
                      &cfg->n_head, NULL));
    bool present;
    TERN_TRY(read_int(root, source, "num_key_value_heads", 1, TERN_LLAMA_MAX_HIDDEN, false,
                      &cfg->n_kv_head, &present));
    if (!present) cfg->n_kv_head = cfg->n_head; /* transformers' backward compatibility */
    if (cfg->n_head % cfg->n_kv_head != 0)
        return tern_errorf("%s: num_key_value_heads: %d does not divide num_attention_heads (%d)",
                           source, cfg->n_kv_head, cfg->n_head);
    TERN_TRY(read_int(root, source, "head_dim", 2, TERN_LLAMA_MAX_HEAD_DIM, false, &cfg->head_dim,
                      &present));
    if (!present) {
        if (cfg->hidden % cfg->n_head != 0)
            return tern_errorf("%s: num_attention_heads: %d heads do not divide hidden_size (%d) "
                               "and no head_dim is given",
                               source, cfg->n_head, cfg->hidden);
        cfg->head_dim = cfg->hidden / cfg->n_head;
    }
    if (cfg->head_dim % 2 != 0 || cfg->head_dim > TERN_LLAMA_MAX_HEAD_DIM)
        return tern_errorf("%s: head_dim: %d must be even and at most %d (rotary pairs)", source,
                           cfg->head_dim, TERN_LLAMA_MAX_HEAD_DIM);
    TERN_TRY(read_int(root, source, "vocab_size", 1, TERN_LLAMA_MAX_VOCAB, true, &cfg->vocab_size,
                      NULL));
    TERN_TRY(read_int(root, source, "max_position_embeddings", 1, TERN_LLAMA_MAX_SEQ, true,
                      &cfg->max_seq, NULL));

    double eps = 1e-6;
    TERN_TRY(tern_cj_number(root, source, "rms_norm_eps", "rms_norm_eps", 0, true, 1, false, &eps,
                            NULL));
    cfg->rms_eps = (float)eps;
    if (!(cfg->rms_eps > 0))
        return tern_errorf("%s: rms_norm_eps: %.17g is zero in float32", source, eps);
    TERN_TRY(read_rope(root, source, cfg));

    cfg->tie_word_embeddings = false;
    TERN_TRY(tern_cj_bool(root, source, "tie_word_embeddings", &cfg->tie_word_embeddings));
    if (cfg->family == TERN_LLAMA_FAMILY_LLAMA) {
        bool attention_bias = false, mlp_bias = false;
        TERN_TRY(tern_cj_bool(root, source, "attention_bias", &attention_bias));
        TERN_TRY(tern_cj_bool(root, source, "mlp_bias", &mlp_bias));
        cfg->qkv_bias = cfg->o_bias = attention_bias;
        cfg->mlp_bias = mlp_bias;
    } else {
        /* Qwen2Attention: q, k, v with bias=True, o_proj bias=False; Qwen2MLP bias=False.
         * transformers never reads attention_bias or mlp_bias for qwen2, nor does tern. */
        cfg->qkv_bias = true;
        cfg->o_bias = cfg->mlp_bias = false;
    }
    TERN_TRY(read_special_ids(root, source, cfg));
    return refuse_unsupported(root, source);
}

tern_error *tern_llama_config_parse(const char *json, size_t len, const char *source,
                                    tern_llama_config *out) {
    if (!source) source = "config";
    cJSON *root;
    TERN_TRY(tern_cj_parse(json, len, source, &root));
    tern_llama_config cfg;
    memset(&cfg, 0, sizeof cfg);
    tern_error *e = read_config(root, source, &cfg);
    cJSON_Delete(root);
    if (!e) *out = cfg;
    return e;
}

tern_error *tern_llama_config_read(const char *path, tern_llama_config *out) {
    cJSON *root;
    TERN_TRY(tern_cj_read(path, &root));
    tern_llama_config cfg;
    memset(&cfg, 0, sizeof cfg);
    tern_error *e = read_config(root, path, &cfg);
    cJSON_Delete(root);
    if (!e) *out = cfg;
    return e;
}

tern_error *tern_llama_config_validate(const tern_llama_config *c) {
    if (!c) return tern_errorf("no configuration given");
    const char *src = "Llama config";
    if (c->family != TERN_LLAMA_FAMILY_LLAMA && c->family != TERN_LLAMA_FAMILY_QWEN2)
        return tern_errorf("%s: model_type: unknown family %d", src, (int)c->family);
    struct {
        const char *name;
        int value, lo, hi;
    } fields[] = {
        {"num_hidden_layers", c->n_layer, 1, TERN_LLAMA_MAX_LAYER},
        {"hidden_size", c->hidden, 1, TERN_LLAMA_MAX_HIDDEN},
        {"intermediate_size", c->intermediate, 1, TERN_LLAMA_MAX_INTERMEDIATE},
        {"num_attention_heads", c->n_head, 1, TERN_LLAMA_MAX_HIDDEN},
        {"num_key_value_heads", c->n_kv_head, 1, TERN_LLAMA_MAX_HIDDEN},
        {"head_dim", c->head_dim, 2, TERN_LLAMA_MAX_HEAD_DIM},
        {"vocab_size", c->vocab_size, 1, TERN_LLAMA_MAX_VOCAB},
        {"max_position_embeddings", c->max_seq, 1, TERN_LLAMA_MAX_SEQ},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value < fields[i].lo || fields[i].value > fields[i].hi)
            return tern_errorf("%s: %s: must be in [%d, %d], got %d", src, fields[i].name,
                               fields[i].lo, fields[i].hi, fields[i].value);
    if (c->n_head % c->n_kv_head != 0)
        return tern_errorf("%s: num_key_value_heads: %d does not divide num_attention_heads (%d)",
                           src, c->n_kv_head, c->n_head);
    if (c->head_dim % 2 != 0) return tern_errorf("%s: head_dim: %d is odd", src, c->head_dim);
    if (!(c->rms_eps > 0 && c->rms_eps <= 1))
        return tern_errorf("%s: rms_norm_eps: must be in (0, 1], got %g", src, (double)c->rms_eps);
    if (!(c->rope_theta > 1 && c->rope_theta <= 1e12))
        return tern_errorf("%s: rope_theta: must be in (1, 1e12], got %g", src, c->rope_theta);
    const tern_llama_rope_scaling *s = &c->rope_scaling;
    if (s->llama3 && !(s->factor > 0 && s->factor <= 1e6 && s->low_freq_factor > 0 &&
                       s->high_freq_factor > s->low_freq_factor && s->high_freq_factor <= 1e6 &&
                       s->original_max_position >= 1 &&
                       s->original_max_position <= TERN_LLAMA_MAX_SEQ))
        return tern_errorf("%s: rope_scaling: llama3 needs factor > 0, 0 < low_freq_factor < "
                           "high_freq_factor and original_max_position_embeddings >= 1",
                           src);
    if (c->family == TERN_LLAMA_FAMILY_QWEN2 && !(c->qkv_bias && !c->o_bias && !c->mlp_bias))
        return tern_errorf("%s: qwen2 has q, k and v biases and no others", src);
    if (c->family == TERN_LLAMA_FAMILY_LLAMA && c->qkv_bias != c->o_bias)
        return tern_errorf("%s: attention_bias: llama gives q, k, v and o_proj biases together",
                           src);
    if (c->bos_token_id < -1 || c->bos_token_id >= c->vocab_size)
        return tern_errorf("%s: bos_token_id: %d is not in [0, %d) (or -1: none)", src,
                           c->bos_token_id, c->vocab_size);
    if (c->n_eos < 0 || c->n_eos > TERN_LLAMA_MAX_EOS)
        return tern_errorf("%s: eos_token_id: %d ids (at most %d)", src, c->n_eos,
                           TERN_LLAMA_MAX_EOS);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] < 0 || c->eos_token_ids[i] >= c->vocab_size)
            return tern_errorf("%s: eos_token_id: %d is not in [0, %d)", src, c->eos_token_ids[i],
                               c->vocab_size);
    return NULL;
}

int64_t tern_llama_config_param_count(const tern_llama_config *c) {
    int64_t C = c->hidden, I = c->intermediate, V = c->vocab_size;
    int64_t q = (int64_t)c->n_head * c->head_dim, kv = (int64_t)c->n_kv_head * c->head_dim;
    int64_t attn = C * q + 2 * C * kv + q * C;
    if (c->qkv_bias) attn += q + 2 * kv;
    if (c->o_bias) attn += C;
    int64_t mlp = 3 * C * I + (c->mlp_bias ? 2 * I + C : 0);
    int64_t layer = attn + mlp + 2 * C; /* two RMSNorm weights */
    return V * C + c->n_layer * layer + C + (c->tie_word_embeddings ? 0 : V * C);
}

tern_error *tern_llama_rope_inv_freq(const tern_llama_config *c, double *inv_freq, size_t n) {
    TERN_TRY(tern_llama_config_validate(c));
    size_t half = (size_t)c->head_dim / 2;
    if (n < half)
        return tern_errorf("rope inv_freq: room for %zu values, head_dim %d needs %zu", n,
                           c->head_dim, half);
    const tern_llama_rope_scaling *s = &c->rope_scaling;
    const double pi = 3.14159265358979323846;
    double L = s->original_max_position;
    double low_wavelen = L / s->low_freq_factor, high_wavelen = L / s->high_freq_factor;
    for (size_t i = 0; i < half; i++) {
        double f = 1.0 / pow(c->rope_theta, (double)(2 * i) / (double)c->head_dim);
        if (s->llama3) {
            double wavelen = 2 * pi / f;
            if (wavelen > low_wavelen) {
                f = f / s->factor; /* long wavelengths: interpolated */
            } else if (!(wavelen < high_wavelen)) {
                /* between the two: a smooth blend of interpolated and original */
                double smooth = (L / wavelen - s->low_freq_factor) /
                                (s->high_freq_factor - s->low_freq_factor);
                f = (1 - smooth) * f / s->factor + smooth * f;
            } /* short wavelengths: unchanged */
        }
        inv_freq[i] = f;
    }
    return NULL;
}

/* ---- writing ---- */

typedef struct text {
    char *s;
    size_t len, cap;
    bool failed;
} text;

static void put(text *t, const char *fmt, ...) TERN_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
    if (t->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = true;
        return;
    }
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = true;
            return;
        }
        t->s = s, t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

/* The shortest decimal that reads back as v, with a decimal point or exponent so that Python
 * reads a float ("10000.0", "1e-05"). */
static void format_double(double v, bool as_float32, char *buf, size_t size) {
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        double back = strtod(buf, NULL);
        if (as_float32 ? (float)back == (float)v : back == v) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", size - strlen(buf) - 1);
}

tern_error *tern_llama_config_format(const tern_llama_config *c, char **json, size_t *len) {
    *json = NULL;
    *len = 0;
    TERN_TRY(tern_llama_config_validate(c));
    bool qwen = c->family == TERN_LLAMA_FAMILY_QWEN2;
    char num[40];
    text t = {0};
    put(&t, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n",
        qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
    if (!qwen) put(&t, "  \"attention_bias\": %s,\n", c->qkv_bias ? "true" : "false");
    put(&t, "  \"attention_dropout\": 0.0,\n");
    if (c->bos_token_id >= 0)
        put(&t, "  \"bos_token_id\": %d,\n", c->bos_token_id);
    else
        put(&t, "  \"bos_token_id\": null,\n");
    if (c->n_eos == 0) {
        put(&t, "  \"eos_token_id\": null,\n");
    } else if (c->n_eos == 1) {
        put(&t, "  \"eos_token_id\": %d,\n", c->eos_token_ids[0]);
    } else {
        put(&t, "  \"eos_token_id\": [");
        for (int i = 0; i < c->n_eos; i++) put(&t, "%s%d", i ? ", " : "", c->eos_token_ids[i]);
        put(&t, "],\n");
    }
    put(&t, "  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n  \"hidden_size\": %d,\n",
        c->head_dim, c->hidden);
    put(&t, "  \"initializer_range\": 0.02,\n  \"intermediate_size\": %d,\n", c->intermediate);
    put(&t, "  \"max_position_embeddings\": %d,\n", c->max_seq);
    if (!qwen) put(&t, "  \"mlp_bias\": %s,\n", c->mlp_bias ? "true" : "false");
    put(&t, "  \"model_type\": \"%s\",\n", tern_llama_family_name(c->family));
    put(&t, "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n", c->n_head,
        c->n_layer);
    put(&t, "  \"num_key_value_heads\": %d,\n", c->n_kv_head);
    format_double(c->rms_eps, true, num, sizeof num);
    put(&t, "  \"rms_norm_eps\": %s,\n", num);
    const tern_llama_rope_scaling *s = &c->rope_scaling;
    if (s->llama3) {
        put(&t, "  \"rope_scaling\": {\n");
        format_double(s->factor, false, num, sizeof num);
        put(&t, "    \"factor\": %s,\n", num);
        format_double(s->high_freq_factor, false, num, sizeof num);
        put(&t, "    \"high_freq_factor\": %s,\n", num);
        format_double(s->low_freq_factor, false, num, sizeof num);
        put(&t, "    \"low_freq_factor\": %s,\n", num);
        put(&t, "    \"original_max_position_embeddings\": %d,\n", s->original_max_position);
        put(&t, "    \"rope_type\": \"llama3\"\n  },\n");
    } else {
        put(&t, "  \"rope_scaling\": null,\n");
    }
    format_double(c->rope_theta, false, num, sizeof num);
    put(&t, "  \"rope_theta\": %s,\n", num);
    put(&t, "  \"tie_word_embeddings\": %s,\n", c->tie_word_embeddings ? "true" : "false");
    put(&t, "  \"use_cache\": true,\n");
    if (qwen) put(&t, "  \"use_sliding_window\": false,\n");
    put(&t, "  \"vocab_size\": %d\n}\n", c->vocab_size);
    if (t.failed) {
        free(t.s);
        return tern_errorf("out of memory formatting config.json");
    }
    *json = t.s;
    *len = t.len;
    return NULL;
}

tern_error *tern_llama_config_write(const char *path, const tern_llama_config *cfg) {
    char *json;
    size_t len;
    TERN_TRY(tern_error_wrap(tern_llama_config_format(cfg, &json, &len), "writing %s", path));
    tern_error *e = tern_write_file(path, json, len);
    free(json);
    return e;
}

/* ---- configurations by name ---- */

tern_error *tern_llama_config_named(const char *name, tern_llama_config *out) {
    static const struct {
        const char *name;
        tern_llama_family family;
        int n_layer, hidden, intermediate, n_head, n_kv_head, head_dim, vocab, max_seq;
        float eps;
        double theta;
        bool llama3, tied;
        int bos, eos;
    } named[] = {
        /* HuggingFaceTB/SmolLM2-135M */
        {"smollm2-135m", TERN_LLAMA_FAMILY_LLAMA, 30, 576, 1536, 9, 3, 64, 49152, 8192, 1e-5f,
         100000.0, false, true, 0, 0},
        /* Qwen/Qwen2.5-0.5B */
        {"qwen2.5-0.5b", TERN_LLAMA_FAMILY_QWEN2, 24, 896, 4864, 14, 2, 64, 151936, 32768, 1e-6f,
         1000000.0, false, true, 151643, 151643},
        /* meta-llama/Llama-3.2-1B */
        {"llama-3.2-1b", TERN_LLAMA_FAMILY_LLAMA, 16, 2048, 8192, 32, 8, 64, 128256, 131072,
         1e-5f, 500000.0, true, true, 128000, 128001},
        /* the fixture llama-tiny-a */
        {"tiny", TERN_LLAMA_FAMILY_LLAMA, 2, 64, 176, 4, 2, 16, 4096, 128, 1e-5f, 10000.0, false,
         true, 0, 1},
    };
    for (size_t i = 0; name && i < sizeof named / sizeof named[0]; i++) {
        if (strcmp(name, named[i].name) != 0) continue;
        tern_llama_config c;
        memset(&c, 0, sizeof c);
        c.family = named[i].family;
        c.n_layer = named[i].n_layer;
        c.hidden = named[i].hidden;
        c.intermediate = named[i].intermediate;
        c.n_head = named[i].n_head;
        c.n_kv_head = named[i].n_kv_head;
        c.head_dim = named[i].head_dim;
        c.vocab_size = named[i].vocab;
        c.max_seq = named[i].max_seq;
        c.rms_eps = named[i].eps;
        c.rope_theta = named[i].theta;
        if (named[i].llama3) {
            tern_llama_rope_scaling s = {true, 32.0, 1.0, 4.0, 8192};
            c.rope_scaling = s;
        }
        c.tie_word_embeddings = named[i].tied;
        c.qkv_bias = c.family == TERN_LLAMA_FAMILY_QWEN2;
        c.bos_token_id = named[i].bos;
        c.n_eos = 1;
        c.eos_token_ids[0] = named[i].eos;
        *out = c;
        return NULL;
    }
    return tern_errorf("unknown Llama-family configuration '%s' (known: smollm2-135m, "
                       "qwen2.5-0.5b, llama-3.2-1b, tiny)",
                       name ? tern_display_of(name).s : "(none)");
}
