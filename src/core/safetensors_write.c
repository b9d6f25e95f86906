/* The safetensors writer: validates the tensors, builds the JSON header by hand (so numbers
 * are exact integers and the layout is fixed), and writes the file atomically. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/display.h"
#include "core/safetensors_dtype.h"
#include "core/utf8.h"
#include "tern/file.h"
#include "tern/safetensors.h"

/* A growing string; `failed` records an allocation failure so callers check once. */
typedef struct text {
    char *s;
    size_t len, cap;
    int failed;
} text;

static void text_append(text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (n >= t->cap - t->len || !t->s) {
        size_t cap = t->cap ? t->cap : 1024;
        while (n >= cap - t->len) {
            if (cap > ((size_t)-1) / 2) {
                t->failed = 1;
                return;
            }
            cap *= 2;
        }
        char *grown = realloc(t->s, cap);
        if (!grown) {
            t->failed = 1;
            return;
        }
        t->s = grown;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void text_puts(text *t, const char *s) { text_append(t, s, strlen(s)); }

/* A JSON string literal. Quotes, backslashes and control characters are escaped; other bytes
 * (already checked to be UTF-8) go in as they are. */
static void text_json_string(text *t, const char *s) {
    text_puts(t, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            text_append(t, esc, 2);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            text_puts(t, esc);
        } else {
            text_append(t, p, 1);
        }
    }
    text_puts(t, "\"");
}

static tern_error *check_string(const char *what, const char *s) {
    size_t bad;
    if (!tern_utf8_valid(s, strlen(s), &bad))
        return tern_errorf("%s '%s' is not UTF-8 (byte %zu)", what, tern_display_of(s).s, bad);
    return NULL;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks each tensor and computes its byte size into sizes[i]. */
static tern_error *check_tensors(const tern_tensor_out *t, size_t n, size_t *sizes) {
    for (size_t i = 0; i < n; i++) {
        if (!t[i].name || !*t[i].name) return tern_errorf("tensor %zu has no name", i);
        tern_display shown = tern_display_of(t[i].name);
        TERN_TRY(check_string("tensor name", t[i].name));
        if (strcmp(t[i].name, "__metadata__") == 0)
            return tern_errorf("a tensor cannot be called __metadata__");
        if (!tern_st_dtype_name(t[i].dtype))
            return tern_errorf("tensor '%s': invalid dtype %d", shown.s, (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > TERN_SAFETENSORS_MAX_DIMS)
            return tern_errorf("tensor '%s': %d dimensions (0 to %d allowed)", shown.s, t[i].ndim,
                               TERN_SAFETENSORS_MAX_DIMS);
        size_t count = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            int64_t dim = t[i].shape[d];
            if (dim < 0) return tern_errorf("tensor '%s': shape[%d] is negative", shown.s, d);
            if (dim != 0 && count > ((size_t)-1) / (uint64_t)dim)
                return tern_errorf("tensor '%s': element count overflows", shown.s);
            count *= (size_t)dim;
        }
        size_t elem = tern_dtype_size(t[i].dtype);
        if (count > ((size_t)-1) / elem)
            return tern_errorf("tensor '%s': byte size overflows", shown.s);
        sizes[i] = count * elem;
        if (sizes[i] > 0 && !t[i].data) return tern_errorf("tensor '%s': no data", shown.s);
    }
    /* Unique names: sort a copy of the name pointers. */
    if (n > 1) {
        const char **names = malloc(n * sizeof *names);
        if (!names) return tern_errorf("out of memory");
        for (size_t i = 0; i < n; i++)
            names[i] = t[i].name;
        qsort(names, n, sizeof *names, compare_strings);
        tern_error *e = NULL;
        for (size_t i = 1; i < n && !e; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                e = tern_errorf("tensor '%s' appears twice", tern_display_of(names[i]).s);
        free(names);
        if (e) return e;
    }
    return NULL;
}

static tern_error *check_metadata(const char *const *kv, int *has_format) {
    *has_format = 0;
    for (size_t i = 0; kv && kv[i]; i += 2) {
        if (!kv[i + 1])
            return tern_errorf("metadata key '%s' has no value", tern_display_of(kv[i]).s);
        TERN_TRY(check_string("metadata key", kv[i]));
        TERN_TRY(check_string("metadata value", kv[i + 1]));
        for (size_t j = 0; j < i; j += 2)
            if (strcmp(kv[j], kv[i]) == 0)
                return tern_errorf("metadata key '%s' appears twice", tern_display_of(kv[i]).s);
        if (strcmp(kv[i], "format") == 0) *has_format = 1;
    }
    return NULL;
}

/* The header JSON, padded with spaces to a multiple of 8 bytes so the data section starts
 * 8-byte aligned in the file. */
static tern_error *build_header(const tern_tensor_out *t, size_t n, const size_t *sizes,
                                const char *const *kv, int has_format, text *h) {
    text_puts(h, "{\"__metadata__\":{");
    int first = 1;
    if (!has_format) {
        text_puts(h, "\"format\":\"pt\"");
        first = 0;
    }
    for (size_t i = 0; kv && kv[i]; i += 2) {
        if (!first) text_puts(h, ",");
        first = 0;
        text_json_string(h, kv[i]);
        text_puts(h, ":");
        text_json_string(h, kv[i + 1]);
    }
    text_puts(h, "}");
    size_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        char num[64];
        text_puts(h, ",");
        text_json_string(h, t[i].name);
        text_puts(h, ":{\"dtype\":\"");
        text_puts(h, tern_st_dtype_name(t[i].dtype));
        text_puts(h, "\",\"shape\":[");
        for (int d = 0; d < t[i].ndim; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            text_puts(h, num);
        }
        if (sizes[i] > ((size_t)-1) - offset)
            return tern_errorf("the tensors' total size overflows");
        snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", offset, offset + sizes[i]);
        text_puts(h, num);
        offset += sizes[i];
    }
    text_puts(h, "}");
    while (!h->failed && h->len % 8 != 0)
        text_puts(h, " ");
    if (h->failed) return tern_errorf("out of memory for the header");
    if (h->len > TERN_SAFETENSORS_MAX_HEADER)
        return tern_errorf("the header would take %zu bytes, over the %u-byte limit", h->len,
                           TERN_SAFETENSORS_MAX_HEADER);
    return NULL;
}

static tern_error *write_all(const char *path, const tern_tensor_out *t, size_t n,
                             const size_t *sizes, const text *h) {
    tern_atomic_file *f;
    TERN_TRY(tern_atomic_open(path, &f));
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; i++)
        len_bytes[i] = (unsigned char)((uint64_t)h->len >> (8 * i));
    tern_error *e = tern_atomic_write(f, len_bytes, 8);
    if (!e) e = tern_atomic_write(f, h->s, h->len);
    for (size_t i = 0; i < n && !e; i++)
        e = tern_atomic_write(f, t[i].data, sizes[i]);
    if (e) {
        tern_atomic_abort(f);
        return e;
    }
    return tern_atomic_commit(f);
}

tern_error *tern_safetensors_write(const char *path, const tern_tensor_out *tensors, size_t n,
                                   const char *const *metadata_kv) {
    if (n > 0 && !tensors) return tern_errorf("writing %s: no tensors given", path);
    size_t *sizes = calloc(n ? n : 1, sizeof *sizes);
    if (!sizes) return tern_errorf("writing %s: out of memory", path);
    text header = {0};
    int has_format;
    tern_error *e = check_tensors(tensors, n, sizes);
    if (!e) e = check_metadata(metadata_kv, &has_format);
    if (!e) e = build_header(tensors, n, sizes, metadata_kv, has_format, &header);
    if (e) {
        e = tern_error_wrap(e, "writing %s", path);
    } else {
        e = write_all(path, tensors, n, sizes, &header);
    }
    free(header.s);
    free(sizes);
    return e;
}
