/* The tokenizer's representation, shared by its source files (not a public header). */
#ifndef TERN_TOKENIZER_INTERNAL_H
#define TERN_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/tokenizer.h"
#include "tokenizer/merge_table.h"

struct tern_tokenizer {
    size_t vocab_size;
    uint8_t *bytes;    /* every token's bytes, one after another, in id order */
    size_t *offsets;   /* token id's bytes are bytes[offsets[id] .. offsets[id + 1]) */
    int32_t byte_token[256]; /* the single-byte token of each byte */
    int32_t eot;       /* the id of <|endoftext|>, or -1 if the vocabulary has none */
    tern_merge_table merges;
};

#endif
