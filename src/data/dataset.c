/* Data sets of token ids: token shards (read into memory), ids in memory, and llm.c-style
 * batches with wrap-around (see tern/data.h). Opening text files lives in dataset_text.c,
 * the one part that needs the tokenizer. */
#include "tern/data.h"
#include "tern/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tern reads token shards in place and needs a little-endian host"
#endif

struct tern_dataset {
    const uint16_t *tokens;
    size_t count;
    void *owned; /* tokens' storage: the ids, or the whole shard file they lie in */
};

static int32_t read_i32(const unsigned char *p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t s;
    memcpy(&s, &v, sizeof s);
    return s;
}

bool tern_is_shard(const void *bytes, size_t len) {
    return len >= 4 && read_i32(bytes) == TERN_SHARD_MAGIC;
}

static tern_error *check_vocab(const uint16_t *tokens, size_t n, size_t vocab, const char *name) {
    if (vocab == 0 || vocab > 65536) return NULL; /* every uint16 is in range */
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= vocab)
            return tern_errorf("%s: token %u at position %zu is outside the vocabulary (%zu ids)",
                               name, (unsigned)tokens[i], i, vocab);
    return NULL;
}

/* Checks a shard's header against its length; *count receives the token count. */
static tern_error *check_shard(const unsigned char *bytes, size_t len, const char *name,
                               size_t *count) {
    if (len < 4 || !tern_is_shard(bytes, len)) {
        if (len < 4) return tern_errorf("%s: not a token shard (only %zu bytes)", name, len);
        return tern_errorf("%s: not a token shard (magic %d, expected %d)", name,
                           (int)read_i32(bytes), TERN_SHARD_MAGIC);
    }
    if (len < TERN_SHARD_HEADER_BYTES)
        return tern_errorf("%s: truncated token shard: %zu bytes, less than its %d-byte header",
                           name, len, TERN_SHARD_HEADER_BYTES);
    int32_t version = read_i32(bytes + 4);
    if (version != TERN_SHARD_VERSION)
        return tern_errorf("%s: token shard version %d is not supported (expected %d: uint16 "
                           "GPT-2 tokens)",
                           name, (int)version, TERN_SHARD_VERSION);
    int32_t claimed = read_i32(bytes + 8);
    if (claimed < 0)
        return tern_errorf("%s: token shard header gives a negative token count (%d)", name,
                           (int)claimed);
    size_t have = len - TERN_SHARD_HEADER_BYTES;
    if (have != 2 * (size_t)claimed)
        return tern_errorf("%s: token shard header says %d tokens (%zu bytes) but %zu bytes "
                           "follow the header",
                           name, (int)claimed, 2 * (size_t)claimed, have);
    *count = (size_t)claimed;
    return NULL;
}

static tern_error *check_count(size_t count, const char *name) {
    if (count < 2)
        return tern_errorf("%s: %zu token%s: a data set needs at least 2 (an input and its "
                           "target)",
                           name, count, count == 1 ? "" : "s");
    return NULL;
}

void tern_dataset_close(tern_dataset *ds) {
    if (!ds) return;
    free(ds->owned);
    free(ds);
}

tern_error *tern_dataset_from_shard_bytes(const void *bytes, size_t len, const char *name,
                                          size_t vocab_size, tern_dataset **out) {
    *out = NULL;
    if (!name) name = "token shard";
    if (!bytes && len) return tern_errorf("%s: no data", name);
    size_t count;
    TERN_TRY(check_shard(bytes, len, name, &count));
    TERN_TRY(check_count(count, name));
    tern_dataset *ds = calloc(1, sizeof *ds);
    uint16_t *tokens = malloc(count * sizeof *tokens);
    if (!ds || !tokens) {
        free(ds);
        free(tokens);
        return tern_errorf("%s: out of memory for %zu tokens", name, count);
    }
    memcpy(tokens, (const unsigned char *)bytes + TERN_SHARD_HEADER_BYTES, count * sizeof *tokens);
    ds->tokens = tokens;
    ds->owned = tokens;
    ds->count = count;
    tern_error *e = check_vocab(tokens, count, vocab_size, name);
    if (e) {
        tern_dataset_close(ds);
        return e;
    }
    *out = ds;
    return NULL;
}

/* The file is read, not mapped: batches are read from it all through training, and a mapped
 * file that someone truncates meanwhile would fault (SIGBUS) instead of failing. */
