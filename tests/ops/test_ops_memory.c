/* Device, memory and generic operations: open/close/device_name/sync, alloc/free,
 * upload/download, download_async/download_wait, copy between every pair of dtypes, fill, get, length, from_list, load
 * (from a safetensors file this test writes, and from the fixture), capture sections; each
 * with its validation errors. */
#include <stdlib.h>
#include <unistd.h>

#include "ops_test.h"
#include "tern/safetensors.h"

static const tern_dtype all_types[TERN_DTYPE_ELEMENT_COUNT] = {TERN_F32, TERN_BF16, TERN_F16, TERN_I32, TERN_U16};

/* What converting v (already representable in `from`) to dtype `to` gives, by the contract:
 * floats round to nearest even, floats to integers truncate (saturating, NaN to 0). */
static double convert_ref(double v, tern_dtype to) {
    switch (to) {
    case TERN_F32: return (float)v;
    case TERN_BF16: return tern_bf16_to_f32(tern_f32_to_bf16((float)v));
    case TERN_F16: return tern_f16_to_f32(tern_f32_to_f16((float)v));
    case TERN_I32: return v != v ? 0 : v <= -2147483648.0 ? -2147483648.0 : v >= 2147483647.0 ? 2147483647.0 : trunc(v);
    case TERN_U16: return v != v ? 0 : v <= 0 ? 0 : v >= 65535 ? 65535 : trunc(v);
    case TERN_Q8: break; /* test_cpu_q8 */
    }
    return 0;
}

static void test_device(ot_ctx *c) {
    const char *name = NULL;
    CHECK_OK(c->ops->device_name(c->d, &name));
    CHECKF(name && name[0], "%s: empty device name", c->handler);
    CHECK_OK(c->ops->sync(c->d));
    CHECK_ERR(c->ops->device_name(c->d, NULL), "device_name");
}

static void test_alloc_free(ot_ctx *c) {
    const tern_ops *o = c->ops;
    for (int t = 0; t < TERN_DTYPE_ELEMENT_COUNT; t++) {
        tern_buf b;
        CHECK_OK(o->alloc(c->d, all_types[t], 1000, &b));
        CHECKF(b.len == 1000 && b.offset == 0 && b.dtype == all_types[t] && b.mem, "%s: alloc %s",
               c->handler, tern_dtype_name(all_types[t]));
        CHECK_ERR(o->free(c->d, (tern_buf[]){tern_view(b, 10, 5)}), "free: buf is a view starting at element 10");
        CHECK_OK(o->free(c->d, &b));
        CHECKF(b.len == 0 && b.mem == NULL, "%s: free leaves the buffer absent", c->handler);
        CHECK_OK(o->free(c->d, &b)); /* absent: no-op */
    }
    tern_buf b;
    CHECK_ERR(o->alloc(c->d, TERN_F32, 0, &b), "alloc: len must be positive");
    CHECK_ERR(o->alloc(c->d, (tern_dtype)9, 4, &b), "alloc: invalid dtype");
    CHECK_ERR(o->alloc(c->d, TERN_F32, 4, NULL), "alloc: out is NULL");
    CHECK_ERR(o->alloc(c->d, TERN_F32, SIZE_MAX / 2, &b), "too large");
    tern_buf bad = {NULL, 0, 5, TERN_F32};
    CHECK_ERR(o->free(c->d, &bad), "free: buf is an invalid view");
    CHECK_ERR(o->free(c->d, NULL), "free: buf is NULL");
}

