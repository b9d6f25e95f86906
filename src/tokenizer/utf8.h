/* Strict UTF-8 decoding, one character at a time. */
#ifndef TERN_TOKENIZER_UTF8_H
#define TERN_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the character at s[0..n), n >= 1. Only well-formed sequences count (Unicode's
 * Table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF). Returns the
 * sequence's length (1 to 4) and sets *cp, or returns 0 when no well-formed character
 * starts at s[0]; the caller then treats the byte s[0] as a unit of its own. */
static inline size_t tern_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint32_t b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    if (b0 < 0xC2) return 0; /* a continuation byte, or the start of an overlong form */
    if (b0 < 0xE0) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((b0 & 0x1F) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (b0 < 0xF0) {
        /* E0 needs A0..BF next (else overlong); ED needs 80..9F (else a surrogate). */
        uint32_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        if (n < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80) return 0;
        *cp = ((b0 & 0x0F) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        return 3;
    }
    if (b0 < 0xF5) {
        /* F0 needs 90..BF next (else overlong); F4 needs 80..8F (else past U+10FFFF). */
        uint32_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        if (n < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        *cp = ((b0 & 0x07) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) |
              (s[3] & 0x3Fu);
        return 4;
    }
    return 0;
}

#endif
