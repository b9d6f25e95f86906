/* The DSL test zoo (see zoo.h). Every runner poisons its outputs before the launch, so a
 * value the kernel failed to write shows up as a mismatch, and computes its reference in
 * plain C independently of the interpreter. */
#include "zoo.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern/half.h"
#include "tern/rng.h"

/* ---- helpers ---- */

static uint64_t next(zoo_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}
static float uniform(zoo_rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)(next(r) >> 40) * (1.0f / 16777216.0f);
}
static float *rand_f32(zoo_rng *r, size_t n, float lo, float hi) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = uniform(r, lo, hi);
    return p;
}
static void *poisoned(size_t bytes) {
    void *p = malloc(bytes);
    if (p) memset(p, 0xff, bytes); /* NaN for floats, -1 for integers */
    return p;
}

static int fail_call(const char *what, tern_error *err) {
    fprintf(stderr, "  %s: %s\n", what, tern_error_message(err));
    tern_error_free(err);
    return -1;
}

/* Compares floats: |got - want| <= tol * max(|want|, floor); NaN must match NaN. */
static int cmp_f32(const char *what, const float *got, const float *want, size_t n, double tol, double floor) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bool ok;
        if (isnan(want[i]))
            ok = isnan(got[i]);
        else if (isinf(want[i]))
            ok = got[i] == want[i];
        else
            ok = fabs((double)got[i] - want[i]) <= tol * fmax(fabs((double)want[i]), floor);
        if (!ok && bad++ < 5) fprintf(stderr, "  %s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
    }
    return bad;
}

static int cmp_u32(const char *what, const uint32_t *got, const uint32_t *want, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ < 5)
            fprintf(stderr, "  %s[%zu]: got %u (0x%08x), want %u (0x%08x)\n", what, i, got[i], got[i], want[i], want[i]);
    return bad;
}

static int cmp_u64(const char *what, const uint64_t *got, const uint64_t *want, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ < 5)
            fprintf(stderr, "  %s[%zu]: got %llu, want %llu\n", what, i, (unsigned long long)got[i],
                    (unsigned long long)want[i]);
    return bad;
}

#define LAUNCH(rt, k, grid, group, ...)                                                          \
    do {                                                                                         \
        tern_arg args_[] = {__VA_ARGS__};                                                        \
        tern_error *e_ = tern_launch(rt, k, grid, group, args_, sizeof args_ / sizeof *args_);   \
        if (e_) {                                                                                \
            rc = fail_call("launch", e_);                                                        \
            goto done;                                                                           \
        }                                                                                        \
    } while (0)

/* i < n guard used by most kernels: returns the global id; the caller closes the if. */
static tern_v guard(tern_kb *kb, tern_v n) {
    tern_v i = tern_global_id(kb, 0);
    tern_if(kb, tern_lt(i, n));
    return i;
}

/* ---- arith_f32: + - * / rem min max pow neg abs fma, through device buffers with offsets ---- */

#define AF_OPS 11
static void arith_f32_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v a = tern_param_buf(kb, "a", TERN_T_F32, TERN_READ);
    tern_v b = tern_param_buf(kb, "b", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v x = tern_name(tern_load(a, i), "x");
    tern_v y = tern_name(tern_load(b, i), "y");
    tern_v base = tern_mul(i, tern_int(AF_OPS));
    tern_v r[AF_OPS] = {
        tern_add(x, y), tern_sub(x, y), tern_mul(x, y), tern_div(x, y), tern_rem(x, y),
        tern_min(x, y), tern_max(x, y), tern_pow(tern_add(tern_abs(x), tern_f32(0.5f)), y),
        tern_neg(x), tern_abs(y), tern_fma(x, y, tern_f32(0.25f)),
    };
    for (int j = 0; j < AF_OPS; j++) tern_store(out, tern_add(base, tern_int(j)), r[j]);
    tern_end(kb);
}

static int arith_f32_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 300, off = 3;
    int rc = 0;
    float *a = rand_f32(r, n + off, -4, 4), *b = rand_f32(r, n, -3, 3);
    float *out = poisoned(sizeof(float) * n * AF_OPS), *want = malloc(sizeof(float) * n * AF_OPS);
    tern_dbuf da = {0}, dout = {0};
    tern_error *err = tern_rt_alloc(rt, TERN_T_F32, n + off, &da);
    if (!err) err = tern_rt_alloc(rt, TERN_T_F32, (size_t)n * AF_OPS, &dout);
    if (!err) err = tern_rt_upload(rt, da, a);
    if (!err) err = tern_rt_upload(rt, dout, out);
    if (err) {
        rc = fail_call("device buffers", err);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        float x = a[i + off], y = b[i];
        float w[AF_OPS] = {x + y, x - y, x * y, x / y, fmodf(x, y), fminf(x, y), fmaxf(x, y),
                           powf(fabsf(x) + 0.5f, y), -x, fabsf(y), fmaf(x, y, 0.25f)};
        memcpy(want + i * AF_OPS, w, sizeof w);
    }
    tern_dbuf view = da;
    view.offset = off; /* a view that starts 3 elements in */
    view.len = n;
    LAUNCH(rt, k, tern_dims1(3), tern_dims1(128), tern_arg_dev(view), tern_arg_host_in(TERN_T_F32, b, n),
           tern_arg_dev(dout), tern_arg_i32(n));
    if ((err = tern_rt_download(rt, out, dout))) {
        rc = fail_call("download", err);
        goto done;
    }
    /* libm's and the device's pow and fmod may differ by an ulp or two; fma may round once */
    rc = cmp_f32("arith_f32", out, want, (size_t)n * AF_OPS, 4e-6, 1e-6);
done:
    tern_rt_free(rt, &da);
    tern_rt_free(rt, &dout);
    free(a), free(b), free(out), free(want);
    return rc;
}

/* ---- math_f32: exp exp2 log log2 sqrt rsqrt tanh erf sin cos floor ceil round trunc isnan isinf,
 * and tanh_approx apart (its own tolerance) ---- */

#define MF_OPS 16
static void math_f32_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v approx = tern_param_buf(kb, "approx", TERN_T_F32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v x = tern_load(xs, i);      /* in [-3, 3] */
    tern_store(approx, i, tern_tanh_approx(x));
    tern_v p = tern_add(tern_abs(x), tern_f32(0.1f)); /* positive */
    tern_v one = tern_f32(1.0f), zero = tern_f32(0.0f);
    tern_v r[MF_OPS] = {
        tern_exp(x), tern_exp2(x), tern_log(p), tern_log2(p), tern_sqrt(p), tern_rsqrt(p),
        tern_tanh(x), tern_erf(x), tern_sin(x), tern_cos(x), tern_floor(x), tern_ceil(x),
        tern_round(tern_mul(x, tern_f32(2.0f))), tern_trunc(x),
        tern_select(tern_isnan(tern_log(x)), one, zero),
        tern_select(tern_isinf(tern_exp(tern_mul(x, tern_f32(100.0f)))), one, zero),
    };
    tern_v base = tern_mul(i, tern_int(MF_OPS));
    for (int j = 0; j < MF_OPS; j++) tern_store(out, tern_add(base, tern_int(j)), r[j]);
    tern_end(kb);
}

static int math_f32_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 257;
    int rc = 0;
    float *x = rand_f32(r, n, -3, 3);
    float *out = poisoned(sizeof(float) * n * MF_OPS), *want = malloc(sizeof(float) * n * MF_OPS);
    float *approx = poisoned(sizeof(float) * n), *tanhs = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        tanhs[i] = tanhf(x[i]);
        float v = x[i], p = fabsf(v) + 0.1f;
        float w[MF_OPS] = {expf(v), exp2f(v), logf(p), log2f(p), sqrtf(p), 1.0f / sqrtf(p),
                           tanhf(v), erff(v), sinf(v), cosf(v), floorf(v), ceilf(v),
                           roundf(v * 2.0f), truncf(v), isnan(logf(v)) ? 1.0f : 0.0f,
                           isinf(expf(v * 100.0f)) ? 1.0f : 0.0f};
        memcpy(want + i * MF_OPS, w, sizeof w);
    }
    LAUNCH(rt, k, tern_dims1(5), tern_dims1(64), tern_arg_host_in(TERN_T_F32, x, n),
           tern_arg_host(TERN_T_F32, out, (size_t)n * MF_OPS), tern_arg_host(TERN_T_F32, approx, (size_t)n),
           tern_arg_i32(n));
    /* device math libraries are within a few ulps of libm; values near zero (sin, cos,
     * erf, tanh) are compared absolutely. tanh_approx: CUDA's tanh.approx.f32 is within
     * 2^-10.99 relative of tanh (PTX ISA); 2^-10 allows for libm's own ulp. */
    rc = cmp_f32("math_f32", out, want, (size_t)n * MF_OPS, 2e-6, 1e-3);
    rc += cmp_f32("tanh_approx", approx, tanhs, (size_t)n, 1.0 / 1024, 1e-3);
done:
    free(x), free(out), free(want), free(approx), free(tanhs);
    return rc;
}

/* ---- arith_int: i32 and u32 arithmetic, bit operations, shifts, comparisons ---- */

