/* The whole Brown corpus: its ids must be tiktoken's (brown_reference.txt holds their count
 * and a hash of each block of ids, written by bench/tokenizer/tiktoken_ref.py reference),
 * decoding them must give the corpus back byte for byte, and the hand-written
 * pre-tokenizer must split it exactly where GPT-2's regex (run by PCRE2) does. */
#include <inttypes.h>
#include <stdint.h>

#include "check.h"
#include "tern/tokenizer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/pretokenize_regex.h"
#include "tokenizer_test_util.h"
#include "brown_reference.h"

/* Compares block by block; on a mismatch, shows where the first bad block's text is. */
static void check_ids(const tern_tokenizer *tok, const int32_t *ids, size_t count,
                      const reference *ref) {
    CHECKF(count == ref->count, "%zu ids, tiktoken has %zu", count, ref->count);
    for (size_t b = 0; b < ref->blocks; b++) {
        size_t start = b * ref->block;
        if (start >= count) break;
        size_t n = count - start < ref->block ? count - start : ref->block;
        uint64_t h = fnv1a64(ids + start, n);
        if (h == ref->hash[b]) continue;
        CHECKF(false, "ids %zu to %zu (block %zu) differ from tiktoken's", start,
               start + n - 1, b);
        char *text = NULL;
        size_t len = 0;
        if (!tern_tokenizer_decode(tok, ids + start, n < 40 ? n : 40, &text, &len))
            fprintf(stderr, "  the block starts with: \"%.*s\"\n", (int)len, text);
        free(text);
        return; /* later blocks are shifted too: the first one is what matters */
    }
}

/* The scanner against the regex over the whole text. */
static void check_pretokenizer(const uint8_t *s, size_t len) {
    tern_regex_pretokenizer *re = NULL;
    CHECK_OK(tern_regex_pretokenizer_new(&re));
    size_t *ends = NULL, count = 0;
    if (re) CHECK_OK(tern_regex_pretokenize(re, s, len, &ends, &count));
    size_t p = 0, i = 0;
    while (ends && p < len) {
        size_t q = tern_pretokenize_next_piece(s, len, p);
        if (i >= count || ends[i] != q) {
            CHECKF(false, "piece %zu at byte %zu: the scanner ends it at %zu, the regex at %zu",
                   i, p, q, i < count ? ends[i] : 0);
            break;
        }
        p = q;
        i++;
    }
    CHECKF(i == count, "%zu pieces, the regex finds %zu", i, count);
    printf("brown: %zu pieces, the same as the regex's\n", count);
    free(ends);
    tern_regex_pretokenizer_free(re);
}

int main(void) {
    char path[4096];
    const char *src = getenv("TERN_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/tokenizer/brown_reference.txt", src ? src : ".");
    reference *ref = malloc(sizeof *ref);
    CHECK(ref && read_reference(path, ref));
    CHECK(ref && ref->count == 1329537); /* the figure */

    size_t len = 0;
    char *text = read_whole_file(shared_path("data/brown.txt", path, sizeof path), &len);
    CHECK(text != NULL);
    tern_tokenizer *tok = NULL;
    CHECK_OK(load_gpt2_tokenizer(&tok));
    if (text && tok && ref) {
        int32_t *ids = NULL;
        size_t count = 0;
        CHECK_OK(tern_tokenizer_encode(tok, text, len, false, &ids, &count));
        check_ids(tok, ids, count, ref);
        printf("brown: %zu bytes -> %zu ids\n", len, count);

        char *back = NULL;
        size_t back_len = 0;
        CHECK_OK(tern_tokenizer_decode(tok, ids, count, &back, &back_len));
        CHECK(back && back_len == len && !memcmp(back, text, len));
        free(back);
        free(ids);
        check_pretokenizer((const uint8_t *)text, len);
    }
    tern_tokenizer_free(tok);
    free(text);
    free(ref);
    return check_summary("test_tokenizer_brown");
}