static void test_transfer(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(11);
    for (int t = 0; t < TERN_DTYPE_ELEMENT_COUNT; t++) {
        tern_dtype dt = all_types[t];
        size_t n = 77, es = tern_dtype_size(dt);
        unsigned char *src = malloc(n * es), *back = malloc(n * es);
        for (size_t i = 0; i < n * es; i++) src[i] = (unsigned char)ot_next();
        ot_buf b = ot_make(c, dt, n, 5, NULL);
        CHECK_OK(o->upload(c->d, b.view, src));
        memset(back, 0, n * es);
        CHECK_OK(o->download(c->d, back, b.view));
        CHECKF(!memcmp(src, back, n * es), "%s: %s upload/download round trip", c->handler, tern_dtype_name(dt));
        CHECKF(ot_guard_ok(c, b), "%s: upload wrote outside its view", c->handler);
        CHECK_ERR(o->upload(c->d, b.view, NULL), "upload: the host pointer is NULL");
        CHECK_ERR(o->download(c->d, NULL, b.view), "download: the host pointer is NULL");
        CHECK_ERR(o->upload(c->d, tern_view(b.view, 70, 10), src), "upload: dst is an invalid view");
        CHECK_ERR(o->download(c->d, back, tern_view(b.view, 78, 1)), "download: src is an invalid view");
        CHECK_OK(o->upload(c->d, tern_none(), NULL)); /* nothing to do */
        ot_free(c, &b);
        free(src);
        free(back);
    }
}

/* download_async copies src as the work queued before it leaves it, not as later work
 * changes it (the fill after it must not show), into dst by download_wait; one at a time. */
static void test_download_async(ot_ctx *c) {
    const tern_ops *o = c->ops;
    enum { N = 300 };
    float src[N], got[N], later[N];
    for (int i = 0; i < N; i++) src[i] = (float)i - 17.25f;
    ot_buf b = ot_make(c, TERN_F32, N, 3, NULL);
    CHECK_OK(o->upload(c->d, b.view, src));
    memset(got, 0, sizeof got);
    CHECK_OK(o->download_async(c->d, got, b.view));
    CHECK_ERR(o->download_async(c->d, later, b.view), "a download is already pending");
    CHECK_OK(o->fill(c->d, b.view, 7.0));
    CHECK_OK(o->download_wait(c->d));
    CHECKF(!memcmp(got, src, sizeof src), "%s: download_async did not copy what the work before it left", c->handler);
    CHECK_OK(o->download(c->d, later, b.view));
    int sevens = 0;
    for (int i = 0; i < N; i++) sevens += later[i] == 7.0f;
    CHECKF(sevens == N, "%s: the fill queued after download_async: %d of %d elements", c->handler, sevens, N);
    CHECK_OK(o->download_wait(c->d)); /* nothing pending: nothing to do */
    CHECK_ERR(o->download_async(c->d, NULL, b.view), "download_async: the host pointer is NULL");
    CHECK_ERR(o->download_async(c->d, got, tern_view(b.view, 290, 20)), "download_async: src is an invalid view");
    CHECK_OK(o->download_async(c->d, got, tern_none())); /* nothing to copy, still pending */
    CHECK_ERR(o->download_async(c->d, got, b.view), "a download is already pending");
    CHECK_OK(o->download_wait(c->d));
    CHECKF(ot_guard_ok(c, b), "%s: the fill wrote outside its view", c->handler);
    ot_free(c, &b);
}

/* Values every dtype can hold exactly, plus ones that need rounding or saturation. */
static double copy_values[] = {0, 1, -1, 2.5, -2.5, 3.75, 100, 255, 65535, 65536, 70000, -70000,
                               1.00390625, 1.01171875, 1.0009765625, 3e9, -3e9, 1e-3, 123456.789,
                               -0.999, 0.4999, 1e30};
#define N_COPY (sizeof copy_values / sizeof copy_values[0])

/* One element of dtype dt holding v, which dt represents exactly. */
static void encode_exact(unsigned char *dst, tern_dtype dt, double v) {
    if (dt == TERN_I32) {
        int32_t i = (int32_t)v;
        memcpy(dst, &i, 4);
    } else if (dt == TERN_U16) {
        uint16_t u = (uint16_t)v;
        memcpy(dst, &u, 2);
    } else {
        ot_encode(dst, dt, (float)v);
    }
}