#define AI_OPS 22
static void arith_int_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v as = tern_param_buf(kb, "as", TERN_T_I32, TERN_READ);
    tern_v bs = tern_param_buf(kb, "bs", TERN_T_I32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_I32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v a = tern_load(as, i), b = tern_load(bs, i);
    tern_v s = tern_and(b, tern_int(63)); /* counts past 31 wrap */
    tern_v ua = tern_cast(a, TERN_T_U32), ub = tern_cast(b, TERN_T_U32);
    tern_v r[AI_OPS] = {
        tern_add(a, b), tern_sub(a, b), tern_mul(a, b), tern_div(a, b), tern_rem(a, b),
        tern_min(a, b), tern_max(a, b), tern_and(a, b), tern_or(a, b), tern_xor(a, b),
        tern_shl(a, s), tern_shr(a, s), tern_not(a), tern_neg(a), tern_abs(a),
        tern_cast(tern_lt(a, b), TERN_T_I32), tern_cast(tern_eq(a, a), TERN_T_I32),
        tern_cast(tern_div(ua, ub), TERN_T_I32), tern_cast(tern_rem(ua, ub), TERN_T_I32),
        tern_cast(tern_shr(ua, tern_cast(s, TERN_T_U32)), TERN_T_I32),
        tern_cast(tern_max(ua, ub), TERN_T_I32), tern_cast(tern_lt(ua, ub), TERN_T_I32),
    };
    tern_v base = tern_mul(i, tern_int(AI_OPS));
    for (int j = 0; j < AI_OPS; j++) tern_store(out, tern_add(base, tern_int(j)), r[j]);
    tern_end(kb);
}

static int32_t wrap32(uint32_t x) {
    int32_t r;
    memcpy(&r, &x, sizeof r);
    return r;
}

static int arith_int_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 200;
    int rc = 0;
    int32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    int32_t *out = poisoned(sizeof(int32_t) * n * AI_OPS), *want = malloc(sizeof(int32_t) * n * AI_OPS);
    for (int i = 0; i < n; i++) {
        a[i] = wrap32((uint32_t)next(r));
        b[i] = i % 3 ? wrap32((uint32_t)next(r)) >> (next(r) % 31) : (int32_t)(next(r) % 200) - 100;
        if (b[i] == 0) b[i] = 7;
        if (a[i] == INT32_MIN && b[i] == -1) b[i] = 3;
    }
    a[0] = INT32_MIN;
    if (b[0] == -1) b[0] = 3; /* INT32_MIN / -1 overflows (also in the C reference) */
    for (int i = 0; i < n; i++) {
        int32_t x = a[i], y = b[i];
        uint32_t ux = (uint32_t)x, uy = (uint32_t)y;
        unsigned s = (unsigned)y & 63;
        int32_t w[AI_OPS] = {
            wrap32(ux + uy), wrap32(ux - uy), wrap32(ux * uy), x / y, x % y,
            x < y ? x : y, x > y ? x : y, x & y, x | y, x ^ y,
            wrap32(ux << (s & 31)), x >> (s & 31), ~x, wrap32(0u - ux), x < 0 ? wrap32(0u - ux) : x,
            x < y, 1, wrap32(ux / uy), wrap32(ux % uy), wrap32(ux >> (s & 31)),
            wrap32(ux > uy ? ux : uy), ux < uy,
        };
        memcpy(want + i * AI_OPS, w, sizeof w);
    }
    LAUNCH(rt, k, tern_dims1(4), tern_dims1(64), tern_arg_host_in(TERN_T_I32, a, n),
           tern_arg_host_in(TERN_T_I32, b, n), tern_arg_host(TERN_T_I32, out, (size_t)n * AI_OPS),
           tern_arg_i32(n));
    rc = cmp_u32("arith_int", (uint32_t *)out, (uint32_t *)want, (size_t)n * AI_OPS);
done:
    free(a), free(b), free(out), free(want);
    return rc;
}

/* ---- int64: the rng.h hash in the DSL (u32 and u64 math, a u64 seed), i64 arithmetic ---- */

static tern_v dsl_hash32(tern_v x) {
    x = tern_xor(x, tern_shr(x, tern_u32(16)));
    x = tern_mul(x, tern_u32(0x7feb352du));
    x = tern_xor(x, tern_shr(x, tern_u32(15)));
    x = tern_mul(x, tern_u32(0x846ca68bu));
    return tern_xor(x, tern_shr(x, tern_u32(16)));
}

static void int64_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v bits = tern_param_buf(kb, "bits", TERN_T_U32, TERN_WRITE);
    tern_v wide = tern_param_buf(kb, "wide", TERN_T_I64, TERN_WRITE);
    tern_v seed = tern_param_scalar(kb, "seed", TERN_T_U64);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_I64);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v lo = tern_cast(seed, TERN_T_U32), hi = tern_cast(tern_shr(seed, tern_int(32)), TERN_T_U32);
    tern_v s = dsl_hash32(tern_xor(dsl_hash32(lo), hi));
    tern_v r = dsl_hash32(tern_xor(s, dsl_hash32(tern_cast(i, TERN_T_U32))));
    tern_store(bits, i, r);
    tern_v w = tern_sub(tern_mul(tern_cast(i, TERN_T_I64), scale), tern_i64(INT64_C(5000000000)));
    w = tern_xor(w, tern_shl(tern_cast(r, TERN_T_I64), tern_int(40)));
    tern_store(wide, i, tern_add(tern_shr(w, tern_int(3)), tern_cast(tern_cast(w, TERN_T_U64), TERN_T_I64)));
    tern_end(kb);
}

static int int64_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 100;
    int rc = 0;
    uint64_t seed = next(r);
    int64_t scale = (int64_t)(next(r) % 1000000007);
    uint32_t *bits = poisoned(n * 4), *want_bits = malloc(n * 4);
    uint64_t *wide = poisoned(n * 8), *want_wide = malloc(n * 8);
    for (int i = 0; i < n; i++) {
        want_bits[i] = tern_random_bits(seed, (uint32_t)i);
        uint64_t w = (uint64_t)i * (uint64_t)scale - 5000000000ull;
        w ^= (uint64_t)want_bits[i] << 40;
        int64_t sw;
        memcpy(&sw, &w, 8);
        want_wide[i] = (uint64_t)(sw >> 3) + w;
    }
    LAUNCH(rt, k, tern_dims1(2), tern_dims1(64), tern_arg_host(TERN_T_U32, bits, n),
           tern_arg_host(TERN_T_I64, wide, n), tern_arg_u64(seed), tern_arg_i64(scale), tern_arg_i32(n));
    rc = cmp_u32("hash", bits, want_bits, n) + cmp_u64("wide", wide, want_wide, n);
done:
    free(bits), free(want_bits), free(wide), free(want_wide);
    return rc;
}

/* ---- casts, bitcasts, select, bools ---- */

#define CA_OPS 8
static void casts_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_U32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v x = tern_load(xs, i);
    tern_v nz = tern_cast(x, TERN_T_BOOL);
    tern_v r[CA_OPS] = {
        tern_bitcast(tern_cast(x, TERN_T_I32), TERN_T_U32),
        tern_cast(x, TERN_T_U32),
        tern_bitcast(tern_cast(tern_cast(i, TERN_T_I64), TERN_T_F32), TERN_T_U32),
        tern_bitcast(x, TERN_T_U32),
        tern_bitcast(tern_select(tern_gt(x, tern_f32(0)), x, tern_neg(x)), TERN_T_U32),
        tern_cast(nz, TERN_T_U32),
        tern_bitcast(tern_cast(tern_lnot(nz), TERN_T_F32), TERN_T_U32),
        tern_cast(tern_bitcast(tern_bitcast(x, TERN_T_I32), TERN_T_F32), TERN_T_U32),
    };
    tern_v base = tern_mul(i, tern_int(CA_OPS));
    for (int j = 0; j < CA_OPS; j++) tern_store(out, tern_add(base, tern_int(j)), r[j]);
    tern_end(kb);
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static uint32_t sat_i32(float f) {
    if (f != f) return 0;
    if (f <= -2147483648.0f) return 0x80000000u;
    if (f >= 2147483647.0f) return 0x7fffffffu;
    return (uint32_t)(int32_t)f;
}
static uint32_t sat_u32(float f) {
    if (f != f || f <= 0) return 0;
    if (f >= 4294967295.0f) return 0xffffffffu;
    return (uint32_t)f;
}

static int casts_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 64;
    int rc = 0;
    float *x = rand_f32(r, n, -100, 100);
    float special[] = {0.0f, -0.0f, -0.5f, 2.99f, 1e10f, -1e10f, 3e9f, NAN, INFINITY, -INFINITY, 16777217.0f};
    memcpy(x, special, sizeof special);
    uint32_t *out = poisoned(4 * n * CA_OPS), *want = malloc(4 * n * CA_OPS);
    for (int i = 0; i < n; i++) {
        float v = x[i];
        uint32_t w[CA_OPS] = {sat_i32(v), sat_u32(v), fbits((float)(int64_t)i), fbits(v),
                              fbits(v > 0 ? v : -v), v != 0, fbits(v != 0 ? 0.0f : 1.0f), sat_u32(v)};
        memcpy(want + i * CA_OPS, w, sizeof w);
    }
    LAUNCH(rt, k, tern_dims1(1), tern_dims1(64), tern_arg_host_in(TERN_T_F32, x, n),
           tern_arg_host(TERN_T_U32, out, (size_t)n * CA_OPS), tern_arg_i32(n));
    rc = cmp_u32("casts", out, want, (size_t)n * CA_OPS);
done:
    free(x), free(out), free(want);
    return rc;
}

/* ---- control flow: if/else, for with per-thread bounds, while, break, continue, exit ---- */

