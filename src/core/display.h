/* Quoting names from files in one-line error messages (private to src/core). */
#ifndef TERN_CORE_DISPLAY_H
#define TERN_CORE_DISPLAY_H

#include <string.h>

/* A copy of s fit for a one-line message: at most 80 bytes then "...", control characters
 * shown as '?'. Names come from files, which may hold anything. */
typedef struct tern_display {
    char s[84];
} tern_display;

static inline tern_display tern_display_of(const char *s) {
    tern_display d;
    size_t i = 0;
    for (; s[i] && i < 80; i++)
        d.s[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i]) {
        memcpy(d.s + i, "...", 3);
        i += 3;
    }
    d.s[i] = '\0';
    return d;
}

#endif
