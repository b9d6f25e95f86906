/* Token shards (write, read, every validation rule), batches with wrap-around, splits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/data.h"
#include "tmpdir.h"

static const char *dir;

/* A shard's bytes built by hand: header ints (magic, version, count), then the ids. */
static unsigned char *shard_bytes(int32_t magic, int32_t version, int32_t count,
                                  const uint16_t *ids, size_t n, size_t *len) {
    *len = 1024 + 2 * n;
    unsigned char *b = calloc(1, *len);
    int32_t head[3] = {magic, version, count};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++)
            b[4 * k + i] = (unsigned char)((uint32_t)head[k] >> (8 * i));
    for (size_t i = 0; i < n; i++) {
        b[1024 + 2 * i] = (unsigned char)(ids[i] & 0xff);
        b[1024 + 2 * i + 1] = (unsigned char)(ids[i] >> 8);
    }
    return b;
}

/* A crafted shard must fail to open, from a file and from memory, with `needle`. */
static void expect_bad(const unsigned char *bytes, size_t len, size_t vocab, const char *needle) {
    const char *path = tmpdir_path(dir, "bad.bin");
    CHECK(tmpdir_write(path, bytes, len) == 0);
    tern_dataset *ds = (tern_dataset *)1;
    tern_error *e = tern_dataset_open_shard(path, vocab, &ds);
    CHECKF(e && strstr(tern_error_message(e), needle) && strstr(tern_error_message(e), "bad.bin"),
           "file: got '%s', wanted '%s'", e ? tern_error_message(e) : "success", needle);
    CHECK(ds == NULL);
    tern_error_free(e);
    e = tern_dataset_from_shard_bytes(bytes, len, "mem", vocab, &ds);
    CHECKF(e && strstr(tern_error_message(e), needle), "memory: got '%s', wanted '%s'",
           e ? tern_error_message(e) : "success", needle);
    tern_error_free(e);
    unlink(path);
}

static void test_shard_round_trip(void) {
    int32_t ids[7] = {50256, 0, 1, 65535, 464, 3290, 50256};
    const char *path = tmpdir_path(dir, "train.bin");
    CHECK_OK(tern_shard_write(path, ids, 7));
    /* byte layout: llm.c's header, then little-endian uint16 */
    char *raw = NULL;
    FILE *f = fopen(path, "rb");
    size_t len = 0;
    if (f) {
        raw = malloc(4096);
        len = fread(raw, 1, 4096, f);
        fclose(f);
    }
    CHECK(len == 1024 + 14);
    if (raw && len == 1038) {
        const unsigned char *u = (const unsigned char *)raw;
        CHECK(u[0] == 0x88 && u[1] == 0xd8 && u[2] == 0x34 &&
              u[3] == 0x01); /* 20240520 = 0x0134d888 */
        CHECK(u[4] == 1 && u[8] == 7 && u[9] == 0);
        int zero = 1;
        for (int i = 12; i < 1024; i++)
            zero &= u[i] == 0;
        CHECK(zero);
        CHECK(u[1024] == 0x50 && u[1025] == 0xc4); /* 50256 = 0xc450 */
        CHECK(u[1030] == 0xff && u[1031] == 0xff);
        CHECK(tern_is_shard(raw, len));
        CHECK(!tern_is_shard("hello", 5));
        CHECK(!tern_is_shard(raw, 3));
    }
    tern_dataset *ds;
    CHECK_OK(tern_dataset_open_shard(path, 0, &ds));
    CHECK(tern_dataset_tokens(ds) == 7);
    for (size_t i = 0; i < 7; i++)
        CHECK(tern_dataset_token(ds, i) == ids[i]);
    CHECK(tern_dataset_token(ds, 7) == -1);
    tern_dataset_close(ds);
    /* vocab limit: 65535 is outside GPT-2's vocabulary, at position 3 */
    CHECK_ERR(tern_dataset_open_shard(path, 50257, &ds),
              "token 65535 at position 3 is outside the vocabulary (50257 ids)");
    CHECK_OK(tern_dataset_from_shard_bytes(raw, len, "mem", 65536, &ds));
    CHECK(tern_dataset_tokens(ds) == 7 && tern_dataset_token(ds, 6) == 50256);
    tern_dataset_close(ds);
    tern_dataset_close(NULL);
    free(raw);

    /* writer errors leave nothing behind */
    int32_t bad_ids[3] = {1, 65536, 2};
    CHECK_ERR(tern_shard_write(tmpdir_path(dir, "x.bin"), bad_ids, 3), "token 65536 at position 1");
    bad_ids[1] = -1;
    CHECK_ERR(tern_shard_write(tmpdir_path(dir, "x.bin"), bad_ids, 3), "token -1 at position 1");
    CHECK_ERR(tern_shard_write(tmpdir_path(dir, "no/x.bin"), ids, 3), "No such file");
    CHECK(tmpdir_count(dir) == 1);
    unlink(path);
}

