/* Helpers of the GPU core tests: the core behind a test-local op table (so the same calls
 * run on the cpu handler and on the core), buffers made identically on both, comparisons.
 *
 * Runtimes: TERN_GPU_TEST_RUNTIMES (comma-separated, default "host,opencl"); one that does
 * not open is skipped with a note unless named explicitly. */
#ifndef TERN_TESTS_GPU_TEST_H
#define TERN_TESTS_GPU_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_core/gpu_core.h"
#include "tern/effect.h"
#include "tern/half.h"
#include "tern/handlers.h"
#include "tern/kernel.h"

/* ---- the core as a handler ---- */

struct tern_dev {
    gpu_core core;
    tern_rt *rt;
};

#define G(d) (&(d)->core)
static tern_error *gtop_open(tern_dev **out) { (void)out; return tern_errorf("use gt_open_runtime"); }
static tern_error *gtop_close(tern_dev *d) {
    gpu_core_free(G(d));
    tern_rt_close(d->rt);
    free(d);
    return NULL;
}
static tern_error *gtop_device_name(tern_dev *d, const char **out) { *out = tern_rt_device(d->rt); return NULL; }
static tern_error *gtop_sync(tern_dev *d) { return gpu_sync(G(d)); }
static tern_error *gtop_alloc(tern_dev *d, tern_dtype t, size_t n, tern_buf *o) { return gpu_alloc(G(d), t, n, o); }
static tern_error *gtop_free(tern_dev *d, tern_buf *b) { return gpu_free(G(d), b); }
static tern_error *gtop_upload(tern_dev *d, tern_buf dst, const void *src) { return gpu_upload(G(d), dst, src); }
static tern_error *gtop_download(tern_dev *d, void *dst, tern_buf src) { return gpu_download(G(d), dst, src); }
static tern_error *gtop_copy(tern_dev *d, tern_buf dst, tern_buf src) { return gpu_copy(G(d), dst, src); }
static tern_error *gtop_fill(tern_dev *d, tern_buf dst, double v) { return gpu_fill(G(d), dst, v); }
static tern_error *gtop_get(tern_dev *d, tern_buf a, size_t i, double *o) { return gpu_get(G(d), a, i, o); }
static tern_error *gtop_length(tern_dev *d, tern_buf a, size_t *o) { return gpu_length(G(d), a, o); }
static tern_error *gtop_from_list(tern_dev *d, tern_dtype t, const double *v, size_t n, tern_buf *o) {
    return gpu_from_list(G(d), t, v, n, o);
}
static tern_error *gtop_load(tern_dev *d, const char *p, const char *n, tern_dtype t, tern_buf *o) {
    return gpu_load(G(d), p, n, t, o);
}
static tern_error *gtop_capture_begin(tern_dev *d, uint64_t key, bool *replay) {
    (void)d, (void)key;
    *replay = false;
    return NULL;
}
static tern_error *gtop_capture_end(tern_dev *d, uint64_t key) { (void)d, (void)key; return NULL; }
static tern_error *gtop_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    return gpu_matmul(G(d), c, a, b, mm);
}
static tern_error *gtop_sum_rows(tern_dev *d, tern_buf o, tern_buf x, int r, int c, float beta) {
    return gpu_sum_rows(G(d), o, x, r, c, beta);
}
static tern_error *gtop_add(tern_dev *d, tern_buf o, tern_buf a, tern_buf b) { return gpu_add(G(d), o, a, b); }
static tern_error *gtop_norm2(tern_dev *d, tern_buf x, double *o) { return gpu_norm2(G(d), x, o); }
static tern_error *gtop_embed(tern_dev *d, tern_buf o, tern_buf t, tern_buf wte, tern_buf wpe, tern_buf pos, int B,
                            int T, int C) {
    return gpu_embed(G(d), o, t, wte, wpe, pos, B, T, C);
}
static tern_error *gtop_embed_backward(tern_dev *d, tern_buf dwte, tern_buf dwpe, tern_buf dout, tern_buf t, int B,
                                     int T, int C) {
    return gpu_embed_backward(G(d), dwte, dwpe, dout, t, B, T, C);
}
static tern_error *gtop_layernorm(tern_dev *d, tern_buf o, tern_buf m, tern_buf r, tern_buf x, tern_buf w, tern_buf b,
                                int rows, int C, float eps) {
    return gpu_layernorm(G(d), o, m, r, x, w, b, rows, C, eps);
}
static tern_error *gtop_layernorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf ds, tern_buf g,
                                         tern_buf x, tern_buf w, tern_buf m, tern_buf r, int rows, int C, float gb) {
    return gpu_layernorm_backward(G(d), dx, dw, db, ds, g, x, w, m, r, rows, C, gb);
}
static tern_error *gtop_gelu(tern_dev *d, tern_buf o, tern_buf x) { return gpu_gelu(G(d), o, x); }
static tern_error *gtop_gelu_backward(tern_dev *d, tern_buf dx, tern_buf g, tern_buf x) {
    return gpu_gelu_backward(G(d), dx, g, x);
}
static tern_error *gtop_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *o) {
    return gpu_attention_saved_len(G(d), B, T, NH, o);
}
static tern_error *gtop_attention(tern_dev *d, tern_buf o, tern_buf s, tern_buf q, int B, int T, int C, int NH) {
    return gpu_attention(G(d), o, s, q, B, T, C, NH);
}
static tern_error *gtop_attention_backward(tern_dev *d, tern_buf dq, tern_buf g, tern_buf q, tern_buf o, tern_buf s,
                                         int B, int T, int C, int NH) {
    return gpu_attention_backward(G(d), dq, g, q, o, s, B, T, C, NH);
}
static tern_error *gtop_attention_cached(tern_dev *d, tern_buf o, tern_buf kc, tern_buf vc, tern_buf q, tern_buf p,
                                       int B, int T, int C, int NH, int max_T) {
    return gpu_attention_cached(G(d), o, kc, vc, q, p, B, T, C, NH, max_T);
}
static tern_error *gtop_cross_entropy(tern_dev *d, tern_buf l, tern_buf lg, tern_buf t, int rows, int V, int Vp,
                                    float gs) {
    return gpu_cross_entropy(G(d), l, lg, t, rows, V, Vp, gs);
}
static tern_error *gtop_sample(tern_dev *d, tern_buf o, tern_buf l, int rows, int V, int Vp, float temp, int k,
                             uint64_t seed, tern_buf counter) {
    return gpu_sample(G(d), o, l, rows, V, Vp, temp, k, seed, counter);
}
static tern_error *gtop_adamw(tern_dev *d, tern_buf p, tern_buf s, tern_buf g, tern_buf m, tern_buf v,
                            const tern_adamw *h) {
    return gpu_adamw(G(d), p, s, g, m, v, h);
}
static tern_error *gtop_allreduce(tern_dev *d, tern_buf b, tern_dist *comm) {
    return gpu_allreduce_via_host(G(d), b, comm);
}
static tern_error *gtop_allgather(tern_dev *d, tern_buf b, tern_dist *comm) {
    return gpu_allgather_via_host(G(d), b, comm);
}
static tern_error *gtop_build(tern_dev *d, tern_buf o, const tern_kernel *k) {
    return tern_rt_build(G(d)->rt, tern_arg_buf(o), k);
}
static tern_error *gtop_zip_with(tern_dev *d, tern_buf o, tern_buf a, tern_buf b, const tern_kernel *k) {
    return tern_rt_zip_with(G(d)->rt, tern_arg_buf(o), tern_arg_buf(a), tern_arg_buf(b), k);
}
static tern_error *gtop_reduce(tern_dev *d, tern_buf a, double init, const tern_kernel *k, double *o) {
    return tern_rt_reduce(G(d)->rt, tern_arg_buf(a), init, k, o);
}
static tern_error *gtop_index_of(tern_dev *d, tern_buf a, double value, int64_t *o) {
    return tern_rt_index_of(G(d)->rt, tern_arg_buf(a), value, o);
}
#undef G

