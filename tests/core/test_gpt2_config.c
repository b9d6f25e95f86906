/* config.json: the fixture, named configurations, the writer, and every validation rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/file.h"
#include "tern/gpt2_config.h"
#include "tmpdir.h"

static int same_config(const tern_gpt2_config *a, const tern_gpt2_config *b) {
    return a->vocab_size == b->vocab_size && a->max_seq == b->max_seq && a->n_layer == b->n_layer &&
           a->n_head == b->n_head && a->n_embd == b->n_embd && a->ln_eps == b->ln_eps;
}

static void test_fixture(void) {
    const char *shared = getenv("TERN_SHARED_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/gpt2-tiny-a/config.json",
             shared ? shared : "../shared");
    tern_gpt2_config c;
    CHECK_OK(tern_gpt2_config_read(path, &c));
    tern_gpt2_config want = {50257, 128, 2, 4, 64, 1e-5f};
    CHECK(same_config(&c, &want));
    tern_gpt2_config tiny;
    CHECK_OK(tern_gpt2_config_named("tiny", &tiny));
    CHECK(same_config(&tiny, &c)); /* "tiny" is the fixture's shape */
}

static void test_named(const char *dir) {
    tern_gpt2_config c;
    CHECK_OK(tern_gpt2_config_named("gpt2", &c));
    CHECK(c.n_layer == 12 && c.n_head == 12 && c.n_embd == 768 && c.max_seq == 1024 &&
          c.vocab_size == 50257 && c.ln_eps == 1e-5f);
    CHECK_OK(tern_gpt2_config_named("gpt2-medium", &c));
    CHECK(c.n_layer == 24 && c.n_head == 16 && c.n_embd == 1024);
    CHECK_OK(tern_gpt2_config_named("small", &c));
    CHECK(c.n_layer == 6 && c.n_head == 6 && c.n_embd == 384 && c.max_seq == 256);
    CHECK_ERR(tern_gpt2_config_named("gpt3", &c), "known: gpt2");
    CHECK_ERR(tern_gpt2_config_named(NULL, &c), "unknown");

    /* Every named configuration is valid and survives write -> read unchanged. */
    const char *names[] = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "small", "tiny"};
    const char *path = tmpdir_path(dir, "config.json");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tern_gpt2_config back;
        CHECK_OK(tern_gpt2_config_named(names[i], &c));
        CHECK_OK(tern_gpt2_config_validate(&c));
        CHECK_OK(tern_gpt2_config_write(path, &c));
        CHECK_OK(tern_gpt2_config_read(path, &back));
        CHECKF(same_config(&c, &back), "%s does not round-trip", names[i]);
    }
    CHECK(tmpdir_count(dir) == 1);

    /* What Hugging Face needs to load it as GPT2LMHeadModel. */
    char *text;
    size_t len;
    CHECK_OK(tern_read_file(path, &text, &len));
    const char *needles[] = {"\"architectures\": [\n    \"GPT2LMHeadModel\"",
                             "\"model_type\": \"gpt2\"",
                             "\"activation_function\": \"gelu_new\"",
                             "\"layer_norm_epsilon\": 1e-05,",
                             "\"tie_word_embeddings\": true",
                             "\"bos_token_id\": 50256",
                             "\"eos_token_id\": 50256",
                             "\"n_positions\": 128",
                             "\"n_ctx\": 128",
                             "\"scale_attn_weights\": true",
                             "\"initializer_range\": 0.02",
                             "\"use_cache\": true",
                             "\"n_inner\": null",
                             "\"resid_pdrop\": 0.1"};
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        CHECKF(strstr(text, needles[i]) != NULL, "written config lacks %s", needles[i]);
    free(text);

    /* Odd epsilons are written in their shortest exact form; a small vocabulary keeps bos/eos
     * inside it. */
    tern_gpt2_config odd = {1000, 64, 1, 2, 8, 3e-7f};
    tern_gpt2_config back;
    CHECK_OK(tern_gpt2_config_write(path, &odd));
    CHECK_OK(tern_gpt2_config_read(path, &back));
    CHECK(same_config(&odd, &back));
    CHECK_OK(tern_read_file(path, &text, &len));
    CHECK(strstr(text, "\"layer_norm_epsilon\": 3e-07,") && strstr(text, "\"eos_token_id\": 999,"));
    free(text);

    odd.n_head = 3;
    CHECK_ERR(tern_gpt2_config_write(path, &odd), "n_head: 3 heads do not divide n_embd (8");
    odd.n_head = 2;
    odd.ln_eps = 0;
    CHECK_ERR(tern_gpt2_config_validate(&odd), "layer_norm_epsilon");
    CHECK_ERR(tern_gpt2_config_write(tmpdir_path(dir, "none/config.json"), &c), "No such file");
    unlink(path);
}