static void test_copy(ot_ctx *c) {
    const tern_ops *o = c->ops;
    for (int s = 0; s < TERN_DTYPE_ELEMENT_COUNT; s++)
        for (int t = 0; t < TERN_DTYPE_ELEMENT_COUNT; t++) {
            tern_dtype st = all_types[s], dt = all_types[t];
            /* the source holds each value as its dtype represents it */
            double src[N_COPY], want[N_COPY];
            unsigned char raw[N_COPY * 4];
            for (size_t i = 0; i < N_COPY; i++) {
                src[i] = convert_ref(copy_values[i], st);
                want[i] = convert_ref(src[i], dt);
                encode_exact(raw + i * tern_dtype_size(st), st, src[i]);
            }
            ot_buf bs = ot_make(c, st, N_COPY, 3, NULL), bd = ot_make(c, dt, N_COPY, 4, NULL);
            CHECK_OK(o->upload(c->d, bs.view, raw));
            CHECK_OK(o->copy(c->d, bd.view, bs.view));
            int same = 1;
            for (size_t i = 0; i < N_COPY; i++) {
                double got = NAN;
                CHECK_OK(o->get(c->d, bd.view, i, &got));
                if (got != want[i]) {
                    same = 0;
                    fprintf(stderr, "copy %s -> %s: element %zu (%.9g): got %.9g, want %.9g\n",
                            tern_dtype_name(st), tern_dtype_name(dt), i, src[i], got, want[i]);
                }
            }
            CHECKF(same, "%s: copy %s -> %s", c->handler, tern_dtype_name(st), tern_dtype_name(dt));
            CHECKF(ot_guard_ok(c, bd), "%s: copy wrote outside its view", c->handler);
            ot_free(c, &bs);
            ot_free(c, &bd);
        }
    /* NaN and infinities between floats; NaN to integers is 0 */
    float special[4] = {NAN, INFINITY, -INFINITY, -0.0f};
    ot_buf sf = ot_make(c, TERN_F32, 4, 0, special);
    for (int t = 0; t < TERN_DTYPE_ELEMENT_COUNT; t++) {
        ot_buf bd = ot_make(c, all_types[t], 4, 1, NULL);
        CHECK_OK(o->copy(c->d, bd.view, sf.view));
        float got[4];
        ot_read(c, bd, got);
        if (tern_dtype_is_float(all_types[t])) {
            CHECKF(isnan(got[0]) && got[1] == INFINITY && got[2] == -INFINITY && got[3] == 0 && signbit(got[3]),
                   "%s: copy f32 -> %s of NaN, inf, -inf, -0", c->handler, tern_dtype_name(all_types[t]));
        } else {
            double lo = all_types[t] == TERN_I32 ? -2147483648.0 : 0;
            double hi = all_types[t] == TERN_I32 ? 2147483647.0 : 65535;
            CHECKF(got[0] == 0 && got[1] == (float)hi && got[2] == (float)lo,
                   "%s: copy f32 -> %s of NaN, inf, -inf", c->handler, tern_dtype_name(all_types[t]));
        }
        ot_free(c, &bd);
    }
    ot_free(c, &sf);
    /* large copies run in parallel chunks */
    size_t n = 300001;
    float *big = ot_random(n, -100, 100), *want = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) want[i] = (float)convert_ref(big[i], TERN_BF16);
    ot_buf bs = ot_make(c, TERN_F32, n, 1, big), bd = ot_make(c, TERN_BF16, n, 2, NULL);
    CHECK_OK(o->copy(c->d, bd.view, bs.view));
    OT_EXPECT(c, bd, want, 0.0, "large copy f32 -> bf16"); /* exact: the same rounding */
    ot_free(c, &bs);
    ot_free(c, &bd);
    free(big);
    free(want);
    /* errors */
    ot_buf a = ot_make(c, TERN_F32, 10, 0, NULL), b = ot_make(c, TERN_F32, 9, 0, NULL);
    CHECK_ERR(o->copy(c->d, a.view, b.view), "copy: dst has 10 elements, src has 9");
    CHECK_ERR(o->copy(c->d, tern_view(a.all, 0, 5), tern_view(a.all, 3, 5)), "copy: dst and src overlap");
    CHECK_ERR(o->copy(c->d, tern_view(a.view, 0, 9), tern_view(b.view, 5, 9)), "copy: src is an invalid view");
    CHECK_OK(o->copy(c->d, tern_view(a.all, 0, 3), tern_view(a.all, 3, 3))); /* adjacent is fine */
    ot_free(c, &a);
    ot_free(c, &b);
}

