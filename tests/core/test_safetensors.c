/* The safetensors reader and writer: round trips, every validation rule with a crafted bad
 * file, and both layouts of the gpt2-tiny-a fixture. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/safetensors.h"
#include "tmpdir.h"

static const char *dir;

/* Writes an 8-byte length, the header text, then data_len bytes (value i % 251): a crafted
 * file. `claimed` overrides the length field when nonzero. */
static const char *craft(const char *name, const char *header, size_t data_len, uint64_t claimed) {
    size_t h = strlen(header);
    uint64_t n = claimed ? claimed : h;
    unsigned char *buf = malloc(8 + h + data_len + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, header, h);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + h + i] = (unsigned char)(i % 251);
    const char *path = tmpdir_path(dir, name);
    CHECK(tmpdir_write(path, buf, 8 + h + data_len) == 0);
    free(buf);
    return path;
}

/* Opens a crafted file and expects an error containing `needle`. */
static void expect_bad(const char *header, size_t data_len, uint64_t claimed, const char *needle) {
    const char *path = craft("bad.safetensors", header, data_len, claimed);
    tern_safetensors *f = (tern_safetensors *)1;
    tern_error *e = tern_safetensors_open(path, &f);
    check_count_++;
    if (!e) {
        check_failures_++;
        fprintf(stderr, "accepted a bad header (wanted '%s'): %s\n", needle, header);
        tern_safetensors_close(f);
    } else {
        if (!strstr(tern_error_message(e), needle) ||
            !strstr(tern_error_message(e), "bad.safetensors")) {
            check_failures_++;
            fprintf(stderr, "error '%s' lacks '%s' or the file name\n", tern_error_message(e),
                    needle);
        }
        if (f != NULL) {
            check_failures_++;
            fprintf(stderr, "*out not cleared on error\n");
        }
        tern_error_free(e);
    }
    unlink(path);
}

static void test_validation(void) {
    /* too short, header length lies, over the size limit */
    const char *p = tmpdir_path(dir, "bad.safetensors");
    CHECK(tmpdir_write(p, "\x02\0\0\0", 4) == 0);
    tern_safetensors *f;
    CHECK_ERR(tern_safetensors_open(p, &f), "too short");
    unlink(p);
    expect_bad("{}", 0, 1000, "runs past the end of the file");
    expect_bad("{}", 0, 100000001, "limit");
    expect_bad("{}", 0, 0xffffffffffffffffull, "limit");
    /* not JSON, not an object, trailing bytes, not UTF-8 */
    expect_bad("{\"a\":", 0, 0, "not valid JSON");
    expect_bad("[1,2]", 0, 0, "not a JSON object");
    expect_bad("{}  x", 0, 0, "text after the value at byte 4");
    /* strict JSON, as the reference reader: cJSON alone would take these */
    expect_bad("{\"a\x01\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 0,
               "control character in a string at byte 3");
    expect_bad("{\"x\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}", 1, 0,
               "not valid JSON");
    expect_bad("{\"x\":{\"dtype\":\"U8\",\"shape\":[1.],\"data_offsets\":[0,1]}}", 1, 0,
               "bad number");
    expect_bad("{\"a\\ud800\":1}", 0, 0, "lone high surrogate");
    expect_bad("{\"a\\q\":1}", 0, 0, "bad escape");
    expect_bad("{\"a\":[1,]}", 0, 0, "unexpected character");
    expect_bad("{\"a\" 1}", 0, 0, "expected ':'");
    expect_bad("", 0, 0, "unexpected end");
    {
        char deep[600] = "{\"a\":";
        for (int k = 0; k < 200; k++)
            strcat(deep, "[");
        for (int k = 0; k < 200; k++)
            strcat(deep, "]");
        strcat(deep, "}");
        expect_bad(deep, 0, 0, "nested too deeply");
    }
    expect_bad("{\"\xff\":1}", 0, 0, "not UTF-8");
    expect_bad("\"str\"", 0, 0, "not a JSON object");
    expect_bad("{\"x\":1}", 0, 0, "entry is not an object");
    /* fields missing, of the wrong type, or given twice */
    expect_bad("{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0, "no dtype");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, 0, "no shape");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, 0, "no data_offsets");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               4, 0, "appears twice");
    expect_bad("{\"x\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0,
               "dtype is not a string");
    /* bad dtype */
    expect_bad("{\"x\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0,
               "unknown or unsupported dtype 'Q7'");
    expect_bad("{\"x\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0,
               "dtype 'f32'");
    /* shapes */
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, 0,
               "shape[0] is not a non-negative integer");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, 0,
               "shape[0]");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,4]}}", 4, 0,
               "shape[1]");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":5,\"data_offsets\":[0,4]}}", 4, 0,
               "shape is not an array");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
               4, 0, "9 dimensions");
    expect_bad(
        "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
        0, "overflows");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, 0,
               "shape[0]");
    /* offsets */
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, 0,
               "run past the data section");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, 0,
               "end before they begin");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, 0,
               "[begin, end]");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, 0,
               "non-negative integers");
    expect_bad("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, 0, "need 8");
    expect_bad("{\"x\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,4]}}", 4, 0,
               "hold 4 bytes");
    /* overlapping, gaps, unclaimed bytes at the end */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, 0, "'a' and 'b' overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
               12, 0, "belong to no tensor");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, 0,
               "tensors end at 4");
    /* duplicate names */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, 0, "tensor 'a' appears twice");
    /* metadata */
    expect_bad("{\"__metadata__\":[1]}", 0, 0, "__metadata__ is not an object");
    expect_bad("{\"__metadata__\":{\"format\":1}}", 0, 0, "value of 'format' is not a string");
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, "__metadata__ appears twice");
    /* a control character in a name stays out of the (one-line) message */
    expect_bad("{\"a\\nb\":{\"dtype\":\"Q\",\"shape\":[],\"data_offsets\":[0,0]}}", 0, 0, "'a?b'");

    /* not a file at all */
    CHECK_ERR(tern_safetensors_open(tmpdir_path(dir, "absent"), &f), "No such file");
    CHECK_ERR(tern_safetensors_open(dir, &f), "not a regular file");
    CHECK_ERR(tern_safetensors_open_memory("abc", 3, "mem", &f), "mem: too short");
}

