/* The tokenizer's representation, shared by its source files (not a public header). */
#ifndef TERN_TOKENIZER_INTERNAL_H
#define TERN_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/tokenizer.h"
#include "tern/error.h"
#include "tokenizer/id_vec.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/piece_cache.h"

struct tern_hf_pipeline; /* hf_pipeline.h: what a tokenizer.json adds */

struct tern_tokenizer {
    size_t vocab_size;
    uint8_t *bytes;    /* every token's bytes, one after another, in id order */
    size_t *offsets;   /* token id's bytes are bytes[offsets[id] .. offsets[id + 1]) */
    int32_t byte_token[256]; /* the single-byte token of each byte */
    int32_t eot;       /* the id of <|endoftext|>, or -1 if the vocabulary has none */
    tern_merge_table merges;
    struct tern_hf_pipeline *hf; /* NULL when loaded from vocab.json + merges.txt */
};

/* Appends the ids of one pre-tokenized piece (len >= 0): one token when the piece is a
 * token and the tokenizer has ignore_merges, else its BPE. The cache (may be NULL) must
 * outlive nothing the piece points to: its bytes must stay put for the whole call. */
tern_error *tern_encode_piece(const tern_tokenizer *tok, tern_piece_cache *cache,
                              const uint8_t *s, size_t len, tern_id_vec *out);

/* Splits s with GPT-2's pre-tokenizer (pretokenize.h) and appends each piece's ids. */
tern_error *tern_encode_gpt2_pieces(const tern_tokenizer *tok, tern_piece_cache *cache,
                                    const uint8_t *s, size_t n, tern_id_vec *out);

#endif
