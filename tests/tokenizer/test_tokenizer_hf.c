/* tokenizer.json against Hugging Face tokenizers, which computed every expected id here:
 *   - the llama-tiny-a fixture's tokenizer (Llama 3's Split, ignore_merges, BOS added):
 *     its hard cases (expected.json), with and without special tokens, and the whole Brown
 *     corpus (brown_llama_reference.txt, by bench/tokenizer/hf_ref.py reference);
 *   - hf_cases.json (tests/tokenizer/gen/gen_hf_cases.py): 14 small tokenizers of every
 *     supported kind, each on about 100 hard texts, in three modes;
 *   - GPT-2 as a tokenizer.json (HF's own, gpt2_tokenizer_skeleton.json with the shared
 *     vocab.json and merges.txt put in) gives exactly the ids of vocab.json + merges.txt.
 * Decoding gives the text back wherever the pipeline keeps every byte. */
#include <cjson/cJSON.h>
#include <stdint.h>

#include "brown_reference.h"
#include "check.h"
#include "tern/tokenizer.h"
#include "tokenizer_test_util.h"

static cJSON *read_json(const char *path) {
    size_t len = 0;
    char *text = read_whole_file(path, &len);
    cJSON *json = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    if (!json) fprintf(stderr, "cannot parse %s\n", path);
    return json;
}

static const char *source_path(const char *rest, char *buf, size_t cap) {
    const char *src = getenv("TERN_SOURCE_DIR");
    snprintf(buf, cap, "%s/%s", src ? src : ".", rest);
    return buf;
}

/* The ids of a JSON array, with prefix before and suffix after (both may be NULL). */
static int32_t *ids_of(const cJSON *arr, const cJSON *prefix, const cJSON *suffix, size_t *n) {
    size_t total = (size_t)cJSON_GetArraySize(arr) + (prefix ? (size_t)cJSON_GetArraySize(prefix) : 0) +
                   (suffix ? (size_t)cJSON_GetArraySize(suffix) : 0);
    int32_t *ids = malloc((total + 1) * sizeof *ids);
    size_t k = 0;
    const cJSON *parts[3] = {prefix, arr, suffix}, *id;
    for (int p = 0; p < 3; p++)
        if (parts[p]) cJSON_ArrayForEach(id, parts[p]) ids[k++] = (int32_t)id->valuedouble;
    *n = k;
    return ids;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 48; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, n > 48 ? " ...\n" : "\n");
}

/* Encodes text with flags and compares with want; returns whether they agree. */
static bool check_encode(const tern_tokenizer *tok, const char *text, unsigned flags,
                         const int32_t *want, size_t want_n, const char *what, int index) {
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tern_tokenizer_encode_flags(tok, text, strlen(text), flags, &ids, &n));
    bool same = n == want_n && (!n || !memcmp(ids, want, n * sizeof *ids));
    CHECKF(same, "%s, text %d, flags %u: ids differ from Hugging Face's", what, index, flags);
    if (!same) {
        fprintf(stderr, "  text: \"%s\"\n", text);
        print_ids("want", want, want_n);
        print_ids("got ", ids, n);
    }
    free(ids);
    return same;
}

static void check_round_trip(const tern_tokenizer *tok, const char *text, const char *what,
                             int index) {
    int32_t *ids = NULL;
    size_t n = 0;
    char *back = NULL;
    size_t len = 0;
    CHECK_OK(tern_tokenizer_encode_flags(tok, text, strlen(text), TERN_ENCODE_SPECIAL_IN_TEXT,
                                         &ids, &n));
    CHECK_OK(tern_tokenizer_decode(tok, ids, n, &back, &len));
    CHECKF(back && len == strlen(text) && !memcmp(back, text, len),
           "%s, text %d: decoding does not give the text back", what, index);
    free(back);
    free(ids);
}

