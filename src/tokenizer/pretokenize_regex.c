#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize_regex.h"

#include <pcre2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/unicode_classes.h"

struct tern_regex_pretokenizer {
    pcre2_code *code;
};

typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} text_buf;

static void buf_add(text_buf *b, const char *s) {
    size_t n = strlen(s);
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

/* Appends the ranges of code points of class c, as the inside of a [...] class. */
static void add_class_ranges(text_buf *b, enum tern_char_class c) {
    uint32_t cp = 0;
    while (cp < 0x110000) {
        if (tern_unicode_class(cp) != c) {
            cp++;
            continue;
        }
        uint32_t first = cp;
        while (cp + 1 < 0x110000 && tern_unicode_class(cp + 1) == c) cp++;
        char range[40];
        if (first == cp)
            snprintf(range, sizeof range, "\\x{%X}", (unsigned)first);
        else
            snprintf(range, sizeof range, "\\x{%X}-\\x{%X}", (unsigned)first, (unsigned)cp);
        buf_add(b, range);
        cp++;
    }
}

tern_error *tern_regex_pretokenizer_new(tern_regex_pretokenizer **out) {
    *out = NULL;
    /* 's|'t|'re|'ve|'m|'ll|'d| ?[L]+| ?[N]+| ?[^SLN]+|[S]+(?![^S])|[S]+ */
    text_buf b = {0};
    buf_add(&b, "'s|'t|'re|'ve|'m|'ll|'d| ?[");
    add_class_ranges(&b, TERN_CHAR_LETTER);
    buf_add(&b, "]+| ?[");
    add_class_ranges(&b, TERN_CHAR_NUMBER);
    buf_add(&b, "]+| ?[^");
    add_class_ranges(&b, TERN_CHAR_SPACE);
    add_class_ranges(&b, TERN_CHAR_LETTER);
    add_class_ranges(&b, TERN_CHAR_NUMBER);
    buf_add(&b, "]+|[");
    add_class_ranges(&b, TERN_CHAR_SPACE);
    buf_add(&b, "]+(?![^");
    add_class_ranges(&b, TERN_CHAR_SPACE);
    buf_add(&b, "])|[");
    add_class_ranges(&b, TERN_CHAR_SPACE);
    buf_add(&b, "]+");
    if (b.failed) {
        free(b.data);
        return tern_errorf("out of memory building the pre-tokenization regex");
    }

    int code_err;
    PCRE2_SIZE err_at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)b.data, b.len, PCRE2_UTF, &code_err, &err_at,
                                     NULL);
    free(b.data);
    if (!code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code_err, message, sizeof message);
        return tern_errorf("compiling the pre-tokenization regex: %s at offset %zu",
                           (const char *)message, (size_t)err_at);
    }
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    tern_regex_pretokenizer *re = malloc(sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        return tern_errorf("out of memory");
    }
    re->code = code;
    *out = re;
    return NULL;
}

void tern_regex_pretokenizer_free(tern_regex_pretokenizer *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

/* Replaces each byte that PCRE2's UTF-8 check rejects by '!'. */
static tern_error *sanitize(pcre2_code *code, pcre2_match_data *md, uint8_t *s, size_t len) {
    size_t from = 0;
    while (from < len) {
        /* A pattern match runs the UTF check over the subject first; a check failure
         * reports where the bad character starts. Matching an empty-anchored probe is
         * not needed: any result other than a UTF error means the rest is valid. */
        int rc = pcre2_match(code, (PCRE2_SPTR)(s + from), len - from, 0, 0, md, NULL);
        if (rc > PCRE2_ERROR_UTF8_ERR1 || rc < PCRE2_ERROR_UTF8_ERR21) {
            if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
                return tern_errorf("pre-tokenization regex failed: error %d", rc);
            return NULL;
        }
        size_t bad = from + pcre2_get_startchar(md);
        s[bad] = '!';
        from = bad + 1;
    }
    return NULL;
}

tern_error *tern_regex_pretokenize(const tern_regex_pretokenizer *re, const uint8_t *text,
                                   size_t len, size_t **ends, size_t *count) {
    *ends = NULL;
    *count = 0;
    tern_error *err = NULL;
    uint8_t *copy = malloc(len ? len : 1);
    size_t *out = malloc((len ? len : 1) * sizeof *out); /* at most one piece per byte */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!copy || !out || !md) {
        err = tern_errorf("out of memory");
        goto fail;
    }
    if (len) memcpy(copy, text, len);
    err = sanitize(re->code, md, copy, len);
    if (err) goto fail;

    size_t n = 0, pos = 0;
    while (pos < len) {
        int rc = pcre2_match(re->code, copy, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) {
            err = tern_errorf("pre-tokenization regex: no match at byte %zu (error %d)", pos, rc);
            goto fail;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[0] != pos || ov[1] <= pos) {
            err = tern_errorf("pre-tokenization regex: the match at byte %zu is [%zu, %zu)", pos,
                              (size_t)ov[0], (size_t)ov[1]);
            goto fail;
        }
        out[n++] = ov[1];
        pos = ov[1];
    }
    pcre2_match_data_free(md);
    free(copy);
    *ends = out;
    *count = n;
    return NULL;
fail:
    pcre2_match_data_free(md);
    free(copy);
    free(out);
    return err;
}
