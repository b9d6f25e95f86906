#include "tern/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tern_error {
    char *message;
};

/* Length of the UTF-8 sequence at s (at most n bytes) when it is a well-formed, printable
 * character, else 0. C1 controls (U+0080..U+009F) and the line and paragraph separators
 * (U+2028, U+2029) are not printable: terminals act on the one, editors break at the other. */
static size_t printable_utf8(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len = c >= 0xf0 && c <= 0xf4   ? 4
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xc2 && c < 0xe0  ? 2
                                          : 0;
    if (!len || len > n) return 0;
    uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    if (cp <= 0x9f || cp == 0x2028 || cp == 0x2029) return 0;
    return len;
}

char *tern_printable_copy(const char *text) {
    if (!text) text = "";
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    char *out = malloc(4 * n + 1); /* every byte at most "\xNN" */
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x7f) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        size_t len = c >= 0x80 ? printable_utf8(s + i, n - i) : 0;
        if (len) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
            continue;
        }
        static const char hex[] = "0123456789abcdef";
        out[o++] = '\\';
        if (c == '\n' || c == '\r' || c == '\t') {
            out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else {
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
        i++;
    }
    out[o] = '\0';
    return out;
}

/* Replaces *message by its printable copy (kept as it is when memory runs out). */
static void make_printable(char **message) {
    char *p = tern_printable_copy(*message);
    if (!p) return;
    free(*message);
    *message = p;
}

/* Returned when the message itself cannot be allocated; never freed. */
static char oom_message[] = "out of memory";
static tern_error out_of_memory = {oom_message};

tern_error *tern_verrorf(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int len = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (len < 0) return &out_of_memory;
    tern_error *err = malloc(sizeof *err);
    char *message = malloc((size_t)len + 1);
    if (!err || !message) {
        free(err);
        free(message);
        return &out_of_memory;
    }
    vsnprintf(message, (size_t)len + 1, fmt, ap);
    make_printable(&message);
    err->message = message;
    return err;
}

tern_error *tern_errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tern_error *err = tern_verrorf(fmt, ap);
    va_end(ap);
    return err;
}

tern_error *tern_error_wrap(tern_error *err, const char *fmt, ...) {
    if (!err || err == &out_of_memory) return err;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) return err;
    size_t old = strlen(err->message);
    char *message = malloc((size_t)len + 2 + old + 1);
    if (!message) return err; /* keep the inner message rather than lose it */
    va_start(ap, fmt);
    vsnprintf(message, (size_t)len + 1, fmt, ap);
    va_end(ap);
    memcpy(message + len, ": ", 2);
    memcpy(message + len + 2, err->message, old + 1);
    free(err->message);
    make_printable(&message); /* the inner part is printable already: it stays as it is */
    err->message = message;
    return err;
}

const char *tern_error_message(const tern_error *err) {
    return err ? err->message : "success";
}

void tern_error_free(tern_error *err) {
    if (!err || err == &out_of_memory) return;
    free(err->message);
    free(err);
}
