/* A strict JSON syntax checker: recursive descent over RFC 8259's grammar, building nothing.
 * The recursion is bounded by max_depth. */
#include "core/json_check.h"

typedef struct checker {
    const unsigned char *s;
    size_t n, i;
    int depth, max_depth;
    const char *why;
} checker;

static bool fail(checker *c, const char *why) {
    if (!c->why) c->why = why;
    return false;
}

static void skip_ws(checker *c) {
    while (c->i < c->n &&
           (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static bool eat(checker *c, unsigned char ch) {
    if (c->i < c->n && c->s[c->i] == ch) {
        c->i++;
        return true;
    }
    return false;
}

static bool is_digit(checker *c) { return c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9'; }

static int hex_value(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* The 4 hex digits after "\u"; -1 when malformed. */
static long hex4(checker *c) {
    if (c->n - c->i < 4) return -1;
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex_value(c->s[c->i + (size_t)k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    c->i += 4;
    return v;
}

static bool string(checker *c) {
    if (!eat(c, '"')) return fail(c, "expected a string");
    while (c->i < c->n) {
        unsigned char ch = c->s[c->i++];
        if (ch == '"') return true;
        if (ch < 0x20) {
            c->i--;
            return fail(c, "control character in a string");
        }
        if (ch != '\\') continue;
        if (c->i >= c->n) break;
        ch = c->s[c->i++];
        if (ch == 'u') {
            long u = hex4(c);
            if (u < 0) return fail(c, "bad \\u escape");
            if (u >= 0xdc00 && u <= 0xdfff) return fail(c, "lone low surrogate escape");
            if (u >= 0xd800 && u <= 0xdbff) { /* must pair with a low surrogate */
                if (!eat(c, '\\') || !eat(c, 'u')) return fail(c, "lone high surrogate escape");
                long lo = hex4(c);
                if (lo < 0xdc00 || lo > 0xdfff) return fail(c, "lone high surrogate escape");
            }
        } else if (!(ch == '"' || ch == '\\' || ch == '/' || ch == 'b' || ch == 'f' || ch == 'n' ||
                     ch == 'r' || ch == 't')) {
            c->i--;
            return fail(c, "bad escape");
        }
    }
    return fail(c, "unterminated string");
}

static bool number(checker *c) {
    eat(c, '-');
    if (eat(c, '0')) {
        /* no leading zeros */
    } else if (is_digit(c)) {
        while (is_digit(c))
            c->i++;
    } else {
        return fail(c, "bad number");
    }
    if (eat(c, '.')) {
        if (!is_digit(c)) return fail(c, "bad number");
        while (is_digit(c))
            c->i++;
    }
    if (eat(c, 'e') || eat(c, 'E')) {
        if (!eat(c, '+')) eat(c, '-');
        if (!is_digit(c)) return fail(c, "bad number");
        while (is_digit(c))
            c->i++;
    }
    return true;
}

static bool literal(checker *c, const char *word) {
    for (const char *p = word; *p; p++)
        if (!eat(c, (unsigned char)*p)) return fail(c, "unexpected character");
    return true;
}

static bool value(checker *c);

static bool object(checker *c) {
    c->i++; /* '{' */
    skip_ws(c);
    if (eat(c, '}')) return true;
    for (;;) {
        if (!string(c)) return false;
        skip_ws(c);
        if (!eat(c, ':')) return fail(c, "expected ':'");
        skip_ws(c);
        if (!value(c)) return false;
        skip_ws(c);
        if (eat(c, '}')) return true;
        if (!eat(c, ',')) return fail(c, "expected ',' or '}'");
        skip_ws(c);
    }
}

static bool array(checker *c) {
    c->i++; /* '[' */
    skip_ws(c);
    if (eat(c, ']')) return true;
    for (;;) {
        if (!value(c)) return false;
        skip_ws(c);
        if (eat(c, ']')) return true;
        if (!eat(c, ',')) return fail(c, "expected ',' or ']'");
        skip_ws(c);
    }
}

static bool value(checker *c) {
    if (c->i >= c->n) return fail(c, "unexpected end");
    unsigned char ch = c->s[c->i];
    if (ch == '{' || ch == '[') {
        if (++c->depth > c->max_depth) return fail(c, "nested too deeply");
        bool ok = ch == '{' ? object(c) : array(c);
        c->depth--;
        return ok;
    }
    if (ch == '"') return string(c);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return number(c);
    if (ch == 't') return literal(c, "true");
    if (ch == 'f') return literal(c, "false");
    if (ch == 'n') return literal(c, "null");
    return fail(c, "unexpected character");
}

bool tern_json_check(const char *s, size_t len, int max_depth, size_t *bad_offset,
                     const char **why) {
    checker c = {(const unsigned char *)s, len, 0, 0, max_depth, NULL};
    skip_ws(&c);
    bool ok = value(&c);
    if (ok) {
        skip_ws(&c);
        if (c.i != c.n) ok = fail(&c, "text after the value");
    }
    if (!ok) {
        if (bad_offset) *bad_offset = c.i;
        if (why) *why = c.why;
    }
    return ok;
}