static void control_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v steps = tern_param_buf(kb, "steps", TERN_T_I32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = tern_global_id(kb, 0);
    TERN_IF(kb, tern_ge(i, n)) { tern_exit(kb); }
    TERN_IF(kb, tern_eq(tern_rem(i, tern_int(5)), tern_int(4))) { tern_exit(kb); } /* output stays poisoned */
    tern_v x = tern_load(xs, i);
    tern_v acc = tern_var(kb, "acc", tern_f32(0));
    TERN_FOR(kb, j, tern_int(0), tern_rem(i, tern_int(7)), tern_int(1)) {
        TERN_IF(kb, tern_eq(tern_and(j, tern_int(1)), tern_int(1))) { tern_continue(kb); }
        tern_assign(acc, tern_add(acc, tern_mul(tern_cast(j, TERN_T_F32), x)));
        TERN_IF(kb, tern_gt(acc, tern_f32(3.0f))) { tern_break(kb); }
    }
    TERN_IF(kb, tern_lt(x, tern_f32(0))) {
        tern_assign(acc, tern_neg(acc));
    }
    TERN_ELSE(kb) {
        tern_assign(acc, tern_add(acc, tern_f32(100.0f)));
    }
    tern_store(out, i, acc);
    /* Collatz steps of i + 1, at most 300 */
    tern_v c = tern_var(kb, "c", tern_add(i, tern_int(1)));
    tern_v count = tern_var(kb, "count", tern_int(0));
    TERN_WHILE(kb, tern_ne(c, tern_int(1))) {
        TERN_IF(kb, tern_eq(tern_and(c, tern_int(1)), tern_int(0))) { tern_assign(c, tern_shr(c, tern_int(1))); }
        TERN_ELSE(kb) { tern_assign(c, tern_add(tern_mul(c, tern_int(3)), tern_int(1))); }
        tern_assign(count, tern_add(count, tern_int(1)));
        TERN_IF(kb, tern_ge(count, tern_int(300))) { tern_break(kb); }
    }
    tern_store(steps, i, count);
}

static int control_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 150;
    int rc = 0;
    float *x = rand_f32(r, n, -1, 1);
    float *out = poisoned(4 * (n + 10)), *want = malloc(4 * (n + 10));
    int32_t *steps = poisoned(4 * (n + 10)), *want_steps = malloc(4 * (n + 10));
    memset(want, 0xff, 4 * (n + 10));
    memset(want_steps, 0xff, 4 * (n + 10));
    for (int i = 0; i < n; i++) {
        if (i % 5 == 4) continue;
        float acc = 0;
        for (int j = 0; j < i % 7; j++) {
            if (j & 1) continue;
            acc += (float)j * x[i];
            if (acc > 3.0f) break;
        }
        want[i] = x[i] < 0 ? -acc : acc + 100.0f;
        int c = i + 1, count = 0;
        while (c != 1) {
            c = c % 2 == 0 ? c / 2 : 3 * c + 1;
            if (++count >= 300) break;
        }
        want_steps[i] = count;
    }
    LAUNCH(rt, k, tern_dims1(5), tern_dims1(32), tern_arg_host_in(TERN_T_F32, x, n),
           tern_arg_host(TERN_T_F32, out, n + 10), tern_arg_host(TERN_T_I32, steps, n + 10), tern_arg_i32(n));
    rc = cmp_u32("control", (uint32_t *)out, (uint32_t *)want, n + 10) +
         cmp_u32("steps", (uint32_t *)steps, (uint32_t *)want_steps, n + 10);
done:
    free(x), free(out), free(want), free(steps), free(want_steps);
    return rc;
}

/* ---- storage types: f16, bf16, u16 in and out (round to nearest even) ---- */

static void storage16_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v h = tern_param_buf(kb, "h", TERN_T_F16, TERN_READ);
    tern_v bf = tern_param_buf(kb, "bf", TERN_T_BF16, TERN_READ);
    tern_v u = tern_param_buf(kb, "u", TERN_T_U16, TERN_READ);
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_v wide = tern_param_buf(kb, "wide", TERN_T_F32, TERN_WRITE);
    tern_v h_out = tern_param_buf(kb, "h_out", TERN_T_F16, TERN_WRITE);
    tern_v bf_out = tern_param_buf(kb, "bf_out", TERN_T_BF16, TERN_WRITE);
    tern_v u_out = tern_param_buf(kb, "u_out", TERN_T_U16, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v base = tern_mul(i, tern_int(3));
    tern_store(wide, base, tern_load(h, i));
    tern_store(wide, tern_add(base, tern_int(1)), tern_load(bf, i));
    tern_store(wide, tern_add(base, tern_int(2)), tern_cast(tern_load(u, i), TERN_T_F32));
    tern_v v = tern_load(x, i);
    tern_store(h_out, i, v);
    tern_store(bf_out, i, v);
    tern_store(u_out, i, tern_add(tern_bitcast(v, TERN_T_U32), tern_u32(0x12340000u)));
    tern_end(kb);
}

static int storage16_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 128;
    int rc = 0;
    uint16_t *h = malloc(2 * n), *bf = malloc(2 * n), *u = malloc(2 * n);
    float *x = rand_f32(r, n, -70000, 70000);
    x[0] = NAN, x[1] = 1e-6f, x[2] = -3e-8f, x[3] = 65520.0f, x[4] = 1.0f + 1.0f / 2048; /* f16 edge cases */
    for (int i = 0; i < n; i++) {
        h[i] = (uint16_t)next(r);
        if ((h[i] & 0x7c00) == 0x7c00) h[i] &= 0x7bff; /* no inf/NaN: their payloads vary */
        bf[i] = tern_f32_to_bf16(uniform(r, -1e6f, 1e6f));
        u[i] = (uint16_t)next(r);
    }
    float *wide = poisoned(4 * 3 * n), *want = malloc(4 * 3 * n);
    uint16_t *h_out = poisoned(2 * n), *bf_out = poisoned(2 * n), *u_out = poisoned(2 * n);
    uint16_t *wh = malloc(2 * n), *wb = malloc(2 * n), *wu = malloc(2 * n);
    for (int i = 0; i < n; i++) {
        want[3 * i] = tern_f16_to_f32(h[i]);
        want[3 * i + 1] = tern_bf16_to_f32(bf[i]);
        want[3 * i + 2] = (float)u[i];
        wh[i] = tern_f32_to_f16(x[i]);
        wb[i] = tern_f32_to_bf16(x[i]);
        wu[i] = (uint16_t)(fbits(x[i]) + 0x12340000u);
    }
    LAUNCH(rt, k, tern_dims1(2), tern_dims1(64), tern_arg_host_in(TERN_T_F16, h, n),
           tern_arg_host_in(TERN_T_BF16, bf, n), tern_arg_host_in(TERN_T_U16, u, n),
           tern_arg_host_in(TERN_T_F32, x, n), tern_arg_host(TERN_T_F32, wide, 3 * n),
           tern_arg_host(TERN_T_F16, h_out, n), tern_arg_host(TERN_T_BF16, bf_out, n),
           tern_arg_host(TERN_T_U16, u_out, n), tern_arg_i32(n));
    rc = cmp_u32("wide", (uint32_t *)wide, (uint32_t *)want, 3 * n);
    for (int i = 0; i < n; i++) {
        if (h_out[i] != wh[i] && rc++ < 5) fprintf(stderr, "  f16[%d]: got 0x%04x, want 0x%04x\n", i, h_out[i], wh[i]);
        /* a NaN stays a NaN; its payload may differ by target (tern/kernel.h) */
        bool both_nan = (bf_out[i] & 0x7fff) > 0x7f80 && (wb[i] & 0x7fff) > 0x7f80;
        if (bf_out[i] != wb[i] && !both_nan && rc++ < 5)
            fprintf(stderr, "  bf16[%d]: got 0x%04x, want 0x%04x\n", i, bf_out[i], wb[i]);
        if (u_out[i] != wu[i] && rc++ < 5) fprintf(stderr, "  u16[%d]: got %u, want %u\n", i, u_out[i], wu[i]);
    }
done:
    free(h), free(bf), free(u), free(x), free(wide), free(want), free(h_out), free(bf_out), free(u_out);
    free(wh), free(wb), free(wu);
    return rc;
}

/* ---- vector loads and stores: f32 x4, bf16 x8, i32 x2, f16 x4 ---- */

static void vector_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xf = tern_param_buf(kb, "xf", TERN_T_F32, TERN_READ);
    tern_v xb = tern_param_buf(kb, "xb", TERN_T_BF16, TERN_READ);
    tern_v xi = tern_param_buf(kb, "xi", TERN_T_I32, TERN_READ);
    tern_v yf = tern_param_buf(kb, "yf", TERN_T_F32, TERN_WRITE);
    tern_v yb = tern_param_buf(kb, "yb", TERN_T_BF16, TERN_WRITE);
    tern_v yi = tern_param_buf(kb, "yi", TERN_T_I32, TERN_WRITE);
    tern_v yh = tern_param_buf(kb, "yh", TERN_T_F16, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32); /* groups of 8 */
    tern_v i = guard(kb, n);
    tern_v f[4], b[8], v[2], out8[8], out4[4];
    tern_load_vec(xf, tern_mul(i, tern_int(4)), 4, f);
    tern_load_vec(xb, tern_mul(i, tern_int(8)), 8, b);
    tern_load_vec(xi, tern_mul(i, tern_int(2)), 2, v);
    for (int j = 0; j < 4; j++) out4[j] = tern_mul(f[3 - j], tern_f32(2.0f));
    tern_store_vec(yf, tern_mul(i, tern_int(4)), 4, out4);
    for (int j = 0; j < 8; j++) out8[j] = tern_add(b[j], f[j % 4]);
    tern_store_vec(yb, tern_mul(i, tern_int(8)), 8, out8);
    tern_v swapped[2] = {v[1], tern_add(v[0], v[1])};
    tern_store_vec(yi, tern_mul(i, tern_int(2)), 2, swapped);
    tern_v h[4];
    for (int j = 0; j < 4; j++) h[j] = tern_sub(f[j], b[j]);
    tern_store_vec(yh, tern_mul(i, tern_int(4)), 4, h);
    tern_end(kb);
}