/* __metadata__ with 200,000 keys: the duplicate at the end is found (by sorting the keys; a
 * check of each key against every earlier one would take minutes here), and without it the
 * file opens and every key is found. */
static void test_many_metadata_keys(void) {
    enum { KEYS = 200000 };
    size_t cap = (size_t)KEYS * 24 + 64, n = 0;
    char *header = malloc(cap);
    CHECK(header != NULL);
    if (!header) return;
    n += (size_t)snprintf(header + n, cap - n, "{\"__metadata__\":{");
    for (int i = 0; i < KEYS; i++)
        n += (size_t)snprintf(header + n, cap - n, "%s\"k%d\":\"v\"", i ? "," : "", i);
    size_t open_end = n;
    n += (size_t)snprintf(header + n, cap - n, ",\"k17\":\"w\"}}");
    expect_bad(header, 0, 0, "__metadata__ key 'k17' appears twice");
    snprintf(header + open_end, cap - open_end, "}}");
    const char *path = craft("many.safetensors", header, 0, 0);
    tern_safetensors *f = NULL;
    CHECK_OK(tern_safetensors_open(path, &f));
    CHECK(f && tern_safetensors_metadata(f, "k199999") && !tern_safetensors_metadata(f, "k200000"));
    tern_safetensors_close(f);
    unlink(path);
    free(header);
}

