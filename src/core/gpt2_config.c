/* Reading, checking and writing GPT-2's config.json (see tern/gpt2_config.h). */
#include "tern/gpt2_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_json.h"
#include "core/display.h"
#include "tern/file.h"

/* config.json files are a few hundred bytes; anything this big is not one. */
#define MAX_CONFIG_BYTES (16u << 20)

/* The key `key` of object `root`, or NULL when absent; a key given twice is an error. cJSON's
 * own lookup is case-insensitive and takes the first copy, so it is not used. */
static tern_error *find_key(const cJSON *root, const char *source, const char *key,
                            const cJSON **out) {
    *out = NULL;
    for (const cJSON *item = root->child; item; item = item->next) {
        if (strcmp(item->string, key) != 0) continue;
        if (*out) return tern_errorf("%s: %s: given twice", source, key);
        *out = item;
    }
    return NULL;
}

static const char *describe(const cJSON *item, char *buf, size_t size) {
    return tern_cj_describe(item, buf, size, false);
}

/* An integer field in [lo, hi]. *present says whether it was there; when it was not and
 * `required` is set, that is an error. */
static tern_error *read_int(const cJSON *root, const char *source, const char *key, int lo, int hi,
                            bool required, int *out, bool *present) {
    const cJSON *item;
    TERN_TRY(find_key(root, source, key, &item));
    if (present) *present = item != NULL;
    if (!item) return required ? tern_errorf("%s: %s: missing", source, key) : NULL;
    char buf[40];
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!cJSON_IsNumber(item) || v != floor(v) || v < lo || v > hi)
        return tern_errorf("%s: %s: must be an integer in [%d, %d], got %s", source, key, lo, hi,
                           describe(item, buf, sizeof buf));
    *out = (int)v;
    return NULL;
}

/* A boolean field that, when present, must equal `want`. */
static tern_error *require_bool(const cJSON *root, const char *source, const char *key, bool want,
                                const char *why) {
    const cJSON *item;
    TERN_TRY(find_key(root, source, key, &item));
    if (!item) return NULL;
    char buf[40];
    if (!cJSON_IsBool(item))
        return tern_errorf("%s: %s: must be true or false, got %s", source, key,
                           describe(item, buf, sizeof buf));
    if ((bool)cJSON_IsTrue(item) != want)
        return tern_errorf("%s: %s: %s is not supported (%s)", source, key, want ? "false" : "true",
                           why);
    return NULL;
}

static tern_error *read_config(const cJSON *root, const char *source, tern_gpt2_config *cfg) {
    char buf[40], quoted[96];
    const cJSON *item;

    TERN_TRY(find_key(root, source, "model_type", &item));
    if (item && !(cJSON_IsString(item) && strcmp(item->valuestring, "gpt2") == 0))
        return tern_errorf("%s: model_type: must be \"gpt2\", got %s", source,
                           tern_cj_describe(item, quoted, sizeof quoted, true));

    TERN_TRY(read_int(root, source, "n_layer", 1, TERN_GPT2_MAX_LAYER, true, &cfg->n_layer, NULL));
    TERN_TRY(read_int(root, source, "n_embd", 1, TERN_GPT2_MAX_EMBD, true, &cfg->n_embd, NULL));
    TERN_TRY(read_int(root, source, "n_head", 1, TERN_GPT2_MAX_EMBD, true, &cfg->n_head, NULL));
    if (cfg->n_embd % cfg->n_head != 0)
        return tern_errorf("%s: n_head: %d heads do not divide n_embd (%d channels)", source,
                           cfg->n_head, cfg->n_embd);
    TERN_TRY(
        read_int(root, source, "vocab_size", 1, TERN_GPT2_MAX_VOCAB, true, &cfg->vocab_size, NULL));
    /* n_ctx is the older name of n_positions; Hugging Face's model uses n_positions alone. */
    bool present;
    TERN_TRY(read_int(root, source, "n_positions", 1, TERN_GPT2_MAX_SEQ, false, &cfg->max_seq,
                      &present));
    if (!present) {
        TERN_TRY(
            read_int(root, source, "n_ctx", 1, TERN_GPT2_MAX_SEQ, false, &cfg->max_seq, &present));
        if (!present) return tern_errorf("%s: n_positions: missing (and no n_ctx)", source);
    }

    cfg->ln_eps = 1e-5f;
    TERN_TRY(find_key(root, source, "layer_norm_epsilon", &item));
    if (item) {
        double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
        if (!cJSON_IsNumber(item) || !(v > 0 && v <= 1) || !((float)v > 0))
            return tern_errorf("%s: layer_norm_epsilon: must be a number in (0, 1], got %s", source,
                               describe(item, buf, sizeof buf));
        cfg->ln_eps = (float)v;
    }

    TERN_TRY(find_key(root, source, "activation_function", &item));
    if (item && !(cJSON_IsString(item) && (strcmp(item->valuestring, "gelu_new") == 0 ||
                                           strcmp(item->valuestring, "gelu_pytorch_tanh") == 0)))
        return tern_errorf("%s: activation_function: must be \"gelu_new\" or "
                           "\"gelu_pytorch_tanh\" (GPT-2's tanh GELU), got %s",
                           source, tern_cj_describe(item, quoted, sizeof quoted, true));

    TERN_TRY(find_key(root, source, "n_inner", &item));
    if (item && !cJSON_IsNull(item) &&
        !(cJSON_IsNumber(item) && item->valuedouble == 4.0 * cfg->n_embd))
        return tern_errorf("%s: n_inner: must be null or 4 * n_embd (%d), got %s", source,
                           4 * cfg->n_embd, describe(item, buf, sizeof buf));

    TERN_TRY(require_bool(root, source, "tie_word_embeddings", true,
                          "tern ties the output layer to the token embedding"));
    TERN_TRY(require_bool(root, source, "scale_attn_weights", true,
                          "tern scales attention by 1/sqrt(head size)"));
    TERN_TRY(require_bool(root, source, "scale_attn_by_inverse_layer_idx", false,
                          "tern's attention does not scale by layer"));
    TERN_TRY(require_bool(root, source, "add_cross_attention", false,
                          "tern's GPT-2 has no cross-attention"));
    return NULL;
}

