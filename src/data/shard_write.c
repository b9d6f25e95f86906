/* Writing token shards (llm.c's format, see tern/data.h) and splitting tokens for training
 * and validation. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/data.h"
#include "tern/file.h"

static void put_i32(unsigned char *p, int32_t v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(u >> (8 * i));
}

tern_error *tern_shard_write(const char *path, const int32_t *ids, size_t n) {
    if (n > INT32_MAX)
        return tern_errorf("writing %s: %zu tokens do not fit one shard (at most %d)", path, n,
                           INT32_MAX);
    if (n > 0 && !ids) return tern_errorf("writing %s: no tokens given", path);
    /* Check every id before creating anything. */
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > 65535)
            return tern_errorf("writing %s: token %d at position %zu does not fit a shard's "
                               "uint16",
                               path, (int)ids[i], i);
    unsigned char header[TERN_SHARD_HEADER_BYTES] = {0};
    put_i32(header, TERN_SHARD_MAGIC);
    put_i32(header + 4, TERN_SHARD_VERSION);
    put_i32(header + 8, (int32_t)n);

    tern_atomic_file *f;
    TERN_TRY(tern_atomic_open(path, &f));
    tern_error *e = tern_atomic_write(f, header, sizeof header);
    enum { CHUNK = 32768 };
    unsigned char chunk[2 * CHUNK];
    for (size_t i = 0; i < n && !e; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        for (size_t j = 0; j < m; j++) {
            uint16_t v = (uint16_t)ids[i + j];
            chunk[2 * j] = (unsigned char)(v & 0xff);
            chunk[2 * j + 1] = (unsigned char)(v >> 8);
        }
        e = tern_atomic_write(f, chunk, 2 * m);
    }
    if (e) {
        tern_atomic_abort(f);
        return e;
    }
    return tern_atomic_commit(f);
}

tern_error *tern_split_sizes(size_t n, double val_fraction, size_t *n_train, size_t *n_val) {
    if (!(val_fraction > 0 && val_fraction < 1))
        return tern_errorf("validation fraction %g is not between 0 and 1", val_fraction);
    double v = nearbyint((double)n * val_fraction);
    size_t nv = v >= (double)n ? n : (size_t)v;
    if (nv < 2 || n - nv < 2)
        return tern_errorf("%zu tokens are too few to split %g of them off for validation "
                           "(each part needs at least 2)",
                           n, val_fraction);
    *n_train = n - nv;
    *n_val = nv;
    return NULL;
}

tern_error *tern_shard_write_split(const char *train_path, const char *val_path, const int32_t *ids,
                                   size_t n, double val_fraction) {
    size_t n_train, n_val;
    TERN_TRY(tern_split_sizes(n, val_fraction, &n_train, &n_val));
    if (!ids) return tern_errorf("writing %s: no tokens given", train_path);
    /* Check every id first, so bad ids in the validation part leave no training file. */
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > 65535)
            return tern_errorf("writing %s: token %d at position %zu does not fit a shard's "
                               "uint16",
                               i < n_train ? train_path : val_path, (int)ids[i],
                               i < n_train ? i : i - n_train);
    TERN_TRY(tern_shard_write(train_path, ids, n_train));
    return tern_shard_write(val_path, ids + n_train, n_val);
}
