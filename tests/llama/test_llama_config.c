/* The Llama family's config.json: the fixture and the hub's configurations read as the named
 * ones, parameter counts against the published totals, the rotary inverse frequencies
 * against numpy (tests/llama/rope_inv_freq_ref.py), formatting read back, and every refusal
 * as one line naming the field. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/file.h"
#include "tern/llama_config.h"

static bool same_config(const tern_llama_config *a, const tern_llama_config *b) {
    bool same = a->family == b->family && a->vocab_size == b->vocab_size &&
                a->max_seq == b->max_seq && a->n_layer == b->n_layer && a->hidden == b->hidden &&
                a->intermediate == b->intermediate && a->n_head == b->n_head &&
                a->n_kv_head == b->n_kv_head && a->head_dim == b->head_dim &&
                a->rms_eps == b->rms_eps && a->rope_theta == b->rope_theta &&
                a->rope_scaling.llama3 == b->rope_scaling.llama3 &&
                a->tie_word_embeddings == b->tie_word_embeddings && a->qkv_bias == b->qkv_bias &&
                a->o_bias == b->o_bias && a->mlp_bias == b->mlp_bias &&
                a->bos_token_id == b->bos_token_id && a->n_eos == b->n_eos;
    if (same && a->rope_scaling.llama3)
        same = a->rope_scaling.factor == b->rope_scaling.factor &&
               a->rope_scaling.low_freq_factor == b->rope_scaling.low_freq_factor &&
               a->rope_scaling.high_freq_factor == b->rope_scaling.high_freq_factor &&
               a->rope_scaling.original_max_position == b->rope_scaling.original_max_position;
    for (int i = 0; same && i < a->n_eos; i++) same = a->eos_token_ids[i] == b->eos_token_ids[i];
    return same;
}

static tern_error *parse(const char *json, tern_llama_config *out) {
    return tern_llama_config_parse(json, strlen(json), "config.json", out);
}

/* The hub's config.json texts of the three models (their shape fields as published). */
static const char *SMOLLM2_135M =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": "
    "0.0, \"bos_token_id\": 0, \"eos_token_id\": 0, \"hidden_act\": \"silu\", \"hidden_size\": 576, "
    "\"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536, "
    "\"is_llama_config\": true, \"max_position_embeddings\": 8192, \"model_type\": \"llama\", "
    "\"num_attention_heads\": 9, \"num_hidden_layers\": 30, \"num_key_value_heads\": 3, "
    "\"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, "
    "\"rope_scaling\": null, \"rope_theta\": 100000, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true, "
    "\"vocab_size\": 49152}";
static const char *QWEN25_05B =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": "
    "151643, \"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, "
    "\"max_window_layers\": 24, \"model_type\": \"qwen2\", \"num_attention_heads\": 14, "
    "\"num_hidden_layers\": 24, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, "
    "\"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true, "
    "\"use_mrope\": false, \"use_sliding_window\": false, \"vocab_size\": 151936}";
static const char *LLAMA32_1B =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": "
    "0.0, \"bos_token_id\": 128000, \"eos_token_id\": 128001, \"head_dim\": 64, \"hidden_act\": "
    "\"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
    "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", "
    "\"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, "
    "\"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, "
    "\"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": "
    "8192, \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.45.0.dev0\", \"use_cache\": "
    "true, \"vocab_size\": 128256}";

