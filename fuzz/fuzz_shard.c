/* libFuzzer target: token shards from arbitrary bytes, then batches. An accepted shard has at
 * least 2 tokens within the vocabulary, and every batch pairs each x with the next token. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* The vocabulary limit comes from the input too: GPT-2's, none, or a tiny one. */
    size_t vocab = size > 12 ? (size_t[]){50257, 0, 300, 65536}[data[12] % 4] : 50257;
    tern_dataset *ds = NULL;
    tern_error *e = tern_dataset_from_shard_bytes(data, size, "fuzz", vocab, &ds);
    if (e) {
        if (ds) __builtin_trap();
        tern_error_free(e);
        return 0;
    }
    size_t n = tern_dataset_tokens(ds);
    if (n < 2 || size != TERN_SHARD_HEADER_BYTES + 2 * n) __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        int32_t t = tern_dataset_token(ds, i);
        if (t < 0 || (vocab && vocab <= 65536 && (size_t)t >= vocab)) __builtin_trap();
    }
    /* A batch shape and index taken from the header's spare bytes. */
    int B = 1 + data[16] % 4, T = 1 + data[17] % 16;
    size_t k;
    memcpy(&k, data + 20, sizeof k);
    int32_t x[64], y[64];
    if (tern_dataset_batch(ds, k, B, T, x, y)) __builtin_trap();
    for (int i = 0; i + 1 < B * T; i++)
        if (y[i] != x[i + 1]) __builtin_trap();
    tern_dataset_batch_count(ds, B, T);
    tern_dataset_close(ds);
    return 0;
}