tern_error *tern_gpt2_config_parse(const char *json, size_t len, const char *source,
                                   tern_gpt2_config *out) {
    if (!source) source = "config";
    if (!json) return tern_errorf("%s: no text", source);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return tern_errorf("%s: not valid JSON (near byte %zu)", source, at);
    }
    tern_error *e = NULL;
    for (const char *p = end; p < json + len && !e; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            e = tern_errorf("%s: text after the JSON object (at byte %zu)", source,
                            (size_t)(p - json));
    if (!e && !cJSON_IsObject(root)) e = tern_errorf("%s: not a JSON object", source);
    tern_gpt2_config cfg = {0};
    if (!e) e = read_config(root, source, &cfg);
    cJSON_Delete(root);
    if (!e) *out = cfg;
    return e;
}

tern_error *tern_gpt2_config_read(const char *path, tern_gpt2_config *out) {
    char *text;
    size_t len;
    TERN_TRY(tern_read_file(path, &text, &len));
    tern_error *e;
    if (len > MAX_CONFIG_BYTES)
        e = tern_errorf("%s: %zu bytes is too large for a config.json", path, len);
    else
        e = tern_gpt2_config_parse(text, len, path, out);
    free(text);
    return e;
}

tern_error *tern_gpt2_config_validate(const tern_gpt2_config *c) {
    if (!c) return tern_errorf("no configuration given");
    struct {
        const char *name;
        int value, hi;
    } fields[] = {
        {"n_layer", c->n_layer, TERN_GPT2_MAX_LAYER},
        {"n_embd", c->n_embd, TERN_GPT2_MAX_EMBD},
        {"n_head", c->n_head, TERN_GPT2_MAX_EMBD},
        {"vocab_size", c->vocab_size, TERN_GPT2_MAX_VOCAB},
        {"n_positions", c->max_seq, TERN_GPT2_MAX_SEQ},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value < 1 || fields[i].value > fields[i].hi)
            return tern_errorf("GPT-2 config: %s: must be in [1, %d], got %d", fields[i].name,
                               fields[i].hi, fields[i].value);
    if (c->n_embd % c->n_head != 0)
        return tern_errorf("GPT-2 config: n_head: %d heads do not divide n_embd (%d channels)",
                           c->n_head, c->n_embd);
    if (!(c->ln_eps > 0 && c->ln_eps <= 1))
        return tern_errorf("GPT-2 config: layer_norm_epsilon: must be in (0, 1], got %g",
                           (double)c->ln_eps);
    return NULL;
}

