/* Every operation called with random arguments: views valid, invalid, absent or of the
 * wrong dtype, shapes from {negative, 0, small, huge}, index buffers holding bad ids,
 * non-finite scalars. Each call must return (an error or success) without crashing, and
 * must not write outside the views it was given: every buffer sits inside an allocation
 * with guard elements, checked after each round. Under ASan this also catches reads out of
 * bounds. Successful calls are fine (random arguments are sometimes valid). */
#include <limits.h>

#include "ops_test.h"

#define POOL 12

static ot_buf pool[POOL];
static size_t pool_len[POOL];

static tern_buf pick_buf(void) {
    int i = ot_randint(0, POOL + 3);
    if (i == POOL) return tern_none();
    if (i == POOL + 1) { /* an invalid view */
        tern_buf b = pool[ot_randint(0, POOL)].view;
        return tern_view(b, b.len, 1);
    }
    if (i == POOL + 2) { /* a sub-view */
        tern_buf b = pool[ot_randint(0, POOL)].view;
        size_t off = b.len ? (size_t)ot_randint(0, (int)b.len) : 0;
        return tern_view(b, off, b.len - off);
    }
    return pool[i].view;
}

/* The first n elements of a random pool buffer of dtype dt holding at least n, or `dflt`. */
static tern_buf pick_fit(tern_dtype dt, size_t n, tern_buf dflt) {
    int start = ot_randint(0, POOL);
    for (int k = 0; k < POOL; k++) {
        int i = (start + k) % POOL;
        if (pool[i].view.dtype == dt && pool[i].view.len >= n) return tern_view(pool[i].view, 0, n);
    }
    return dflt;
}

static int pick_int(void) {
    static const int values[] = {-7, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 64, 100, 1 << 20, INT_MAX};
    return values[ot_randint(0, (int)(sizeof values / sizeof values[0]))];
}

static float pick_float(void) {
    static const float values[] = {0.0f, 1.0f, -1.0f, 0.5f, 1e-5f, 1e30f, NAN, INFINITY, -INFINITY};
    return values[ot_randint(0, (int)(sizeof values / sizeof values[0]))];
}

/* Fills the pool: each dtype, several lengths; the i32 buffers hold ids in and out of
 * range (so index validation is exercised), the floats small values. */
static void make_pool(ot_ctx *c) {
    static const size_t lens[] = {1, 4, 12, 36, 64, 96, 108, 144, 192, 300};
    for (int i = 0; i < POOL; i++) {
        tern_dtype dt = (tern_dtype)(i % TERN_DTYPE_ELEMENT_COUNT); /* q8_0: test_cpu_q8 */
        size_t n = lens[ot_randint(0, 10)];
        float *init = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++)
            init[j] = dt == TERN_I32 ? (float)ot_randint(-2, 12) : dt == TERN_U16 ? (float)ot_randint(0, 9) : ot_randf(-2, 2);
        pool[i] = ot_make(c, dt, n, (size_t)ot_randint(0, 4), init);
        pool_len[i] = n;
        free(init);
    }
}