/* A base config with one key replaced (or added when absent, removed when value is NULL). */
static char *with(const char *key, const char *value) {
    const char *keys[] = {"model_type",
                          "n_layer",
                          "n_head",
                          "n_embd",
                          "n_positions",
                          "vocab_size",
                          "layer_norm_epsilon",
                          "activation_function",
                          "n_inner",
                          "tie_word_embeddings"};
    const char *vals[] = {"\"gpt2\"",     "2",    "4",   "64", "128", "50257", "1e-05",
                          "\"gelu_new\"", "null", "true"};
    static char buf[2048];
    size_t n = 0;
    int found = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = vals[i];
        if (strcmp(keys[i], key) == 0) {
            found = 1;
            v = value;
        }
        if (!v) continue;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%s\": %s", n > 1 ? ", " : "", keys[i],
                              v);
    }
    if (!found && value) n += (size_t)snprintf(buf + n, sizeof buf - n, ", \"%s\": %s", key, value);
    snprintf(buf + n, sizeof buf - n, "}");
    return buf;
}

static void bad(const char *json, const char *needle) {
    tern_gpt2_config c;
    tern_error *e = tern_gpt2_config_parse(json, strlen(json), "my/config.json", &c);
    check_count_++;
    if (!e) {
        check_failures_++;
        fprintf(stderr, "accepted: %s (wanted an error with '%s')\n", json, needle);
        return;
    }
    const char *m = tern_error_message(e);
    if (!strstr(m, needle) || strncmp(m, "my/config.json: ", 16) != 0 || strchr(m, '\n')) {
        check_failures_++;
        fprintf(stderr, "error '%s' lacks the file name or '%s'\n", m, needle);
    }
    tern_error_free(e);
}

static void good(const char *json, tern_gpt2_config *out) {
    tern_gpt2_config c = {0};
    CHECK_OK(tern_gpt2_config_parse(json, strlen(json), "ok.json", &c));
    if (out) *out = c;
}

