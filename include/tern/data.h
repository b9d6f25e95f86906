/* Training and evaluation data: llm.c token shards and plain text, read in batches.
 *
 * A token shard is a header of 256 little-endian int32 (magic 20240520, version 1, the token
 * count, the rest zero) followed by that many little-endian uint16 token ids, and nothing
 * else. Any other file is taken for UTF-8 text and tokenized when opened.
 *
 * Batches follow llm.c: batch k of B x T reads the B*T + 1 tokens starting at position
 * k*B*T, x being the first B*T of them and y the last B*T (y[i] is the token after x[i]).
 * Positions are taken modulo the number of tokens N, so batches wrap around the end of the
 * data back to its start, for every k. When B*T + 1 > N a single batch therefore holds
 * some tokens more than once; that is allowed (a tiny data set still trains), and at each
 * wrap the pair (last token, first token) appears as if the data were a loop. */
#ifndef TERN_DATA_H
#define TERN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"
#include "tern/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_SHARD_MAGIC 20240520
#define TERN_SHARD_VERSION 1
#define TERN_SHARD_HEADER_BYTES 1024 /* 256 int32 */

typedef struct tern_dataset tern_dataset;

/* Opens a data file: a token shard when it starts with the shard magic, otherwise UTF-8 text,
 * which is tokenized with `tok` ("<|endoftext|>" in the text becomes the end-of-text id;
 * text that is not UTF-8 is an error giving the offset of the first bad byte). tok may be
 * NULL for shards; a text file then is an error. Every id must be below vocab_size (0: no
 * limit beyond the shard format's 65536); the first that is not is an error naming its
 * position. Fewer than 2 tokens is an error. */
tern_error *tern_dataset_open(const char *path, const tern_tokenizer *tok, size_t vocab_size,
                              tern_dataset **out);

/* Opens a token shard (read into memory); anything else is an error. */
tern_error *tern_dataset_open_shard(const char *path, size_t vocab_size, tern_dataset **out);

/* A data set from the len bytes of a token shard in memory (copied); `name` is used in
 * error messages. */
tern_error *tern_dataset_from_shard_bytes(const void *bytes, size_t len, const char *name,
                                          size_t vocab_size, tern_dataset **out);

/* A data set holding a copy of n token ids, each in [0, 65536) and below vocab_size. */
tern_error *tern_dataset_from_ids(const int32_t *ids, size_t n, size_t vocab_size,
                                  tern_dataset **out);

void tern_dataset_close(tern_dataset *ds); /* NULL is a no-op */

/* The number of tokens N (at least 2), and token i < N. */
size_t tern_dataset_tokens(const tern_dataset *ds);
int32_t tern_dataset_token(const tern_dataset *ds, size_t i);

/* How many batches of B x T fit before the first one that wraps: floor((N - 1) / (B*T)).
 * 0 for invalid B or T. An evaluation over "the whole data" reads batches 0 .. this - 1. */
size_t tern_dataset_batch_count(const tern_dataset *ds, int B, int T);

/* Batch k (any k: positions wrap) into x and y, each of B*T ids. B and T must be positive. */
tern_error *tern_dataset_batch(const tern_dataset *ds, size_t k, int B, int T, int32_t *x,
                               int32_t *y);

/* Whether `len` bytes begin with the token shard magic. */
bool tern_is_shard(const void *bytes, size_t len);

/* Writes n ids as a token shard, atomically. Each id must be in [0, 65536), and n at most
 * INT32_MAX (the header's count is an int32). */
tern_error *tern_shard_write(const char *path, const int32_t *ids, size_t n);

/* Splits n tokens for training and validation: the last round(n * val_fraction) go to
 * validation. val_fraction must be in (0, 1), and each part must get at least 2 tokens. */
tern_error *tern_split_sizes(size_t n, double val_fraction, size_t *n_train, size_t *n_val);

/* Writes the two parts of that split as token shards (what `tern tokenize --out` uses). */
tern_error *tern_shard_write_split(const char *train_path, const char *val_path, const int32_t *ids,
                                   size_t n, double val_fraction);

#ifdef __cplusplus
}
#endif
#endif