static void call_random(ot_ctx *c, int op) {
    const tern_ops *o = c->ops;
    tern_dev *d = c->d;
    tern_error *err = NULL;
    tern_buf a = pick_buf(), b = pick_buf(), x = pick_buf(), y = pick_buf(), z = pick_buf(), w = pick_buf();
    int i1 = pick_int(), i2 = pick_int(), i3 = pick_int(), i4 = pick_int();
    float f = pick_float();
    double dv;
    size_t sz;
    float host[4096] = {0};
    switch (op) {
    case 0: err = o->copy(d, a, b); break;
    case 1: err = o->fill(d, a, (double)pick_int() * 0.5); break;
    case 2: err = o->get(d, a, (size_t)ot_randint(0, 400), &dv); break;
    case 3: err = o->length(d, a, &sz); break;
    case 4: /* transfers of views up to 300 elements of 4 bytes: host holds 4096 floats */
        err = ot_randint(0, 2) ? o->upload(d, a, host) : o->download(d, host, a);
        break;
    case 5: {
        tern_matmul mm = {0};
        mm.m = pick_int(), mm.n = pick_int(), mm.k = pick_int();
        mm.trans_a = ot_randint(0, 2), mm.trans_b = ot_randint(0, 2);
        mm.lda = ot_randint(0, 3) ? 0 : pick_int(), mm.ldb = ot_randint(0, 3) ? 0 : pick_int();
        mm.batch = ot_randint(0, 3) ? 1 : pick_int();
        mm.alpha = ot_randint(0, 4) ? 1.0f : f, mm.beta = ot_randint(0, 2) ? 0.0f : 0.5f;
        mm.bias = ot_randint(0, 2) ? tern_none() : x;
        mm.epilogue = (tern_epilogue)ot_randint(0, 4); /* 3: unknown */
        mm.aux = ot_randint(0, 2) ? tern_none() : y;
        mm.addend = ot_randint(0, 3) ? tern_none() : ot_randint(0, 2) ? a : w; /* c's own view, or another */
        err = o->matmul(d, a, b, z, &mm);
        break;
    }
    case 6: err = o->sum_rows(d, a, b, i1, i2, ot_randint(0, 2) ? 0.0f : f); break;
    case 7: err = o->add(d, a, b, x); break;
    case 8: err = o->norm2(d, a, &dv); break;
    case 9: err = o->embed(d, a, b, x, y, z, i1, i2, i3); break;
    case 10: err = o->embed_backward(d, a, b, x, y, i1, i2, i3); break;
    case 11: err = o->layernorm(d, a, b, x, y, z, w, i1, i2, ot_randint(0, 2) ? 1e-5f : f); break;
    case 12: {
        tern_buf dsum = ot_randint(0, 2) ? tern_none() : pick_buf(), mean = pick_buf(), rstd = pick_buf();
        tern_buf out = ot_randint(0, 2) ? tern_none() : pick_buf(), bias = ot_randint(0, 2) ? tern_none() : pick_buf();
        err = o->layernorm_backward(d, a, b, x, dsum, out, y, z, w, bias, mean, rstd, i1, i2,
                                    ot_randint(0, 3) ? 1.0f : f);
        break;
    }
    case 13: err = o->gelu(d, a, ot_randint(0, 4) ? b : a); break;
    case 14: err = o->gelu_backward(d, a, b, x); break;
    case 15: err = o->attention_saved_len(d, i1, i2, i3, &sz); break;
    case 16: err = o->attention(d, a, b, x, i1, i2, i3, i4, pick_int()); break;
    case 17: err = o->attention_backward(d, a, b, x, y, z, i1, i2, i3, i4, pick_int()); break;
    case 18: err = o->attention_cached(d, a, b, x, y, z, i1, i2, i3, i4, pick_int(), pick_int()); break;
    case 19: err = o->cross_entropy(d, a, b, x, i1, i2, i3, ot_randint(0, 2) ? 1.0f : f); break;
    case 20: err = o->sample(d, a, b, i1, i2, i3, f, pick_int(), 7, x); break;
    case 21: {
        tern_adamw h = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, ot_randint(0, 3), ot_randint(0, 2) ? 1.0f : f};
        if (a.dtype == TERN_U16 && ot_randint(0, 2)) { /* the split form, its shadow bf16 of a's length */
            b = pick_fit(TERN_BF16, a.len, b);
            x = pick_fit(TERN_F32, a.len, x), y = pick_fit(TERN_F32, a.len, y), z = pick_fit(TERN_F32, a.len, z);
        }
        err = o->adamw(d, a, b, x, y, z, ot_randint(0, 10) ? &h : NULL);
        break;
    }
    case 22: err = o->allreduce(d, a, NULL); break; /* one rank: validation, then nothing */
    case 23: err = o->allgather(d, a, NULL); break; /* likewise */
    case 24: err = o->rmsnorm(d, a, b, x, y, i1, i2, ot_randint(0, 2) ? 1e-5f : f); break;
    case 25: err = o->rmsnorm_backward(d, a, b, x, y, z, w, i1, i2, ot_randint(0, 3) ? 1.0f : f); break;
    case 26: err = o->rope(d, a, ot_randint(0, 3) ? b : a, x, y, i1, i2, i3, i4); break;
    case 27: err = o->rope_backward(d, a, ot_randint(0, 3) ? b : a, x, y, i1, i2, i3, i4); break;
    case 28: err = o->swiglu(d, a, b, x, i1, i2, i3); break;
    case 29: err = o->swiglu_backward(d, a, b, x, y, z, i1, i2, i3); break;
    default: break;
    }
    tern_error_free(err);
}

static void test_all(ot_ctx *c) {
    ot_seed(99);
    for (int round = 0; round < 60; round++) {
        make_pool(c);
        for (int call = 0; call < 150; call++) call_random(c, ot_randint(0, 30));
        int ok = 1;
        for (int i = 0; i < POOL; i++) ok &= ot_guard_ok(c, pool[i]);
        CHECKF(ok, "%s: round %d: an operation wrote outside its views", c->handler, round);
        for (int i = 0; i < POOL; i++) ot_free(c, &pool[i]);
    }
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_random_args");
}
