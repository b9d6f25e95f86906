/* The generated class tables (src/tokenizer/unicode_classes.c, read out of tiktoken's regex
 * engine) against an independent, maintained Unicode library: PCRE2's Unicode properties.
 * For every code point PCRE2's Unicode version assigns, \p{L} and \p{N} must agree with
 * ours; code points it leaves unassigned (\p{Cn}) may be letters or numbers in our newer
 * tables, and are counted. White space is checked against the White_Space property,
 * written out here from Unicode's PropList.txt. The strict UTF-8 decoder is checked
 * against PCRE2's UTF-8 validation. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

static pcre2_code *compile(const char *pattern, uint32_t options) {
    int err;
    PCRE2_SIZE at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | options, &err, &at, NULL);
    if (code) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return code;
}

static size_t encode_utf8(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static bool matches(pcre2_code *code, pcre2_match_data *md, const uint8_t *s, size_t n) {
    return pcre2_match(code, s, n, 0, PCRE2_NO_UTF_CHECK, md, NULL) > 0;
}

/* Unicode's White_Space property (PropList.txt; unchanged since Unicode 6.3). */
static bool is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static void check_classes(void) {
    pcre2_code *letter = compile("^\\p{L}$", 0), *number = compile("^\\p{N}$", 0);
    pcre2_code *unassigned = compile("^\\p{Cn}$", 0);
    CHECK(letter && number && unassigned);
    if (!letter || !number || !unassigned) return;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    size_t wrong = 0, newer = 0, letters = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        enum tern_char_class ours = tern_unicode_class(cp);
        if (cp >= 0xD800 && cp < 0xE000) { /* surrogates: never characters in UTF-8 */
            CHECK(ours == TERN_CHAR_OTHER);
            continue;
        }
        CHECKF((ours == TERN_CHAR_SPACE) == is_white_space(cp), "U+%04X white space", cp);
        letters += ours == TERN_CHAR_LETTER;
        uint8_t s[4];
        size_t n = encode_utf8(cp, s);
        if (matches(unassigned, md, s, n)) {
            newer += ours == TERN_CHAR_LETTER || ours == TERN_CHAR_NUMBER;
            continue;
        }
        enum tern_char_class want = matches(letter, md, s, n)   ? TERN_CHAR_LETTER
                                    : matches(number, md, s, n) ? TERN_CHAR_NUMBER
                                                                : TERN_CHAR_OTHER;
        bool ok = ours == want || (want == TERN_CHAR_OTHER && ours == TERN_CHAR_SPACE);
        if (!ok && wrong++ < 10)
            fprintf(stderr, "U+%04X: ours is class %d, PCRE2's is %d\n", cp, ours, want);
    }
    CHECKF(wrong == 0, "%zu code points are classed differently from PCRE2", wrong);
    /* Sanity bounds that a broken table would miss: Unicode 14 already has 131,756
     * letters; the tables' version adds some (141,028 in Unicode 16). */
    CHECKF(letters >= 131756 && letters < 160000, "%zu letters", letters);
    char unicode[32] = "?";
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, unicode) < 0) unicode[0] = '?';
    printf("classes agree with PCRE2 (Unicode %s) on all its assigned code points; %zu letters "
           "and numbers are newer than it\n", unicode, newer);
    pcre2_match_data_free(md);
    pcre2_code_free(letter);
    pcre2_code_free(number);
    pcre2_code_free(unassigned);
}

/* tern_utf8_decode against PCRE2: with PCRE2_MATCH_INVALID_UTF, \A. (any one character)
 * matches exactly a well-formed first character. Every first and second byte, with a
 * few choices of third and fourth. */
static void check_decoder(void) {
    pcre2_code *first = compile("\\A.", PCRE2_DOTALL | PCRE2_MATCH_INVALID_UTF);
    CHECK(first != NULL);
    if (!first) return;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    static const uint8_t tails[] = {0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0x41, 0xC0};
    size_t wrong = 0, tried = 0;
    for (int b0 = 0; b0 < 256; b0++) {
        for (int b1 = 0; b1 < 256; b1++) {
            for (size_t t = 0; t < sizeof tails * sizeof tails; t++) {
                uint8_t s[4] = {(uint8_t)b0, (uint8_t)b1, tails[t % sizeof tails],
                                tails[t / sizeof tails]};
                for (size_t n = 1; n <= 4; n++) {
                    uint32_t cp = 0;
                    size_t ours = tern_utf8_decode(s, n, &cp);
                    int rc = pcre2_match(first, s, n, 0, 0, md, NULL);
                    size_t want = rc > 0 ? pcre2_get_ovector_pointer(md)[1] : 0;
                    tried++;
                    if (ours != want && wrong++ < 10)
                        fprintf(stderr, "%02X %02X %02X %02X (%zu bytes): ours %zu, PCRE2 %zu\n",
                                s[0], s[1], s[2], s[3], n, ours, want);
                    if (ours && ours == want) {
                        uint8_t again[4];
                        size_t len = encode_utf8(cp, again);
                        if ((len != ours || memcmp(again, s, len)) && wrong++ < 10)
                            fprintf(stderr, "%02X %02X %02X %02X: decoded to U+%04X\n", s[0],
                                    s[1], s[2], s[3], cp);
                    }
                }
            }
        }
    }
    CHECKF(wrong == 0, "%zu of %zu byte sequences decode differently from PCRE2", wrong, tried);
    pcre2_match_data_free(md);
    pcre2_code_free(first);
}

int main(void) {
    check_classes();
    check_decoder();
    return check_summary("test_unicode_classes");
}
