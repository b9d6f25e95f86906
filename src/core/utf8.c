/* UTF-8 validation, following the well-formed byte sequences table of the Unicode standard
 * (chapter 3, table 3-7). */
#include "core/utf8.h"

#include <stdint.h>

bool tern_utf8_valid(const char *s, size_t len, size_t *bad_offset) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            if (c == 0xe0)
                lo = 0xa0; /* no overlong forms */
            else if (c == 0xed)
                hi = 0x9f; /* no surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            if (c == 0xf0)
                lo = 0x90; /* no overlong forms */
            else if (c == 0xf4)
                hi = 0x8f; /* nothing past U+10FFFF */
        } else {
            if (bad_offset) *bad_offset = i;
            return false;
        }
        if (len - i <= need) {
            if (bad_offset) *bad_offset = i;
            return false;
        }
        if (p[i + 1] < lo || p[i + 1] > hi) {
            if (bad_offset) *bad_offset = i;
            return false;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                if (bad_offset) *bad_offset = i;
                return false;
            }
        }
        i += need + 1;
    }
    return true;
}
