/* Shared helpers of the per-op tests. Every test is written against the handler-generic op
 * table (tern_handler_ops), so the same file checks cpu, cuda and opencl.
 *
 * Handlers: env TERN_TEST_HANDLER names one ("cpu"); without it every built-in handler is
 * tried, and one whose device does not open (no GPU here) is skipped with a note. A named
 * handler that is not built or does not open is a failure.
 *
 * Buffers: ot_make places each view at an offset inside a larger allocation whose guard
 * elements before and after hold a byte pattern; ot_guard_ok checks an operation left them
 * alone. Outputs are poisoned with NaN (or -1 for integers) before each call, so an
 * element an operation forgets to write shows up. */
#ifndef TERN_TESTS_OPS_TEST_H
#define TERN_TESTS_OPS_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/effect.h"
#include "tern/half.h"
#include "tern/handlers.h"

typedef struct ot_ctx {
    const tern_ops *ops;
    tern_dev *d;
    const char *handler;
} ot_ctx;

/* ---- handlers ---- */

/* Calls fn for each handler under test. */
static inline void ot_run(void (*fn)(ot_ctx *c)) {
    const char *only = getenv("TERN_TEST_HANDLER");
    size_t count;
    const char *const *names = tern_handler_names(&count);
    int ran = 0;
    for (size_t i = 0; i < count; i++) {
        if (only && *only && strcmp(only, names[i]) != 0) continue;
        ot_ctx c = {tern_handler_ops(names[i]), NULL, names[i]};
        tern_error *err = c.ops->open(NULL, &c.d);
        if (err) {
            if (only && *only) {
                CHECKF(0, "handler %s does not open: %s", names[i], tern_error_message(err));
            } else {
                printf("note: skipping handler %s: %s\n", names[i], tern_error_message(err));
            }
            tern_error_free(err);
            continue;
        }
        const char *dev_name = NULL;
        CHECK_OK(c.ops->device_name(c.d, &dev_name));
        printf("handler %s (%s)\n", names[i], dev_name ? dev_name : "?");
        fn(&c);
        CHECK_OK(c.ops->close(c.d));
        ran++;
    }
    CHECKF(ran > 0 || !(only && *only), "handler '%s' is not built in", only);
}

/* ---- random numbers (splitmix64; each test seeds it) ---- */

static uint64_t ot_rng_state = 1;

static inline void ot_seed(uint64_t seed) { ot_rng_state = seed; }

