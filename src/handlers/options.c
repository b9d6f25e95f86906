/* Parsing of handler options ("key=value,key=value") into their tuning records. */
#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An integer in [min, max] from [s, end), or an error. */
static tern_error *parse_int(const char *what, const char *s, const char *end, int min, int max, int *out) {
    char buf[32];
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= sizeof buf) return tern_errorf("%s: expected an integer", what);
    memcpy(buf, s, n);
    buf[n] = 0;
    char *stop;
    errno = 0;
    long v = strtol(buf, &stop, 10);
    if (*stop || errno) return tern_errorf("%s: '%s' is not an integer", what, buf);
    if (v < min || v > max) return tern_errorf("%s: %ld is out of range [%d, %d]", what, v, min, max);
    *out = (int)v;
    return NULL;
}

static tern_error *set_value(const tern_option *o, void *record, const char *what, const char *v, const char *end) {
    char *field = (char *)record + o->offset;
    switch (o->kind) {
    case TERN_OPTION_INT: return parse_int(what, v, end, o->min, o->max, (int *)(void *)field);
    case TERN_OPTION_BOOL: {
        int b;
        TERN_TRY(parse_int(what, v, end, 0, 1, &b));
        *(bool *)(void *)field = b != 0;
        return NULL;
    }
    case TERN_OPTION_INT3: {
        int *out = (int *)(void *)field, parts[3];
        const char *p = v;
        for (int i = 0; i < 3; i++) {
            const char *stop = i < 2 ? memchr(p, '/', (size_t)(end - p)) : end;
            if (!stop) return tern_errorf("%s: expected three values a/b/c", what);
            TERN_TRY(parse_int(what, p, stop, o->min, o->max, &parts[i]));
            p = stop + 1;
        }
        memcpy(out, parts, sizeof parts);
        return NULL;
    }
    case TERN_OPTION_TEXT:
        if ((size_t)(end - v) >= TERN_OPTION_TEXT_MAX) return tern_errorf("%s: the value is too long", what);
        memcpy(field, v, (size_t)(end - v));
        field[end - v] = 0;
        return NULL;
    }
    return tern_errorf("%s: unknown option kind", what);
}

/* The known keys, "a, b, c", into buf. */
static const char *known_keys(const tern_option_set *sets, size_t count, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t s = 0; s < count; s++)
        for (size_t k = 0; k < sets[s].count && used < cap; k++) {
            int n = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", sets[s].keys[k].key);
            if (n < 0) break;
            used += (size_t)n;
        }
    return used ? buf : "none";
}

static tern_error *apply_text(const char *handler, const char *source, const char *text, const tern_option_set *sets,
                              size_t count) {
    for (const char *p = text; *p;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (end == p) { /* an empty item: "a=1,,b=2" or a trailing comma */
            p = *end ? end + 1 : end;
            continue;
        }
        size_t klen = (size_t)((eq ? eq : end) - p);
        const tern_option *o = NULL;
        void *record = NULL;
        for (size_t s = 0; s < count && !o; s++)
            for (size_t k = 0; k < sets[s].count; k++)
                if (strlen(sets[s].keys[k].key) == klen && !strncmp(sets[s].keys[k].key, p, klen)) {
                    o = &sets[s].keys[k];
                    record = sets[s].record;
                    break;
                }
        if (!o) {
            char keys[512];
            return tern_errorf("%s: %s: unknown option '%.*s' (known: %s)", handler, source, (int)klen, p,
                               known_keys(sets, count, keys, sizeof keys));
        }
        if (!eq) return tern_errorf("%s: %s: option '%s' needs a value (%s=...)", handler, source, o->key, o->key);
        char what[160];
        snprintf(what, sizeof what, "%s: %s: option '%s'", handler, source, o->key);
        TERN_TRY(set_value(o, record, what, eq + 1, end));
        p = *end ? end + 1 : end;
    }
    return NULL;
}

tern_error *tern_options_apply(const char *handler, const char *env, const char *options,
                               const tern_option_set *sets, size_t count) {
    const char *from_env = env ? getenv(env) : NULL;
    if (from_env && *from_env) TERN_TRY(apply_text(handler, env, from_env, sets, count));
    if (options && *options) TERN_TRY(apply_text(handler, "options", options, sets, count));
    return NULL;
}
