#include "tokenizer/merge_table.h"

#include <stdlib.h>

tern_error *tern_merge_table_init(tern_merge_table *t, size_t max_merges) {
    size_t slots = 16;
    unsigned bits = 4;
    while (slots < 2 * max_merges) {
        if (bits >= 40) return tern_errorf("too many merges (%zu)", max_merges);
        slots *= 2;
        bits++;
    }
    t->slots = malloc(slots * sizeof *t->slots);
    if (!t->slots) return tern_errorf("out of memory for %zu merges", max_merges);
    for (size_t i = 0; i < slots; i++) t->slots[i].key = TERN_MERGE_EMPTY;
    t->mask = slots - 1;
    t->shift = 64 - bits;
    t->count = 0;
    return NULL;
}

void tern_merge_table_free(tern_merge_table *t) {
    free(t->slots);
    t->slots = NULL;
}

bool tern_merge_table_add(tern_merge_table *t, int32_t left, int32_t right, int32_t rank,
                          int32_t merged) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = tern_merge_slot_of(t, key);
    while (t->slots[i].key != TERN_MERGE_EMPTY) {
        if (t->slots[i].key == key) return false;
        i = (i + 1) & t->mask;
    }
    t->slots[i] = (tern_merge_slot){key, rank, merged};
    t->count++;
    return true;
}