#define GT_ENTRY_(name, params) .name = gtop_##name,
static const tern_ops gt_ops = {.handler = "gpu-core", TERN_OPS(GT_ENTRY_)};
#undef GT_ENTRY_

/* A device over runtime `name`, or NULL (with *err) when it does not open. */
static inline tern_dev *gtop_open_runtime(const char *name, tern_error **err) {
    tern_dev *d = calloc(1, sizeof *d);
    *err = tern_rt_open(name, &d->rt);
    if (!*err) *err = gpu_core_init(&d->core, d->rt);
    if (*err) {
        if (d->rt) tern_rt_close(d->rt);
        free(d);
        return NULL;
    }
    return d;
}

/* ---- the two sides ---- */

typedef struct gt_side {
    const tern_ops *ops;
    tern_dev *d;
} gt_side;

static gt_side gt_cpu, gt_gpu;
static const char *gt_runtime = "?";

/* A buffer on both sides: views at `off` in allocations with guard elements after. */
typedef struct gt_pair {
    tern_buf all[2], view[2];
} gt_pair;

#define GT_GUARD 7

/* Random numbers (splitmix64). */
static uint64_t gt_state = 1;
static inline uint64_t gt_next(void) {
    uint64_t z = (gt_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float gt_randf(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(gt_next() >> 11) * (1.0 / 9007199254740992.0));
}
static inline float *gt_random(size_t n, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = gt_randf(lo, hi);
    return x;
}

static inline void gt_encode(void *dst, tern_dtype dt, float v) {
    uint16_t h;
    switch (dt) {
    case TERN_F32: memcpy(dst, &v, 4); break;
    case TERN_BF16: h = tern_f32_to_bf16(v); memcpy(dst, &h, 2); break;
    case TERN_F16: h = tern_f32_to_f16(v); memcpy(dst, &h, 2); break;
    case TERN_I32: { int32_t i = (int32_t)v; memcpy(dst, &i, 4); break; }
    case TERN_U16: h = (uint16_t)v; memcpy(dst, &h, 2); break;
    }
}

static inline float gt_decode(const void *src, tern_dtype dt) {
    uint16_t h;
    switch (dt) {
    case TERN_F32: { float v; memcpy(&v, src, 4); return v; }
    case TERN_BF16: memcpy(&h, src, 2); return tern_bf16_to_f32(h);
    case TERN_F16: memcpy(&h, src, 2); return tern_f16_to_f32(h);
    case TERN_I32: { int32_t i; memcpy(&i, src, 4); return (float)i; }
    case TERN_U16: memcpy(&h, src, 2); return (float)h;
    }
    return 0;
}

/* n elements of dt at offset off, from init (converted) or NaN / -1 poison. */
static inline gt_pair gt_make(tern_dtype dt, size_t n, size_t off, const float *init) {
    gt_pair p;
    memset(&p, 0, sizeof p);
    size_t total = off + n + GT_GUARD, es = tern_dtype_size(dt);
    unsigned char *host = malloc(total * es);
    memset(host, 0x5A, total * es);
    for (size_t i = 0; i < n; i++) {
        unsigned char *q = host + (off + i) * es;
        if (init) gt_encode(q, dt, init[i]);
        else if (dt == TERN_I32 || dt == TERN_U16) memset(q, 0xff, es);
        else gt_encode(q, dt, NAN);
    }
    gt_side *sides[2] = {&gt_cpu, &gt_gpu};
    for (int s = 0; s < 2; s++) {
        CHECK_OK(sides[s]->ops->alloc(sides[s]->d, dt, total, &p.all[s]));
        CHECK_OK(sides[s]->ops->upload(sides[s]->d, p.all[s], host));
        p.view[s] = tern_view(p.all[s], off, n);
    }
    free(host);
    return p;
}

static inline gt_pair gt_make_i32(const int32_t *v, size_t n, size_t off) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
    gt_pair p = gt_make(TERN_I32, n, off, f);
    free(f);
    return p;
}

