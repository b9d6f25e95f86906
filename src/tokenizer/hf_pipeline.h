/* What a Hugging Face tokenizer.json adds to the byte-level BPE core: added tokens matched
 * in the text, a normalizer, a chain of pre-tokenizers and the tokens the post-processor
 * puts around the ids. Loaded by hf_load.c, run by hf_encode.c; docs/tokenizer.md says
 * what is supported and what is refused. */
#ifndef TERN_TOKENIZER_HF_PIPELINE_H
#define TERN_TOKENIZER_HF_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"
#include "tokenizer/id_vec.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/token_index.h"
#include "tokenizer/tokenizer_internal.h"

/* How a split keeps the pattern's matches (Hugging Face's SplitDelimiterBehavior). */
typedef enum {
    TERN_SPLIT_REMOVED,
    TERN_SPLIT_ISOLATED,
    TERN_SPLIT_MERGED_WITH_PREVIOUS,
    TERN_SPLIT_MERGED_WITH_NEXT,
    TERN_SPLIT_CONTIGUOUS,
} tern_split_behavior;

typedef enum {
    TERN_PRETOK_GPT2,         /* GPT-2's regex, by the hand-written scanner (pretokenize.h) */
    TERN_PRETOK_REGEX,        /* Split: a pattern, a behaviour, maybe inverted */
    TERN_PRETOK_DIGITS,       /* Digits: numbers apart from the rest */
    TERN_PRETOK_PREFIX_SPACE, /* ByteLevel's add_prefix_space: a space before each piece */
} tern_pretok_kind;

typedef struct {
    tern_pretok_kind kind;
    tern_split_behavior behavior; /* REGEX, DIGITS */
    bool invert;                  /* REGEX: the pattern matches what lies between pieces */
    tern_split_regex *regex;      /* REGEX */
} tern_pretok_step;

#define TERN_HF_MAX_STEPS 16

/* The added tokens of one matching pass, by first byte; each list longest first, so the
 * first that matches at a position is the longest (Hugging Face: leftmost-longest). */
typedef struct {
    uint32_t *order;     /* indexes into the pipeline's added[] */
    uint32_t first[257]; /* order[first[b] .. first[b + 1]): tokens starting with byte b */
} tern_added_set;

typedef struct {
    int32_t id;
    const uint8_t *bytes; /* what is matched in the text (its content, normalized if the
                           * token is `normalized`), owned by the pipeline */
    size_t len;
    bool special, lstrip, rstrip;
} tern_added_token;

struct tern_hf_pipeline {
    bool nfc;           /* normalizer: NFC */
    bool ignore_merges; /* a piece that is a token of the vocabulary is that token */
    tern_token_index vocab_index; /* the model's vocabulary, for ignore_merges */
    tern_pretok_step steps[TERN_HF_MAX_STEPS];
    size_t n_steps;
    tern_added_token *added;
    size_t n_added;
    uint8_t *added_text; /* the bytes every added token's `bytes` points into */
    tern_added_set raw_set;        /* tokens with normalized false: found in the raw text */
    tern_added_set normalized_set; /* normalized true: found after the normalizer */
    int32_t *prefix_ids, *suffix_ids; /* the post-processor's tokens around a sequence */
    size_t n_prefix, n_suffix;
};

void tern_hf_pipeline_free(struct tern_hf_pipeline *hf);

/* Encodes s[0..n) through the pipeline, appending to out (flags: TERN_ENCODE_*; cache:
 * the call's piece cache, or NULL). */
tern_error *tern_hf_encode(const tern_tokenizer *tok, const uint8_t *s, size_t n,
                           unsigned flags, tern_piece_cache *cache, tern_id_vec *out);

/* NFC of s[0..n) (ill-formed bytes kept as they are): *out is NULL when s is already in
 * NFC, else a new buffer of *out_len bytes, freed by the caller. */
tern_error *tern_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len);

#endif
