/* Encoding through a tokenizer.json's pipeline, in Hugging Face's order:
 *
 *   1. added tokens whose `normalized` is false are found in the raw text;
 *   2. each part between them is normalized (NFC, when the normalizer says so), and added
 *      tokens whose `normalized` is true are found in that;
 *   3. each remaining part goes through the pre-tokenizers in turn, each splitting the
 *      pieces of the one before;
 *   4. each final piece is one token (ignore_merges) or its BPE (tokenizer.c, bpe.c);
 *   5. the post-processor's tokens (a BOS) go around the ids.
 *
 * Pieces are passed down the chain of pre-tokenizers as they are found, not collected, so a
 * large text takes no memory beyond its ids. A piece that a pre-tokenizer changes (a prefix
 * space) is copied into an arena that lives for the call, so that the piece cache can keep
 * pointing at it. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/hf_pipeline.h"
#include "tokenizer/pretokenize.h"

/* Blocks of copied bytes that stay put until the end of the call. */
typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    uint8_t data[];
} arena_block;

typedef struct {
    const tern_tokenizer *tok;
    const struct tern_hf_pipeline *hf;
    tern_piece_cache *cache;
    tern_id_vec *out;
    bool special_in_text;
    tern_regex_scratch *regex[TERN_HF_MAX_STEPS];
    arena_block *arena;
} encode_ctx;

static tern_error *arena_alloc(encode_ctx *c, size_t n, uint8_t **out) {
    arena_block *b = c->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ((size_t)1 << 16) ? n : (size_t)1 << 16;
        b = malloc(sizeof *b + cap);
        if (!b) return tern_errorf("out of memory encoding (%zu bytes)", n);
        b->next = c->arena;
        b->used = 0;
        b->cap = cap;
        c->arena = b;
    }
    *out = b->data + b->used;
    b->used += n;
    return NULL;
}

static tern_error *run_step(encode_ctx *c, size_t step, const uint8_t *s, size_t n);

/* Where a splitting step's spans go: its behaviour decides which spans make a piece, and
 * each piece goes to the next step. At most one piece is held back, for the behaviours that
 * merge a span with its neighbour. */
typedef struct {
    encode_ctx *c;
    size_t next_step;
    const uint8_t *base;
    tern_split_behavior behavior;
    bool invert;
    bool has_pending, pending_match, prev_match;
    size_t pending_start, pending_end;
} span_sink;

static tern_error *flush(span_sink *k) {
    if (!k->has_pending) return NULL;
    k->has_pending = false;
    return run_step(k->c, k->next_step, k->base + k->pending_start,
                    k->pending_end - k->pending_start);
}

static tern_error *hold(span_sink *k, size_t start, size_t end, bool is_match) {
    TERN_TRY(flush(k));
    k->has_pending = true;
    k->pending_start = start;
    k->pending_end = end;
    k->pending_match = is_match;
    return NULL;
}

/* Hugging Face's NormalizedString::split, one span at a time. */
static tern_error *on_span(void *ctx, size_t start, size_t end, bool is_match) {
    span_sink *k = ctx;
    if (k->invert) is_match = !is_match;
    tern_error *err = NULL;
    switch (k->behavior) {
    case TERN_SPLIT_REMOVED:
        if (!is_match) err = run_step(k->c, k->next_step, k->base + start, end - start);
        break;
    case TERN_SPLIT_ISOLATED:
        err = run_step(k->c, k->next_step, k->base + start, end - start);
        break;
    case TERN_SPLIT_MERGED_WITH_PREVIOUS: /* a match joins the non-match before it */
        if (is_match && !k->prev_match && k->has_pending)
            k->pending_end = end;
        else
            err = hold(k, start, end, is_match);
        break;
    case TERN_SPLIT_MERGED_WITH_NEXT: /* a match joins the non-match after it */
        if (k->has_pending && k->pending_match && !is_match) {
            k->pending_end = end;
            err = flush(k);
        } else {
            err = hold(k, start, end, is_match);
        }
        break;
    case TERN_SPLIT_CONTIGUOUS: /* consecutive matches make one piece */
        if (k->has_pending && is_match == k->prev_match)
            k->pending_end = end;
        else
            err = hold(k, start, end, is_match);
        break;
    }
    k->prev_match = is_match;
    return err;
}