static void test_named(void) {
    static const struct {
        const char *name, *hub;
        int64_t params; /* the hub's published totals, the tied embedding once */
    } named[] = {
        {"smollm2-135m", NULL, 134515008},
        {"qwen2.5-0.5b", NULL, 494032768},
        {"llama-3.2-1b", NULL, 1235814400},
    };
    const char *hub[] = {SMOLLM2_135M, QWEN25_05B, LLAMA32_1B};
    for (int i = 0; i < 3; i++) {
        tern_llama_config want, got, back;
        CHECK_OK(tern_llama_config_named(named[i].name, &want));
        CHECKF(tern_llama_config_param_count(&want) == named[i].params, "%s: %lld parameters",
               named[i].name, (long long)tern_llama_config_param_count(&want));
        CHECK_OK(parse(hub[i], &got));
        CHECKF(same_config(&got, &want), "%s: the hub's config.json reads differently",
               named[i].name);
        /* formatted, then read back as the same */
        char *json = NULL;
        size_t len = 0;
        CHECK_OK(tern_llama_config_format(&want, &json, &len));
        if (json) {
            CHECK_OK(tern_llama_config_parse(json, len, "formatted", &back));
            CHECKF(same_config(&back, &want), "%s: formatted config reads back differently:\n%s",
                   named[i].name, json);
        }
        free(json);
    }
    /* the tiny one is the fixture's shape */
    const char *shared = getenv("TERN_SHARED_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/llama-tiny-a/config.json", shared ? shared : "../shared");
    tern_llama_config fixture, tiny;
    CHECK_OK(tern_llama_config_read(path, &fixture));
    CHECK_OK(tern_llama_config_named("tiny", &tiny));
    CHECK(same_config(&fixture, &tiny));
    CHECK(fixture.head_dim == 16 && fixture.n_kv_head == 2 && fixture.tie_word_embeddings &&
          !fixture.qkv_bias && fixture.bos_token_id == 0 && fixture.n_eos == 1 &&
          fixture.eos_token_ids[0] == 1);
    /* 2 layers of (64 (64 + 2 32 + 64) + 3 64 176 + 2 64) + 4096 64 + 64 */
    CHECK(tern_llama_config_param_count(&tiny) == 2 * (64 * 192 + 3 * 64 * 176 + 128) +
                                                      4096 * 64 + 64);
    CHECK_ERR(tern_llama_config_named("gpt2", &tiny), "known: smollm2-135m, qwen2.5-0.5b");
}

/* The minimal config with `extra` members added ("" for none). */
static tern_error *parse_with(const char *extra, tern_llama_config *out) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"model_type\": \"%s\", \"hidden_size\": 64, \"intermediate_size\": 176, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100, "
             "\"max_position_embeddings\": 128%s%s}",
             strstr(extra, "QWEN") ? "qwen2" : "llama", *extra && !strstr(extra, "QWEN") ? ", " : "",
             strstr(extra, "QWEN") ? extra + 4 : extra);
    return parse(json, out);
}

static void test_fields(void) {
    tern_llama_config c;
    CHECK_OK(parse_with("", &c));
    CHECK(c.family == TERN_LLAMA_FAMILY_LLAMA && c.n_kv_head == 4 && c.head_dim == 16 &&
          c.rms_eps == 1e-6f && c.rope_theta == 10000 && !c.rope_scaling.llama3 &&
          !c.tie_word_embeddings && !c.qkv_bias && !c.o_bias && !c.mlp_bias &&
          c.bos_token_id == -1 && c.n_eos == 0);
    CHECK_OK(parse_with("\"head_dim\": 32, \"num_key_value_heads\": 1", &c));
    CHECK(c.head_dim == 32 && c.n_kv_head == 1);
    CHECK_OK(parse_with("\"head_dim\": null, \"num_key_value_heads\": null", &c));
    CHECK(c.head_dim == 16 && c.n_kv_head == 4);
    /* llama: attention_bias covers q, k, v and o; mlp_bias the three MLP products */
    CHECK_OK(parse_with("\"attention_bias\": true, \"mlp_bias\": true", &c));
    CHECK(c.qkv_bias && c.o_bias && c.mlp_bias);
    /* qwen2: q, k, v biases whatever the config says, never o or the MLP */
    CHECK_OK(parse_with("QWEN, \"attention_bias\": false, \"mlp_bias\": true", &c));
    CHECK(c.family == TERN_LLAMA_FAMILY_QWEN2 && c.qkv_bias && !c.o_bias && !c.mlp_bias);
    CHECK_OK(parse_with("QWEN, \"use_sliding_window\": false, \"sliding_window\": 4096, "
                        "\"max_window_layers\": 1, \"layer_types\": [\"full_attention\", "
                        "\"full_attention\"]",
                        &c));
    CHECK_OK(parse_with("\"eos_token_id\": [1, 7, 99], \"bos_token_id\": 98", &c));
    CHECK(c.n_eos == 3 && c.eos_token_ids[1] == 7 && c.eos_token_ids[2] == 99 &&
          c.bos_token_id == 98);
    CHECK_OK(parse_with("\"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8, "
                        "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
                        "\"original_max_position_embeddings\": 64}",
                        &c));
    CHECK(c.rope_scaling.llama3 && c.rope_scaling.factor == 8 &&
          c.rope_scaling.original_max_position == 64);
    CHECK_OK(parse_with("\"rope_scaling\": {\"rope_type\": \"default\"}", &c));
    CHECK(!c.rope_scaling.llama3);
    /* transformers 5 keeps theta and the scaling together */
    CHECK_OK(parse_with("\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, "
                        "\"factor\": 32.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                        "\"original_max_position_embeddings\": 8192}",
                        &c));
    CHECK(c.rope_scaling.llama3 && c.rope_theta == 500000 && c.rope_scaling.factor == 32);
    CHECK_OK(parse_with("\"partial_rotary_factor\": 1.0, \"hidden_act\": \"silu\", "
                        "\"num_experts\": 0, \"num_local_experts\": null",
                        &c));
}