tern_error *tern_dataset_open_shard(const char *path, size_t vocab_size, tern_dataset **out) {
    *out = NULL;
    char *bytes;
    size_t len;
    TERN_TRY(tern_read_file(path, &bytes, &len));
    tern_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        free(bytes);
        return tern_errorf("%s: out of memory", path);
    }
    ds->owned = bytes;
    size_t count = 0;
    tern_error *e = check_shard((const unsigned char *)bytes, len, path, &count);
    if (!e) e = check_count(count, path);
    if (!e) {
        /* The header is 1024 bytes and malloc's blocks are aligned: so are the ids. */
        ds->tokens = (const uint16_t *)(bytes + TERN_SHARD_HEADER_BYTES);
        ds->count = count;
        e = check_vocab(ds->tokens, count, vocab_size, path);
    }
    if (e) {
        tern_dataset_close(ds);
        return e;
    }
    *out = ds;
    return NULL;
}

tern_error *tern_dataset_from_ids(const int32_t *ids, size_t n, size_t vocab_size,
                                  tern_dataset **out) {
    *out = NULL;
    const char *name = "token ids";
    TERN_TRY(check_count(n, name));
    if (!ids) return tern_errorf("%s: no data", name);
    size_t limit = vocab_size == 0 || vocab_size > 65536 ? 65536 : vocab_size;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= limit)
            return tern_errorf("token %d at position %zu is outside the vocabulary (%zu ids%s)",
                               (int)ids[i], i, limit,
                               limit == 65536 ? ", the most a uint16 data set holds" : "");
    tern_dataset *ds = calloc(1, sizeof *ds);
    uint16_t *tokens = malloc(n * sizeof *tokens);
    if (!ds || !tokens) {
        free(ds);
        free(tokens);
        return tern_errorf("out of memory for %zu tokens", n);
    }
    for (size_t i = 0; i < n; i++)
        tokens[i] = (uint16_t)ids[i];
    ds->tokens = tokens;
    ds->owned = tokens;
    ds->count = n;
    *out = ds;
    return NULL;
}

size_t tern_dataset_tokens(const tern_dataset *ds) { return ds ? ds->count : 0; }

int32_t tern_dataset_token(const tern_dataset *ds, size_t i) {
    return ds && i < ds->count ? ds->tokens[i] : -1;
}

/* B*T as a size_t, or 0 when B or T is not positive (or the product overflows). */
static size_t batch_tokens(int B, int T) {
    if (B < 1 || T < 1) return 0;
    if ((size_t)B > ((size_t)-1 - 1) / (size_t)T) return 0;
    return (size_t)B * (size_t)T;
}

size_t tern_dataset_batch_count(const tern_dataset *ds, int B, int T) {
    size_t bt = batch_tokens(B, T);
    if (!ds || bt == 0) return 0;
    return (ds->count - 1) / bt;
}

/* (a * b) mod n without overflow. */
static size_t mul_mod(size_t a, size_t b, size_t n) {
#if defined(__SIZEOF_INT128__)
    return (size_t)((unsigned __int128)(a % n) * (b % n) % n);
#else
    size_t r = 0;
    a %= n;
    b %= n;
    while (b) {
        if (b & 1) r = r >= n - a ? r - (n - a) : r + a;
        a = a >= n - a ? a - (n - a) : a + a;
        b >>= 1;
    }
    return r;
#endif
}

tern_error *tern_dataset_batch(const tern_dataset *ds, size_t k, int B, int T, int32_t *x,
                               int32_t *y) {
    if (!ds) return tern_errorf("reading a batch: no data set");
    size_t bt = batch_tokens(B, T);
    if (bt == 0) return tern_errorf("reading a batch: invalid batch shape %d x %d", B, T);
    if (!x || !y) return tern_errorf("reading a batch: no output arrays");
    size_t n = ds->count;
    size_t pos = mul_mod(k, bt, n);
    /* Copy in runs between wrap points rather than taking a modulo per token. */
    int32_t prev = ds->tokens[pos];
    pos = pos + 1 == n ? 0 : pos + 1;
    for (size_t i = 0; i < bt;) {
        size_t run = n - pos < bt - i ? n - pos : bt - i;
        for (size_t j = 0; j < run; j++) {
            int32_t t = ds->tokens[pos + j];
            x[i + j] = prev;
            y[i + j] = t;
            prev = t;
        }
        i += run;
        pos += run;
        if (pos == n) pos = 0;
    }
    return NULL;
}