/* The Digits pre-tokenizer's spans: each number character a match, the runs between not. */
static tern_error *digit_spans(const uint8_t *s, size_t n, span_sink *k) {
    size_t p = 0, run = 0;
    while (p < n) {
        size_t len;
        enum tern_char_class cls = tern_pretok_unit(s, n, p, &len);
        if (cls == TERN_CHAR_NUMBER) {
            if (run < p) TERN_TRY(on_span(k, run, p, false));
            TERN_TRY(on_span(k, p, p + len, true));
            run = p + len;
        }
        p += len;
    }
    if (run < n) TERN_TRY(on_span(k, run, n, false));
    return NULL;
}

/* Pre-tokenizer `step` on the piece s[0..n); past the last step, the piece is encoded. */
static tern_error *run_step(encode_ctx *c, size_t step, const uint8_t *s, size_t n) {
    if (n == 0) return NULL;
    if (step == c->hf->n_steps) return tern_encode_piece(c->tok, c->cache, s, n, c->out);
    const tern_pretok_step *st = &c->hf->steps[step];
    switch (st->kind) {
    case TERN_PRETOK_GPT2:
        if (step + 1 == c->hf->n_steps) return tern_encode_gpt2_pieces(c->tok, c->cache, s, n, c->out);
        for (size_t p = 0; p < n;) {
            size_t q = tern_pretokenize_next(s, n, p);
            TERN_TRY(run_step(c, step + 1, s + p, q - p));
            p = q;
        }
        return NULL;
    case TERN_PRETOK_PREFIX_SPACE: {
        if (s[0] == ' ') return run_step(c, step + 1, s, n);
        uint8_t *copy = NULL;
        TERN_TRY(arena_alloc(c, n + 1, &copy));
        copy[0] = ' ';
        memcpy(copy + 1, s, n);
        return run_step(c, step + 1, copy, n + 1);
    }
    case TERN_PRETOK_REGEX:
    case TERN_PRETOK_DIGITS: {
        span_sink k = {.c = c, .next_step = step + 1, .base = s, .behavior = st->behavior,
                       .invert = st->invert};
        if (st->kind == TERN_PRETOK_REGEX)
            TERN_TRY(tern_split_regex_spans(st->regex, c->regex[step], s, n, on_span, &k));
        else
            TERN_TRY(digit_spans(s, n, &k));
        return flush(&k);
    }
    }
    return tern_errorf("unknown pre-tokenizer step %d", (int)st->kind);
}

/* Unicode White_Space at s[p] (p < n), and its length. */
static bool space_at(const uint8_t *s, size_t n, size_t p, size_t *len) {
    return tern_pretok_unit(s, n, p, len) == TERN_CHAR_SPACE;
}

/* The start of the white space that ends s[lo..p), as Hugging Face's lstrip takes it. */
static size_t strip_left(const uint8_t *s, size_t n, size_t lo, size_t p) {
    while (p > lo) {
        size_t l = 0, len;
        for (size_t k = 1; k <= 4 && k <= p - lo; k++) { /* the character that ends at p */
            uint32_t cp;
            if (tern_utf8_decode(s + p - k, n - (p - k), &cp) == k) {
                l = k;
                break;
            }
        }
        if (!l || !space_at(s, n, p - l, &len)) break;
        p -= l;
    }
    return p;
}

static size_t strip_right(const uint8_t *s, size_t n, size_t p) {
    size_t len;
    while (p < n && space_at(s, n, p, &len)) p += len;
    return p;
}

static bool set_is_empty(const tern_added_set *set) { return set->first[256] == 0; }

typedef tern_error *(*text_fn)(encode_ctx *c, const uint8_t *s, size_t n);

