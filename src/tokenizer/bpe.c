#include "tokenizer/bpe.h"

#include <string.h>

#define NO_RANK INT32_MAX

size_t tern_bpe_small(const tern_merge_table *merges, const int32_t byte_token[256],
                      const uint8_t *piece, size_t n, int32_t *ids) {
    /* rank[i], merged[i]: the rule for the pair (ids[i], ids[i + 1]), if any. */
    int32_t rank[TERN_BPE_SMALL_MAX], merged[TERN_BPE_SMALL_MAX];
    for (size_t i = 0; i < n; i++) ids[i] = byte_token[piece[i]];
    for (size_t i = 0; i + 1 < n; i++) {
        const tern_merge_slot *s = tern_merge_table_find(merges, ids[i], ids[i + 1]);
        rank[i] = s ? s->rank : NO_RANK;
        merged[i] = s ? s->merged : 0;
    }
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == NO_RANK) break;
        /* ids[best], ids[best + 1] -> merged; pairs after it shift down by one. */
        ids[best] = merged[best];
        memmove(&ids[best + 1], &ids[best + 2], (n - best - 2) * sizeof *ids);
        if (n - best > 2) {
            memmove(&rank[best + 1], &rank[best + 2], (n - best - 3) * sizeof *rank);
            memmove(&merged[best + 1], &merged[best + 2], (n - best - 3) * sizeof *merged);
        }
        n--;
        for (size_t i = best > 0 ? best - 1 : 0; i <= best && i + 1 < n; i++) {
            const tern_merge_slot *s = tern_merge_table_find(merges, ids[i], ids[i + 1]);
            rank[i] = s ? s->rank : NO_RANK;
            merged[i] = s ? s->merged : 0;
        }
    }
    return n;
}

/* A min-heap of candidate merges, each rank << 32 | position of its left token: the
 * lowest rank first, then the leftmost. */
typedef struct {
    uint64_t *items;
    size_t count;
} pair_heap;

static void heap_push(pair_heap *h, uint64_t item) {
    size_t i = h->count++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->items[parent] <= item) break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = item;
}

static uint64_t heap_pop(pair_heap *h) {
    uint64_t top = h->items[0], last = h->items[--h->count];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->count) break;
        if (child + 1 < h->count && h->items[child + 1] < h->items[child]) child++;
        if (last <= h->items[child]) break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->count) h->items[i] = last;
    return top;
}

static void push_pair(pair_heap *h, const tern_merge_table *merges, const int32_t *ids,
                      int32_t left, int32_t right) {
    const tern_merge_slot *s = tern_merge_table_find(merges, ids[left], ids[right]);
    if (s) heap_push(h, (uint64_t)(uint32_t)s->rank << 32 | (uint32_t)left);
}

tern_error *tern_bpe_large(const tern_merge_table *merges, const int32_t byte_token[256],
                           const uint8_t *piece, size_t n, tern_id_vec *out) {
    if (n > INT32_MAX / 4) return tern_errorf("a piece of %zu bytes is too long to encode", n);
    /* ids[i] < 0 marks a token merged into its left neighbour. Each merge pushes at most
     * two pairs, and there are fewer than n merges: 3n heap entries suffice. */
    int32_t *ids = malloc(n * sizeof *ids);
    int32_t *next = malloc(n * sizeof *next);
    int32_t *prev = malloc(n * sizeof *prev);
    pair_heap heap = {malloc(3 * n * sizeof *heap.items), 0};
    tern_error *err = NULL;
    if (!ids || !next || !prev || !heap.items) {
        err = tern_errorf("out of memory encoding a piece of %zu bytes", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        ids[i] = byte_token[piece[i]];
        next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair(&heap, merges, ids, (int32_t)i, (int32_t)i + 1);
    while (heap.count) {
        uint64_t item = heap_pop(&heap);
        int32_t rank = (int32_t)(item >> 32), left = (int32_t)(item & 0xFFFFFFFFu);
        int32_t right = next[left];
        if (ids[left] < 0 || right < 0) continue;
        /* Stale if either token has changed since: the pair's rule (unique per rank) is
         * no longer the one that was pushed. */
        const tern_merge_slot *s = tern_merge_table_find(merges, ids[left], ids[right]);
        if (!s || s->rank != rank) continue;
        ids[left] = s->merged;
        ids[right] = -1;
        next[left] = next[right];
        if (next[right] >= 0) prev[next[right]] = left;
        if (prev[left] >= 0) push_pair(&heap, merges, ids, prev[left], left);
        if (next[left] >= 0) push_pair(&heap, merges, ids, left, next[left]);
    }
    size_t count = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) count++;
    err = tern_id_vec_reserve(out, count);
    if (err) goto done;
    for (int32_t i = 0; i >= 0; i = next[i]) out->data[out->count++] = ids[i];
done:
    free(ids);
    free(next);
    free(prev);
    free(heap.items);
    return err;
}

tern_error *tern_bpe_piece(const tern_merge_table *merges, const int32_t byte_token[256],
                           const uint8_t *piece, size_t n, tern_id_vec *out) {
    if (n > TERN_BPE_SMALL_MAX) return tern_bpe_large(merges, byte_token, piece, n, out);
    TERN_TRY(tern_id_vec_reserve(out, n));
    out->count += tern_bpe_small(merges, byte_token, piece, n, out->data + out->count);
    return NULL;
}
