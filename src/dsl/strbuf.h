/* A growable string for the emitters and dumps. A failed allocation sticks: later appends
 * are ignored and sb_take returns NULL, so callers check once at the end. */
#ifndef TERN_KERNEL_STRBUF_H
#define TERN_KERNEL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/error.h"

typedef struct strbuf {
    char *data;
    size_t len, cap;
    bool failed;
} strbuf;

void sb_init(strbuf *sb);
void sb_free(strbuf *sb);
void sb_puts(strbuf *sb, const char *s);
void sb_putc(strbuf *sb, char c);
void sb_printf(strbuf *sb, const char *fmt, ...) TERN_PRINTF(2, 3);
/* The string (owned by the caller), or NULL when an append failed; sb is emptied. */
char *sb_take(strbuf *sb);
/* Appends s as the body of a C string literal (quotes, backslashes and control characters
 * escaped; '%' doubled when printf_safe). */
void sb_put_c_string(strbuf *sb, const char *s, bool printf_safe);

#endif