static void test_shard_validation(void) {
    uint16_t ids[4] = {1, 2, 3, 4};
    size_t len;
    unsigned char *b;
    b = shard_bytes(20240521, 1, 4, ids, 4, &len);
    expect_bad(b, len, 0, "not a token shard (magic 20240521");
    free(b);
    b = shard_bytes(20240520, 2, 4, ids, 4, &len);
    expect_bad(b, len, 0, "version 2 is not supported");
    free(b);
    b = shard_bytes(20240520, 1, 5, ids, 4, &len); /* count says more than the file holds */
    expect_bad(b, len, 0, "header says 5 tokens (10 bytes) but 8 bytes follow");
    free(b);
    b = shard_bytes(20240520, 1, 3, ids, 4, &len); /* ... or fewer */
    expect_bad(b, len, 0, "header says 3 tokens");
    free(b);
    b = shard_bytes(20240520, 1, 4, ids, 4, &len); /* an odd trailing byte */
    expect_bad(b, len - 1, 0, "but 7 bytes follow");
    free(b);
    b = shard_bytes(20240520, 1, -4, ids, 4, &len);
    expect_bad(b, len, 0, "negative token count (-4)");
    free(b);
    b = shard_bytes(20240520, 1, 4, ids, 4, &len);
    expect_bad(b, 600, 0, "truncated token shard: 600 bytes");
    expect_bad(b, 2, 0, "not a token shard (only 2 bytes)");
    expect_bad(b, 0, 0, "not a token shard (only 0 bytes)");
    expect_bad(b, len, 4, "token 4 at position 3 is outside the vocabulary (4 ids)");
    free(b);
    b = shard_bytes(20240520, 1, 1, ids, 1, &len);
    expect_bad(b, len, 0, "1 token: a data set needs at least 2");
    free(b);
    b = shard_bytes(20240520, 1, 0, ids, 0, &len);
    expect_bad(b, len, 0, "0 tokens");
    free(b);
    tern_dataset *ds;
    CHECK_ERR(tern_dataset_open_shard(tmpdir_path(dir, "absent.bin"), 0, &ds), "No such file");
    CHECK_ERR(tern_dataset_open_shard(dir, 0, &ds), "folder");
}

static void test_from_ids(void) {
    int32_t ids[3] = {5, 70000, 1};
    tern_dataset *ds;
    CHECK_ERR(tern_dataset_from_ids(ids, 3, 0, &ds), "token 70000 at position 1");
    ids[1] = -2;
    CHECK_ERR(tern_dataset_from_ids(ids, 3, 0, &ds), "token -2 at position 1");
    ids[1] = 9;
    CHECK_ERR(tern_dataset_from_ids(ids, 3, 8, &ds),
              "token 9 at position 1 is outside the vocabulary (8 ids)");
    CHECK_ERR(tern_dataset_from_ids(ids, 1, 0, &ds), "at least 2");
    CHECK_OK(tern_dataset_from_ids(ids, 3, 10, &ds));
    CHECK(tern_dataset_tokens(ds) == 3 && tern_dataset_token(ds, 1) == 9);
    tern_dataset_close(ds);
}

/* The batch starting at token `start` the slow way: token j of the chunk is start + j mod n. */
static int batch_matches(const tern_dataset *ds, size_t start, size_t bt, const int32_t *x,
                         const int32_t *y) {
    size_t n = tern_dataset_tokens(ds);
    for (size_t j = 0; j < bt; j++) {
        if (x[j] != tern_dataset_token(ds, (start + j) % n)) return 0;
        if (y[j] != tern_dataset_token(ds, (start + j + 1) % n)) return 0;
    }
    return 1;
}

