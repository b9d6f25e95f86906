/* GPT-2's pre-tokenization, written out by hand.
 *
 * GPT-2 splits text into pieces with this regex, and runs BPE inside each piece:
 *
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * Every character is a letter, a number, white space or other, so some alternative matches
 * at every position and the pieces tile the text. tern_pretokenize_next() returns where the
 * piece starting at a position ends, taking the alternatives in the regex's order. It is a
 * scanner over the tables of unicode_classes.h and is checked against the regex itself,
 * run by PCRE2 (pretokenize_regex.h), on the Brown corpus, on random text and by the fuzzer.
 *
 * Bytes that are not part of well-formed UTF-8 are taken one at a time as "other"
 * characters (the regex cannot see them; this is tern's extension to arbitrary bytes). */
#ifndef TERN_TOKENIZER_PRETOKENIZE_H
#define TERN_TOKENIZER_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

/* The classes of the ASCII characters, to skip the table lookup for them. */
#define TERN_O TERN_CHAR_OTHER
#define TERN_L TERN_CHAR_LETTER
#define TERN_N TERN_CHAR_NUMBER
#define TERN_S TERN_CHAR_SPACE
static const uint8_t tern_ascii_class[128] = {
    TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* 00-07 */
    TERN_O, TERN_S, TERN_S, TERN_S, TERN_S, TERN_S, TERN_O, TERN_O, /* 08-0F: \t \n \v \f \r */
    TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* 10-17 */
    TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* 18-1F: not White_Space */
    TERN_S, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* space ! " # $ % & ' */
    TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* ( ) * + , - . / */
    TERN_N, TERN_N, TERN_N, TERN_N, TERN_N, TERN_N, TERN_N, TERN_N, /* 0-7 */
    TERN_N, TERN_N, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* 8 9 : ; < = > ? */
    TERN_O, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, /* @ A-G */
    TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, /* H-O */
    TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, /* P-W */
    TERN_L, TERN_L, TERN_L, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* X Y Z [ \ ] ^ _ */
    TERN_O, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, /* ` a-g */
    TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, /* h-o */
    TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, TERN_L, /* p-w */
    TERN_L, TERN_L, TERN_L, TERN_O, TERN_O, TERN_O, TERN_O, TERN_O, /* x y z { | } ~ DEL */
};
#undef TERN_O
#undef TERN_L
#undef TERN_N
#undef TERN_S

/* The class of the unit at s[p] (p < n) and its length in *len: a well-formed character,
 * or a single ill-formed byte, which is "other". */
static inline enum tern_char_class tern_pretok_unit(const uint8_t *s, size_t n, size_t p,
                                                    size_t *len) {
    uint8_t b = s[p];
    if (b < 0x80) {
        *len = 1;
        return (enum tern_char_class)tern_ascii_class[b];
    }
    uint32_t cp;
    size_t l = tern_utf8_decode(s + p, n - p, &cp);
    if (!l) {
        *len = 1;
        return TERN_CHAR_OTHER;
    }
    *len = l;
    return tern_unicode_class(cp);
}

/* The end of the run of class c that starts at p (p itself may be n). */
static inline size_t tern_pretok_run(const uint8_t *s, size_t n, size_t p,
                                     enum tern_char_class c) {
    while (p < n) {
        uint8_t b = s[p];
        if (b < 0x80) {
            if (tern_ascii_class[b] != c) break;
            p++;
            continue;
        }
        size_t len;
        if (tern_pretok_unit(s, n, p, &len) != c) break;
        p += len;
    }
    return p;
}

/* The end of the piece that starts at p (p < n): a position in (p, n]. */
static inline size_t tern_pretokenize_next(const uint8_t *s, size_t n, size_t p) {
    uint8_t b = s[p];
    /* 's|'t|'re|'ve|'m|'ll|'d (ASCII and case-sensitive, as GPT-2 has it) */
    if (b == '\'' && p + 1 < n) {
        uint8_t c1 = s[p + 1];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return p + 2;
        if (p + 2 < n) {
            uint8_t c2 = s[p + 2];
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
                return p + 3;
        }
    }
    size_t len;
    enum tern_char_class c = tern_pretok_unit(s, n, p, &len);
    /* ` ?X+` for X = letter, number, other: only U+0020 is the optional space. */
    if (b == ' ' && p + 1 < n) {
        size_t len2;
        enum tern_char_class c2 = tern_pretok_unit(s, n, p + 1, &len2);
        if (c2 != TERN_CHAR_SPACE) return tern_pretok_run(s, n, p + 1 + len2, c2);
    }
    if (c == TERN_CHAR_SPACE) {
        /* \s+(?!\S): the whole run of white space if it ends the text; otherwise the run
         * less its last character, which stays to lead the next word (` ?\p{L}+` etc.).
         * A run of one character before a non-space falls to the last case, \s+. */
        size_t last = p, q = p + len;
        while (q < n) {
            size_t l;
            if (tern_pretok_unit(s, n, q, &l) != TERN_CHAR_SPACE) break;
            last = q;
            q += l;
        }
        return (q == n || last == p) ? q : last;
    }
    return tern_pretok_run(s, n, p + len, c);
}

/* The same, as a function (for tests and the fuzzer). */
size_t tern_pretokenize_next_piece(const uint8_t *s, size_t n, size_t p);

#endif
