#include "tokenizer/piece_cache.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_SLOTS ((size_t)1 << 12)
/* 2^18 slots hold 128K distinct pieces in about 6 MB: Brown has about 50K. */
#define MAX_SLOTS ((size_t)1 << 18)

tern_error *tern_piece_cache_init(tern_piece_cache *c) {
    memset(c, 0, sizeof *c);
    c->slots = calloc(INITIAL_SLOTS, sizeof *c->slots);
    if (!c->slots) return tern_errorf("out of memory for the piece cache");
    c->mask = INITIAL_SLOTS - 1;
    return NULL;
}

void tern_piece_cache_free(tern_piece_cache *c) {
    free(c->slots);
    free(c->ids.data);
    memset(c, 0, sizeof *c);
}

tern_piece_slot *tern_piece_cache_find(tern_piece_cache *c, const uint8_t *piece, size_t len,
                                       uint32_t h) {
    for (size_t i = h & c->mask;; i = (i + 1) & c->mask) {
        tern_piece_slot *s = &c->slots[i];
        if (!s->bytes) return s;
        if (s->hash == h && s->len == len && !memcmp(s->bytes, piece, len)) return s;
    }
}

/* Doubles the table, re-placing every entry. */
static tern_error *grow(tern_piece_cache *c) {
    size_t slots = (c->mask + 1) * 2;
    tern_piece_slot *grown = calloc(slots, sizeof *grown);
    if (!grown) return tern_errorf("out of memory for the piece cache");
    for (size_t i = 0; i <= c->mask; i++) {
        tern_piece_slot *s = &c->slots[i];
        if (!s->bytes) continue;
        size_t j = s->hash & (slots - 1);
        while (grown[j].bytes) j = (j + 1) & (slots - 1);
        grown[j] = *s;
    }
    free(c->slots);
    c->slots = grown;
    c->mask = slots - 1;
    return NULL;
}

tern_error *tern_piece_cache_put(tern_piece_cache *c, tern_piece_slot *slot,
                                 const uint8_t *piece, size_t len, uint32_t h,
                                 const int32_t *ids, size_t count) {
    size_t slots = c->mask + 1;
    if (2 * (c->used + 1) > slots && slots >= MAX_SLOTS) return NULL; /* full: keep as is */
    if (c->ids.count + count > UINT32_MAX) return NULL;
    TERN_TRY(tern_id_vec_reserve(&c->ids, count));
    *slot = (tern_piece_slot){piece, (uint32_t)len, h, (uint32_t)count, (uint32_t)c->ids.count};
    memcpy(c->ids.data + c->ids.count, ids, count * sizeof *ids);
    c->ids.count += count;
    c->used++;
    if (2 * c->used > slots) return grow(c);
    return NULL;
}
