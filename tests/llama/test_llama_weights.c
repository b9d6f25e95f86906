/* Weights in a folder (tern/weights.h): one model.safetensors or shards with an index,
 * written here by tern's writer and, in tests/llama/data/sharded, by the reference
 * `safetensors` package (tests/llama/make_sharded_ref.py); and every refusal as one line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/tmpdir.h"
#include "tern/file.h"
#include "tern/half.h"
#include "tern/weights.h"

/* i * 0.25 - 1, the values make_sharded_ref.py writes */
static float value_at(size_t i) { return (float)i * 0.25f - 1.0f; }

static bool holds_values(const tern_tensor_info *t) {
    if (!t) return false;
    float *got = malloc(t->count * sizeof *got);
    bool ok = got != NULL;
    tern_error *e = ok ? tern_tensor_convert(t, TERN_F32, got) : NULL;
    if (e) {
        tern_error_free(e);
        ok = false;
    }
    for (size_t i = 0; ok && i < t->count; i++) ok = got[i] == value_at(i);
    free(got);
    return ok;
}

static void test_reference_shards(void) {
    const char *src = getenv("TERN_SOURCE_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/llama/data/sharded", src ? src : ".");
    tern_weights *w = NULL;
    CHECK_OK(tern_weights_open(dir, &w));
    if (!w) return;
    CHECK(tern_weights_count(w) == 4 && tern_weights_shard_count(w) == 2);
    const char *names[] = {"lm_head.weight", "model.embed_tokens.weight",
                           "model.layers.0.mlp.gate_proj.weight", "model.norm.weight"};
    for (int i = 0; i < 4; i++) {
        const tern_tensor_info *t = NULL;
        CHECK_OK(tern_weights_get(w, names[i], &t));
        CHECKF(holds_values(t), "%s", names[i]);
        CHECK(tern_weights_at(w, (size_t)i) == t); /* sorted by name */
    }
    const tern_tensor_info *t = tern_weights_find(w, "model.norm.weight");
    CHECK(t && t->dtype == TERN_F16 && t->ndim == 1 && t->shape[0] == 4);
    t = tern_weights_find(w, "model.embed_tokens.weight");
    CHECK(t && t->dtype == TERN_F32 && t->ndim == 2 && t->shape[0] == 5 && t->shape[1] == 4);
    CHECK(tern_weights_find(w, "model.layers.1.mlp.gate_proj.weight") == NULL);
    CHECK_ERR(tern_weights_get(w, "nope", &t), "tensor 'nope' is not in the checkpoint");
    tern_weights_close(w);
}

/* writes `n` tensors of shape [rows, 4], values value_at, into dir/file */
static void write_shard(const char *dir, const char *file, const char *const *names, int n, tern_dtype dt) {
    float f32[64];
    uint16_t half[64];
    for (int i = 0; i < 64; i++) {
        f32[i] = value_at((size_t)i);
        half[i] = dt == TERN_BF16 ? tern_f32_to_bf16(f32[i]) : tern_f32_to_f16(f32[i]);
    }
    tern_tensor_out t[8];
    for (int i = 0; i < n; i++) {
        t[i] = (tern_tensor_out){names[i], dt, 2, {i + 1, 4}, dt == TERN_F32 ? (const void *)f32 : half};
    }
    CHECK_OK(tern_safetensors_write(tmpdir_path(dir, file), t, (size_t)n, NULL));
}

static void write_text(const char *path, const char *text) { CHECK(tmpdir_write(path, text, strlen(text)) == 0); }

static void expect_refused(const char *dir, const char *needle) {
    tern_weights *w = NULL;
    tern_error *e = tern_weights_open(dir, &w);
    CHECKF(e != NULL, "opened; expected '%s'", needle);
    CHECK(w == NULL);
    if (!e) {
        tern_weights_close(w);
        return;
    }
    const char *m = tern_error_message(e);
    CHECKF(strstr(m, needle) != NULL, "'%s' lacks '%s'", m, needle);
    CHECKF(strchr(m, '\n') == NULL, "not one line: '%s'", m);
    tern_error_free(e);
}