static void test_fill_get(ot_ctx *c) {
    const tern_ops *o = c->ops;
    const double values[] = {0, 1.5, -3.25, 70000.7, 1.00390625};
    for (int t = 0; t < TERN_DTYPE_ELEMENT_COUNT; t++) {
        tern_dtype dt = all_types[t];
        for (size_t vi = 0; vi < sizeof values / sizeof values[0]; vi++) {
            double v = values[vi];
            if (dt == TERN_U16 && (v < 0 || v >= 65536)) continue;
            if (dt == TERN_F16 && fabs(v) > 65504) continue; /* inf: the copy test covers it */
            ot_buf b = ot_make(c, dt, 100003, 7, NULL);
            CHECK_OK(o->fill(c->d, b.view, v));
            float want_one = (float)convert_ref(v, dt);
            float *want = malloc(b.view.len * sizeof(float));
            for (size_t i = 0; i < b.view.len; i++) want[i] = want_one;
            OT_EXPECT(c, b, want, 0.0, "fill %s with %g", tern_dtype_name(dt), v);
            double got = -1;
            CHECK_OK(o->get(c->d, b.view, 100002, &got));
            CHECKF(got == (double)want_one, "%s: get %s: %g, want %g", c->handler, tern_dtype_name(dt), got, (double)want_one);
            size_t len = 0;
            CHECK_OK(o->length(c->d, tern_view(b.view, 3, 50), &len));
            CHECK(len == 50);
            CHECK_ERR(o->get(c->d, b.view, 100003, &got), "get: index 100003 is out of range [0, 100003)");
            free(want);
            ot_free(c, &b);
        }
    }
    ot_buf i32 = ot_make(c, TERN_I32, 4, 0, NULL), u16 = ot_make(c, TERN_U16, 4, 0, NULL);
    CHECK_ERR(o->fill(c->d, i32.view, 3e9), "fill: value 3e+09 does not fit in i32");
    CHECK_ERR(o->fill(c->d, i32.view, NAN), "does not fit in i32");
    CHECK_ERR(o->fill(c->d, u16.view, -1), "fill: value -1 does not fit in u16");
    CHECK_OK(o->fill(c->d, u16.view, 65535.9)); /* truncates to 65535 */
    double got;
    CHECK_OK(o->get(c->d, u16.view, 2, &got));
    CHECK(got == 65535);
    ot_buf f = ot_make(c, TERN_F32, 4, 0, NULL);
    CHECK_OK(o->fill(c->d, f.view, NAN));
    CHECK_OK(o->get(c->d, f.view, 0, &got));
    CHECK(isnan(got));
    CHECK_ERR(o->get(c->d, f.view, 0, NULL), "get: out is NULL");
    CHECK_ERR(o->get(c->d, tern_view(f.view, 3, 2), 0, &got), "get: a is an invalid view");
    size_t len;
    CHECK_ERR(o->length(c->d, tern_view(f.view, 3, 2), &len), "length: a is an invalid view");
    CHECK_OK(o->length(c->d, tern_none(), &len));
    CHECK(len == 0);
    ot_free(c, &i32);
    ot_free(c, &u16);
    ot_free(c, &f);
}