static void check_fixture(void) {
    char path[4096];
    tern_tokenizer *tok = NULL;
    CHECK_OK(tern_tokenizer_load_dir(shared_path("fixtures/llama-tiny-a", path, sizeof path), &tok));
    cJSON *expected = read_json(shared_path("fixtures/llama-tiny-a/expected.json", path, sizeof path));
    if (!tok || !expected) return;
    CHECK(tern_tokenizer_vocab_size(tok) == 4096);
    CHECK(tern_tokenizer_eot(tok) == 1); /* <|end_of_text|> */
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(expected, "tokenizer")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        size_t n_ids, n_special;
        int32_t *ids = ids_of(cJSON_GetObjectItem(c, "ids"), NULL, NULL, &n_ids);
        int32_t *with = ids_of(cJSON_GetObjectItem(c, "ids_with_special_tokens"), NULL, NULL, &n_special);
        check_encode(tok, text, TERN_ENCODE_SPECIAL_IN_TEXT, ids, n_ids, "fixture", n);
        check_encode(tok, text, TERN_ENCODE_SPECIAL_IN_TEXT | TERN_ENCODE_ADD_SPECIAL, with,
                     n_special, "fixture", n);
        int32_t *dflt = NULL;
        size_t n_dflt = 0;
        CHECK_OK(tern_tokenizer_encode(tok, text, strlen(text), true, &dflt, &n_dflt));
        CHECK(n_dflt == n_special && !memcmp(dflt, with, n_dflt * sizeof *dflt));
        free(dflt);
        check_round_trip(tok, text, "fixture", n);
        free(ids);
        free(with);
        n++;
    }
    CHECK(n == 15);
    printf("llama-tiny-a: %d cases, with and without special tokens\n", n);

    /* All of Brown, against HF's ids. */
    reference *ref = malloc(sizeof *ref);
    CHECK(ref && read_reference(source_path("tests/tokenizer/brown_llama_reference.txt", path,
                                            sizeof path), ref));
    size_t len = 0;
    char *brown = read_whole_file(shared_path("data/brown.txt", path, sizeof path), &len);
    if (ref && ref->count && brown) {
        int32_t *ids = NULL;
        size_t count = 0;
        CHECK_OK(tern_tokenizer_encode_flags(tok, brown, len, TERN_ENCODE_SPECIAL_IN_TEXT, &ids,
                                             &count));
        CHECKF(count == ref->count, "brown: %zu ids, HF has %zu", count, ref->count);
        for (size_t b = 0; b < ref->blocks && b * ref->block < count; b++) {
            size_t start = b * ref->block;
            size_t k = count - start < ref->block ? count - start : ref->block;
            if (fnv1a64(ids + start, k) == ref->hash[b]) continue;
            CHECKF(false, "brown: ids %zu to %zu (block %zu) differ from HF's", start,
                   start + k - 1, b);
            break;
        }
        char *back = NULL;
        size_t back_len = 0;
        CHECK_OK(tern_tokenizer_decode(tok, ids, count, &back, &back_len));
        CHECK(back && back_len == len && !memcmp(back, brown, len));
        printf("llama-tiny-a: brown, %zu bytes -> %zu ids, HF's\n", len, count);
        free(back);
        free(ids);
    }
    free(brown);
    free(ref);
    cJSON_Delete(expected);
    tern_tokenizer_free(tok);
}

/* Pipelines that keep every byte of the text (no Removed split, prefix space, NFC, strip). */
static bool keeps_bytes(const char *name) {
    static const char *const lossless[] = {"gpt2_bytelevel", "bytelevel_no_regex", "llama3",
                                           "llama3_merges", "split_merged",
                                           "split_merged_invert", "split_empty_matches"};
    for (size_t i = 0; i < sizeof lossless / sizeof *lossless; i++)
        if (!strcmp(name, lossless[i])) return true;
    return false;
}

static void check_generated(void) {
    char path[4096];
    cJSON *all = read_json(source_path("tests/tokenizer/hf_cases.json", path, sizeof path));
    if (!all) {
        CHECK(all != NULL);
        return;
    }
    const cJSON *texts = cJSON_GetObjectItem(all, "texts"), *model = cJSON_GetObjectItem(all, "model");
    int n_tokenizers = 0, n_checks = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(all, "tokenizers")) {
        const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
        cJSON *json = cJSON_Duplicate(cJSON_GetObjectItem(t, "tokenizer"), true);
        cJSON *m = cJSON_Duplicate(model, true);
        cJSON *stub = cJSON_GetObjectItem(json, "model");
        cJSON_ReplaceItemInObject(m, "ignore_merges",
                                  cJSON_Duplicate(cJSON_GetObjectItem(stub, "ignore_merges"), true));
        cJSON_ReplaceItemInObject(json, "model", m);
        char *text = cJSON_PrintUnformatted(json);
        tern_tokenizer *tok = NULL;
        CHECK_OK(tern_tokenizer_load_json_memory(text, strlen(text), &tok));
        free(text);
        cJSON_Delete(json);
        if (!tok) {
            fprintf(stderr, "  (tokenizer %s)\n", name);
            continue;
        }
        const cJSON *prefix = cJSON_GetObjectItem(t, "prefix"), *suffix = cJSON_GetObjectItem(t, "suffix");
        const cJSON *r = cJSON_GetObjectItem(t, "results")->child, *s;
        int i = 0, bad = 0;
        cJSON_ArrayForEach(s, texts) {
            const char *str = s->valuestring;
            const cJSON *plain = cJSON_GetObjectItem(r, "ids_plain"), *dflt = cJSON_GetObjectItem(r, "ids_default");
            size_t n1, n2, n3;
            int32_t *ids = ids_of(cJSON_GetObjectItem(r, "ids"), NULL, NULL, &n1);
            int32_t *want_default = dflt ? ids_of(dflt, NULL, NULL, &n2)
                                         : ids_of(cJSON_GetObjectItem(r, "ids"), prefix, suffix, &n2);
            int32_t *want_plain = ids_of(plain ? plain : cJSON_GetObjectItem(r, "ids"), NULL, NULL, &n3);
            bad += !check_encode(tok, str, TERN_ENCODE_SPECIAL_IN_TEXT, ids, n1, name, i);
            bad += !check_encode(tok, str, TERN_ENCODE_SPECIAL_IN_TEXT | TERN_ENCODE_ADD_SPECIAL,
                                 want_default, n2, name, i);
            bad += !check_encode(tok, str, 0, want_plain, n3, name, i);
            if (keeps_bytes(name)) check_round_trip(tok, str, name, i);
            n_checks += 3;
            free(ids);
            free(want_default);
            free(want_plain);
            r = r->next;
            i++;
            if (bad > 6) break; /* enough to see what is wrong */
        }
        n_tokenizers++;
        tern_tokenizer_free(tok);
    }
    CHECK(n_tokenizers == 14);
    printf("hf_cases.json: %d tokenizers, %d encodings\n", n_tokenizers, n_checks);
    cJSON_Delete(all);
}