static void test_accepted_oddities(void) {
    tern_safetensors *f;
    /* Empty header object, header padded with spaces, unknown fields, zero-size tensors,
     * scalars, and the hub's dtypes tern cannot compute with. */
    const char *p =
        craft("ok.safetensors",
              "{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},"
              "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[2,2],\"data_offsets\":[0,4]},"
              "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]},"
              "\"empty\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[12,12]},"
              "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16],\"x\":1}}   ",
              16, 0);
    CHECK_OK(tern_safetensors_open(p, &f));
    if (f) {
        CHECK(tern_safetensors_count(f) == 4);
        CHECK(strcmp(tern_safetensors_metadata(f, "k"), "v") == 0);
        CHECK(tern_safetensors_metadata(f, "nope") == NULL);
        const tern_tensor_info *m = tern_safetensors_find(f, "mask");
        CHECK(m && !m->supported && strcmp(m->dtype_name, "BOOL") == 0 && m->count == 4);
        const tern_tensor_info *ids = tern_safetensors_find(f, "ids");
        float out[4];
        CHECK(ids && ids->elem_size == 8);
        CHECK_ERR(tern_tensor_convert(ids, TERN_F32, out), "I64");
        const tern_tensor_info *e = tern_safetensors_find(f, "empty");
        CHECK(e && e->count == 0 && e->nbytes == 0 && e->ndim == 2);
        CHECK_OK(tern_tensor_convert(e, TERN_F32, out));
        const tern_tensor_info *s = tern_safetensors_find(f, "scalar");
        CHECK(s && s->ndim == 0 && s->count == 1 && s->offset == 12);
        /* data order: mask, ids, then empty and scalar (both at 12; the empty one first) */
        CHECK(strcmp(tern_safetensors_at(f, 0)->name, "mask") == 0);
        CHECK(strcmp(tern_safetensors_at(f, 3)->name, "scalar") == 0);
        CHECK(tern_safetensors_at(f, 4) == NULL);
        CHECK(tern_safetensors_find(f, "missing") == NULL);
        tern_safetensors_close(f);
    }
    /* leading whitespace and a null __metadata__, as the reference reader allows */
    p = craft("empty.safetensors", " \n{\"__metadata__\":null}", 0, 0);
    CHECK_OK(tern_safetensors_open(p, &f));
    CHECK(f && tern_safetensors_metadata(f, "format") == NULL);
    tern_safetensors_close(f);
    p = craft("empty.safetensors", "{}", 0, 0);
    CHECK_OK(tern_safetensors_open(p, &f));
    CHECK(tern_safetensors_count(f) == 0);
    tern_safetensors_close(f);
    tern_safetensors_close(NULL);
}

static void test_round_trip(void) {
    float a[6] = {1, -2, 3.5f, 0.25f, -0.0f, 1e-20f};
    uint16_t b[4] = {0x3f80, 0xc000, 0x7f80, 0x0001}; /* bf16 */
    uint16_t h[3] = {0x3c00, 0x7bff, 0x8001};         /* f16 */
    int32_t i = -123456;
    uint16_t u[5] = {0, 1, 50256, 65535, 7};
    tern_tensor_out t[] = {
        {"w.a", TERN_F32, 2, {2, 3}, a},
        {"b\"quote\\back\nline", TERN_BF16, 3, {1, 2, 2}, b},
        {"h.\xc3\xa9t\xc3\xa9", TERN_F16, 1, {3}, h},
        {"scalar", TERN_I32, 0, {0}, &i},
        {"u", TERN_U16, 8, {1, 1, 1, 1, 5, 1, 1, 1}, u},
        {"none", TERN_F32, 2, {0, 4}, NULL},
    };
    const char *path = tmpdir_path(dir, "rt.safetensors");
    const char *meta[] = {"step", "12", "note", "a \"b\"", NULL};
    CHECK_OK(tern_safetensors_write(path, t, 6, meta));
    CHECK(tmpdir_count(dir) == 1);

    /* The header length is a multiple of 8 and the file is exactly header plus data. */
    FILE *fp = fopen(path, "rb");
    unsigned char len8[8] = {0};
    if (fp) {
        CHECK(fread(len8, 1, 8, fp) == 8);
        fclose(fp);
    }
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--)
        hl = hl << 8 | len8[k];
    CHECK(hl % 8 == 0);
    size_t data_bytes = sizeof a + sizeof b + sizeof h + sizeof i + sizeof u;
    struct stat st;
    CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == 8 + hl + data_bytes);

    tern_safetensors *f;
    CHECK_OK(tern_safetensors_open(path, &f));
    if (!f) return;
    CHECK(tern_safetensors_count(f) == 6);
    CHECK(strcmp(tern_safetensors_metadata(f, "format"), "pt") == 0);
    CHECK(strcmp(tern_safetensors_metadata(f, "step"), "12") == 0);
    CHECK(strcmp(tern_safetensors_metadata(f, "note"), "a \"b\"") == 0);
    for (size_t k = 0; k < 6; k++) {
        const tern_tensor_info *r = tern_safetensors_find(f, t[k].name);
        CHECKF(r != NULL, "tensor %zu missing", k);
        if (!r) continue;
        size_t count = 1;
        for (int d = 0; d < t[k].ndim; d++)
            count *= (size_t)t[k].shape[d];
        CHECK(r->supported && r->dtype == t[k].dtype && r->ndim == t[k].ndim);
        CHECK(memcmp(r->shape, t[k].shape, sizeof(int64_t) * (size_t)t[k].ndim) == 0);
        CHECK(r->count == count && r->nbytes == count * tern_dtype_size(t[k].dtype));
        CHECK(count == 0 || memcmp(r->data, t[k].data, r->nbytes) == 0);
        /* tensors stay in the given order */
        CHECK(tern_safetensors_at(f, k) == r);
    }
    const tern_tensor_info *r = tern_safetensors_find(f, "w.a");
    float back[6];
    CHECK_OK(tern_tensor_convert(r, TERN_F32, back));
    CHECK(memcmp(back, a, sizeof a) == 0);
    r = tern_safetensors_find(f, "b\"quote\\back\nline");
    CHECK_OK(tern_tensor_convert(r, TERN_F32, back));
    CHECK(back[0] == 1.0f && back[1] == -2.0f && back[2] == INFINITY);
    tern_safetensors_close(f);

    /* "format" given by the caller replaces the default; no metadata at all gets "pt". */
    const char *meta2[] = {"format", "np", NULL};
    CHECK_OK(tern_safetensors_write(path, t, 1, meta2));
    CHECK_OK(tern_safetensors_open(path, &f));
    CHECK(f && strcmp(tern_safetensors_metadata(f, "format"), "np") == 0);
    tern_safetensors_close(f);
    CHECK_OK(tern_safetensors_write(path, NULL, 0, NULL));
    CHECK_OK(tern_safetensors_open(path, &f));
    CHECK(f && tern_safetensors_count(f) == 0 &&
          strcmp(tern_safetensors_metadata(f, "format"), "pt") == 0);
    tern_safetensors_close(f);
    unlink(path);
}