static void test_batches(void) {
    int32_t ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = 100 + i;
    tern_dataset *ds;
    CHECK_OK(tern_dataset_from_ids(ids, 10, 0, &ds));
    int32_t x[64], y[64];
    /* llm.c's layout, written out: batch k of 2 x 2 starts at 4k */
    CHECK_OK(tern_dataset_batch(ds, 0, 2, 2, x, y));
    CHECK(x[0] == 100 && x[1] == 101 && x[2] == 102 && x[3] == 103);
    CHECK(y[0] == 101 && y[1] == 102 && y[2] == 103 && y[3] == 104);
    CHECK_OK(tern_dataset_batch(ds, 1, 2, 2, x, y));
    CHECK(x[0] == 104 && x[3] == 107 && y[3] == 108);
    /* batch 2 starts at 8 and wraps: x = 108 109 100 101, y = 109 100 101 102 */
    CHECK_OK(tern_dataset_batch(ds, 2, 2, 2, x, y));
    CHECK(x[0] == 108 && x[1] == 109 && x[2] == 100 && x[3] == 101);
    CHECK(y[0] == 109 && y[1] == 100 && y[2] == 101 && y[3] == 102);
    CHECK(tern_dataset_batch_count(ds, 2, 2) == 2); /* (10 - 1) / 4 */
    CHECK(tern_dataset_batch_count(ds, 3, 3) == 1);
    CHECK(tern_dataset_batch_count(ds, 1, 9) == 1);
    CHECK(tern_dataset_batch_count(ds, 1, 10) == 0);
    CHECK(tern_dataset_batch_count(ds, 0, 10) == 0);

    /* every k up to a few wraps, against start = k*B*T mod n computed by repeated addition */
    int shapes[][2] = {{1, 1}, {2, 2}, {1, 3}, {3, 1}, {2, 5}, {4, 4}, {1, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], T = shapes[s][1];
        size_t bt = (size_t)(B * T), start = 0;
        int ok = 1;
        for (size_t k = 0; k < 40; k++) {
            CHECK_OK(tern_dataset_batch(ds, k, B, T, x, y));
            ok &= batch_matches(ds, start, bt, x, y);
            start = (start + bt) % 10;
        }
        CHECKF(ok, "batches of %d x %d", B, T);
    }
    /* B*T + 1 > n: the tokens repeat within the batch */
    CHECK_OK(tern_dataset_batch(ds, 0, 4, 8, x, y));
    CHECK(batch_matches(ds, 0, 32, x, y));
    CHECK(x[10] == 100 && y[9] == 100 && x[31] == 101);
    /* huge k: SIZE_MAX * 4 mod 10 = (SIZE_MAX mod 10) * 4 mod 10 = 5 * 4 mod 10 = 0 */
    CHECK_OK(tern_dataset_batch(ds, SIZE_MAX, 2, 2, x, y));
    CHECK(batch_matches(ds, 0, 4, x, y));
    /* (SIZE_MAX - 1) * 3 mod 10 = 4 * 3 mod 10 = 2 */
    CHECK_OK(tern_dataset_batch(ds, SIZE_MAX - 1, 1, 3, x, y));
    CHECK(batch_matches(ds, 2, 3, x, y));

    CHECK_ERR(tern_dataset_batch(ds, 0, 0, 4, x, y), "invalid batch shape 0 x 4");
    CHECK_ERR(tern_dataset_batch(ds, 0, 4, -1, x, y), "invalid batch shape");
    CHECK_ERR(tern_dataset_batch(ds, 0, 1, 1, NULL, y), "no output");
    CHECK_ERR(tern_dataset_batch(NULL, 0, 1, 1, x, y), "no data set");
    tern_dataset_close(ds);

    /* the smallest data set: two tokens */
    CHECK_OK(tern_dataset_from_ids(ids, 2, 0, &ds));
    CHECK_OK(tern_dataset_batch(ds, 3, 1, 3, x, y));
    CHECK(batch_matches(ds, 1, 3, x, y)); /* 9 mod 2 = 1 */
    CHECK(x[0] == 101 && y[0] == 100 && x[1] == 100);
    tern_dataset_close(ds);
}

static void test_split(void) {
    size_t tr, va;
    CHECK_OK(tern_split_sizes(100, 0.1, &tr, &va));
    CHECK(tr == 90 && va == 10);
    CHECK_OK(tern_split_sizes(1000, 0.0025, &tr, &va)); /* 2.5 rounds to even */
    CHECK(tr == 998 && va == 2);
    CHECK_ERR(tern_split_sizes(1000, 0.0005, &tr, &va), "too few"); /* 0.5 -> 0 */
    CHECK_ERR(tern_split_sizes(3, 0.5, &tr, &va), "too few");
    CHECK_ERR(tern_split_sizes(100, 0.0, &tr, &va), "between 0 and 1");
    CHECK_ERR(tern_split_sizes(100, 1.0, &tr, &va), "between 0 and 1");
    CHECK_ERR(tern_split_sizes(100, 0.99, &tr, &va), "too few");

    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = i * 3;
    const char *train = tmpdir_path(dir, "train.bin"), *val = tmpdir_path(dir, "val.bin");
    CHECK_OK(tern_shard_write_split(train, val, ids, 20, 0.25));
    tern_dataset *a, *b;
    CHECK_OK(tern_dataset_open_shard(train, 0, &a));
    CHECK_OK(tern_dataset_open_shard(val, 0, &b));
    CHECK(a && b && tern_dataset_tokens(a) == 15 && tern_dataset_tokens(b) == 5);
    CHECK(a && b && tern_dataset_token(a, 14) == 42 && tern_dataset_token(b, 0) == 45);
    tern_dataset_close(a);
    tern_dataset_close(b);
    unlink(train);
    unlink(val);
    ids[18] = 70000; /* in the validation part: nothing is written */
    CHECK_ERR(tern_shard_write_split(train, val, ids, 20, 0.25),
              "val.bin: token 70000 at position 3");
    CHECK(tmpdir_count(dir) == 0);
}

int main(void) {
    dir = tmpdir_make();
    test_shard_round_trip();
    test_shard_validation();
    test_from_ids();
    test_batches();
    test_split();
    tmpdir_remove(dir);
    return check_summary("test_data");
}
