/* libFuzzer target for tokenizer.json. The first byte of an input says what to do with the
 * rest (the byte's value mod 3):
 *   0: encode it with the llama-tiny-a fixture's tokenizer (Llama 3's Split regex, added
 *      tokens, ignore_merges, BOS), every combination of flags (bits 2-3 of the byte), and
 *      decode: the ids must give the bytes back (invalid UTF-8 included; the BOS decodes to
 *      its own text, so only SPECIAL_IN_TEXT and no flags are compared).
 *   1: load it as a tokenizer.json: any outcome but a crash, a leak or a multi-line error is
 *      fine; one that loads must encode a few texts, and itself, into ids it can decode.
 *   2: a regex up to the first NUL byte, then a text: a Split pre-tokenizer with that pattern
 *      (behaviour and invert from bits 2-5 of the byte) over a vocabulary of the 256 bytes.
 *      The regex may fail to compile or hit PCRE2's match limit (errors); otherwise a
 *      behaviour that keeps every byte must decode to the text.
 * The fixture comes from $TERN_SHARED_DIR/fixtures/llama-tiny-a, else
 * ../shared/fixtures/llama-tiny-a. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tokenizer.h"
#include "tokenizer/byte_alphabet.h"

static tern_tokenizer *llama;
static char *byte_vocab; /* {"model": {vocab of the 256 bytes, no merges}, ...} as JSON text */

static void fail(const char *what) {
    fprintf(stderr, "fuzz_tokenizer_json: %s\n", what);
    abort(); /* how a fuzz target reports a bug */
}

static void check(tern_error *err, const char *what) {
    if (!err) return;
    fprintf(stderr, "fuzz_tokenizer_json: %s: %s\n", what, tern_error_message(err));
    abort();
}

static void expect_one_line(tern_error *err) {
    if (strchr(tern_error_message(err), '\n')) fail("an error message spans lines");
    tern_error_free(err);
}

/* A vocabulary of the 256 single bytes (spelled in the byte alphabet), for mode 2. */
static char *byte_vocab_json(void) {
    cJSON *vocab = cJSON_CreateObject();
    int32_t id = 0;
    for (uint32_t cp = 0; cp < 0x144; cp++) {
        if (tern_byte_of_char(cp) < 0) continue;
        char utf8[3] = {0};
        if (cp < 0x80) {
            utf8[0] = (char)cp;
        } else {
            utf8[0] = (char)(0xC0 | cp >> 6);
            utf8[1] = (char)(0x80 | (cp & 0x3F));
        }
        cJSON_AddNumberToObject(vocab, utf8, id++);
    }
    cJSON *model = cJSON_CreateObject();
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", cJSON_CreateArray());
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "model", model);
    cJSON *decoder = cJSON_CreateObject();
    cJSON_AddStringToObject(decoder, "type", "ByteLevel");
    cJSON_AddItemToObject(root, "decoder", decoder);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char dir[4096];
    const char *shared = getenv("TERN_SHARED_DIR");
    snprintf(dir, sizeof dir, "%s/fixtures/llama-tiny-a", shared ? shared : "../shared");
    check(tern_tokenizer_load_dir(dir, &llama), "loading the fixture's tokenizer");
    byte_vocab = byte_vocab_json();
    if (!byte_vocab) fail("out of memory");
    return 0;
}

/* Encodes and decodes; when `exact`, the decoded bytes must be the text. */
static void encode_decode(const tern_tokenizer *tok, const uint8_t *s, size_t n, unsigned flags,
                          int exact) {
    int32_t *ids = NULL;
    size_t count = 0;
    char *back = NULL;
    size_t len = 0;
    check(tern_tokenizer_encode_flags(tok, (const char *)s, n, flags, &ids, &count), "encode");
    check(tern_tokenizer_decode(tok, ids, count, &back, &len), "decode");
    if (exact && (len != n || memcmp(back, s, n))) fail("decode(encode(text)) != text");
    free(ids);
    free(back);
}

static void load(const uint8_t *s, size_t n) {
    tern_tokenizer *tok = NULL;
    tern_error *err = tern_tokenizer_load_json_memory((const char *)s, n, &tok);
    if (err) {
        if (tok) fail("a failed load returned a tokenizer");
        expect_one_line(err);
        return;
    }
    static const char *const texts[] = {"Hello, world! 12345", "<|end_of_text|> \xC3\xA9\xFF",
                                        "  \n\n\t x", ""};
    for (int i = 0; i < 4; i++)
        for (unsigned flags = 0; flags < 4; flags++)
            encode_decode(tok, (const uint8_t *)texts[i], strlen(texts[i]), flags, 0);
    encode_decode(tok, s, n < 4096 ? n : 4096, 3, 0);
    tern_tokenizer_free(tok);
}

static void split(unsigned mode, const uint8_t *s, size_t n) {
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                            "MergedWithNext", "Contiguous"};
    const uint8_t *nul = memchr(s, 0, n);
    if (!nul) return;
    size_t pattern_len = (size_t)(nul - s);
    char *pattern = malloc(pattern_len + 1);
    memcpy(pattern, s, pattern_len);
    pattern[pattern_len] = '\0';
    unsigned behavior = (mode >> 2) % 5;
    int invert = (mode >> 5) & 1;

    cJSON *root = cJSON_Parse(byte_vocab);
    cJSON *seq = cJSON_CreateObject(), *list = cJSON_CreateArray(), *sp = cJSON_CreateObject();
    cJSON *pat = cJSON_CreateObject(), *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(pat, "Regex", pattern);
    cJSON_AddStringToObject(sp, "type", "Split");
    cJSON_AddItemToObject(sp, "pattern", pat);
    cJSON_AddStringToObject(sp, "behavior", behaviors[behavior]);
    cJSON_AddBoolToObject(sp, "invert", invert);
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
    cJSON_AddBoolToObject(bl, "use_regex", 0);
    cJSON_AddItemToArray(list, sp);
    cJSON_AddItemToArray(list, bl);
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON_AddItemToObject(seq, "pretokenizers", list);
    cJSON_AddItemToObject(root, "pre_tokenizer", seq);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    free(pattern);
    tern_tokenizer *tok = NULL;
    tern_error *err = json ? tern_tokenizer_load_json_memory(json, strlen(json), &tok) : NULL;
    free(json);
    if (err) { /* a pattern PCRE2 rejects, or one with a NUL that JSON cut short */
        expect_one_line(err);
        return;
    }
    if (!tok) return;
    const uint8_t *text = nul + 1;
    size_t len = n - pattern_len - 1;
    int32_t *ids = NULL;
    size_t count = 0;
    err = tern_tokenizer_encode_flags(tok, (const char *)text, len, 0, &ids, &count);
    if (err) { /* PCRE2's match limit: a pathological pattern is an error, not a hang */
        expect_one_line(err);
    } else {
        char *back = NULL;
        size_t back_len = 0;
        check(tern_tokenizer_decode(tok, ids, count, &back, &back_len), "decode");
        if (behavior != 0 && (back_len != len || memcmp(back, text, len)))
            fail("a split that keeps every byte lost some");
        free(back);
    }
    free(ids);
    tern_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    switch (data[0] % 3) {
    case 0:
        for (unsigned flags = 0; flags < 4; flags++)
            encode_decode(llama, s, n, flags, !(flags & TERN_ENCODE_ADD_SPECIAL));
        break;
    case 1:
        load(s, n);
        break;
    default:
        split(data[0], s, n);
        break;
    }
    return 0;
}
