/* UTF-8 validation (private to src/core). */
#ifndef TERN_CORE_UTF8_H
#define TERN_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0, len) is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF). When it is not, *bad_offset receives the offset of the first bad byte. */
bool tern_utf8_valid(const char *s, size_t len, size_t *bad_offset);

#endif