/* The shortest decimal that reads back as the same float ("1e-05", not 9.99999975e-06). */
static void format_float(float v, char *buf, size_t size) {
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)v);
        if ((float)strtod(buf, NULL) == v) return;
    }
}

tern_error *tern_gpt2_config_format(const tern_gpt2_config *cfg, char **json, size_t *len) {
    *json = NULL;
    *len = 0;
    TERN_TRY(tern_gpt2_config_validate(cfg));
    char eps[32];
    format_float(cfg->ln_eps, eps, sizeof eps);
    /* GPT-2's special token is 50256; a smaller vocabulary gets its last id instead so the
     * ids stay inside it. */
    int eot = cfg->vocab_size > 50256 ? 50256 : cfg->vocab_size - 1;
    const char *fmt = "{\n"
                      "  \"activation_function\": \"gelu_new\",\n"
                      "  \"architectures\": [\n"
                      "    \"GPT2LMHeadModel\"\n"
                      "  ],\n"
                      "  \"attn_pdrop\": 0.1,\n"
                      "  \"bos_token_id\": %d,\n"
                      "  \"embd_pdrop\": 0.1,\n"
                      "  \"eos_token_id\": %d,\n"
                      "  \"initializer_range\": 0.02,\n"
                      "  \"layer_norm_epsilon\": %s,\n"
                      "  \"model_type\": \"gpt2\",\n"
                      "  \"n_ctx\": %d,\n"
                      "  \"n_embd\": %d,\n"
                      "  \"n_head\": %d,\n"
                      "  \"n_inner\": null,\n"
                      "  \"n_layer\": %d,\n"
                      "  \"n_positions\": %d,\n"
                      "  \"reorder_and_upcast_attn\": false,\n"
                      "  \"resid_pdrop\": 0.1,\n"
                      "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                      "  \"scale_attn_weights\": true,\n"
                      "  \"summary_activation\": null,\n"
                      "  \"summary_first_dropout\": 0.1,\n"
                      "  \"summary_proj_to_labels\": true,\n"
                      "  \"summary_type\": \"cls_index\",\n"
                      "  \"summary_use_proj\": true,\n"
                      "  \"tie_word_embeddings\": true,\n"
                      "  \"use_cache\": true,\n"
                      "  \"vocab_size\": %d\n"
                      "}\n";
    int n = snprintf(NULL, 0, fmt, eot, eot, eps, cfg->max_seq, cfg->n_embd, cfg->n_head,
                     cfg->n_layer, cfg->max_seq, cfg->vocab_size);
    if (n < 0) return tern_errorf("formatting config.json failed");
    char *text = malloc((size_t)n + 1);
    if (!text) return tern_errorf("out of memory formatting config.json");
    snprintf(text, (size_t)n + 1, fmt, eot, eot, eps, cfg->max_seq, cfg->n_embd, cfg->n_head,
             cfg->n_layer, cfg->max_seq, cfg->vocab_size);
    *json = text;
    *len = (size_t)n;
    return NULL;
}

tern_error *tern_gpt2_config_write(const char *path, const tern_gpt2_config *cfg) {
    char *json;
    size_t len;
    TERN_TRY(tern_error_wrap(tern_gpt2_config_format(cfg, &json, &len), "writing %s", path));
    tern_error *e = tern_write_file(path, json, len);
    free(json);
    return e;
}

tern_error *tern_gpt2_config_named(const char *name, tern_gpt2_config *out) {
    static const struct {
        const char *name;
        int n_layer, n_head, n_embd, max_seq;
    } named[] = {
        {"gpt2", 12, 12, 768, 1024},        {"gpt2-medium", 24, 16, 1024, 1024},
        {"gpt2-large", 36, 20, 1280, 1024}, {"gpt2-xl", 48, 25, 1600, 1024},
        {"small", 6, 6, 384, 256},          {"mini", 6, 8, 256, 256},
        {"tiny", 2, 4, 64, 128},
    };
    for (size_t i = 0; name && i < sizeof named / sizeof named[0]; i++) {
        if (strcmp(name, named[i].name) != 0) continue;
        tern_gpt2_config c = {50257,           named[i].max_seq, named[i].n_layer,
                              named[i].n_head, named[i].n_embd,  1e-5f};
        *out = c;
        return NULL;
    }
    return tern_errorf("unknown model configuration '%s' (known: gpt2, gpt2-medium, gpt2-large, "
                       "gpt2-xl, small, mini, tiny)",
                       name ? name : "(none)");
}