/* Splits s[0..n) at the added tokens of set: text parts go to on_text, tokens to the ids.
 * Leftmost-longest, the way Hugging Face's Aho-Corasick matcher finds them; a special token
 * that is not to be matched is passed over as text, and matching goes on after it. */
static tern_error *split_added(encode_ctx *c, const tern_added_set *set, const uint8_t *s,
                               size_t n, text_fn on_text) {
    if (set_is_empty(set)) return on_text(c, s, n);
    const tern_added_token *added = c->hf->added;
    size_t text_from = 0, p = 0;
    while (p < n) {
        uint32_t lo = set->first[s[p]], hi = set->first[s[p] + 1];
        const tern_added_token *hit = NULL;
        for (uint32_t i = lo; i < hi; i++) {
            const tern_added_token *t = &added[set->order[i]];
            if (t->len <= n - p && !memcmp(s + p, t->bytes, t->len)) {
                hit = t;
                break;
            }
        }
        if (!hit) {
            p++;
            continue;
        }
        size_t start = p, end = p + hit->len;
        p = end;
        if (hit->special && !c->special_in_text) continue;
        if (hit->lstrip) start = strip_left(s, n, text_from, start);
        if (hit->rstrip) end = strip_right(s, n, end);
        if (text_from < start) TERN_TRY(on_text(c, s + text_from, start - text_from));
        TERN_TRY(tern_id_vec_push(c->out, hit->id));
        text_from = p = end;
    }
    if (text_from < n) TERN_TRY(on_text(c, s + text_from, n - text_from));
    return NULL;
}

static tern_error *pretokenize_text(encode_ctx *c, const uint8_t *s, size_t n) {
    return run_step(c, 0, s, n);
}

/* A part of the raw text between added tokens: normalize it, then look for the normalized
 * added tokens in it. */
static tern_error *normalize_text(encode_ctx *c, const uint8_t *s, size_t n) {
    if (c->hf->nfc) {
        uint8_t *normal = NULL;
        size_t normal_len = 0;
        TERN_TRY(tern_nfc(s, n, &normal, &normal_len));
        if (normal) { /* keep it for the call: the cache may point into it */
            uint8_t *kept = NULL;
            tern_error *err = arena_alloc(c, normal_len ? normal_len : 1, &kept);
            if (!err) memcpy(kept, normal, normal_len);
            free(normal);
            TERN_TRY(err);
            s = kept;
            n = normal_len;
        }
    }
    return split_added(c, &c->hf->normalized_set, s, n, pretokenize_text);
}

tern_error *tern_hf_encode(const tern_tokenizer *tok, const uint8_t *s, size_t n,
                           unsigned flags, tern_piece_cache *cache, tern_id_vec *out) {
    const struct tern_hf_pipeline *hf = tok->hf;
    encode_ctx c = {.tok = tok, .hf = hf, .cache = cache, .out = out,
                    .special_in_text = flags & TERN_ENCODE_SPECIAL_IN_TEXT};
    tern_error *err = NULL;
    for (size_t i = 0; i < hf->n_steps && !err; i++)
        if (hf->steps[i].kind == TERN_PRETOK_REGEX)
            err = tern_regex_scratch_new(hf->steps[i].regex, &c.regex[i]);
    bool add = flags & TERN_ENCODE_ADD_SPECIAL;
    for (size_t i = 0; add && !err && i < hf->n_prefix; i++)
        err = tern_id_vec_push(out, hf->prefix_ids[i]);
    if (!err) err = split_added(&c, &hf->raw_set, s, n, normalize_text);
    for (size_t i = 0; add && !err && i < hf->n_suffix; i++)
        err = tern_id_vec_push(out, hf->suffix_ids[i]);
    for (size_t i = 0; i < hf->n_steps; i++) tern_regex_scratch_free(c.regex[i]);
    while (c.arena) {
        arena_block *next = c.arena->next;
        free(c.arena);
        c.arena = next;
    }
    return err;
}
