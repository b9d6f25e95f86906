/* A cache of BPE results by piece, for one encode call. Text repeats its words, and
 * looking a piece up is several times cheaper than merging its bytes again. It lives for
 * one call (not in the tokenizer) so that encoding stays thread-safe with a const
 * tokenizer. */
#ifndef TERN_TOKENIZER_PIECE_CACHE_H
#define TERN_TOKENIZER_PIECE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"
#include "tokenizer/id_vec.h"

typedef struct {
    const uint8_t *bytes; /* the piece, in the caller's text; NULL marks a free slot */
    uint32_t len;
    uint32_t hash;
    uint32_t count; /* its ids: ids.data[at .. at + count) */
    uint32_t at;
} tern_piece_slot;

typedef struct {
    tern_piece_slot *slots;
    size_t mask, used;
    tern_id_vec ids;
} tern_piece_cache;

tern_error *tern_piece_cache_init(tern_piece_cache *c);
void tern_piece_cache_free(tern_piece_cache *c);

/* The slot for piece (hash h): a hit when its bytes are set, else the free slot where it
 * would go. */
tern_piece_slot *tern_piece_cache_find(tern_piece_cache *c, const uint8_t *piece, size_t len,
                                       uint32_t h);

/* Stores piece's ids in the free slot that find returned. When the cache is full it
 * silently stores nothing; only running out of memory is an error. */
tern_error *tern_piece_cache_put(tern_piece_cache *c, tern_piece_slot *slot,
                                 const uint8_t *piece, size_t len, uint32_t h,
                                 const int32_t *ids, size_t count);

#endif
