/* A hash index from a token's bytes to its id, used while loading (merges.txt names
 * tokens by their text). */
#ifndef TERN_TOKENIZER_TOKEN_INDEX_H
#define TERN_TOKENIZER_TOKEN_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"
#include "tokenizer/tokenizer_internal.h"

typedef struct {
    int32_t *slots; /* ids; -1 marks a free slot */
    size_t mask;
    const struct tern_tokenizer *tok;
} tern_token_index;

/* Indexes every token of tok. Two ids with the same bytes are an error naming both. */
tern_error *tern_token_index_build(tern_token_index *index, const struct tern_tokenizer *tok);
/* The same for the ids whose include[id] is non-zero (tokenizer.json: the model's own
 * vocabulary, without added tokens that only the added vocabulary has). */
tern_error *tern_token_index_build_some(tern_token_index *index,
                                        const struct tern_tokenizer *tok,
                                        const uint8_t *include);
void tern_token_index_free(tern_token_index *index);

/* The id of the token with these bytes, or -1. */
int32_t tern_token_index_find(const tern_token_index *index, const uint8_t *bytes, size_t len);

#endif