static void test_write_errors(void) {
    float a[2] = {1, 2};
    const char *path = tmpdir_path(dir, "w.safetensors");
    tern_tensor_out dup[] = {{"x", TERN_F32, 1, {2}, a}, {"x", TERN_F32, 1, {2}, a}};
    CHECK_ERR(tern_safetensors_write(path, dup, 2, NULL), "'x' appears twice");
    tern_tensor_out bad[] = {{"", TERN_F32, 1, {2}, a}};
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "no name");
    bad[0].name = "__metadata__";
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "__metadata__");
    bad[0].name = "bad\xff";
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "not UTF-8");
    bad[0].name = "x";
    bad[0].shape[0] = -2;
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "negative");
    bad[0].shape[0] = 2;
    bad[0].ndim = 9;
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "9 dimensions");
    bad[0].ndim = 1;
    bad[0].data = NULL;
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "no data");
    bad[0].data = a;
    bad[0].dtype = (tern_dtype)42;
    CHECK_ERR(tern_safetensors_write(path, bad, 1, NULL), "invalid dtype");
    bad[0].dtype = TERN_F32;
    const char *odd[] = {"k", NULL};
    CHECK_ERR(tern_safetensors_write(path, bad, 1, odd), "has no value");
    const char *twice[] = {"k", "1", "k", "2", NULL};
    CHECK_ERR(tern_safetensors_write(path, bad, 1, twice), "appears twice");
    CHECK(tmpdir_count(dir) == 0);
    /* an unwritable destination: a clear error and nothing left behind */
    CHECK_ERR(tern_safetensors_write(tmpdir_path(dir, "no/such/dir.safetensors"), bad, 1, NULL),
              "No such file or directory");
    CHECK(tmpdir_count(dir) == 0);
}

static void check_fixture_tensor(const tern_safetensors *f, const char *name, int ndim,
                                 const int64_t *shape) {
    const tern_tensor_info *t = tern_safetensors_find(f, name);
    CHECKF(t != NULL, "fixture tensor %s missing", name);
    if (!t) return;
    CHECK(t->supported && t->dtype == TERN_F32 && t->ndim == ndim);
    CHECK(memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0);
}

