/* Arbitrary bytes, invalid UTF-8 included: encoding then decoding gives the input back;
 * the hand-written pre-tokenizer splits exactly where the PCRE2 regex does; the BPE's scan
 * and heap algorithms agree; long pieces take the heap path with the right result. The
 * inputs come from a fixed-seed generator, mixing fragments chosen to hit the rule's
 * corners with random bytes. */
#include <stdint.h>

#include "check.h"
#include "tern/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/pretokenize_regex.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer_test_util.h"

static uint64_t rng_state = 0x5EED5EED12345678ull;

static uint64_t next_random(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *const fragments[] = {
    " ", "  ", "\t", "\n", "\r\n", "\n\n", "\v", "\f", "\x1c", "a", "Z", "word", " the",
    "0", "42", " 7", "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "''", "!", "?!",
    ".", ",", "-", "_", "<|endoftext|>", "<|", "|>", "\xC3\xA9", "\xC3\xAF",   /* é ï */
    "\xE6\x97\xA5\xE6\x9C\xAC",                                              /* 日本 */
    "\xD9\xA3", "\xE2\x85\xAB", "\xC2\xBD",                                  /* ٣ Ⅻ ½ */
    "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xC2\x85", "\xE1\xA0\x8E", /* nbsp, ideographic
                                                  space, line separator, NEL, U+180E */
    "\xE2\x80\x8B", "\xCC\x81",                  /* zero-width space, combining acute */
    "\xF0\x9F\x98\x80", "\xE1\xB2\x89",          /* 😀, U+1C89 (a Unicode 16 letter) */
    "\x80", "\xBF", "\xFF", "\xFE", "\xC0\x80", "\xC1\xBF",  /* stray and overlong bytes */
    "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", /* overlong,
                                                  surrogate, past U+10FFFF, bad lead */
    "\xE2\x82", "\xF0\x9F\x98", "\xC3",          /* truncated sequences */
};
#define FRAGMENTS (sizeof fragments / sizeof fragments[0])

/* A random text of up to max bytes in buf; returns its length. */
static size_t random_text(uint8_t *buf, size_t max) {
    size_t target = next_random() % max, n = 0;
    while (n < target) {
        uint64_t r = next_random();
        if (r % 8 == 0) { /* a random byte */
            buf[n++] = (uint8_t)(r >> 8);
            continue;
        }
        const char *f = fragments[(r >> 8) % FRAGMENTS];
        size_t len = strlen(f);
        if (n + len > max) break;
        memcpy(buf + n, f, len);
        n += len;
    }
    return n;
}

static bool check_roundtrip(const tern_tokenizer *tok, const uint8_t *s, size_t n, bool special) {
    int32_t *ids = NULL;
    size_t count = 0;
    char *back = NULL;
    size_t len = 0;
    tern_error *err = tern_tokenizer_encode(tok, (const char *)s, n, special, &ids, &count);
    if (!err) err = tern_tokenizer_decode(tok, ids, count, &back, &len);
    bool ok = !err && len == n && !memcmp(back, s, n);
    tern_error_free(err);
    free(ids);
    free(back);
    return ok;
}

/* The scanner's pieces against the regex's; prints the first difference. */
static bool check_pieces(const tern_regex_pretokenizer *re, const uint8_t *s, size_t n) {
    size_t *ends = NULL, count = 0;
    tern_error *err = tern_regex_pretokenize(re, s, n, &ends, &count);
    if (err) {
        fprintf(stderr, "regex: %s\n", tern_error_message(err));
        tern_error_free(err);
        return false;
    }
    size_t p = 0, i = 0;
    bool ok = true;
    for (; p < n; i++) {
        size_t q = tern_pretokenize_next_piece(s, n, p);
        if (i >= count || ends[i] != q) {
            fprintf(stderr, "piece %zu at byte %zu: scanner ends it at %zu, regex at %zu; text:",
                    i, p, q, i < count ? ends[i] : 0);
            for (size_t k = 0; k < n && k < 200; k++) fprintf(stderr, " %02X", s[k]);
            fprintf(stderr, "\n");
            ok = false;
            break;
        }
        p = q;
    }
    free(ends);
    return ok && i == count;
}

/* The scan and the heap agree on every short piece of the text. */
static bool check_bpe_paths(const tern_tokenizer *tok, const uint8_t *s, size_t n) {
    int32_t small[TERN_BPE_SMALL_MAX];
    tern_id_vec large = {0};
    bool ok = true;
    for (size_t p = 0; p < n && ok;) {
        size_t q = tern_pretokenize_next_piece(s, n, p);
        if (q - p <= TERN_BPE_SMALL_MAX) {
            size_t k = tern_bpe_small(&tok->merges, tok->byte_token, s + p, q - p, small);
            large.count = 0;
            tern_error *err = tern_bpe_large(&tok->merges, tok->byte_token, s + p, q - p, &large);
            ok = !err && large.count == k && !memcmp(small, large.data, k * sizeof *small);
            tern_error_free(err);
        }
        p = q;
    }
    free(large.data);
    return ok;
}

/* Long pieces (past TERN_BPE_SMALL_MAX bytes) go through the heap. */
static void check_long_pieces(const tern_tokenizer *tok) {
    size_t n = 100000;
    char *text = malloc(n);
    memset(text, 'a', n);
    int32_t *ids = NULL;
    size_t count = 0;
    CHECK_OK(tern_tokenizer_encode(tok, text, n, false, &ids, &count));
    /* GPT-2 merges "aaaa" (24794) and nothing longer that fits: a run of 'a's encodes as
     * 24794 repeated, as the fixture's 300 'a's do. */
    bool all = count == n / 4;
    for (size_t i = 0; all && i < count; i++) all = ids[i] == 24794;
    CHECK(all);
    free(ids);
    /* A long random run of letters: the heap path must equal the scan on each 64-byte
     * prefix, and round-trip whole. */
    for (size_t i = 0; i < n; i++) text[i] = (char)('a' + next_random() % 26);
    CHECK(check_roundtrip(tok, (const uint8_t *)text, n, false));
    for (size_t len = 65; len <= 64 * 4; len += 37) {
        tern_id_vec large = {0};
        CHECK_OK(tern_bpe_large(&tok->merges, tok->byte_token, (const uint8_t *)text, len, &large));
        char *back = NULL;
        size_t back_len = 0;
        CHECK_OK(tern_tokenizer_decode(tok, large.data, large.count, &back, &back_len));
        CHECK(back_len == len && !memcmp(back, text, len));
        free(back);
        free(large.data);
    }
    free(text);
}

int main(void) {
    tern_tokenizer *tok = NULL;
    tern_regex_pretokenizer *re = NULL;
    CHECK_OK(load_gpt2_tokenizer(&tok));
    CHECK_OK(tern_regex_pretokenizer_new(&re));
    if (!tok || !re) return check_summary("test_tokenizer_roundtrip");

    enum { CASES = 3000, MAX_LEN = 400 };
    uint8_t buf[MAX_LEN];
    int roundtrip_bad = 0, pieces_bad = 0, bpe_bad = 0;
    for (int c = 0; c < CASES; c++) {
        size_t n = random_text(buf, sizeof buf);
        roundtrip_bad += !check_roundtrip(tok, buf, n, c % 2);
        pieces_bad += !check_pieces(re, buf, n);
        bpe_bad += !check_bpe_paths(tok, buf, n);
    }
    CHECKF(roundtrip_bad == 0, "%d of %d texts do not round-trip", roundtrip_bad, CASES);
    CHECKF(pieces_bad == 0, "%d of %d texts split differently from the regex", pieces_bad, CASES);
    CHECKF(bpe_bad == 0, "%d of %d texts: the BPE scan and heap disagree", bpe_bad, CASES);

    /* Every single byte and every pair of bytes. */
    int pairs_bad = 0;
    for (int a = 0; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            uint8_t two[2] = {(uint8_t)a, (uint8_t)b};
            pairs_bad += !check_roundtrip(tok, two, 2, true) || !check_pieces(re, two, 2);
        }
        uint8_t one = (uint8_t)a;
        pairs_bad += !check_roundtrip(tok, &one, 1, false);
    }
    CHECKF(pairs_bad == 0, "%d byte pairs fail", pairs_bad);

    check_long_pieces(tok);
    tern_regex_pretokenizer_free(re);
    tern_tokenizer_free(tok);
    return check_summary("test_tokenizer_roundtrip");
}