static void test_from_list(ot_ctx *c) {
    const tern_ops *o = c->ops;
    const double vals[] = {1, -2.5, 3.75, 65535, 0.1};
    for (int t = 0; t < TERN_DTYPE_ELEMENT_COUNT; t++) {
        tern_dtype dt = all_types[t];
        const double *v = vals;
        double uv[5] = {1, 2.5, 3.75, 65535, 0.1};
        if (dt == TERN_U16) v = uv;
        tern_buf b;
        CHECK_OK(o->from_list(c->d, dt, v, 5, &b));
        CHECK(b.len == 5 && b.dtype == dt);
        for (size_t i = 0; i < 5; i++) {
            double got;
            CHECK_OK(o->get(c->d, b, i, &got));
            CHECKF(got == convert_ref(v[i], dt), "%s: from_list %s [%zu]: %g", c->handler, tern_dtype_name(dt), i, got);
        }
        CHECK_OK(o->free(c->d, &b));
    }
    tern_buf b;
    CHECK_ERR(o->from_list(c->d, TERN_F32, vals, 0, &b), "from_list: count must be positive");
    CHECK_ERR(o->from_list(c->d, TERN_F32, NULL, 3, &b), "from_list: values is NULL");
    CHECK_ERR(o->from_list(c->d, TERN_U16, vals, 3, &b), "from_list: values[1] = -2.5 does not fit in u16");
    CHECK_ERR(o->from_list(c->d, (tern_dtype)-1, vals, 3, &b), "from_list: invalid dtype");
}

static void test_load(ot_ctx *c) {
    const tern_ops *o = c->ops;
    char dir[] = "/tmp/tern_test_ops_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECKF(0, "mkdtemp failed");
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    /* one tensor per file dtype, holding the same values (exact in every dtype) */
    float vals[6] = {1, -2, 0.5, 3.75, -0.125, 1024};
    uint16_t bf[6], hf[6];
    int32_t iv[6];
    for (int i = 0; i < 6; i++) {
        bf[i] = tern_f32_to_bf16(vals[i]);
        hf[i] = tern_f32_to_f16(vals[i]);
        iv[i] = (int32_t)vals[i];
    }
    tern_tensor_out ts[4] = {
        {"f32", TERN_F32, 2, {2, 3}, vals},
        {"bf16", TERN_BF16, 2, {3, 2}, bf},
        {"f16", TERN_F16, 1, {6}, hf},
        {"i32", TERN_I32, 1, {6}, iv},
    };
    tern_error *err = tern_safetensors_write(path, ts, 4, NULL);
    CHECKF(!err, "writing the test file: %s", tern_error_message(err));
    tern_error_free(err);
    const char *names[3] = {"f32", "bf16", "f16"};
    for (int n = 0; n < 3; n++)
        for (int t = 0; t < 3; t++) {
            tern_buf b = tern_none();
            CHECK_OK(o->load(c->d, path, names[n], all_types[t], &b));
            CHECKF(b.len == 6 && b.dtype == all_types[t], "%s: load %s as %s", c->handler, names[n],
                   tern_dtype_name(all_types[t]));
            for (size_t i = 0; i < 6 && b.len == 6; i++) {
                double got;
                CHECK_OK(o->get(c->d, b, i, &got));
                CHECKF(got == vals[i], "%s: load %s as %s [%zu] = %g", c->handler, names[n],
                       tern_dtype_name(all_types[t]), i, got);
            }
            CHECK_OK(o->free(c->d, &b));
        }
    tern_buf b;
    CHECK_ERR(o->load(c->d, path, "i32", TERN_F32, &b), "load: tensor 'i32' of");
    CHECK_ERR(o->load(c->d, path, "nope", TERN_F32, &b), "has no tensor 'nope'");
    CHECK_ERR(o->load(c->d, path, "f32", TERN_I32, &b), "load: dtype must be f32, bf16 or f16, got i32");
    CHECK_ERR(o->load(c->d, NULL, "f32", TERN_F32, &b), "load: path is NULL");
    CHECK_ERR(o->load(c->d, path, NULL, TERN_F32, &b), "load: name is NULL");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/missing.safetensors", dir);
    CHECK_ERR(o->load(c->d, missing, "f32", TERN_F32, &b), "load");
    unlink(path);
    rmdir(dir);
    /* the fixture: a real GPT-2 tensor, checked against the host reader */
    const char *shared = getenv("TERN_SHARED_DIR");
    if (!shared) return;
    char fixture[512];
    snprintf(fixture, sizeof fixture, "%s/fixtures/gpt2-tiny-a/model.safetensors", shared);
    tern_safetensors *f;
    err = tern_safetensors_open(fixture, &f);
    if (err) {
        CHECKF(0, "opening the fixture: %s", tern_error_message(err));
        tern_error_free(err);
        return;
    }
    const char *name = "transformer.h.1.mlp.c_fc.weight";
    const tern_tensor_info *ti = tern_safetensors_find(f, name);
    CHECK(ti != NULL);
    if (ti) {
        float *want = malloc(ti->count * sizeof(float));
        CHECK_OK(tern_tensor_convert(ti, TERN_F32, want));
        tern_buf w;
        CHECK_OK(o->load(c->d, fixture, name, TERN_F32, &w));
        CHECK(w.len == ti->count);
        if (w.len == ti->count) {
            float *got = malloc(w.len * sizeof(float));
            CHECK_OK(o->download(c->d, got, w));
            CHECK(!memcmp(got, want, w.len * sizeof(float)));
            free(got);
        }
        CHECK_OK(o->free(c->d, &w));
        free(want);
    }
    tern_safetensors_close(f);
}