static inline uint64_t ot_next(void) {
    uint64_t z = (ot_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double ot_uniform(void) { return (double)(ot_next() >> 11) * (1.0 / 9007199254740992.0); }

static inline float ot_randf(float lo, float hi) { return lo + (hi - lo) * (float)ot_uniform(); }

static inline int ot_randint(int lo, int hi) { /* [lo, hi) */
    return lo + (int)(ot_next() % (uint64_t)(hi - lo));
}

/* n values uniform in [lo, hi) into a new array (caller frees). */
static inline float *ot_random(size_t n, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = ot_randf(lo, hi);
    return x;
}

/* ---- dtypes on the host ---- */

/* Rounds host values to what a buffer of dtype holds, in place (references then use
 * exactly the device's inputs). */
static inline void ot_round(float *x, size_t n, tern_dtype dt) {
    for (size_t i = 0; i < n; i++) {
        if (dt == TERN_BF16) x[i] = tern_bf16_to_f32(tern_f32_to_bf16(x[i]));
        else if (dt == TERN_F16) x[i] = tern_f16_to_f32(tern_f32_to_f16(x[i]));
    }
}

/* One element of dtype dt from f32 (integers: truncated). */
static inline void ot_encode(void *dst, tern_dtype dt, float v) {
    switch (dt) {
    case TERN_F32: memcpy(dst, &v, 4); break;
    case TERN_BF16: { uint16_t h = tern_f32_to_bf16(v); memcpy(dst, &h, 2); break; }
    case TERN_F16: { uint16_t h = tern_f32_to_f16(v); memcpy(dst, &h, 2); break; }
    case TERN_I32: { int32_t i = (int32_t)v; memcpy(dst, &i, 4); break; }
    case TERN_U16: { uint16_t u = (uint16_t)v; memcpy(dst, &u, 2); break; }
    case TERN_Q8: break; /* not an element dtype: test_cpu_q8 */
    }
}

static inline float ot_decode(const void *src, tern_dtype dt) {
    switch (dt) {
    case TERN_F32: { float v; memcpy(&v, src, 4); return v; }
    case TERN_BF16: { uint16_t h; memcpy(&h, src, 2); return tern_bf16_to_f32(h); }
    case TERN_F16: { uint16_t h; memcpy(&h, src, 2); return tern_f16_to_f32(h); }
    case TERN_I32: { int32_t i; memcpy(&i, src, 4); return (float)i; }
    case TERN_U16: { uint16_t u; memcpy(&u, src, 2); return (float)u; }
    case TERN_Q8: break; /* not an element dtype: test_cpu_q8 */
    }
    return 0;
}

/* Relative tolerance of a result stored in dtype dt on top of f32 compute: bf16 keeps 8
 * significant bits (relative rounding error <= 2^-9), f16 11 bits (2^-12); norm-wise
 * relative error stays below those. */
static inline double ot_tol(tern_dtype out, double f32_tol) {
    if (out == TERN_BF16) return 8e-3 > f32_tol ? 8e-3 : f32_tol;
    if (out == TERN_F16) return 1e-3 > f32_tol ? 1e-3 : f32_tol;
    return f32_tol;
}

/* ---- device buffers with guards ---- */

#define OT_GUARD 19 /* guard elements after each view (odd, to misalign what follows) */

typedef struct ot_buf {
    tern_buf all;  /* the allocation */
    tern_buf view; /* what the operation sees */
    size_t off;
} ot_buf;

/* A view of n elements at offset `off` of a new allocation. Contents: init converted to dt
 * when given, else poison (NaN, or -1 for integers). Guards hold the byte 0xA5. */
static inline ot_buf ot_make(ot_ctx *c, tern_dtype dt, size_t n, size_t off, const float *init) {
    ot_buf b;
    memset(&b, 0, sizeof b);
    size_t total = off + n + OT_GUARD, es = tern_dtype_size(dt);
    tern_error *err = c->ops->alloc(c->d, dt, total, &b.all);
    if (err) {
        CHECKF(0, "alloc of %zu %s failed: %s", total, tern_dtype_name(dt), tern_error_message(err));
        tern_error_free(err);
        b.view = tern_none();
        return b;
    }
    unsigned char *host = malloc(total * es);
    memset(host, 0xA5, total * es);
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = host + (off + i) * es;
        if (init) ot_encode(p, dt, init[i]);
        else if (dt == TERN_I32 || dt == TERN_U16) memset(p, 0xff, es);
        else ot_encode(p, dt, NAN);
    }
    CHECK_OK(c->ops->upload(c->d, b.all, host));
    free(host);
    b.view = tern_view(b.all, off, n);
    b.off = off;
    return b;
}

static inline ot_buf ot_make_i32(ot_ctx *c, const int32_t *vals, size_t n, size_t off) {
    ot_buf b = ot_make(c, TERN_I32, n, off, NULL);
    if (b.view.mem && vals) CHECK_OK(c->ops->upload(c->d, b.view, vals));
    return b;
}

/* The view's contents as f32. */
static inline void ot_read(ot_ctx *c, ot_buf b, float *out) {
    size_t n = b.view.len, es = tern_dtype_size(b.view.dtype);
    unsigned char *host = malloc((n ? n : 1) * es);
    CHECK_OK(c->ops->download(c->d, host, b.view));
    for (size_t i = 0; i < n; i++) out[i] = ot_decode(host + i * es, b.view.dtype);
    free(host);
}

/* Whether the guard elements around the view are untouched. */
static inline int ot_guard_ok(ot_ctx *c, ot_buf b) {
    if (!b.all.mem) return 1;
    size_t es = tern_dtype_size(b.all.dtype), total = b.all.len;
    unsigned char *host = malloc(total * es);
    CHECK_OK(c->ops->download(c->d, host, b.all));
    int ok = 1;
    for (size_t i = 0; i < total * es; i++) {
        size_t el = i / es;
        if (el >= b.off && el < b.off + b.view.len) continue;
        if (host[i] != 0xA5) ok = 0;
    }
    free(host);
    return ok;
}

static inline void ot_free(ot_ctx *c, ot_buf *b) {
    if (b->all.mem) CHECK_OK(c->ops->free(c->d, &b->all));
    b->view = tern_none();
}

/* Reads the view, compares it with want (norm-wise relative error), checks the guards. */
#define OT_EXPECT(c, b, want, tol, ...)                                                    \
    do {                                                                                   \
        size_t ot_n_ = (b).view.len;                                                       \
        float *ot_got_ = malloc((ot_n_ ? ot_n_ : 1) * sizeof(float));                      \
        ot_read((c), (b), ot_got_);                                                        \
        double ot_err_ = check_rel_error(ot_got_, (want), ot_n_);                          \
        char ot_what_[200];                                                                \
        snprintf(ot_what_, sizeof ot_what_, __VA_ARGS__);                                  \
        CHECKF(ot_err_ <= (tol), "%s: %s: relative error %.3g > %.3g", (c)->handler,       \
               ot_what_, ot_err_, (double)(tol));                                          \
        CHECKF(ot_guard_ok((c), (b)), "%s: %s: wrote outside its view", (c)->handler,      \
               ot_what_);                                                                  \
        free(ot_got_);                                                                     \
    } while (0)

/* The error of an operation, or, when it returned none, of the next sync: bad index values
 * (token ids, targets, positions) live in device memory, and a GPU handler may find them
 * only when its kernel runs and report them at the next synchronising operation. */
static inline tern_error *ot_or_sync(ot_ctx *c, tern_error *err) {
    return err ? err : c->ops->sync(c->d);
}

/* Whether the handler under test is the cpu one (for checks of cpu-only behaviour). */
static inline int ot_is_cpu(const ot_ctx *c) { return strcmp(c->handler, "cpu") == 0; }

/* Whether to run a suite's whole case matrix (every shape x dtype combination) or its
 * representative set. On opencl each kernel variant (element types and shape constants are
 * compiled in) is a PoCL compile of seconds, so make test runs there the representative
 * set each suite states beside its loops: every kernel and code path at least once, each
 * dtype of each buffer at least once, the edge shapes (1 x 1, odd sizes, GPT-2's). The slow
 * suite's *_opencl_full tests set TERN_TEST_FULL=1 for the whole matrix; cpu, interp and
 * cuda always run it (docs/PERFORMANCE.md, "The test suite on a new 2-core machine"). */
static inline int ot_full(const ot_ctx *c) {
    if (strcmp(c->handler, "opencl") != 0) return 1;
    const char *full = getenv("TERN_TEST_FULL");
    return full && !strcmp(full, "1");
}

/* Float dtypes an operation's "every float buffer may be f32 or bf16" allows. */
static const tern_dtype ot_float2[2] = {TERN_F32, TERN_BF16};

#endif
