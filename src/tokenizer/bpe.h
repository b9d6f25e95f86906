/* Byte-pair encoding of one pre-tokenized piece.
 *
 * A piece starts as one token per byte; then, over and over, the adjacent pair with the
 * lowest-ranked merge rule (the leftmost such pair on a tie) is replaced by the merged
 * token, until no adjacent pair has a rule. With merge rules in the order BPE learnt them
 * (a rule that uses a token comes after the rule that makes it, as in GPT-2's merges.txt)
 * this is the same as Hugging Face's "merge every occurrence of the best pair" loop.
 *
 * Short pieces (almost all of them) use a scan over an array of pair ranks: quadratic,
 * but tiny and cache-friendly. Long ones use a heap of candidate pairs over a linked list,
 * O(n log n), so that a megabyte-long run of letters is no denial of service. */
#ifndef TERN_TOKENIZER_BPE_H
#define TERN_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"
#include "tokenizer/id_vec.h"
#include "tokenizer/merge_table.h"

/* Pieces up to this many bytes take the scan. */
#define TERN_BPE_SMALL_MAX 64

/* The scan: n in [1, TERN_BPE_SMALL_MAX]; writes the ids to ids[] and returns how many. */
size_t tern_bpe_small(const tern_merge_table *merges, const int32_t byte_token[256],
                      const uint8_t *piece, size_t n, int32_t *ids);

/* The heap: any n >= 1; appends the ids to out. */
tern_error *tern_bpe_large(const tern_merge_table *merges, const int32_t byte_token[256],
                           const uint8_t *piece, size_t n, tern_id_vec *out);

/* Either, by length: appends the ids of piece to out. */
tern_error *tern_bpe_piece(const tern_merge_table *merges, const int32_t byte_token[256],
                           const uint8_t *piece, size_t n, tern_id_vec *out);

#endif