static void test_capture(ot_ctx *c) {
    const tern_ops *o = c->ops;
    /* the same section twice: the second may be a replay, and must see the new contents */
    float a1[8] = {1, 2, 3, 4, 5, 6, 7, 8}, a2[8] = {10, 20, 30, 40, 50, 60, 70, 80}, ones[8];
    for (int i = 0; i < 8; i++) ones[i] = 1;
    ot_buf a = ot_make(c, TERN_F32, 8, 0, a1), b = ot_make(c, TERN_F32, 8, 0, ones);
    ot_buf out = ot_make(c, TERN_F32, 8, 0, NULL);
    for (int round = 0; round < 2; round++) {
        if (round == 1) CHECK_OK(o->upload(c->d, a.view, a2));
        bool replay = true;
        CHECK_OK(o->capture_begin(c->d, 0x1234, &replay));
        if (!replay) CHECK_OK(o->add(c->d, out.view, a.view, b.view));
        CHECK_OK(o->capture_end(c->d, 0x1234));
        float want[8];
        for (int i = 0; i < 8; i++) want[i] = (round ? a2[i] : a1[i]) + 1;
        OT_EXPECT(c, out, want, 0.0, "capture round %d", round);
    }
    CHECK_ERR(o->capture_begin(c->d, 1, NULL), "capture_begin: replay is NULL");
    /* a fence between two operations changes nothing they compute */
    CHECK_OK(o->add(c->d, out.view, a.view, b.view));
    CHECK_OK(o->fence(c->d));
    CHECK_OK(o->add(c->d, out.view, out.view, b.view));
    float want2[8];
    for (int i = 0; i < 8; i++) want2[i] = a2[i] + 2;
    OT_EXPECT(c, out, want2, 0.0, "add, fence, add");
    /* the handler's steps a section: its option, 1 by default */
    int steps = 0;
    CHECK_OK(o->replay_steps(c->d, &steps));
    CHECKF(steps >= 1 && steps <= 64, "replay_steps: %d", steps);
    CHECK_ERR(o->replay_steps(c->d, NULL), "replay_steps: out is NULL");
    ot_free(c, &a);
    ot_free(c, &b);
    ot_free(c, &out);
}

static void test_all(ot_ctx *c) {
    test_device(c);
    test_alloc_free(c);
    test_transfer(c);
    test_download_async(c);
    test_copy(c);
    test_fill_get(c);
    test_from_list(c);
    test_load(c);
    test_capture(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_memory");
}