static inline void gt_free(gt_pair *p) {
    CHECK_OK(gt_cpu.ops->free(gt_cpu.d, &p->all[0]));
    CHECK_OK(gt_gpu.ops->free(gt_gpu.d, &p->all[1]));
}

/* The view of side s as f32. */
static inline float *gt_read(gt_pair p, int s) {
    gt_side *side = s ? &gt_gpu : &gt_cpu;
    size_t n = p.view[s].len, es = tern_dtype_size(p.view[s].dtype);
    unsigned char *host = malloc((n ? n : 1) * es);
    float *out = malloc((n ? n : 1) * sizeof *out);
    CHECK_OK(side->ops->download(side->d, host, p.view[s]));
    for (size_t i = 0; i < n; i++) out[i] = gt_decode(host + i * es, p.view[s].dtype);
    free(host);
    return out;
}

/* Whether the GPU side left the elements around the view alone. */
static inline bool gt_guard_ok(gt_pair p) {
    size_t total = p.all[1].len, es = tern_dtype_size(p.all[1].dtype), off = p.view[1].offset;
    unsigned char *host = malloc(total * es);
    CHECK_OK(gt_gpu.ops->download(gt_gpu.d, host, p.all[1]));
    bool ok = true;
    for (size_t i = 0; i < total * es; i++) {
        size_t el = i / es;
        if ((el < off || el >= off + p.view[1].len) && host[i] != 0x5A) ok = false;
    }
    free(host);
    return ok;
}