static void test_fixtures(void) {
    const char *shared = getenv("TERN_SHARED_DIR");
    if (!shared) shared = "../shared";
    char path[4096], hub_path[4096];
    snprintf(path, sizeof path, "%s/fixtures/gpt2-tiny-a/model.safetensors", shared);
    snprintf(hub_path, sizeof hub_path, "%s/fixtures/gpt2-tiny-a/model-hub-layout.safetensors",
             shared);
    tern_safetensors *f = NULL, *hub = NULL;
    CHECK_OK(tern_safetensors_open(path, &f));
    CHECK_OK(tern_safetensors_open(hub_path, &hub));
    if (!f || !hub) {
        tern_safetensors_close(f);
        tern_safetensors_close(hub);
        return;
    }
    /* save_pretrained layout: 2 layers x 12 tensors + wte, wpe, ln_f.{weight,bias}; no lm_head */
    CHECK(tern_safetensors_count(f) == 28);
    CHECK(strcmp(tern_safetensors_metadata(f, "format"), "pt") == 0);
    int64_t wte[] = {50257, 64}, wpe[] = {128, 64}, fc[] = {64, 256}, attn[] = {64, 192};
    int64_t mask[] = {1, 1, 128, 128};
    check_fixture_tensor(f, "transformer.wte.weight", 2, wte);
    check_fixture_tensor(f, "transformer.wpe.weight", 2, wpe);
    check_fixture_tensor(f, "transformer.h.1.mlp.c_fc.weight", 2, fc);
    check_fixture_tensor(f, "transformer.h.0.attn.c_attn.weight", 2, attn);
    CHECK(tern_safetensors_find(f, "lm_head.weight") == NULL);
    /* hub layout: no prefix, plus a causal-mask buffer per layer */
    CHECK(tern_safetensors_count(hub) == 30);
    check_fixture_tensor(hub, "wte.weight", 2, wte);
    check_fixture_tensor(hub, "h.1.attn.bias", 4, mask);
    /* the same weights in both files */
    size_t same = 0;
    for (size_t i = 0; i < tern_safetensors_count(f); i++) {
        const tern_tensor_info *t = tern_safetensors_at(f, i);
        const char *short_name = t->name + strlen("transformer.");
        const tern_tensor_info *u = tern_safetensors_find(hub, short_name);
        if (u && u->nbytes == t->nbytes && memcmp(u->data, t->data, t->nbytes) == 0) same++;
    }
    CHECK(same == 28);
    /* the mask is lower-triangular ones */
    const tern_tensor_info *m = tern_safetensors_find(hub, "h.0.attn.bias");
    float *mv = m ? malloc(m->count * sizeof *mv) : NULL;
    if (mv) {
        CHECK_OK(tern_tensor_convert(m, TERN_F32, mv));
        CHECK(mv[0] == 1.0f && mv[1] == 0.0f && mv[128 + 1] == 1.0f && mv[128 * 128 - 1] == 1.0f &&
              mv[127] == 0.0f);
        free(mv);
    }
    /* a bf16 copy of wte equals the reference rounding of each value */
    const tern_tensor_info *w = tern_safetensors_find(f, "transformer.wte.weight");
    if (w) {
        uint16_t *b = malloc(w->count * 2);
        float *fv = malloc(w->count * 4);
        CHECK_OK(tern_tensor_convert(w, TERN_BF16, b));
        CHECK_OK(tern_tensor_convert(w, TERN_F32, fv));
        size_t within = 0;
        for (size_t i = 0; i < w->count; i++) {
            float back;
            uint32_t bits = (uint32_t)b[i] << 16;
            memcpy(&back, &bits, 4);
            /* bf16 keeps 8 significant bits; rounding to nearest errs by at most half a unit
             * in the last place: 2^-8 relative (subnormals aside; GPT-2 weights have none) */
            if (fabsf(back - fv[i]) <= fabsf(fv[i]) * (1.0f / 256.0f)) within++;
        }
        CHECK(within == w->count);
        free(b);
        free(fv);
    }
    tern_safetensors_close(f);
    tern_safetensors_close(hub);
}

int main(void) {
    dir = tmpdir_make();
    test_validation();
    test_many_metadata_keys();
    test_accepted_oddities();
    unlink(tmpdir_path(dir, "ok.safetensors"));
    unlink(tmpdir_path(dir, "empty.safetensors"));
    test_round_trip();
    test_write_errors();
    test_fixtures();
    tmpdir_remove(dir);
    return check_summary("test_safetensors");
}
