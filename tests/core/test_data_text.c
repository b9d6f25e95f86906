/* Opening data files of either kind: text tokenized at open (checked against the fixture's
 * independently computed ids) and shards detected by their magic. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/data.h"
#include "tern/file.h"
#include "tern/tokenizer.h"
#include "tmpdir.h"

static const char *dir;

/* Each text of expected.json's "tokenizer" list, written to a file and opened as data, gives
 * the listed ids (texts of fewer than 2 ids are rejected as data sets). */
static void test_fixture_texts(const tern_tokenizer *tok, const char *shared) {
    char path[4096];
    snprintf(path, sizeof path, "%s/fixtures/gpt2-tiny-a/expected.json", shared);
    char *json;
    size_t len;
    CHECK_OK(tern_read_file(path, &json, &len));
    cJSON *root = json ? cJSON_ParseWithLength(json, len) : NULL;
    free(json);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    CHECK(cJSON_IsArray(list) && cJSON_GetArraySize(list) > 5);
    const char *file = tmpdir_path(dir, "text.txt");
    int checked = 0;
    for (const cJSON *item = list ? list->child : NULL; item; item = item->next) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "text");
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(item, "ids");
        if (!cJSON_IsString(text) || !cJSON_IsArray(ids)) continue;
        CHECK(tmpdir_write(file, text->valuestring, strlen(text->valuestring)) == 0);
        tern_dataset *ds = NULL;
        int n = cJSON_GetArraySize(ids);
        if (n < 2) {
            CHECK_ERR(tern_dataset_open(file, tok, 50257, &ds), "at least 2");
            continue;
        }
        CHECK_OK(tern_dataset_open(file, tok, 50257, &ds));
        if (!ds) continue;
        int ok = tern_dataset_tokens(ds) == (size_t)n;
        int i = 0;
        for (const cJSON *id = ids->child; id && ok; id = id->next, i++)
            ok = tern_dataset_token(ds, (size_t)i) == (int32_t)id->valuedouble;
        CHECKF(ok, "ids of \"%.40s\"", text->valuestring);
        checked++;
        tern_dataset_close(ds);
    }
    CHECK(checked >= 5);
    cJSON_Delete(root);
    unlink(file);
}

static void test_kinds(const tern_tokenizer *tok) {
    const char *text = tmpdir_path(dir, "a.txt");
    const char *shard = tmpdir_path(dir, "a.bin");
    const char *hello = "Hello, world!<|endoftext|>The capital of France is";
    CHECK(tmpdir_write(text, hello, strlen(hello)) == 0);
    tern_dataset *ds = NULL;
    CHECK_OK(tern_dataset_open(text, tok, 50257, &ds));
    /* 15496 11 995 0 | 50256 | 464 3139 286 4881 318 */
    CHECK(ds && tern_dataset_tokens(ds) == 10 && tern_dataset_token(ds, 4) == 50256 &&
          tern_dataset_token(ds, 5) == 464);
    tern_dataset_close(ds);
    CHECK_ERR(tern_dataset_open(text, NULL, 50257, &ds), "no tokenizer");
    CHECK_ERR(tern_dataset_open(text, tok, 1000, &ds),
              "token 15496 at position 0 is outside the vocabulary (1000 ids)");

    /* a shard opens without a tokenizer, through the same call */
    int32_t ids[3] = {7, 8, 9};
    CHECK_OK(tern_shard_write(shard, ids, 3));
    CHECK_OK(tern_dataset_open(shard, NULL, 50257, &ds));
    CHECK(ds && tern_dataset_tokens(ds) == 3 && tern_dataset_token(ds, 2) == 9);
    tern_dataset_close(ds);
    CHECK_OK(tern_dataset_open(shard, tok, 50257, &ds));
    tern_dataset_close(ds);
    CHECK_ERR(tern_dataset_open(shard, NULL, 8, &ds), "token 8 at position 1");

    /* neither: binary that is not UTF-8 */
    CHECK(tmpdir_write(text, "ok so far \xff\xfe", 12) == 0);
    CHECK_ERR(tern_dataset_open(text, tok, 50257, &ds),
              "neither a token shard nor UTF-8 text (invalid byte at offset 10)");
    CHECK(tmpdir_write(text, "", 0) == 0);
    CHECK_ERR(tern_dataset_open(text, tok, 50257, &ds), "0 tokens");
    CHECK_ERR(tern_dataset_open(tmpdir_path(dir, "absent"), tok, 50257, &ds), "No such file");
    unlink(text);
    unlink(shard);
}

int main(void) {
    const char *shared = getenv("TERN_SHARED_DIR");
    if (!shared) shared = "../shared";
    char tokdir[4096];
    snprintf(tokdir, sizeof tokdir, "%s/data/gpt2-tokenizer", shared);
    tern_tokenizer *tok = NULL;
    CHECK_OK(tern_tokenizer_load_dir(tokdir, &tok));
    if (!tok) return check_summary("test_data_text");
    dir = tmpdir_make();
    test_fixture_texts(tok, shared);
    test_kinds(tok);
    tern_tokenizer_free(tok);
    tmpdir_remove(dir);
    return check_summary("test_data_text");
}
