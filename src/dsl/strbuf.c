#include "dsl/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_init(strbuf *sb) { memset(sb, 0, sizeof *sb); }

void sb_free(strbuf *sb) {
    free(sb->data);
    sb_init(sb);
}

static bool sb_reserve(strbuf *sb, size_t extra) {
    if (sb->failed) return false;
    if (extra > SIZE_MAX / 4 - sb->len) {
        sb->failed = true;
        return false;
    }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->data = p;
    sb->cap = cap;
    return true;
}

void sb_puts(strbuf *sb, const char *s) {
    size_t n = strlen(s);
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

void sb_putc(strbuf *sb, char c) {
    if (!sb_reserve(sb, 1)) return;
    sb->data[sb->len++] = c;
    sb->data[sb->len] = '\0';
}

void sb_printf(strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->failed = true;
        return;
    }
    if (!sb_reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

char *sb_take(strbuf *sb) {
    if (sb->failed) {
        sb_free(sb);
        return NULL;
    }
    char *s = sb->data ? sb->data : strdup("");
    sb_init(sb);
    return s;
}

void sb_put_c_string(strbuf *sb, const char *s, bool printf_safe) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_puts(sb, "\\\""); break;
        case '\\': sb_puts(sb, "\\\\"); break;
        case '\n': sb_puts(sb, "\\n"); break;
        case '\t': sb_puts(sb, "\\t"); break;
        case '%':
            sb_puts(sb, printf_safe ? "%%" : "%");
            break;
        default:
            if (*p < 0x20 || *p >= 0x7f)
                sb_printf(sb, "\\%03o", *p);
            else
                sb_putc(sb, (char)*p);
        }
    }
}