static int vector_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 40;
    int rc = 0;
    float *xf = rand_f32(r, 4 * n, -10, 10);
    uint16_t *xb = malloc(2 * 8 * n);
    int32_t *xi = malloc(4 * 2 * n);
    for (int i = 0; i < 8 * n; i++) xb[i] = tern_f32_to_bf16(uniform(r, -10, 10));
    for (int i = 0; i < 2 * n; i++) xi[i] = (int32_t)(next(r) % 100000);
    float *yf = poisoned(4 * 4 * n), *wf = malloc(4 * 4 * n);
    uint16_t *yb = poisoned(2 * 8 * n), *wb = malloc(2 * 8 * n), *yh = poisoned(2 * 4 * n), *wh = malloc(2 * 4 * n);
    int32_t *yi = poisoned(4 * 2 * n), *wi = malloc(4 * 2 * n);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 4; j++) wf[4 * i + j] = xf[4 * i + 3 - j] * 2.0f;
        for (int j = 0; j < 8; j++) wb[8 * i + j] = tern_f32_to_bf16(tern_bf16_to_f32(xb[8 * i + j]) + xf[4 * i + j % 4]);
        wi[2 * i] = xi[2 * i + 1];
        wi[2 * i + 1] = xi[2 * i] + xi[2 * i + 1];
        for (int j = 0; j < 4; j++) wh[4 * i + j] = tern_f32_to_f16(xf[4 * i + j] - tern_bf16_to_f32(xb[8 * i + j]));
    }
    LAUNCH(rt, k, tern_dims1(2), tern_dims1(32), tern_arg_host_in(TERN_T_F32, xf, 4 * n),
           tern_arg_host_in(TERN_T_BF16, xb, 8 * n), tern_arg_host_in(TERN_T_I32, xi, 2 * n),
           tern_arg_host(TERN_T_F32, yf, 4 * n), tern_arg_host(TERN_T_BF16, yb, 8 * n),
           tern_arg_host(TERN_T_I32, yi, 2 * n), tern_arg_host(TERN_T_F16, yh, 4 * n), tern_arg_i32(n));
    rc = cmp_u32("yf", (uint32_t *)yf, (uint32_t *)wf, 4 * n) + cmp_u32("yi", (uint32_t *)yi, (uint32_t *)wi, 2 * n);
    for (int i = 0; i < 8 * n; i++)
        if (yb[i] != wb[i] && rc++ < 5) fprintf(stderr, "  yb[%d]: got 0x%04x, want 0x%04x\n", i, yb[i], wb[i]);
    for (int i = 0; i < 4 * n; i++)
        if (yh[i] != wh[i] && rc++ < 5) fprintf(stderr, "  yh[%d]: got 0x%04x, want 0x%04x\n", i, yh[i], wh[i]);
done:
    free(xf), free(xb), free(xi), free(yf), free(wf), free(yb), free(wb), free(yh), free(wh), free(yi), free(wi);
    return rc;
}

/* ---- threadgroup memory and barriers: reverse and rotate within each group ---- */

static void shared_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_max_threads(kb, 128);
    tern_v tile = tern_shared(kb, "tile", TERN_T_F32, 128);
    tern_v counts = tern_shared(kb, "counts", TERN_T_I32, 4);
    tern_v gid = tern_global_id(kb, 0), lid = tern_local_id(kb, 0);
    TERN_IF(kb, tern_lt(lid, tern_int(4))) { tern_store(counts, lid, tern_int(0)); }
    tern_store(tile, lid, tern_load(xs, gid));
    tern_barrier(kb);
    tern_v a = tern_load(tile, tern_sub(tern_int(127), lid));
    tern_v b = tern_load(tile, tern_and(tern_add(lid, tern_int(1)), tern_int(127)));
    tern_atomic_add(counts, tern_and(lid, tern_int(3)), tern_int(1));
    tern_barrier(kb);
    tern_store(tile, lid, tern_add(a, b));
    tern_barrier(kb);
    tern_v c = tern_cast(tern_load(counts, tern_rem(lid, tern_int(4))), TERN_T_F32);
    tern_store(out, gid, tern_add(tern_load(tile, tern_xor(lid, tern_int(5))), c));
}

static int shared_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int groups = 3, n = groups * 128;
    int rc = 0;
    float *x = rand_f32(r, n, -5, 5), *out = poisoned(4 * n), *want = malloc(4 * n);
    for (int g = 0; g < groups; g++)
        for (int l = 0; l < 128; l++) {
            int m = l ^ 5;
            const float *t = x + g * 128;
            want[g * 128 + l] = t[127 - m] + t[(m + 1) & 127] + 32.0f;
        }
    LAUNCH(rt, k, tern_dims1(groups), tern_dims1(128), tern_arg_host_in(TERN_T_F32, x, n),
           tern_arg_host(TERN_T_F32, out, n));
    rc = cmp_f32("shared", out, want, n, 0, 0);
done:
    free(x), free(out), free(want);
    return rc;
}

/* ---- SIMD groups: reductions, scan, shuffles, votes ---- */

#define SI_OPS 14
static void simd_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v ks = tern_param_buf(kb, "ks", TERN_T_I32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v iout = tern_param_buf(kb, "iout", TERN_T_U32, TERN_WRITE);
    tern_v gid = tern_global_id(kb, 0), lane = tern_simd_lane(kb);
    tern_v x = tern_load(xs, gid), v = tern_load(ks, gid);
    tern_v f[6] = {
        tern_simd_sum(x), tern_simd_min(x), tern_simd_max(x), tern_simd_prefix_sum(x),
        tern_simd_shuffle(x, tern_and(tern_mul(lane, tern_int(7)), tern_int(31))),
        tern_simd_shuffle_down(x, tern_int(5)),
    };
    tern_v u[8] = {
        tern_cast(tern_simd_sum(v), TERN_T_U32), tern_cast(tern_simd_prefix_sum(v), TERN_T_U32),
        tern_cast(tern_simd_max(v), TERN_T_U32),
        tern_cast(tern_simd_shuffle_xor(v, tern_int(3)), TERN_T_U32),
        tern_cast(tern_simd_shuffle_up(v, tern_rem(lane, tern_int(4))), TERN_T_U32),
        tern_simd_ballot(tern_gt(x, tern_f32(0))),
        tern_cast(tern_simd_any(tern_gt(x, tern_f32(2.9f))), TERN_T_U32),
        tern_cast(tern_simd_all(tern_gt(x, tern_f32(-2.9f))), TERN_T_U32),
    };
    for (int j = 0; j < 6; j++) tern_store(out, tern_add(tern_mul(gid, tern_int(6)), tern_int(j)), f[j]);
    for (int j = 0; j < 8; j++) tern_store(iout, tern_add(tern_mul(gid, tern_int(8)), tern_int(j)), u[j]);
}

static int simd_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 256;
    int rc = 0;
    float *x = rand_f32(r, n, -3, 3);
    int32_t *v = malloc(4 * n);
    for (int i = 0; i < n; i++) v[i] = (int32_t)(next(r) % 2001) - 1000;
    for (int i = 64; i < 96; i++) x[i] = fabsf(x[i]) + 0.5f; /* one group all positive */
    float *out = poisoned(4 * 6 * n), *want = malloc(4 * 6 * n);
    uint32_t *iout = poisoned(4 * 8 * n), *iwant = malloc(4 * 8 * n);
    for (int g = 0; g < n; g += 32) {
        const float *gx = x + g;
        const int32_t *gv = v + g;
        float a[32], mn = gx[0], mx = gx[0];
        int32_t isum = 0, imax = gv[0];
        for (int j = 0; j < 32; j++) {
            a[j] = gx[j];
            mn = fminf(mn, gx[j]);
            mx = fmaxf(mx, gx[j]);
            isum += gv[j];
            imax = gv[j] > imax ? gv[j] : imax;
        }
        for (int m = 16; m > 0; m >>= 1) /* the butterfly order every target uses */
            for (int j = 0; j < m; j++) a[j] = a[j] + a[j + m];
        float scan[32];
        for (int j = 0; j < 32; j++) scan[j] = gx[j];
        for (int o = 1; o < 32; o <<= 1) {
            float next_scan[32];
            for (int j = 0; j < 32; j++) next_scan[j] = j >= o ? scan[j] + scan[j - o] : scan[j];
            memcpy(scan, next_scan, sizeof scan);
        }
        uint32_t ballot = 0;
        bool any = false, all = true;
        for (int j = 0; j < 32; j++) {
            ballot |= (uint32_t)(gx[j] > 0) << j;
            any = any || gx[j] > 2.9f;
            all = all && gx[j] > -2.9f;
        }
        int32_t iscan = 0;
        for (int j = 0; j < 32; j++) {
            float *w = want + 6 * (g + j);
            w[0] = a[0], w[1] = mn, w[2] = mx, w[3] = j ? scan[j - 1] : 0.0f;
            w[4] = gx[(j * 7) & 31], w[5] = j + 5 < 32 ? gx[j + 5] : gx[j];
            uint32_t *u = iwant + 8 * (g + j);
            u[0] = (uint32_t)isum, u[1] = (uint32_t)iscan, u[2] = (uint32_t)imax, u[3] = (uint32_t)gv[j ^ 3];
            u[4] = (uint32_t)(j >= j % 4 ? gv[j - j % 4] : gv[j]);
            u[5] = ballot, u[6] = any, u[7] = all;
            iscan += gv[j];
        }
    }
    LAUNCH(rt, k, tern_dims1(2), tern_dims1(128), tern_arg_host_in(TERN_T_F32, x, n),
           tern_arg_host_in(TERN_T_I32, v, n), tern_arg_host(TERN_T_F32, out, 6 * n),
           tern_arg_host(TERN_T_U32, iout, 8 * n));
    /* the combining order is fixed, so even the float sums match exactly */
    rc = cmp_u32("simd_f32", (uint32_t *)out, (uint32_t *)want, 6 * n) + cmp_u32("simd_int", iout, iwant, 8 * n);
done:
    free(x), free(v), free(out), free(want), free(iout), free(iwant);
    return rc;
}

/* ---- mma_bf16: per SIMD group, D = A B + C for A 16 x 32, B 32 x 8 (two k-steps in a
 * loop, accumulating in variables), and E = A[:, 0:16] B[0:16, :] with C = 0 constants ---- */

