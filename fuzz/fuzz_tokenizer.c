/* libFuzzer target for the tokenizer. The first byte of an input says what to do with the
 * rest:
 *   even: encode it (special tokens on when bit 1 is set) and decode the ids, which must
 *         give it back byte for byte, invalid UTF-8 included; split it with the hand-written
 *         pre-tokenizer and with GPT-2's regex run by PCRE2, which must agree; run the BPE's
 *         scan and heap algorithms on each short piece, which must agree.
 *   odd:  load a tokenizer from it (vocab.json, a NUL byte, merges.txt): any outcome but a
 *         crash or a leak is fine; one that loads must round-trip a text.
 * GPT-2's files come from $TERN_SHARED_DIR/data/gpt2-tokenizer, else
 * $TERN_SOURCE_DIR/data/gpt2-tokenizer, else data/gpt2-tokenizer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/pretokenize_regex.h"
#include "tokenizer/tokenizer_internal.h"

static tern_tokenizer *gpt2;
static tern_regex_pretokenizer *regex;

static void fail(const char *what) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", what);
    abort(); /* how a fuzz target reports a bug */
}

static void check(tern_error *err, const char *what) {
    if (!err) return;
    fprintf(stderr, "fuzz_tokenizer: %s: %s\n", what, tern_error_message(err));
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char dir[4096];
    const char *shared = getenv("TERN_SHARED_DIR"), *source = getenv("TERN_SOURCE_DIR");
    if (shared)
        snprintf(dir, sizeof dir, "%s/data/gpt2-tokenizer", shared);
    else if (source)
        snprintf(dir, sizeof dir, "%s/data/gpt2-tokenizer", source);
    else
        snprintf(dir, sizeof dir, "data/gpt2-tokenizer");
    check(tern_tokenizer_load_dir(dir, &gpt2), "loading GPT-2's tokenizer");
    check(tern_regex_pretokenizer_new(&regex), "compiling the regex");
    return 0;
}

static void round_trip(const tern_tokenizer *tok, const uint8_t *s, size_t n, bool special) {
    int32_t *ids = NULL;
    size_t count = 0;
    char *back = NULL;
    size_t len = 0;
    check(tern_tokenizer_encode(tok, (const char *)s, n, special, &ids, &count), "encode");
    check(tern_tokenizer_decode(tok, ids, count, &back, &len), "decode");
    if (len != n || memcmp(back, s, n)) fail("decode(encode(text)) != text");
    free(ids);
    free(back);
}

static void pieces_and_bpe(const uint8_t *s, size_t n) {
    size_t *ends = NULL, count = 0;
    check(tern_regex_pretokenize(regex, s, n, &ends, &count), "regex");
    int32_t small[TERN_BPE_SMALL_MAX];
    tern_id_vec large = {0};
    size_t p = 0, i = 0;
    for (; p < n; i++) {
        size_t q = tern_pretokenize_next_piece(s, n, p);
        if (i >= count || ends[i] != q) fail("the pre-tokenizer and the regex split differently");
        if (q - p <= TERN_BPE_SMALL_MAX) {
            size_t k = tern_bpe_small(&gpt2->merges, gpt2->byte_token, s + p, q - p, small);
            large.count = 0;
            check(tern_bpe_large(&gpt2->merges, gpt2->byte_token, s + p, q - p, &large), "bpe");
            if (large.count != k || memcmp(small, large.data, k * sizeof *small))
                fail("the BPE scan and heap disagree");
        }
        p = q;
    }
    if (i != count) fail("the regex finds more pieces");
    free(ends);
    free(large.data);
}

static void load(const uint8_t *s, size_t n) {
    const uint8_t *nul = memchr(s, 0, n);
    size_t vocab_len = nul ? (size_t)(nul - s) : n;
    const char *merges = nul ? (const char *)nul + 1 : "";
    size_t merges_len = nul ? n - vocab_len - 1 : 0;
    tern_tokenizer *tok = NULL;
    tern_error *err = tern_tokenizer_load_memory((const char *)s, vocab_len, merges, merges_len,
                                                 &tok);
    if (err) {
        if (tok) fail("a failed load returned a tokenizer");
        if (strchr(tern_error_message(err), '\n')) fail("an error message spans lines");
        tern_error_free(err);
        return;
    }
    static const uint8_t text[] = "Hello, world! <|endoftext|> \xC3\xA9\xFF 42";
    round_trip(tok, text, sizeof text - 1, true);
    tern_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        load(s, n);
    } else {
        round_trip(gpt2, s, n, data[0] & 2);
        pieces_and_bpe(s, n);
    }
    return 0;
}