static void test_written(void) {
    const char *root = tmpdir_make();
    /* one file */
    const char *single = tmpdir_path(root, "single");
    CHECK_OK(tern_make_dirs(single));
    const char *a[] = {"model.norm.weight", "model.embed_tokens.weight", "lm_head.weight"};
    write_shard(single, "model.safetensors", a, 3, TERN_BF16);
    tern_weights *w = NULL;
    CHECK_OK(tern_weights_open(single, &w));
    CHECK(tern_weights_count(w) == 3 && tern_weights_shard_count(w) == 1);
    const tern_tensor_info *t = NULL;
    CHECK_OK(tern_weights_get(w, "model.embed_tokens.weight", &t));
    CHECK(t && t->dtype == TERN_BF16 && t->shape[0] == 2 && holds_values(t));
    CHECK(tern_weights_at(w, 0) == tern_weights_find(w, "lm_head.weight"));
    tern_weights_close(w);

    /* three shards of mixed dtypes, one with an index */
    const char *sh = tmpdir_path(root, "sharded");
    CHECK_OK(tern_make_dirs(sh));
    const char *s1[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.bias"};
    const char *s2[] = {"model.layers.1.self_attn.q_proj.weight"};
    const char *s3[] = {"lm_head.weight", "model.norm.weight", "model.embed_tokens.weight"};
    write_shard(sh, "model-00001-of-00003.safetensors", s1, 2, TERN_F32);
    write_shard(sh, "model-00002-of-00003.safetensors", s2, 1, TERN_F16);
    write_shard(sh, "model-00003-of-00003.safetensors", s3, 3, TERN_BF16);
    const char *index = tmpdir_path(sh, "model.safetensors.index.json");
    const char *good = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {"
                       "\"model.layers.0.self_attn.q_proj.weight\": \"model-00001-of-00003.safetensors\", "
                       "\"model.layers.0.self_attn.q_proj.bias\": \"model-00001-of-00003.safetensors\", "
                       "\"model.layers.1.self_attn.q_proj.weight\": \"model-00002-of-00003.safetensors\", "
                       "\"lm_head.weight\": \"model-00003-of-00003.safetensors\", "
                       "\"model.norm.weight\": \"model-00003-of-00003.safetensors\", "
                       "\"model.embed_tokens.weight\": \"model-00003-of-00003.safetensors\"}}";
    write_text(index, good);
    CHECK_OK(tern_weights_open(sh, &w));
    CHECK(tern_weights_count(w) == 6 && tern_weights_shard_count(w) == 3);
    for (size_t i = 0; i < tern_weights_count(w); i++) CHECKF(holds_values(tern_weights_at(w, i)), "tensor %zu", i);
    t = tern_weights_find(w, "model.layers.1.self_attn.q_proj.weight");
    CHECK(t && t->dtype == TERN_F16 && t->shape[0] == 1);
    t = tern_weights_find(w, "model.embed_tokens.weight");
    CHECK(t && t->dtype == TERN_BF16 && t->shape[0] == 3);
    tern_weights_close(w);

    /* refusals, one fault at a time */
    struct {
        const char *index, *needle;
    } bad[] = {
        {"{\"weight_map\": {\"lm_head.weight\": \"../model-00003-of-00003.safetensors\"}}",
         "the shard of 'lm_head.weight' (\"../model-00003-of-00003.safetensors\") is not a plain file name"},
        {"{\"weight_map\": {\"lm_head.weight\": \"/etc/passwd\"}}", "is not a plain file name"},
        {"{\"weight_map\": {\"lm_head.weight\": \".hidden.safetensors\"}}", "starts with '.'"},
        {"{\"weight_map\": {\"lm_head.weight\": \"\"}}", "(\"\") is empty"},
        {"{\"weight_map\": {\"lm_head.weight\": 3}}", "the shard of 'lm_head.weight' is not a string"},
        {"{\"weight_map\": {\"lm_head.weight\": \"missing.safetensors\"}}", "names shard missing.safetensors"},
        {"{\"weight_map\": {}}", "weight_map: empty"},
        {"{\"metadata\": {}}", "weight_map: missing"},
        {"{\"weight_map\": []}", "weight_map: not an object"},
        {"{\"weight_map\": {}, \"weight_map\": {}}", "weight_map: given twice"},
        {"{\"metadata\": 1, \"weight_map\": {}}", "metadata: not an object"},
        {"[]", "not a JSON object"},
        {"{\"weight_map\": {\"a\": \"b\",}}", "not valid JSON"},
        {"{\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00003.safetensors\"}}",
         "tensor 'lm_head.weight' is not in its shard model-00001-of-00003.safetensors"},
        /* shard 3 holds two tensors the map leaves out */
        {"{\"weight_map\": {\"lm_head.weight\": \"model-00003-of-00003.safetensors\"}}",
         "shard model-00003-of-00003.safetensors holds tensor 'model.norm.weight', which weight_map does not list"},
        {"{\"weight_map\": {"
         "\"model.layers.1.self_attn.q_proj.weight\": \"model-00002-of-00003.safetensors\", "
         "\"model.layers.1.self_attn.q_proj.weight\": \"model-00002-of-00003.safetensors\"}}",
         "tensor 'model.layers.1.self_attn.q_proj.weight' given twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(index, bad[i].index);
        expect_refused(sh, bad[i].needle);
    }
    /* a shard that is a folder, not a file */
    CHECK_OK(tern_make_dirs(tmpdir_path(sh, "dir.safetensors")));
    write_text(index, "{\"weight_map\": {\"x\": \"dir.safetensors\"}}");
    expect_refused(sh, "dir.safetensors");
    /* a damaged shard: the reader's own message, wrapped */
    write_text(tmpdir_path(sh, "model-00002-of-00003.safetensors"), "garbage");
    write_text(index, good);
    expect_refused(sh, "names shard model-00002-of-00003.safetensors");
    /* no weights at all */
    const char *empty = tmpdir_path(root, "empty");
    CHECK_OK(tern_make_dirs(empty));
    expect_refused(empty, "no weights (neither model.safetensors nor model.safetensors.index.json)");

    /* a tensor of another dtype opens, but is not a float weight */
    const char *other = tmpdir_path(root, "other");
    CHECK_OK(tern_make_dirs(other));
    const char header[] = "{\"mask\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
    unsigned char file[8 + sizeof header - 1 + 8];
    uint64_t hl = sizeof header - 1;
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)(hl >> (8 * i));
    memcpy(file + 8, header, sizeof header - 1);
    memset(file + 8 + hl, 0, 8);
    CHECK(tmpdir_write(tmpdir_path(other, "model.safetensors"), file, sizeof file) == 0);
    CHECK_OK(tern_weights_open(other, &w));
    CHECK_ERR(tern_weights_get(w, "mask", &t), "tensor 'mask' is I64 (tern reads F32, F16 and BF16 weights)");
    tern_weights_close(w);
    tmpdir_remove(root);
}

int main(void) {
    test_reference_shards();
    test_written();
    return check_summary("test_llama_weights");
}