#define MM_K 32
#define MM_TILES 4 /* SIMD groups: two threadgroups of 64 threads */

/* tern_mma_bf16's layout: register r of lane (g, t) is A[g + a_row][2t + a_col],
 * B[2t + b_row][g], C[g + c_row][2t + c_col]. */
static int mm_a_row(int r) { return r & 2 ? 8 : 0; }
static int mm_a_col(int r) { return (r & 4 ? 8 : 0) + (r & 1); }
static int mm_b_row(int r) { return (r & 2 ? 8 : 0) + (r & 1); }
static int mm_c_row(int r) { return r & 2 ? 8 : 0; }
static int mm_c_col(int r) { return r & 1; }

/* base + (row + row_off) * ld + col + col_off, as DSL values */
static tern_v mm_index(tern_v base, tern_v row, int row_off, int ld, tern_v col, int col_off) {
    return tern_add(base, tern_add(tern_mul(tern_add(row, tern_int(row_off)), tern_int(ld)),
                                   tern_add(col, tern_int(col_off))));
}

/* Lane (g, t)'s A and B fragments of k-step `step` (a DSL value: 0 or 1). */
static void mm_load(tern_v A, tern_v B, tern_v tile, tern_v g, tern_v t, tern_v step, tern_v a[8], tern_v b[4]) {
    tern_v k0 = tern_mul(step, tern_int(16)), t2 = tern_mul(t, tern_int(2));
    tern_v abase = tern_mul(tile, tern_int(16 * MM_K)), bbase = tern_mul(tile, tern_int(MM_K * 8));
    for (int r = 0; r < 8; r++)
        a[r] = tern_load(A, mm_index(tern_add(abase, k0), g, mm_a_row(r), MM_K, t2, mm_a_col(r)));
    for (int r = 0; r < 4; r++)
        b[r] = tern_load(B, mm_index(tern_add(bbase, tern_mul(k0, tern_int(8))), t2, mm_b_row(r), 8, g, 0));
}

static void mma_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_F32, TERN_READ); /* [tiles][16][32] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_F32, TERN_READ); /* [tiles][32][8] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_F32, TERN_READ); /* [tiles][16][8] */
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE);
    tern_v E = tern_param_buf(kb, "E", TERN_T_F32, TERN_WRITE);
    tern_v lane = tern_simd_lane(kb), tile = tern_div(tern_global_id(kb, 0), tern_int(32));
    tern_v g = tern_div(lane, tern_int(4)), t = tern_rem(lane, tern_int(4)), t2 = tern_mul(t, tern_int(2));
    tern_v cbase = tern_mul(tile, tern_int(16 * 8)), acc[4], a[8], b[4], d[4];
    for (int r = 0; r < 4; r++) {
        char name[8];
        snprintf(name, sizeof name, "acc%d", r);
        acc[r] = tern_var(kb, name, tern_load(C, mm_index(cbase, g, mm_c_row(r), 8, t2, mm_c_col(r))));
    }
    TERN_FOR(kb, step, tern_int(0), tern_int(2), tern_int(1)) {
        mm_load(A, B, tile, g, t, step, a, b);
        tern_mma_bf16(kb, a, b, acc, d);
        for (int r = 0; r < 4; r++) tern_assign(acc[r], d[r]);
    }
    mm_load(A, B, tile, g, t, tern_int(0), a, b);
    const tern_v zero[4] = {tern_f32(0.0f), tern_f32(0.0f), tern_f32(0.0f), tern_int(0)};
    tern_mma_bf16(kb, a, b, zero, d);
    for (int r = 0; r < 4; r++) {
        tern_v at = mm_index(cbase, g, mm_c_row(r), 8, t2, mm_c_col(r));
        tern_store(D, at, acc[r]);
        tern_store(E, at, d[r]);
    }
}

static float bf16_round(float x) { return tern_bf16_to_f32(tern_f32_to_bf16(x)); }

/* want = C + sum over k < K of bf16(A) bf16(B) in double, and bound = the error an f32
 * accumulation of those terms may make: (terms + 1) * 2^-23 * (|C| + sum |products|), the
 * classic bound for a sum of n terms doubled so that accumulators that truncate pass too. */
static void mm_reference(const float *A, const float *B, const float *C, int K, float *want, double *bound) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            double sum = C ? C[i * 8 + j] : 0.0, mag = fabs(sum);
            for (int k = 0; k < K; k++) {
                double p = (double)bf16_round(A[i * MM_K + k]) * bf16_round(B[k * 8 + j]);
                sum += p;
                mag += fabs(p);
            }
            want[i * 8 + j] = (float)sum;
            bound[i * 8 + j] = (K + 2) * ldexp(mag, -23);
        }
}

static int mm_compare(const char *what, const float *got, const float *want, const double *bound, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= bound[i] + 1e-6 * fabs((double)want[i])) && bad++ < 5)
            fprintf(stderr, "  %s[%d]: got %.9g, want %.9g (tolerance %.3g)\n", what, i, got[i], want[i],
                    bound[i]);
    return bad;
}

static int mma_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int na = MM_TILES * 16 * MM_K, nb = MM_TILES * MM_K * 8, nc = MM_TILES * 16 * 8;
    int rc = 0;
    float *A = rand_f32(r, na, -2, 2), *B = rand_f32(r, nb, -2, 2), *C = rand_f32(r, nc, -4, 4);
    float *D = poisoned(4 * nc), *E = poisoned(4 * nc), *wd = malloc(4 * nc), *we = malloc(4 * nc);
    double *bd = malloc(sizeof(double) * nc), *be = malloc(sizeof(double) * nc);
    /* exact ties between two bf16 values, so round-to-nearest-even shows: 1 + 2^-8 rounds
     * down to 1, 1 + 3 * 2^-8 up to 1 + 2^-6 */
    A[0] = 1.00390625f, A[1] = 1.01171875f, B[0] = -1.00390625f, B[9] = 1.01171875f;
    for (int tile = 0; tile < MM_TILES; tile++) {
        const float *a = A + tile * 16 * MM_K, *b = B + tile * MM_K * 8;
        mm_reference(a, b, C + tile * 128, MM_K, wd + tile * 128, bd + tile * 128);
        mm_reference(a, b, NULL, 16, we + tile * 128, be + tile * 128);
    }
    LAUNCH(rt, k, tern_dims1(2), tern_dims1(64), tern_arg_host_in(TERN_T_F32, A, na),
           tern_arg_host_in(TERN_T_F32, B, nb), tern_arg_host_in(TERN_T_F32, C, nc),
           tern_arg_host(TERN_T_F32, D, nc), tern_arg_host(TERN_T_F32, E, nc));
    rc = mm_compare("mma_D", D, wd, bd, nc) + mm_compare("mma_E", E, we, be, nc);
done:
    free(A), free(B), free(C), free(D), free(E), free(wd), free(we), free(bd), free(be);
    return rc;
}

/* ---- load_matrix: per SIMD group, 32 rows of a bf16 tile in threadgroup memory (24
 * elements apart, 16-byte aligned), each lane naming one row start; the eight elements each
 * lane receives, plain and transposed, against the layout in tern/kernel.h ---- */

#define LM_LD 24
#define LM_GROUP (32 * LM_LD) /* elements of one SIMD group's tile */

/* The row start lane l gives: row l, at column 0 or 8. */
static int lm_row_start(int l) { return l * LM_LD + 8 * (l & 1); }

static void load_matrix_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ); /* [groups][32][LM_LD] */
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE); /* [threads][16] */
    tern_v tile = tern_shared(kb, "tile", TERN_T_BF16, 2 * LM_GROUP);
    tern_v lane = tern_simd_lane(kb), sg = tern_simd_group(kb), gid = tern_global_id(kb, 0);
    tern_v local_base = tern_mul(sg, tern_int(LM_GROUP));
    tern_v global_base = tern_mul(tern_div(gid, tern_int(32)), tern_int(LM_GROUP));
    TERN_FOR(kb, e, lane, tern_int(LM_GROUP), tern_int(32)) {
        tern_store(tile, tern_add(local_base, e), tern_load(x, tern_add(global_base, e)));
    }
    tern_barrier(kb);
    tern_v start = tern_add(local_base, tern_add(tern_mul(lane, tern_int(LM_LD)),
                                                 tern_mul(tern_and(lane, tern_int(1)), tern_int(8))));
    tern_v plain[8], transposed[8];
    tern_load_matrix(tile, start, false, plain);
    tern_load_matrix(tile, start, true, transposed);
    tern_v at = tern_mul(gid, tern_int(16));
    tern_store_vec(out, at, 4, plain);
    tern_store_vec(out, tern_add(at, tern_int(4)), 4, plain + 4);
    tern_store_vec(out, tern_add(at, tern_int(8)), 4, transposed);
    tern_store_vec(out, tern_add(at, tern_int(12)), 4, transposed + 4);
}

static int load_matrix_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int groups = 4, threads = 32 * groups, n = groups * LM_GROUP;
    int rc = 0;
    uint16_t *x = malloc(2 * (size_t)n);
    float *out = poisoned(4 * 16 * (size_t)threads), *want = malloc(4 * 16 * (size_t)threads);
    for (int i = 0; i < n; i++) x[i] = tern_f32_to_bf16(uniform(r, -100, 100));
    for (int t = 0; t < threads; t++) {
        const uint16_t *g = x + (t / 32) * LM_GROUP;
        int l = t % 32;
        for (int m = 0; m < 4; m++)
            for (int j = 0; j < 2; j++) {
                /* plain: row l / 4 of matrix m, columns 2 (l % 4) + j; transposed: rows
                 * 2 (l % 4) + j, column l / 4 */
                want[t * 16 + 2 * m + j] = tern_bf16_to_f32(g[lm_row_start(8 * m + l / 4) + 2 * (l % 4) + j]);
                want[t * 16 + 8 + 2 * m + j] = tern_bf16_to_f32(g[lm_row_start(8 * m + 2 * (l % 4) + j) + l / 4]);
            }
    }
    LAUNCH(rt, k, tern_dims1(2), tern_dims1(64), tern_arg_host_in(TERN_T_BF16, x, n),
           tern_arg_host(TERN_T_F32, out, 16 * threads));
    rc = cmp_u32("load_matrix", (uint32_t *)out, (uint32_t *)want, 16 * (size_t)threads);
