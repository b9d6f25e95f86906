#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/split_regex.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

/* A match may take this many steps of PCRE2's matcher before it is given up as
 * pathological. A pre-token of the patterns in use takes a few dozen. */
#define MATCH_LIMIT 10000000u
#define JIT_STACK_MAX ((size_t)4 << 20)

struct tern_split_regex {
    pcre2_code *code;
};

struct tern_regex_scratch {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *jit_stack;
    uint8_t *copy; /* the text with ill-formed bytes replaced, when it has any */
    size_t copy_cap;
};

typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} text_buf;

static void buf_add_n(text_buf *b, const char *s, size_t n) {
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
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_add(text_buf *b, const char *s) { buf_add_n(b, s, strlen(s)); }

static void add_range(text_buf *b, uint32_t first, uint32_t last) {
    char range[40];
    if (first == last)
        snprintf(range, sizeof range, "\\x{%X}", (unsigned)first);
    else
        snprintf(range, sizeof range, "\\x{%X}-\\x{%X}", (unsigned)first, (unsigned)last);
    buf_add(b, range);
}

/* Appends, as the inside of a [...] class, the code points of class c (or, negated, every
 * other code point except the surrogates, which UTF-8 cannot hold). */
static void add_class_ranges(text_buf *b, enum tern_char_class c, bool negated) {
    uint32_t cp = 0;
    while (cp < 0x110000) {
        bool in = (tern_unicode_class(cp) == c) != negated && !(cp >= 0xD800 && cp <= 0xDFFF);
        if (!in) {
            cp++;
            continue;
        }
        uint32_t first = cp;
        while (cp + 1 < 0x110000 && (tern_unicode_class(cp + 1) == c) != negated &&
               !(cp + 1 >= 0xD800 && cp + 1 <= 0xDFFF))
            cp++;
        add_range(b, first, cp);
        cp++;
    }
}

/* If pattern[i] starts \p{L}, \p{N}, \pL, \pN, \P... or \s, \S (i at the backslash), sets
 * the class, whether it is negated, and the escape's length. */
static bool class_escape(const char *p, size_t n, size_t i, enum tern_char_class *c,
                         bool *negated, size_t *len) {
    if (i + 1 >= n) return false;
    char e = p[i + 1];
    if (e == 's' || e == 'S') {
        *c = TERN_CHAR_SPACE;
        *negated = e == 'S';
        *len = 2;
        return true;
    }
    if (e != 'p' && e != 'P') return false;
    *negated = e == 'P';
    if (i + 2 >= n) return false;
    if (p[i + 2] != '{') {
        if (p[i + 2] != 'L' && p[i + 2] != 'N') return false;
        *c = p[i + 2] == 'L' ? TERN_CHAR_LETTER : TERN_CHAR_NUMBER;
        *len = 3;
        return true;
    }
    const char *close = memchr(p + i + 3, '}', n - i - 3);
    if (!close) return false;
    const char *name = p + i + 3;
    size_t name_len = (size_t)(close - name);
    if (name_len && name[0] == '^') {
        *negated = !*negated;
        name++;
        name_len--;
    }
    if ((name_len == 1 && name[0] == 'L') || (name_len == 6 && !memcmp(name, "Letter", 6)))
        *c = TERN_CHAR_LETTER;
    else if ((name_len == 1 && name[0] == 'N') || (name_len == 6 && !memcmp(name, "Number", 6)))
        *c = TERN_CHAR_NUMBER;
    else
        return false;
    *len = (size_t)(close - (p + i)) + 1;
    return true;
}

tern_error *tern_regex_spell_classes(const char *p, size_t n, char **out, size_t *out_len) {
    text_buf b = {0};
    bool in_class = false;
    size_t i = 0;
    while (i < n) {
        char ch = p[i];
        enum tern_char_class c;
        bool negated;
        size_t len;
        if (ch == '\\' && class_escape(p, n, i, &c, &negated, &len)) {
            if (in_class) {
                add_class_ranges(&b, c, negated);
            } else {
                buf_add(&b, negated ? "[^" : "[");
                add_class_ranges(&b, c, false);
                buf_add(&b, "]");
            }
            i += len;
        } else if (ch == '\\' && i + 1 < n && p[i + 1] == 'Q') {
            /* \Q...\E quotes everything up to \E (or the end) */
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < n; k++)
                if (p[k] == '\\' && p[k + 1] == 'E') {
                    end = p + k + 2;
                    break;
                }
            size_t q = end ? (size_t)(end - p) : n;
            buf_add_n(&b, p + i, q - i);
            i = q;
        } else if (ch == '\\') {
            size_t q = i + 2 <= n ? i + 2 : n;
            buf_add_n(&b, p + i, q - i);
            i = q;
        } else if (!in_class && ch == '[') {
            in_class = true;
            size_t q = i + 1;
            if (q < n && p[q] == '^') q++;
            if (q < n && p[q] == ']') q++; /* a ']' first is a literal */
            buf_add_n(&b, p + i, q - i);
            i = q;
        } else if (in_class && ch == '[' && i + 1 < n && p[i + 1] == ':') {
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < n; k++)
                if (p[k] == ':' && p[k + 1] == ']') {
                    end = p + k + 2;
                    break;
                }
            size_t q = end ? (size_t)(end - p) : i + 1;
            buf_add_n(&b, p + i, q - i);
            i = q;
        } else {
            if (in_class && ch == ']') in_class = false;
            buf_add_n(&b, p + i, 1);
            i++;
        }
    }
    if (!b.data) buf_add(&b, "");
    if (b.failed) {
        free(b.data);
        return tern_errorf("out of memory spelling out a regex");
    }
    *out = b.data;
    *out_len = b.len;
    return NULL;
}

