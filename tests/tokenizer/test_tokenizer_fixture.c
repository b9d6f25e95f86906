/* The fixture's tokenizer cases (../shared/fixtures/gpt2-tiny-a/expected.json, "tokenizer",
 * computed by two independent GPT-2 tokenizers) and tiktoken-computed cases aimed at the
 * pre-tokenization rule (extra_cases.json): each text encodes to its ids, and they decode
 * back to the text. Plus the special-token switch and token bytes. */
#include <cjson/cJSON.h>
#include <stdint.h>

#include "check.h"
#include "tern/tokenizer.h"
#include "tokenizer_test_util.h"

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, n > 64 ? " ...\n" : "\n");
}

/* Runs every {"text", "ids"} case of a JSON array; returns how many there were. */
static int check_cases(const tern_tokenizer *tok, const cJSON *cases, const char *source) {
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        CHECK(cJSON_IsString(text) && cJSON_IsArray(want));
        if (!cJSON_IsString(text) || !cJSON_IsArray(want)) continue;
        n++;
        size_t want_n = (size_t)cJSON_GetArraySize(want);
        int32_t *want_ids = malloc((want_n + 1) * sizeof *want_ids);
        size_t k = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, want) want_ids[k++] = (int32_t)id->valuedouble;

        const char *s = text->valuestring;
        int32_t *ids = NULL;
        size_t count = 0;
        CHECK_OK(tern_tokenizer_encode(tok, s, strlen(s), true, &ids, &count));
        bool same = count == want_n && (!count || !memcmp(ids, want_ids, count * sizeof *ids));
        CHECKF(same, "%s case %d: ids differ", source, n);
        if (!same) {
            fprintf(stderr, "  text: \"%s\"\n", s);
            print_ids("want", want_ids, want_n);
            print_ids("got ", ids, count);
        }
        char *back = NULL;
        size_t back_len = 0;
        CHECK_OK(tern_tokenizer_decode(tok, want_ids, want_n, &back, &back_len));
        CHECKF(back && back_len == strlen(s) && !memcmp(back, s, back_len),
               "%s case %d: decoding the ids does not give the text back", source, n);
        free(back);
        free(ids);
        free(want_ids);
    }
    return n;
}

static cJSON *read_json(const char *path) {
    size_t len = 0;
    char *text = read_whole_file(path, &len);
    cJSON *json = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    return json;
}

/* <|endoftext|> is one id only when special tokens are on. */
static void check_special(const tern_tokenizer *tok) {
    const char *text = "a<|endoftext|>b";
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tern_tokenizer_encode(tok, text, strlen(text), true, &ids, &n));
    CHECK(n == 3 && ids[1] == 50256);
    free(ids);
    CHECK_OK(tern_tokenizer_encode(tok, text, strlen(text), false, &ids, &n));
    CHECK(n > 3);
    bool has_eot = false;
    for (size_t i = 0; i < n; i++) has_eot |= ids[i] == 50256;
    CHECK(!has_eot);
    char *back = NULL;
    size_t len = 0;
    CHECK_OK(tern_tokenizer_decode(tok, ids, n, &back, &len));
    CHECK(back && len == strlen(text) && !memcmp(back, text, len));
    free(back);
    free(ids);
    /* Back to back, and a partial one that must stay text. */
    text = "<|endoftext|><|endoftext|><|endoftext";
    CHECK_OK(tern_tokenizer_encode(tok, text, strlen(text), true, &ids, &n));
    CHECK(n > 2 && ids[0] == 50256 && ids[1] == 50256 && ids[2] != 50256);
    free(ids);
}

static void check_token_bytes(const tern_tokenizer *tok) {
    const char *bytes = NULL;
    size_t len = 0;
    CHECK_OK(tern_tokenizer_token_bytes(tok, 50256, &bytes, &len));
    CHECK(len == 13 && !memcmp(bytes, "<|endoftext|>", 13));
    CHECK_OK(tern_tokenizer_token_bytes(tok, 198, &bytes, &len));
    CHECK(len == 1 && bytes[0] == '\n');
    CHECK_OK(tern_tokenizer_token_bytes(tok, 220, &bytes, &len));
    CHECK(len == 1 && bytes[0] == ' ');
    CHECK_OK(tern_tokenizer_token_bytes(tok, 464, &bytes, &len)); /* "The" */
    CHECK(len == 3 && !memcmp(bytes, "The", 3));
    /* U+1F600 is split across two tokens: F0 9F 98 and 80. Each decodes to its bytes,
     * and together to the character. */
    int32_t emoji[] = {47249, 222};
    char *text = NULL;
    CHECK_OK(tern_tokenizer_decode(tok, emoji, 1, &text, &len));
    CHECK(len == 3 && !memcmp(text, "\xF0\x9F\x98", 3));
    free(text);
    CHECK_OK(tern_tokenizer_decode(tok, emoji + 1, 1, &text, &len));
    CHECK(len == 1 && (unsigned char)text[0] == 0x80);
    free(text);
    CHECK_OK(tern_tokenizer_decode(tok, emoji, 2, &text, &len));
    CHECK(len == 4 && !strcmp(text, "\xF0\x9F\x98\x80"));
    free(text);
    /* Empty input both ways. */
    int32_t *ids = (int32_t *)1;
    size_t n = 1;
    CHECK_OK(tern_tokenizer_encode(tok, NULL, 0, true, &ids, &n));
    CHECK(n == 0);
    free(ids);
    CHECK_OK(tern_tokenizer_decode(tok, NULL, 0, &text, &len));
    CHECK(text && len == 0 && text[0] == '\0');
    free(text);
}

int main(void) {
    tern_tokenizer *tok = NULL;
    CHECK_OK(load_gpt2_tokenizer(&tok));
    if (!tok) return check_summary("test_tokenizer_fixture");
    CHECK(tern_tokenizer_vocab_size(tok) == 50257);
    CHECK(tern_tokenizer_eot(tok) == 50256);

    char path[4096];
    cJSON *expected = read_json(shared_path("fixtures/gpt2-tiny-a/expected.json", path,
                                            sizeof path));
    CHECK(expected != NULL);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(expected, "tokenizer");
    CHECK(cJSON_IsArray(cases));
    CHECK(check_cases(tok, cases, "fixture") >= 14);
    cJSON_Delete(expected);

    const char *src = getenv("TERN_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/tokenizer/extra_cases.json", src ? src : ".");
    cJSON *extra = read_json(path);
    CHECK(cJSON_IsArray(extra));
    CHECK(check_cases(tok, extra, "extra_cases.json") >= 40);
    cJSON_Delete(extra);

    check_special(tok);
    check_token_bytes(tok);
    tern_tokenizer_free(tok);
    return check_summary("test_tokenizer_fixture");
}