done:
    free(x), free(out), free(want);
    return rc;
}

/* ---- wgmma_bf16: per warpgroup, D = A B + C for A 64 x 32 (registers), B 32 x 64 (a tile
 * of k rows, as V in O += P V), small integers: exact in any order ---- */

#define WZ_K 32
#define WZ_N 64

static void wgmma_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_F32, TERN_READ);   /* [groups][64][WZ_K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_F32, TERN_READ);   /* [groups][WZ_K][WZ_N] */
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE);  /* [groups][64][WZ_N] */
    tern_v tile = tern_shared_tiles(kb, "tile", WZ_K * WZ_N);
    tern_v tid = tern_local_index(kb), grp = tern_group_id(kb, 0);
    TERN_FOR(kb, e, tid, tern_int(WZ_K * WZ_N), tern_int(128)) {
        tern_v k = tern_div(e, tern_int(WZ_N)), n = tern_rem(e, tern_int(WZ_N));
        tern_store(tile, tern_wg_tile_index(tern_int(0), WZ_K, k, n),
                   tern_load(B, tern_add(tern_mul(grp, tern_int(WZ_K * WZ_N)), e)));
    }
    tern_barrier(kb);
    tern_v lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    tern_v row = tern_add(tern_mul(sg, tern_int(16)), tern_div(lane, tern_int(4)));
    tern_v t2 = tern_mul(tern_rem(lane, tern_int(4)), tern_int(2));
    tern_v a[WZ_K / 2], c[WZ_N / 2], d[WZ_N / 2];
    for (int j = 0; j < WZ_K / 2; j++) { /* tern_mma_bf16's a layout, step j / 8 */
        int r = j % 8;
        tern_v m = tern_add(row, tern_int(r & 2 ? 8 : 0));
        tern_v k = tern_add(t2, tern_int(16 * (j / 8) + (r & 4 ? 8 : 0) + (r & 1)));
        a[j] = tern_load(A, tern_add(tern_mul(grp, tern_int(64 * WZ_K)), tern_add(tern_mul(m, tern_int(WZ_K)), k)));
    }
    for (int j = 0; j < WZ_N / 2; j++) c[j] = tern_f32((float)(j % 3));
    tern_wg_tile b = {tile, tern_int(0), WZ_K, true};
    tern_wgmma_bf16(kb, WZ_N, WZ_K, a, NULL, &b, c, d);
    for (int j = 0; j < WZ_N / 2; j++) {
        tern_v m = tern_add(row, tern_int(j % 4 >= 2 ? 8 : 0));
        tern_v n = tern_add(t2, tern_int(8 * (j / 4) + (j & 1)));
        tern_store(D, tern_add(tern_mul(grp, tern_int(64 * WZ_N)), tern_add(tern_mul(m, tern_int(WZ_N)), n)), d[j]);
    }
}

static int wgmma_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int groups = 2, na = groups * 64 * WZ_K, nb = groups * WZ_K * WZ_N, nd = groups * 64 * WZ_N;
    int rc = 0;
    float *A = malloc(4 * (size_t)na), *B = malloc(4 * (size_t)nb), *D = poisoned(4 * (size_t)nd), *want = malloc(4 * (size_t)nd);
    for (int i = 0; i < na; i++) A[i] = (float)(int)uniform(r, -8, 8);
    for (int i = 0; i < nb; i++) B[i] = (float)(int)uniform(r, -8, 8);
    for (int g = 0; g < groups; g++)
        for (int m = 0; m < 64; m++)
            for (int n = 0; n < WZ_N; n++) {
                /* c[j] = j % 3 for the thread's j = 4 (n / 8) + 2 (m % 16 >= 8) + n % 2 */
                int j = 4 * (n / 8) + 2 * (m % 16 >= 8) + n % 2;
                double acc = j % 3;
                for (int kk = 0; kk < WZ_K; kk++)
                    acc += (double)A[(g * 64 + m) * WZ_K + kk] * B[(g * WZ_K + kk) * WZ_N + n];
                want[(g * 64 + m) * WZ_N + n] = (float)acc;
            }
    LAUNCH(rt, k, tern_dims1(groups), tern_dims1(128), tern_arg_host_in(TERN_T_F32, A, na),
           tern_arg_host_in(TERN_T_F32, B, nb), tern_arg_host(TERN_T_F32, D, nd));
    rc = cmp_u32("wgmma_bf16", (uint32_t *)D, (uint32_t *)want, (size_t)nd);
done:
    free(A), free(B), free(D), free(want);
    return rc;
}

/* ---- atomics: integer ops on global memory, a CAS loop, f32 add ---- */

static void atomics_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v counts = tern_param_buf(kb, "counts", TERN_T_I32, TERN_READ_WRITE);
    tern_v bits = tern_param_buf(kb, "bits", TERN_T_U32, TERN_READ_WRITE);
    tern_v slots = tern_param_buf(kb, "slots", TERN_T_I32, TERN_READ_WRITE);
    tern_v olds = tern_param_buf(kb, "olds", TERN_T_I32, TERN_WRITE);
    tern_v total = tern_param_buf(kb, "total", TERN_T_F32, TERN_READ_WRITE);
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v i = tern_global_id(kb, 0);
    tern_atomic_add(counts, tern_rem(i, tern_int(16)), tern_int(1));
    tern_atomic_max(counts, tern_int(16), i);
    tern_atomic_min(counts, tern_int(17), tern_sub(tern_int(1000), i));
    tern_v u = tern_cast(i, TERN_T_U32);
    tern_atomic_or(bits, tern_int(0), tern_shl(tern_u32(1), tern_and(u, tern_u32(31))));
    tern_atomic_and(bits, tern_int(1), tern_not(tern_shl(tern_u32(1), tern_and(u, tern_u32(15)))));
    tern_atomic_xor(bits, tern_int(2), tern_mul(u, tern_u32(2654435761u)));
    tern_store(olds, i, tern_atomic_xchg(slots, tern_int(0), i));
    /* increment slots[1] with a compare-and-swap loop */
    tern_v expected = tern_var(kb, "expected", tern_load(slots, tern_int(1)));
    TERN_WHILE(kb, tern_bool(true)) {
        tern_v old = tern_atomic_cas(slots, tern_int(1), expected, tern_add(expected, tern_int(1)));
        TERN_IF(kb, tern_eq(old, expected)) { tern_break(kb); }
        tern_assign(expected, old);
    }
    tern_atomic_add(total, tern_int(0), tern_load(xs, i));
}

static int atomics_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 256;
    int rc = 0;
    int32_t counts[18] = {0}, slots[2] = {-5, 10}, *olds = poisoned(4 * n);
    counts[16] = -1, counts[17] = 1 << 30;
    uint32_t bits[3] = {0, 0xffffffffu, 0x5555u};
    float total = 1.5f, *x = rand_f32(r, n, -1, 1);
    LAUNCH(rt, k, tern_dims1(4), tern_dims1(64), tern_arg_host(TERN_T_I32, counts, 18),
           tern_arg_host(TERN_T_U32, bits, 3), tern_arg_host(TERN_T_I32, slots, 2),
           tern_arg_host(TERN_T_I32, olds, n), tern_arg_host(TERN_T_F32, &total, 1),
           tern_arg_host_in(TERN_T_F32, x, n));
    for (int j = 0; j < 16; j++)
        if (counts[j] != n / 16 && rc++ < 5) fprintf(stderr, "  counts[%d] = %d\n", j, counts[j]);
    if (counts[16] != n - 1 || counts[17] != 1000 - (n - 1)) {
        rc++;
        fprintf(stderr, "  max %d, min %d\n", counts[16], counts[17]);
    }
    uint32_t x_want = 0x5555u;
    for (int i = 0; i < n; i++) x_want ^= (uint32_t)i * 2654435761u;
    if (bits[0] != 0xffffffffu || bits[1] != 0xffff0000u || bits[2] != x_want) {
        rc++;
        fprintf(stderr, "  bits %08x %08x %08x\n", bits[0], bits[1], bits[2]);
    }
    /* xchg: the old values and the final one are the initial one and every thread's index */
    int *seen = calloc(n + 1, sizeof *seen);
    seen[slots[0] == -5 ? n : slots[0]]++;
    for (int i = 0; i < n; i++) seen[olds[i] == -5 ? n : (olds[i] >= 0 && olds[i] < n ? olds[i] : 0)]++;
    for (int i = 0; i <= n; i++)
        if (seen[i] != 1 && rc++ < 5) fprintf(stderr, "  xchg value %d seen %d times\n", i, seen[i]);
    free(seen);
    if (slots[1] != 10 + n) {
        rc++;
        fprintf(stderr, "  cas counter %d, want %d\n", slots[1], 10 + n);
    }
    double sum = 1.5;
    for (int i = 0; i < n; i++) sum += x[i];
    /* float additions in any order: 256 terms of size <= 1 round to within 1e-4 */
    if (fabs(total - sum) > 1e-4) {
        rc++;
        fprintf(stderr, "  total %.7g, want %.7g\n", total, sum);
    }
done:
    free(olds), free(x);
    return rc;
}

/* ---- thread attributes in a 3-D launch ---- */

