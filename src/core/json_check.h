/* Strict JSON syntax checking (private to src/core). */
#ifndef TERN_CORE_JSON_CHECK_H
#define TERN_CORE_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0, len) is exactly one JSON value (RFC 8259) with optional whitespace around it,
 * nested at most max_depth arrays and objects deep. cJSON, which builds the tree afterwards,
 * is lenient (control characters in strings, numbers such as 01 or 1.); this check makes
 * tern refuse what strict parsers such as the reference safetensors reader refuse. Bytes at
 * or above 0x80 are not examined here (check UTF-8 separately). On failure *bad_offset and
 * *why describe the first fault. */
bool tern_json_check(const char *s, size_t len, int max_depth, size_t *bad_offset,
                     const char **why);

#endif