/* GPT-2's tokenizer.json, as HF writes it, with the shared vocab.json and merges.txt. */
static char *gpt2_tokenizer_json(void) {
    char path[4096];
    cJSON *json = read_json(source_path("tests/tokenizer/gpt2_tokenizer_skeleton.json", path, sizeof path));
    cJSON *vocab = read_json(shared_path("data/gpt2-tokenizer/vocab.json", path, sizeof path));
    size_t len = 0;
    char *merges_txt = read_whole_file(shared_path("data/gpt2-tokenizer/merges.txt", path, sizeof path), &len);
    if (!json || !vocab || !merges_txt) {
        cJSON_Delete(json);
        cJSON_Delete(vocab);
        free(merges_txt);
        return NULL;
    }
    cJSON *merges = cJSON_CreateArray();
    for (size_t p = 0; p < len;) {
        char *nl = memchr(merges_txt + p, '\n', len - p);
        size_t end = nl ? (size_t)(nl - merges_txt) : len;
        merges_txt[end] = '\0';
        const char *line = merges_txt + p;
        if (*line && strncmp(line, "#version", 8)) { /* HF writes pairs: ["a", "b"] */
            char *space = strchr(line, ' ');
            *space = '\0';
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateString(line));
            cJSON_AddItemToArray(pair, cJSON_CreateString(space + 1));
            cJSON_AddItemToArray(merges, pair);
        }
        p = end + 1;
    }
    cJSON *model = cJSON_GetObjectItem(json, "model");
    cJSON_ReplaceItemInObject(model, "vocab", vocab);
    cJSON_ReplaceItemInObject(model, "merges", merges);
    char *text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    free(merges_txt);
    return text;
}

static void check_gpt2_json(void) {
    char *json = gpt2_tokenizer_json();
    CHECK(json != NULL);
    tern_tokenizer *from_json = NULL, *from_files = NULL;
    if (json) CHECK_OK(tern_tokenizer_load_json_memory(json, strlen(json), &from_json));
    free(json);
    CHECK_OK(load_gpt2_tokenizer(&from_files));
    if (!from_json || !from_files) goto done;
    CHECK(tern_tokenizer_vocab_size(from_json) == 50257 && tern_tokenizer_eot(from_json) == 50256);
    char path[4096];
    cJSON *cases = read_json(source_path("tests/tokenizer/extra_cases.json", path, sizeof path));
    size_t len = 0;
    char *brown = read_whole_file(shared_path("data/brown.txt", path, sizeof path), &len);
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        for (int special = 0; special < 2; special++) {
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            CHECK_OK(tern_tokenizer_encode(from_json, text, strlen(text), special, &a, &na));
            CHECK_OK(tern_tokenizer_encode(from_files, text, strlen(text), special, &b, &nb));
            CHECKF(na == nb && !memcmp(a, b, na * sizeof *a), "GPT-2 case %d: tokenizer.json "
                   "and vocab.json + merges.txt differ", n);
            free(a);
            free(b);
        }
        n++;
    }
    const char *eot = "a<|endoftext|>b";
    for (int special = 0; special < 2; special++) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK_OK(tern_tokenizer_encode(from_json, eot, strlen(eot), special, &a, &na));
        CHECK_OK(tern_tokenizer_encode(from_files, eot, strlen(eot), special, &b, &nb));
        CHECK(na == nb && !memcmp(a, b, na * sizeof *a) && (na == 3) == special);
        free(a);
        free(b);
    }
    if (brown) {
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK_OK(tern_tokenizer_encode(from_json, brown, len, false, &a, &na));
        CHECK_OK(tern_tokenizer_encode(from_files, brown, len, false, &b, &nb));
        CHECK(na == 1329537 && na == nb && !memcmp(a, b, na * sizeof *a));
        printf("gpt2 tokenizer.json: %d cases and brown (%zu ids) as vocab.json + merges.txt\n",
               n, na);
        free(a);
        free(b);
    }
    free(brown);
    cJSON_Delete(cases);
done:
    tern_tokenizer_free(from_json);
    tern_tokenizer_free(from_files);
}

int main(void) {
    check_fixture();
    check_generated();
    check_gpt2_json();
    return check_summary("test_tokenizer_hf");
}