#define GR_OUT 19
static void grid3d_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v out = tern_param_buf(kb, "out", TERN_T_I32, TERN_WRITE);
    tern_v gx = tern_global_id(kb, 0), gy = tern_global_id(kb, 1), gz = tern_global_id(kb, 2);
    tern_v w = tern_mul(tern_group_count(kb, 0), tern_group_size(kb, 0));
    tern_v h = tern_mul(tern_group_count(kb, 1), tern_group_size(kb, 1));
    tern_v linear = tern_add(gx, tern_mul(w, tern_add(gy, tern_mul(h, gz))));
    tern_v vals[GR_OUT] = {
        gx, gy, gz, tern_local_id(kb, 0), tern_local_id(kb, 1), tern_local_id(kb, 2),
        tern_group_id(kb, 0), tern_group_id(kb, 1), tern_group_id(kb, 2),
        tern_group_size(kb, 0), tern_group_size(kb, 1), tern_group_size(kb, 2),
        tern_group_count(kb, 0), tern_group_count(kb, 1), tern_group_count(kb, 2),
        tern_local_index(kb), tern_simd_lane(kb), tern_simd_group(kb), tern_simd_groups(kb),
    };
    for (int j = 0; j < GR_OUT; j++) tern_store(out, tern_add(tern_mul(linear, tern_int(GR_OUT)), tern_int(j)), vals[j]);
}

static int grid3d_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    (void)r;
    const int G[3] = {2, 3, 2}, L[3] = {4, 4, 4};
    const int W = G[0] * L[0], H = G[1] * L[1], D = G[2] * L[2], n = W * H * D;
    int rc = 0;
    int32_t *out = poisoned(4 * GR_OUT * n), *want = malloc(4 * GR_OUT * n);
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int lx = x % L[0], ly = y % L[1], lz = z % L[2];
                int li = lx + L[0] * (ly + L[1] * lz);
                int32_t v[GR_OUT] = {x, y, z, lx, ly, lz, x / L[0], y / L[1], z / L[2], L[0], L[1], L[2],
                                     G[0], G[1], G[2], li, li % 32, li / 32, 2};
                memcpy(want + GR_OUT * (x + W * (y + H * z)), v, sizeof v);
            }
    LAUNCH(rt, k, tern_dims3(2, 3, 2), tern_dims3(4, 4, 4), tern_arg_host(TERN_T_I32, out, (size_t)GR_OUT * n));
    rc = cmp_u32("grid3d", (uint32_t *)out, (uint32_t *)want, (size_t)GR_OUT * n);
done:
    free(out), free(want);
    return rc;
}

/* ---- tern_call: an inlined pure function with a loop ---- */

static void poly_fn(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_v degree = tern_param_scalar(kb, "degree", TERN_T_I32);
    tern_v acc = tern_var(kb, "acc", tern_f32(1.0f));
    TERN_FOR(kb, d, tern_int(0), degree, tern_int(1)) { tern_assign(acc, tern_fma(acc, x, tern_f32(0.5f))); }
    tern_result(kb, acc);
}

static void call_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_kernel *poly = NULL;
    tern_error *err = tern_kernel_build("poly", poly_fn, NULL, &poly);
    if (err) { /* cannot happen; keeps the trace honest if it does */
        tern_print_at(TERN_HERE, kb, tern_error_message(err), 0, NULL);
        tern_error_free(err);
        return;
    }
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = guard(kb, n);
    tern_v y = tern_call(kb, poly, tern_load(xs, i), tern_rem(i, tern_int(5)));
    tern_v z = tern_call(kb, poly, tern_f32(2.0f), tern_int(3)); /* folds to a constant */
    tern_store(out, i, tern_add(y, z));
    tern_end(kb);
    tern_kernel_free(poly);
}

static int call_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = 50;
    int rc = 0;
    float *x = rand_f32(r, n, -2, 2), *out = poisoned(4 * n), *want = malloc(4 * n);
    float z = 1.0f;
    for (int d = 0; d < 3; d++) z = fmaf(z, 2.0f, 0.5f);
    for (int i = 0; i < n; i++) {
        float acc = 1.0f;
        for (int d = 0; d < i % 5; d++) acc = fmaf(acc, x[i], 0.5f);
        want[i] = acc + z;
    }
    LAUNCH(rt, k, tern_dims1(1), tern_dims1(64), tern_arg_host_in(TERN_T_F32, x, n),
           tern_arg_host(TERN_T_F32, out, n), tern_arg_i32(n));
    rc = cmp_f32("call", out, want, n, 0, 0);
done:
    free(x), free(out), free(want);
    return rc;
}

/* ---- print: the output of every thread that runs it ---- */

static void print_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v xs = tern_param_buf(kb, "xs", TERN_T_F32, TERN_READ);
    tern_v i = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(i, tern_int(3))) {
        tern_print(kb, "zoo print i={} x={} big={}\n", i, tern_load(xs, i), tern_u64(1ull << 40));
    }
}

static int print_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    (void)r;
    int rc = 0;
    float x[3] = {1.5f, -2.0f, 0.25f};
    char path[] = "/tmp/tern_zoo_print_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    tern_arg args[] = {tern_arg_host_in(TERN_T_F32, x, 3)};
    tern_error *err = tern_launch(rt, k, tern_dims1(1), tern_dims1(32), args, 1);
    if (!err) err = tern_rt_sync(rt);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    if (err) {
        close(fd);
        unlink(path);
        return fail_call("launch", err);
    }
    char text[4096] = "";
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, text, sizeof text - 1);
    text[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    const char *want[] = {"zoo print i=0 x=1.5 big=1099511627776\n", "zoo print i=1 x=-2 big=1099511627776\n",
                          "zoo print i=2 x=0.25 big=1099511627776\n"};
    for (int j = 0; j < 3; j++)
        if (!strstr(text, want[j])) {
            rc++;
            fprintf(stderr, "  print output lacks '%s'; got:\n%s\n", want[j], text);
        }
    return rc;
}

/* ---- wait_previous and prefetch: a chain of launches, each reading the one before ----
 * out[i] = in[i] * w[i] + 1, w prefetched before the wait, launched CHAIN times on device
 * buffers (a -> b -> a ...) without synchronising: on CUDA each launch may start while the
 * previous one runs, so a wrong wait shows as stale values. Small integers: exact in f32.
 * The result is read by tern_rt_download_async, then two more launches overwrite it before
 * tern_rt_download_wait: the copy must hold the value the launches before it left (cuda
 * copies in the background), and a second download before the wait is an error. */
#define CHAIN 8
#define CHAIN_N 4096

static void chain_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v in = tern_param_buf(kb, "in", TERN_T_F32, TERN_READ);
    tern_v w = tern_param_buf(kb, "w", TERN_T_F32, TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(i, n)) { tern_prefetch(w, i); }
    tern_wait_previous(kb);
    TERN_IF(kb, tern_lt(i, n)) { tern_store(out, i, tern_fma(tern_load(in, i), tern_load(w, i), tern_f32(1.0f))); }
}

static int chain_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    float *x = malloc(CHAIN_N * sizeof *x), *w = malloc(CHAIN_N * sizeof *w), *got = poisoned(CHAIN_N * sizeof *got);
    tern_dbuf buf[3] = {{0}};
    tern_error *err = x && w && got ? NULL : tern_errorf("out of memory");
    for (int j = 0; j < 3 && !err; j++) err = tern_rt_alloc(rt, TERN_T_F32, CHAIN_N, &buf[j]);
    int rc = 0;
    if (!err) {
        for (int i = 0; i < CHAIN_N; i++) x[i] = (float)(next(r) % 3), w[i] = (float)(next(r) % 2) + 1.0f;
        err = tern_rt_upload(rt, buf[0], x);
        if (!err) err = tern_rt_upload(rt, buf[2], w);
    }
    for (int s = 0; s < CHAIN + 2 && !err; s++) {
        tern_arg args[] = {tern_arg_dev(buf[(s + 1) % 2]), tern_arg_dev(buf[s % 2]), tern_arg_dev(buf[2]),
                           tern_arg_i32(CHAIN_N)};
        err = tern_launch(rt, k, tern_dims1(CHAIN_N / 128), tern_dims1(128), args, 4);
        if (err || s != CHAIN - 1) continue;
        /* after CHAIN launches: the result, copied while the next two run (the second
         * overwrites it) */
        err = tern_rt_download_async(rt, got, buf[CHAIN % 2]);
        float one;
        tern_dbuf first = {buf[0].mem, 0, 1, TERN_T_F32};
        tern_error *again = err ? NULL : tern_rt_download_async(rt, &one, first);
        if (!err && (!again || !strstr(tern_error_message(again), "already pending"))) {
            fprintf(stderr, "  chain: a second download_async while one is pending: %s\n",
                    again ? tern_error_message(again) : "no error");
            rc++;
        }
        tern_error_free(again);
    }
    if (!err) err = tern_rt_download_wait(rt);
    if (!err) err = tern_rt_sync(rt);
    if (err) {
        rc = fail_call("chain", err);
    } else {
        for (int s = 0; s < CHAIN; s++)
            for (int i = 0; i < CHAIN_N; i++) x[i] = x[i] * w[i] + 1.0f; /* at most 3 * 2^8 + 2^8 */
        rc += cmp_f32("chain", got, x, CHAIN_N, 0, 1);
    }
    for (int j = 0; j < 3; j++) tern_rt_free(rt, &buf[j]);
    free(x);
    free(w);
    free(got);
    return rc;
}

/* ---- fence_device: the last group finishes ----
 * Each group stores y = 3 x for its elements; after a barrier its thread 0 fences and counts
 * the group in (an atomic add on a device counter); the thread that counts last fences
 * again and tells its group, which sums the whole of y, out[t] = sum of y[j] over j = t mod FN_GROUP, reading what every other group stored,
 * then resets the counter. Launched twice on the same counter (which must come back 0), so
 * a missed reset shows as no group finishing. Integers: exact. */
#define FN_GROUP 64
#define FN_GROUPS 16