tern_error *tern_split_regex_new(const char *pattern, size_t len, bool literal,
                                 tern_split_regex **out) {
    *out = NULL;
    char *spelled = NULL;
    size_t spelled_len = len;
    uint32_t options = PCRE2_UTF;
    if (literal) {
        options |= PCRE2_LITERAL;
    } else {
        TERN_TRY(tern_regex_spell_classes(pattern, len, &spelled, &spelled_len));
        options |= PCRE2_UCP;
    }
    int code_err;
    PCRE2_SIZE err_at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)(literal ? pattern : spelled), spelled_len,
                                     options, &code_err, &err_at, NULL);
    free(spelled);
    if (!code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code_err, message, sizeof message);
        /* The offset is in the spelled-out pattern; the message is what helps. */
        return tern_errorf("the regex does not compile: %s", (const char *)message);
    }
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    tern_split_regex *re = malloc(sizeof *re);
    if (!re) {
        pcre2_code_free(code);
        return tern_errorf("out of memory");
    }
    re->code = code;
    *out = re;
    return NULL;
}

void tern_split_regex_free(tern_split_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

tern_error *tern_regex_scratch_new(const tern_split_regex *re, tern_regex_scratch **out) {
    tern_regex_scratch *s = calloc(1, sizeof *s);
    if (!s) return tern_errorf("out of memory");
    s->md = pcre2_match_data_create_from_pattern(re->code, NULL);
    s->mc = pcre2_match_context_create(NULL);
    s->jit_stack = pcre2_jit_stack_create(32 * 1024, JIT_STACK_MAX, NULL);
    if (!s->md || !s->mc || !s->jit_stack) {
        tern_regex_scratch_free(s);
        return tern_errorf("out of memory for regex matching");
    }
    pcre2_set_match_limit(s->mc, MATCH_LIMIT);
    pcre2_jit_stack_assign(s->mc, NULL, s->jit_stack);
    *out = s;
    return NULL;
}

void tern_regex_scratch_free(tern_regex_scratch *s) {
    if (!s) return;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mc);
    pcre2_jit_stack_free(s->jit_stack);
    free(s->copy);
    free(s);
}

/* The first ill-formed byte of s (n if none). */
static size_t first_ill_formed(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = tern_utf8_decode(s + i, n - i, &cp);
        if (!l) return i;
        i += l;
    }
    return n;
}

/* s itself if it is well-formed UTF-8, else a copy with each ill-formed byte as U+0001. */
static tern_error *subject_of(tern_regex_scratch *scratch, const uint8_t *s, size_t n,
                              const uint8_t **subject) {
    size_t bad = first_ill_formed(s, n);
    *subject = s;
    if (bad == n) return NULL;
    if (scratch->copy_cap < n) {
        uint8_t *grown = realloc(scratch->copy, n);
        if (!grown) return tern_errorf("out of memory matching a regex on %zu bytes", n);
        scratch->copy = grown;
        scratch->copy_cap = n;
    }
    uint8_t *c = scratch->copy;
    memcpy(c, s, n);
    size_t i = bad;
    while (i < n) {
        uint32_t cp;
        size_t l = c[i] < 0x80 ? 1 : tern_utf8_decode(c + i, n - i, &cp);
        if (!l) {
            c[i] = 0x01;
            l = 1;
        }
        i += l;
    }
    *subject = c;
    return NULL;
}

/* The length of the (well-formed) UTF-8 character at s[0]. */
static size_t char_len(uint8_t b) {
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

tern_error *tern_split_regex_spans(const tern_split_regex *re, tern_regex_scratch *scratch,
                                   const uint8_t *s, size_t n, tern_span_fn emit, void *ctx) {
    if (n == 0) return NULL;
    const uint8_t *subject;
    TERN_TRY(subject_of(scratch, s, n, &subject));
    size_t search_from = 0, prev = 0, last_match_end = 0;
    bool any_match = false;
    while (search_from <= n) {
        int rc = pcre2_match(re->code, subject, n, search_from, PCRE2_NO_UTF_CHECK, scratch->md,
                             scratch->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            return tern_errorf("the pre-tokenizer's regex failed at byte %zu: %s", search_from,
                               (const char *)message);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(scratch->md);
        size_t start = ov[0], end = ov[1];
        if (end < start || start < search_from)
            return tern_errorf("the pre-tokenizer's regex reported a match ending before it "
                               "starts (\\K is not supported)");
        if (start == end && any_match && end == last_match_end) {
            /* an empty match where the last one ended: move on one character */
            if (search_from >= n) break;
            search_from += char_len(subject[search_from]);
            continue;
        }
        any_match = true;
        last_match_end = end;
        search_from = end;
        if (prev != start) TERN_TRY(emit(ctx, prev, start, false));
        TERN_TRY(emit(ctx, start, end, true));
        prev = end;
    }
    if (prev != n) TERN_TRY(emit(ctx, prev, n, false));
    return NULL;
}
