#include "tokenizer/token_index.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/bytes_hash.h"

static int32_t find_slot(const tern_token_index *index, const uint8_t *bytes, size_t len,
                         size_t *slot) {
    const struct tern_tokenizer *tok = index->tok;
    size_t i = (size_t)tern_bytes_hash(bytes, len) & index->mask;
    for (;; i = (i + 1) & index->mask) {
        int32_t id = index->slots[i];
        if (id < 0) break;
        size_t start = tok->offsets[id], n = tok->offsets[id + 1] - start;
        if (n == len && !memcmp(tok->bytes + start, bytes, len)) break;
    }
    *slot = i;
    return index->slots[i];
}

tern_error *tern_token_index_build(tern_token_index *index, const struct tern_tokenizer *tok) {
    return tern_token_index_build_some(index, tok, NULL);
}

tern_error *tern_token_index_build_some(tern_token_index *index,
                                        const struct tern_tokenizer *tok,
                                        const uint8_t *include) {
    size_t slots = 16;
    while (slots < 2 * tok->vocab_size) slots *= 2;
    index->slots = malloc(slots * sizeof *index->slots);
    if (!index->slots) return tern_errorf("out of memory indexing %zu tokens", tok->vocab_size);
    memset(index->slots, 0xFF, slots * sizeof *index->slots); /* all -1 */
    index->mask = slots - 1;
    index->tok = tok;
    for (size_t id = 0; id < tok->vocab_size; id++) {
        if (include && !include[id]) continue;
        size_t slot;
        int32_t other = find_slot(index, tok->bytes + tok->offsets[id],
                                  tok->offsets[id + 1] - tok->offsets[id], &slot);
        if (other >= 0) {
            tern_token_index_free(index);
            return tern_errorf("ids %d and %zu are the same token", (int)other, id);
        }
        index->slots[slot] = (int32_t)id;
    }
    return NULL;
}

void tern_token_index_free(tern_token_index *index) {
    free(index->slots);
    index->slots = NULL;
}

int32_t tern_token_index_find(const tern_token_index *index, const uint8_t *bytes, size_t len) {
    size_t slot;
    return find_slot(index, bytes, len, &slot);
}