static void expect_refused(const char *extra, const char *needle) {
    tern_llama_config c;
    tern_error *e = parse_with(extra, &c);
    CHECKF(e != NULL, "accepted: %s", extra);
    if (!e) return;
    const char *m = tern_error_message(e);
    CHECKF(strstr(m, needle) != NULL, "'%s' lacks '%s'", m, needle);
    CHECKF(strchr(m, '\n') == NULL, "not one line: '%s'", m);
    CHECKF(strncmp(m, "config.json: ", 13) == 0, "does not name the file: '%s'", m);
    tern_error_free(e);
}

static void test_refusals(void) {
    tern_llama_config c;
    CHECK_ERR(parse("{\"model_type\": \"gpt2\"}", &c), "model_type: must be \"llama\" or \"qwen2\", got \"gpt2\"");
    CHECK_ERR(parse("{\"model_type\": \"qwen2_moe\"}", &c), "got \"qwen2_moe\"");
    CHECK_ERR(parse("{\"hidden_size\": 64}", &c), "model_type: missing");
    CHECK_ERR(parse("[1]", &c), "not a JSON object");
    CHECK_ERR(parse("{\"model_type\": \"llama\"} x", &c), "text after the JSON object");
    expect_refused("\"hidden_size\": 32", "hidden_size: given twice");
    expect_refused("\"num_key_value_heads\": 3", "num_key_value_heads: 3 does not divide num_attention_heads (4)");
    expect_refused("\"num_key_value_heads\": 0", "num_key_value_heads: must be an integer in [1,");
    expect_refused("\"head_dim\": 15", "head_dim: 15 must be even");
    expect_refused("\"head_dim\": 2048", "head_dim: must be an integer in [2, 1024]");
    expect_refused("\"hidden_act\": \"gelu\"", "hidden_act: must be \"silu\"");
    expect_refused("\"rms_norm_eps\": 0", "rms_norm_eps: must be a number in (0");
    expect_refused("\"rms_norm_eps\": 1e-300", "rms_norm_eps: 1e-300 is zero in float32");
    expect_refused("\"rope_theta\": \"big\"", "rope_theta: must be a number");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}",
                   "rope_scaling.rope_type: \"linear\" is not supported");
    expect_refused("\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}",
                   "rope_scaling.rope_type: \"dynamic\" is not supported");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"yarn\"}", "\"yarn\" is not supported");
    expect_refused("\"rope_scaling\": {\"factor\": 2.0}", "rope_scaling.rope_type: missing");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"llama3\", \"type\": \"linear\"}",
                   "rope_scaling: rope_type and type disagree");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1, "
                   "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 64}",
                   "rope_scaling.factor: missing");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, "
                   "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 64}",
                   "rope_scaling.high_freq_factor: 4 must exceed low_freq_factor (4)");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                   "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 6.5}",
                   "rope_scaling.original_max_position_embeddings: must be an integer");
    expect_refused("\"rope_scaling\": 3", "rope_scaling: must be null or an object");
    expect_refused("\"rope_scaling\": {\"rope_type\": \"default\"}, \"rope_parameters\": "
                   "{\"rope_type\": \"default\"}",
                   "rope_scaling: given with rope_parameters");
    expect_refused("\"partial_rotary_factor\": 0.5", "partial_rotary_factor: 0.5 is not supported");
    expect_refused("QWEN, \"use_sliding_window\": true", "use_sliding_window: true is not supported");
    expect_refused("\"layer_types\": [\"full_attention\", \"sliding_attention\"]",
                   "layer_types[1]: \"sliding_attention\" is not supported");
    expect_refused("\"num_local_experts\": 8", "num_local_experts: mixtures of experts are not supported");
    expect_refused("QWEN, \"num_experts\": 60", "num_experts: mixtures of experts");
    expect_refused("\"moe_intermediate_size\": 1408", "moe_intermediate_size: mixtures of experts");
    expect_refused("\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]", "eos_token_id: more than 8 ids");
    expect_refused("\"eos_token_id\": 100", "eos_token_id: must be integers in [0, 99], got 100");
    expect_refused("\"eos_token_id\": [1, \"x\"]", "eos_token_id: must be integers in [0, 99], got a string");
    expect_refused("\"bos_token_id\": -1", "bos_token_id: must be an integer in [0, 99]");
    expect_refused("\"tie_word_embeddings\": 1", "tie_word_embeddings: must be true or false");
    expect_refused("\"attention_bias\": \"yes\"", "attention_bias: must be true or false");
    /* missing required shape fields */
    CHECK_ERR(parse("{\"model_type\": \"llama\", \"hidden_size\": 64}", &c), "config.json: num_hidden_layers: missing");
    CHECK_ERR(parse("{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 60, "
                    "\"intermediate_size\": 8, \"num_attention_heads\": 8, \"vocab_size\": 10, "
                    "\"max_position_embeddings\": 8}",
                    &c),
              "num_attention_heads: 8 heads do not divide hidden_size (60) and no head_dim is given");
    /* configurations built in code */
    tern_llama_config v;
    CHECK_OK(tern_llama_config_named("tiny", &v));
    v.n_kv_head = 3;
    CHECK_ERR(tern_llama_config_validate(&v), "num_key_value_heads: 3 does not divide");
    CHECK_OK(tern_llama_config_named("qwen2.5-0.5b", &v));
    v.o_bias = true;
    CHECK_ERR(tern_llama_config_validate(&v), "qwen2 has q, k and v biases and no others");
    char *json = NULL;
    size_t len;
    CHECK_ERR(tern_llama_config_format(&v, &json, &len), "qwen2 has q, k and v biases");
    CHECK(json == NULL);
}

