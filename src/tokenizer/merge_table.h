/* The BPE merge rules as a hash table: (left id, right id) -> (rank, merged id). */
#ifndef TERN_TOKENIZER_MERGE_TABLE_H
#define TERN_TOKENIZER_MERGE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

typedef struct {
    uint64_t key; /* left << 32 | right; TERN_MERGE_EMPTY marks a free slot */
    int32_t rank; /* the merge's line in merges.txt, from 0: lower merges first */
    int32_t merged;
} tern_merge_slot;

#define TERN_MERGE_EMPTY UINT64_MAX

typedef struct {
    tern_merge_slot *slots;
    size_t mask; /* slots - 1; a power of two at least twice the number of merges */
    unsigned shift;
    size_t count;
} tern_merge_table;

tern_error *tern_merge_table_init(tern_merge_table *t, size_t max_merges);
void tern_merge_table_free(tern_merge_table *t);

/* Adds a rule; returns false (and changes nothing) if the pair already has one. The
 * table must have room: at most the max_merges given to init. */
bool tern_merge_table_add(tern_merge_table *t, int32_t left, int32_t right, int32_t rank,
                          int32_t merged);

static inline size_t tern_merge_slot_of(const tern_merge_table *t, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* The rule for (left, right), or NULL. */
static inline const tern_merge_slot *tern_merge_table_find(const tern_merge_table *t,
                                                           int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = tern_merge_slot_of(t, key);; i = (i + 1) & t->mask) {
        const tern_merge_slot *s = &t->slots[i];
        if (s->key == key) return s;
        if (s->key == TERN_MERGE_EMPTY) return NULL;
    }
}

#endif
