/* Bad inputs give one-line errors, never a crash: missing and garbled vocab.json and
 * merges.txt, ids outside the vocabulary. Also a tiny hand-made vocabulary, loaded from
 * memory, to show the loader and BPE follow the files and nothing GPT-2-specific. */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "tern/tokenizer.h"
#include "tokenizer_test_util.h"

/* GPT-2's byte alphabet, written out independently of src/tokenizer/byte_alphabet.c:
 * appends the spelling of byte b (as UTF-8) to out. */
static size_t spell_byte(int b, char *out) {
    int self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int cp = b;
    if (!self) {
        int k = 0;
        for (int c = 0; c < b; c++)
            k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* A vocabulary of the 256 bytes (ids 0-255, in byte order) plus `extra` (a JSON fragment
 * like "\"ab\": 256", or ""), as JSON text in a static buffer. */
static const char *byte_vocab(const char *extra) {
    static char json[8192];
    size_t n = 0;
    json[n++] = '{';
    for (int b = 0; b < 256; b++) {
        char spelled[4];
        size_t len = spell_byte(b, spelled);
        json[n++] = '"';
        if (spelled[0] == '"' || spelled[0] == '\\') json[n++] = '\\';
        memcpy(json + n, spelled, len);
        n += len;
        n += (size_t)snprintf(json + n, sizeof json - n, "\": %d%s", b, b < 255 ? ", " : "");
    }
    snprintf(json + n, sizeof json - n, "%s%s}", *extra ? ", " : "", extra);
    return json;
}

static tern_error *load(const char *vocab, const char *merges, tern_tokenizer **tok) {
    return tern_tokenizer_load_memory(vocab, strlen(vocab), merges, strlen(merges), tok);
}

/* Loading fails with a one-line message containing needle, and leaves *out NULL. */
static void check_load_error(const char *vocab, const char *merges, const char *needle) {
    tern_tokenizer *tok = (tern_tokenizer *)&tok; /* not NULL: load must clear it */
    tern_error *err = load(vocab, merges, &tok);
    CHECKF(err != NULL, "loading succeeded; expected an error with '%s'", needle);
    CHECK(tok == NULL);
    if (!err) {
        tern_tokenizer_free(tok);
        return;
    }
    const char *message = tern_error_message(err);
    CHECKF(strstr(message, needle) != NULL, "'%s' lacks '%s'", message, needle);
    CHECKF(strchr(message, '\n') == NULL, "'%s' is not one line", message);
    tern_error_free(err);
}

static void check_garbled_vocab(void) {
    const char *merges = "#version: 0.2\n";
    check_load_error("", merges, "vocab.json: not valid JSON");
    check_load_error("{\"a\": 0,", merges, "not valid JSON");
    check_load_error("[1, 2]", merges, "expected a JSON object");
    check_load_error("{}", merges, "has no tokens");
    check_load_error("{\"a\": \"zero\"}", merges, "token 'a': the id is not a number");
    check_load_error("{\"a\": 0.5}", merges, "not a whole number");
    check_load_error("{\"a\": -1}", merges, "not a whole number");
    check_load_error("{\"a\": 1}", merges, "not a whole number from 0 to 0");
    check_load_error("{\"a\": 0, \"b\": 0}", merges, "id 0 is given to two tokens");
    check_load_error("{\"a b\": 0}", merges, "not spelled in GPT-2's byte alphabet");
    check_load_error("{\"\": 0}", merges, "empty or not spelled");
    check_load_error("{\"a\": 0, \"a\": 1}", merges, "ids 0 and 1 are the same token");
    check_load_error("{\"a\": 0}", merges, "no token for the byte 0x00");
    check_load_error(byte_vocab("\"a\": 256"), merges, "ids 97 and 256 are the same token");
}

static void check_garbled_merges(void) {
    const char *vocab = byte_vocab("\"ab\": 256, \"abc\": 257");
    check_load_error(vocab, "a", "merges.txt: line 1: expected two tokens");
    check_load_error(vocab, "#version: 0.2\na  b\n", "line 2: expected two tokens");
    check_load_error(vocab, "a b c\n", "expected two tokens separated by one space");
    check_load_error(vocab, "a b\n b\n", "line 2: expected two tokens");
    check_load_error(vocab, "a b\nxy c\n", "line 2: the token 'xy' is not in the vocabulary");
    check_load_error(vocab, "a c\n", "line 1: 'a c' merges into a token that is not in");
    check_load_error(vocab, "a b\na b\n", "line 2: the rule 'a b' appears twice");
    check_load_error(vocab, "a \x01\n", "not spelled in GPT-2's byte alphabet");
    check_load_error(vocab, "a \xFF\n", "not spelled in GPT-2's byte alphabet");
    /* Fine: no merges at all, a CRLF file, a missing final newline, blank lines. */
    const char *good[] = {"", "#version: 0.2\n", "a b\r\nab c\r\n", "a b\nab c", "\na b\n\n"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tern_tokenizer *tok = NULL;
        CHECK_OK(load(vocab, good[i], &tok));
        tern_tokenizer_free(tok);
    }
}

/* The tiny vocabulary encodes by its own rules: "ab" then "abc". */
static void check_tiny_vocab(void) {
    tern_tokenizer *tok = NULL;
    CHECK_OK(load(byte_vocab("\"ab\": 256, \"abc\": 257, \"<|endoftext|>\": 258"),
                  "#version: 0.2\na b\nab c\n", &tok));
    if (!tok) return;
    CHECK(tern_tokenizer_vocab_size(tok) == 259);
    CHECK(tern_tokenizer_eot(tok) == 258);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tern_tokenizer_encode(tok, "abcab ab<|endoftext|>", 21, true, &ids, &n));
    int32_t want[] = {257, 256, 32, 256, 258}; /* "abc" "ab", " " "ab" (there is no " a") */
    CHECK(n == 5 && !memcmp(ids, want, sizeof want));
    free(ids);
    tern_tokenizer_free(tok);
    /* Without <|endoftext|> in the vocabulary, special tokens are simply off. */
    CHECK_OK(load(byte_vocab(""), "", &tok));
    if (!tok) return;
    CHECK(tern_tokenizer_eot(tok) == -1);
    CHECK_OK(tern_tokenizer_encode(tok, "<|endoftext|>", 13, true, &ids, &n));
    CHECK(n == 13);
    free(ids);
    tern_tokenizer_free(tok);
}

static void check_files(void) {
    tern_tokenizer *tok = (tern_tokenizer *)&tok;
    CHECK_ERR(tern_tokenizer_load_dir("/nonexistent/tokenizer", &tok),
              "cannot open /nonexistent/tokenizer/vocab.json");
    CHECK(tok == NULL);
    char dir[4096];
    shared_path("data/gpt2-tokenizer", dir, sizeof dir);
    char vocab[4200], merges[4200];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/merges.txt", dir);
    CHECK_ERR(tern_tokenizer_load(vocab, "/nonexistent/merges.txt", &tok), "cannot open");
    /* Each file where the other is expected: the error names the file. */
    tern_error *err = tern_tokenizer_load(merges, vocab, &tok);
    CHECK(err && strstr(tern_error_message(err), merges) &&
          strstr(tern_error_message(err), "not valid JSON"));
    tern_error_free(err);
    CHECK_ERR(tern_tokenizer_load(vocab, vocab, &tok), "expected two tokens");
    CHECK_ERR(tern_tokenizer_load(dir, merges, &tok), "not a regular file"); /* a folder */
}

static void check_decode_range(void) {
    tern_tokenizer *tok = NULL;
    CHECK_OK(load_gpt2_tokenizer(&tok));
    if (!tok) return;
    int32_t bad[][2] = {{464, 50257}, {-1, 464}, {INT32_MAX, 0}, {INT32_MIN, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *text = (char *)&tok;
        size_t len = 7;
        CHECK_ERR(tern_tokenizer_decode(tok, bad[i], 2, &text, &len), "outside the vocabulary");
        CHECK(text == NULL && len == 0);
    }
    CHECK_ERR(tern_tokenizer_decode(tok, bad[0], 2, &(char *){NULL}, &(size_t){0}),
              "token id 50257 (at position 1) is outside the vocabulary (ids 0 to 50256)");
    const char *bytes;
    size_t len;
    CHECK_ERR(tern_tokenizer_token_bytes(tok, 50257, &bytes, &len), "outside the vocabulary");
    CHECK_ERR(tern_tokenizer_token_bytes(tok, -5, &bytes, &len), "token id -5");
    tern_tokenizer_free(tok);
}

int main(void) {
    check_garbled_vocab();
    check_garbled_merges();
    check_tiny_vocab();
    check_files();
    check_decode_range();
    return check_summary("test_tokenizer_errors");
}