/* inv_freq against numpy's float64 values (tests/llama/data/rope_inv_freq.json). */
static void test_inv_freq(void) {
    const char *src = getenv("TERN_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/llama/data/rope_inv_freq.json", src ? src : ".");
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(tern_read_file(path, &text, &len));
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    CHECK(root != NULL);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    int n_cases = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        const char *name = cJSON_GetObjectItemCaseSensitive(cs, "name")->valuestring;
        double theta = cJSON_GetObjectItemCaseSensitive(cs, "rope_theta")->valuedouble;
        int hd = cJSON_GetObjectItemCaseSensitive(cs, "head_dim")->valueint;
        const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(cs, "rope_scaling");
        char *scaling_text = scaling ? cJSON_PrintUnformatted(scaling) : NULL;
        char extra[1024];
        snprintf(extra, sizeof extra, "\"head_dim\": %d, \"rope_theta\": %.17g, \"rope_scaling\": %s", hd,
                 theta, scaling_text ? scaling_text : "null");
        free(scaling_text);
        tern_llama_config c;
        tern_error *e = parse_with(extra, &c);
        CHECK_OK(e);
        if (e) continue;
        double got[512];
        CHECK_OK(tern_llama_rope_inv_freq(&c, got, 512));
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(cs, "inv_freq");
        CHECKF(cJSON_GetArraySize(want) == hd / 2, "%s: %d values", name, cJSON_GetArraySize(want));
        double worst = 0;
        int i = 0;
        const cJSON *w;
        cJSON_ArrayForEach(w, want) {
            double err = fabs(got[i] - w->valuedouble) / w->valuedouble;
            if (err > worst) worst = err;
            i++;
        }
        /* the same float64 formula: a few ulp apart at most (pow and the order of the blend) */
        CHECKF(worst <= 4e-16, "%s: inv_freq relative error %.3g", name, worst);
        n_cases++;
    }
    CHECKF(n_cases == 6, "%d cases read", n_cases);
    cJSON_Delete(root);
    free(text);
    tern_llama_config c;
    CHECK_OK(tern_llama_config_named("tiny", &c));
    double few[4];
    CHECK_ERR(tern_llama_rope_inv_freq(&c, few, 4), "room for 4 values, head_dim 16 needs 8");
}

int main(void) {
    test_named();
    test_fields();
    test_refusals();
    test_inv_freq();
    return check_summary("test_llama_config");
}