static void test_validation(const char *dir) {
    tern_gpt2_config c;
    good(with("", NULL), &c);
    CHECK(c.n_layer == 2 && c.n_head == 4 && c.n_embd == 64 && c.max_seq == 128);

    /* syntax */
    bad("{\"n_layer\": ", "not valid JSON");
    bad("[1]", "not a JSON object");
    bad("{} {}", "text after the JSON object");
    bad("", "not valid JSON");
    /* missing, zero, negative, huge, non-integer, wrong type */
    bad(with("n_layer", NULL), "n_layer: missing");
    bad(with("n_layer", "0"), "n_layer: must be an integer in [1, 1024], got 0");
    bad(with("n_layer", "-2"), "n_layer: must be an integer");
    bad(with("n_layer", "1025"), "n_layer");
    bad(with("n_layer", "2.5"), "n_layer: must be an integer in [1, 1024], got 2.5");
    bad(with("n_layer", "\"2\""), "n_layer: must be an integer in [1, 1024], got a string");
    bad(with("n_layer", "null"), "got null");
    bad(with("n_layer", "1e999"), "n_layer");
    bad(with("n_embd", "131072"), "n_embd");
    bad(with("n_head", "0"), "n_head");
    bad(with("n_head", "5"), "n_head: 5 heads do not divide n_embd (64");
    bad(with("vocab_size", "1000001"), "vocab_size");
    bad(with("vocab_size", "[50257]"),
        "vocab_size: must be an integer in [1, 1000000], got an array");
    bad(with("n_positions", "2097152"), "n_positions");
    bad(with("n_positions", "0"), "n_positions");
    bad(with("n_positions", NULL), "n_positions: missing");
    bad(with("layer_norm_epsilon", "0"), "layer_norm_epsilon: must be a number in (0, 1]");
    bad(with("layer_norm_epsilon", "-1e-5"), "layer_norm_epsilon");
    bad(with("layer_norm_epsilon", "2"), "layer_norm_epsilon");
    bad(with("layer_norm_epsilon", "1e-300"), "layer_norm_epsilon"); /* 0 as a float */
    bad(with("layer_norm_epsilon", "\"1e-5\""), "layer_norm_epsilon");
    bad(with("activation_function", "\"relu\""),
        "activation_function: must be \"gelu_new\" or \"gelu_pytorch_tanh\" (GPT-2's tanh GELU), "
        "got \"relu\"");
    bad(with("activation_function", "\"gelu\""), "activation_function");
    bad(with("activation_function", "null"), "activation_function");
    bad(with("n_inner", "1024"), "n_inner: must be null or 4 * n_embd (256), got 1024");
    bad(with("n_inner", "\"256\""), "n_inner");
    bad(with("tie_word_embeddings", "false"), "tie_word_embeddings: false is not supported");
    bad(with("tie_word_embeddings", "1"), "tie_word_embeddings: must be true or false");
    bad(with("model_type", "\"llama\""), "model_type: must be \"gpt2\", got \"llama\"");
    bad(with("model_type", "\"a\\nb\""), "got \"a?b\""); /* one line even so */
    bad(with("model_type", "7"), "model_type");
    bad(with("scale_attn_weights", "false"), "scale_attn_weights");
    bad(with("scale_attn_by_inverse_layer_idx", "true"), "scale_attn_by_inverse_layer_idx");
    bad(with("add_cross_attention", "true"), "add_cross_attention");
    bad("{\"n_layer\": 2, \"n_layer\": 3, \"n_head\": 4, \"n_embd\": 64, \"n_positions\": 8, "
        "\"vocab_size\": 10}",
        "n_layer: given twice");

    /* defaults and alternatives */
    good(with("layer_norm_epsilon", NULL), &c);
    CHECK(c.ln_eps == 1e-5f);
    good(with("layer_norm_epsilon", "1e-6"), &c);
    CHECK(c.ln_eps == 1e-6f);
    good(with("activation_function", NULL), NULL);
    good(with("activation_function", "\"gelu_pytorch_tanh\""), NULL);
    good(with("n_inner", NULL), NULL);
    good(with("n_inner", "256"), NULL);
    good(with("tie_word_embeddings", NULL), NULL);
    good(with("model_type", NULL), NULL);
    good(with("n_layer", "2.0"), NULL); /* an integral number is an integer */
    good(with("extra", "{\"anything\": [1, 2]}"), NULL);
    /* n_ctx stands in for a missing n_positions, and yields to a present one */
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", with("n_positions", NULL));
    strcpy(buf + strlen(buf) - 1, ", \"n_ctx\": 256}");
    good(buf, &c);
    CHECK(c.max_seq == 256);
    good(with("n_ctx", "512"), &c);
    CHECK(c.max_seq == 128);

    /* reading a file: errors name it */
    const char *path = tmpdir_path(dir, "cfg.json");
    const char *text = with("n_head", "3");
    CHECK(tmpdir_write(path, text, strlen(text)) == 0);
    CHECK_ERR(tern_gpt2_config_read(path, &c), "cfg.json: n_head");
    unlink(path);
    CHECK_ERR(tern_gpt2_config_read(path, &c), "No such file");
}

int main(void) {
    const char *dir = tmpdir_make();
    test_fixture();
    test_named(dir);
    test_validation(dir);
    tmpdir_remove(dir);
    return check_summary("test_gpt2_config");
}