/* GPU vs cpu: norm-wise relative error within tol, guards intact. Returns the error. */
#define GT_EXPECT(p, tol, ...)                                                                \
    do {                                                                                      \
        float *gt_c_ = gt_read((p), 0), *gt_g_ = gt_read((p), 1);                             \
        double gt_e_ = check_rel_error(gt_g_, gt_c_, (p).view[0].len);                        \
        char gt_w_[200];                                                                      \
        snprintf(gt_w_, sizeof gt_w_, __VA_ARGS__);                                           \
        CHECKF(gt_e_ <= (tol), "[%s] %s: relative error %.3g > %.3g", gt_runtime, gt_w_,      \
               gt_e_, (double)(tol));                                                         \
        CHECKF(gt_guard_ok(p), "[%s] %s: wrote outside its view", gt_runtime, gt_w_);         \
        free(gt_c_);                                                                          \
        free(gt_g_);                                                                          \
    } while (0)

/* Calls an op on both sides with the same arguments; `args` uses V(x) for pair views. */
#define GT_BOTH(op, ...)                                                                      \
    do {                                                                                      \
        int gt_s_ = 0;                                                                        \
        CHECK_OK(gt_cpu.ops->op(gt_cpu.d, __VA_ARGS__));                                      \
        gt_s_ = 1;                                                                            \
        CHECK_OK(gt_gpu.ops->op(gt_gpu.d, __VA_ARGS__));                                      \
        (void)gt_s_;                                                                          \
    } while (0)
#define V(p) ((p).view[gt_s_])

/* Tolerance of an output stored in dtype dt after f32 compute (bf16: 8 significant bits). */
static inline double gt_tol(tern_dtype dt, double f32_tol) {
    return dt == TERN_BF16 ? (f32_tol > 1e-2 ? f32_tol : 1e-2) : f32_tol;
}

/* Whether to run every dtype/offset combination: on the interpreter (cheap to build) yes;
 * on compiled runtimes a reduced set, since each combination is a kernel variant the
 * driver compiles (PoCL takes seconds per kernel; its cache helps only the second run). */
static inline bool gt_full(void) { return !strcmp(gt_runtime, "host"); }

/* Runs fn on each runtime under test. The reference side is the cpu handler, or with
 * TERN_GPU_TEST_REFERENCE=host the core itself over the host interpreter (for machines
 * where only the kernels are built, e.g. a GPU box without the cpu handler's BLAS). */
static inline void gt_run(void (*fn)(void)) {
    const char *list = getenv("TERN_GPU_TEST_RUNTIMES");
    const char *ref = getenv("TERN_GPU_TEST_REFERENCE");
    bool named = list && *list;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", named ? list : "host,opencl");
    if (ref && !strcmp(ref, "host")) {
        tern_error *err;
        gt_cpu.ops = &gt_ops;
        gt_cpu.d = gtop_open_runtime("host", &err);
        if (!gt_cpu.d) {
            CHECKF(0, "the host runtime does not open: %s", tern_error_message(err));
            tern_error_free(err);
            return;
        }
    } else {
#ifndef GT_NO_CPU
        gt_cpu.ops = tern_handler_ops("cpu");
        CHECK_OK(gt_cpu.ops->open(&gt_cpu.d));
#else
        CHECKF(0, "built without the cpu handler: set TERN_GPU_TEST_REFERENCE=host");
        return;
#endif
    }
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        tern_error *err;
        tern_dev *d = gtop_open_runtime(name, &err);
        if (!d) {
            if (named) CHECKF(0, "runtime %s does not open: %s", name, tern_error_message(err));
            else printf("note: skipping runtime %s: %s\n", name, tern_error_message(err));
            tern_error_free(err);
            continue;
        }
        printf("runtime %s (%s)\n", name, tern_rt_device(d->rt));
        gt_gpu.ops = &gt_ops;
        gt_gpu.d = d;
        gt_runtime = name;
        fn();
        CHECK_OK(gtop_close(d));
    }
    CHECK_OK(gt_cpu.ops->close(gt_cpu.d));
}

#endif