static void fence_trace(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_buf(kb, "x", TERN_T_I32, TERN_READ);
    tern_v y = tern_param_buf(kb, "y", TERN_T_I32, TERN_READ_WRITE);
    tern_v counter = tern_param_buf(kb, "counter", TERN_T_I32, TERN_READ_WRITE);
    tern_v out = tern_param_buf(kb, "out", TERN_T_I32, TERN_WRITE);
    tern_v last = tern_shared(kb, "last", TERN_T_I32, 1);
    tern_v i = tern_global_id(kb, 0), t = tern_local_id(kb, 0);
    tern_store(y, i, tern_mul(tern_load(x, i), tern_int(3)));
    tern_barrier(kb);
    TERN_IF(kb, tern_eq(t, tern_int(0))) {
        tern_fence_device(kb);
        tern_v seen = tern_atomic_add(counter, tern_int(0), tern_int(1));
        tern_v is_last = tern_eq(seen, tern_sub(tern_group_count(kb, 0), tern_int(1)));
        TERN_IF(kb, is_last) { tern_fence_device(kb); }
        tern_store(last, tern_int(0), tern_select(is_last, tern_int(1), tern_int(0)));
    }
    tern_barrier(kb);
    TERN_IF(kb, tern_ne(tern_load(last, tern_int(0)), tern_int(0))) {
        tern_v sum = tern_var(kb, "sum", tern_int(0));
        TERN_FOR(kb, j, t, tern_mul(tern_group_count(kb, 0), tern_int(FN_GROUP)), tern_int(FN_GROUP)) {
            tern_assign(sum, tern_add(sum, tern_load(y, j)));
        }
        tern_store(out, t, sum);
        TERN_IF(kb, tern_eq(t, tern_int(0))) { tern_store(counter, tern_int(0), tern_int(0)); }
    }
}

static int fence_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    const int n = FN_GROUP * FN_GROUPS;
    int32_t *x = malloc(4 * (size_t)n), want[FN_GROUP] = {0}, zero = 0, count = -1;
    int32_t *got = poisoned(4 * FN_GROUP);
    tern_dbuf counter = {0}, y = {0};
    tern_error *err = x && got ? NULL : tern_errorf("out of memory");
    if (!err) err = tern_rt_alloc(rt, TERN_T_I32, 1, &counter);
    if (!err) err = tern_rt_alloc(rt, TERN_T_I32, (size_t)n, &y);
    if (!err) err = tern_rt_upload(rt, counter, &zero);
    for (int i = 0; i < n && !err; i++) x[i] = (int32_t)(next(r) % 1000) - 500;
    for (int launch = 0; launch < 2 && !err; launch++) {
        memset(got, 0xff, 4 * FN_GROUP);
        tern_arg args[] = {tern_arg_host_in(TERN_T_I32, x, (size_t)n), tern_arg_dev(y), tern_arg_dev(counter),
                           tern_arg_host(TERN_T_I32, got, FN_GROUP)};
        err = tern_launch(rt, k, tern_dims1(FN_GROUPS), tern_dims1(FN_GROUP), args, 4);
    }
    if (!err) err = tern_rt_download(rt, &count, counter);
    int rc;
    if (err) {
        rc = fail_call("fence_device", err);
    } else {
        for (int i = 0; i < n; i++) want[i % FN_GROUP] += 3 * x[i];
        rc = cmp_u32("fence_device", (uint32_t *)got, (uint32_t *)want, FN_GROUP);
        if (count != 0 && rc++ < 5) fprintf(stderr, "  the counter is %d after the launches, want 0\n", count);
    }
    tern_rt_free(rt, &counter);
    tern_rt_free(rt, &y);
    free(x), free(got);
    return rc;
}

/* ---- copy_async: each thread copies its part of four device arrays into threadgroup memory
 * (u16 by 16 bytes, f32 by 8, u32 by 4, i64 by 16), commits, waits for all of it and meets the
 * others at a barrier; then writes out the part thread 63 - tid copied. Random bits: the
 * bytes must arrive as they were. ---- */
#define CA_GROUP 64

/* out[g][tid][j] = threadgroup copy of x[g][63 - tid][j], `per` elements a thread. */
static void copy_async_part(tern_kb *kb, tern_v x, tern_v out, tern_type elem, int per, const char *name) {
    tern_v tid = tern_local_id(kb, 0), gid = tern_global_id(kb, 0);
    tern_v s = tern_shared(kb, name, elem, (size_t)per * CA_GROUP);
    tern_copy_async(s, tern_mul(tid, tern_int(per)), x, tern_mul(gid, tern_int(per)), per);
    tern_copy_async_commit(kb);
    tern_copy_async_wait(kb, 0);
    tern_barrier(kb);
    tern_v mirror = tern_mul(tern_sub(tern_int(CA_GROUP - 1), tid), tern_int(per));
    for (int j = 0; j < per; j++)
        tern_store(out, tern_add(tern_mul(gid, tern_int(per)), tern_int(j)), tern_load(s, tern_add(mirror, tern_int(j))));
}

static void copy_async_trace(tern_kb *kb, void *user) {
    (void)user;
    static const tern_type types[4] = {TERN_T_U16, TERN_T_F32, TERN_T_U32, TERN_T_I64};
    static const int per[4] = {8, 2, 1, 2};
    static const char *const names[4][3] = {{"h", "oh", "sh"}, {"f", "of", "sf"}, {"u", "ou", "su"}, {"l", "ol", "sl"}};
    tern_v in[4], out[4];
    for (int a = 0; a < 4; a++) in[a] = tern_param_buf(kb, names[a][0], types[a], TERN_READ);
    for (int a = 0; a < 4; a++) out[a] = tern_param_buf(kb, names[a][1], types[a], TERN_WRITE);
    for (int a = 0; a < 4; a++) copy_async_part(kb, in[a], out[a], types[a], per[a], names[a][2]);
}

static int copy_async_run(tern_rt *rt, const tern_kernel *k, zoo_rng *r) {
    enum { GROUPS = 2, T = GROUPS * CA_GROUP };
    static uint16_t h[8 * T], oh[8 * T];
    static float f[2 * T], of[2 * T];
    static uint32_t u[T], ou[T], wu[T], wf[2 * T];
    static uint64_t l[2 * T], ol[2 * T], wl[2 * T];
    static uint16_t wh[8 * T];
    for (int i = 0; i < 8 * T; i++) h[i] = (uint16_t)next(r);
    for (int i = 0; i < 2 * T; i++) {
        uint32_t bits = (uint32_t)next(r) & 0xbfffffffu; /* finite: no NaN to quieten in the check */
        memcpy(&f[i], &bits, 4);
        l[i] = next(r);
    }
    for (int i = 0; i < T; i++) u[i] = (uint32_t)next(r);
    memset(oh, 0xff, sizeof oh), memset(of, 0xff, sizeof of), memset(ou, 0xff, sizeof ou), memset(ol, 0xff, sizeof ol);
    for (int t = 0; t < T; t++) {
        int m = t - t % CA_GROUP + CA_GROUP - 1 - t % CA_GROUP; /* the mirror thread */
        for (int j = 0; j < 8; j++) wh[8 * t + j] = h[8 * m + j];
        for (int j = 0; j < 2; j++) memcpy(&wf[2 * t + j], &f[2 * m + j], 4), wl[2 * t + j] = l[2 * m + j];
        wu[t] = u[m];
    }
    int rc = 0;
    LAUNCH(rt, k, tern_dims1(GROUPS), tern_dims1(CA_GROUP), tern_arg_host_in(TERN_T_U16, h, 8 * T),
           tern_arg_host_in(TERN_T_F32, f, 2 * T), tern_arg_host_in(TERN_T_U32, u, T),
           tern_arg_host_in(TERN_T_I64, l, 2 * T), tern_arg_host(TERN_T_U16, oh, 8 * T),
           tern_arg_host(TERN_T_F32, of, 2 * T), tern_arg_host(TERN_T_U32, ou, T), tern_arg_host(TERN_T_I64, ol, 2 * T));
    for (int i = 0; i < 8 * T; i++)
        if (oh[i] != wh[i] && rc++ < 5) fprintf(stderr, "  copy_async u16[%d]: got 0x%04x, want 0x%04x\n", i, oh[i], wh[i]);
    rc += cmp_u32("copy_async f32", (uint32_t *)of, wf, 2 * T);
    rc += cmp_u32("copy_async u32", ou, wu, T);
    rc += cmp_u64("copy_async i64", ol, wl, 2 * T);
done:
    return rc;
}

/* ---- the table ---- */

const zoo_case zoo_cases[] = {
    {"arith_f32", arith_f32_trace, NULL, arith_f32_run},
    {"math_f32", math_f32_trace, NULL, math_f32_run},
    {"arith_int", arith_int_trace, NULL, arith_int_run},
    {"int64", int64_trace, NULL, int64_run},
    {"casts", casts_trace, NULL, casts_run},
    {"control", control_trace, NULL, control_run},
    {"storage16", storage16_trace, NULL, storage16_run},
    {"vector", vector_trace, NULL, vector_run},
    {"shared", shared_trace, NULL, shared_run},
    {"simd", simd_trace, NULL, simd_run},
    {"mma_bf16", mma_trace, NULL, mma_run},
    {"load_matrix", load_matrix_trace, NULL, load_matrix_run},
    {"wgmma_bf16", wgmma_trace, NULL, wgmma_run},
    {"atomics", atomics_trace, NULL, atomics_run},
    {"grid3d", grid3d_trace, NULL, grid3d_run},
    {"call", call_trace, NULL, call_run},
    {"print", print_trace, NULL, print_run},
    {"wait_previous", chain_trace, NULL, chain_run},
    {"fence_device", fence_trace, NULL, fence_run},
    {"copy_async", copy_async_trace, NULL, copy_async_run},
};
const int zoo_count = sizeof zoo_cases / sizeof *zoo_cases;
