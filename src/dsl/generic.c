/* The generic operations (build, zip_with, reduce, index_of) on any runtime. Each wraps
 * the user's pure function in a kernel traced here (tern_call inlines it), cached per
 * runtime by the function's hash and the buffers' types; the runtimes compile and cache
 * those like any kernel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/ir.h"
#include "dsl/runtime.h"
#include "tern/half.h"

#define GROUP 256   /* threads per group of every generic kernel */
#define MAX_GROUPS 1024 /* groups of the reduce's first pass */

typedef struct gen_spec {
    const tern_kernel *fn;
    tern_type out, a, b; /* buffer element types */
    tern_type t;         /* reduce / index_of: the value type */
} gen_spec;

/* The 64-bit global index of the calling thread in a 1-D launch. */
static tern_v index64(tern_kb *kb) {
    tern_v g = tern_cast(tern_group_id(kb, 0), TERN_T_I64);
    tern_v s = tern_cast(tern_group_size(kb, 0), TERN_T_I64);
    return tern_name(tern_add(tern_mul(g, s), tern_cast(tern_local_id(kb, 0), TERN_T_I64)), "i");
}

/* v as a value of type t (the conversions tern_cast makes; none when it already is one). */
static tern_v convert(tern_v v, tern_type t) { return tern_cast(v, t); }

/* The buffer a pure function's parameter takes (fn param p's type). */
static tern_type param_type(const tern_kernel *fn, int p) { return tern_kernel_param(fn, p).type; }

/* ---- the wrapper kernels ---- */

static void build_trace(tern_kb *kb, void *user) {
    const gen_spec *s = user;
    tern_v out = tern_param_buf(kb, "out", s->out, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I64);
    tern_v i = index64(kb);
    TERN_IF(kb, tern_lt(i, n)) {
        tern_v arg = param_type(s->fn, 0) == TERN_T_I64 ? i : tern_cast(i, TERN_T_I32);
        tern_store(out, i, convert(tern_call(kb, s->fn, arg), tern_type_value(s->out)));
    }
}

static void zip_trace(tern_kb *kb, void *user) {
    const gen_spec *s = user;
    tern_v out = tern_param_buf(kb, "out", s->out, TERN_WRITE);
    tern_v a = tern_param_buf(kb, "a", s->a, TERN_READ);
    tern_v b = tern_param_buf(kb, "b", s->b, TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I64);
    tern_v i = index64(kb);
    TERN_IF(kb, tern_lt(i, n)) {
        tern_v r = tern_call(kb, s->fn, tern_load(a, i), tern_load(b, i));
        tern_store(out, i, convert(r, tern_type_value(s->out)));
    }
}

/* Combines the value in `acc` (valid when `got`) with x: acc = got ? fn(acc, x) : x. */
static void fold(tern_kb *kb, const tern_kernel *fn, tern_v acc, tern_v got, tern_v x) {
    TERN_IF(kb, got) { tern_assign(acc, tern_call(kb, fn, acc, x)); }
    TERN_ELSE(kb) { tern_assign(acc, x); }
    tern_assign(got, tern_bool(true));
}

/* The tree over a group's GROUP slots (vals, with flags in has), result in slot 0. */
static void group_tree(tern_kb *kb, const tern_kernel *fn, tern_v vals, tern_v has, tern_v tid) {
    for (int s = GROUP / 2; s > 0; s /= 2) {
        TERN_IF(kb, tern_lt(tid, tern_int(s))) {
            tern_v other = tern_add(tid, tern_int(s));
            TERN_IF(kb, tern_ne(tern_load(has, other), tern_int(0))) {
                tern_v mine = tern_load(vals, tid), theirs = tern_load(vals, other);
                TERN_IF(kb, tern_ne(tern_load(has, tid), tern_int(0))) { tern_store(vals, tid, tern_call(kb, fn, mine, theirs)); }
                TERN_ELSE(kb) { tern_store(vals, tid, theirs); }
                tern_store(has, tid, tern_int(1));
            }
        }
        tern_barrier(kb);
    }
}

/* Pass 1: each group folds a strided part of a into partial[group] (has: any element). */
static void reduce1_trace(tern_kb *kb, void *user) {
    const gen_spec *s = user;
    tern_v a = tern_param_buf(kb, "a", s->a, TERN_READ);
    tern_v partial = tern_param_buf(kb, "partial", s->t, TERN_WRITE);
    tern_v has = tern_param_buf(kb, "has", TERN_T_I32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I64);
    tern_v vals = tern_shared(kb, "vals", s->t, GROUP);
    tern_v flags = tern_shared(kb, "flags", TERN_T_I32, GROUP);
    tern_v tid = tern_local_id(kb, 0);
    tern_v stride = tern_mul(tern_cast(tern_group_count(kb, 0), TERN_T_I64), tern_i64(GROUP));
    tern_v acc = tern_var(kb, "acc", convert(tern_int(0), s->t));
    tern_v got = tern_var(kb, "got", tern_bool(false));
    TERN_FOR(kb, i, index64(kb), n, stride) { fold(kb, s->fn, acc, got, tern_load(a, i)); }
    tern_store(vals, tid, acc);
    tern_store(flags, tid, tern_cast(got, TERN_T_I32));
    tern_barrier(kb);
    group_tree(kb, s->fn, vals, flags, tid);
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        tern_store(partial, tern_group_id(kb, 0), tern_load(vals, tern_int(0)));
        tern_store(has, tern_group_id(kb, 0), tern_load(flags, tern_int(0)));
    }
}

/* Pass 2: one group folds the partials, then init: result[0] = fn(init, total). */
static void reduce2_trace(tern_kb *kb, void *user) {
    const gen_spec *s = user;
    tern_v partial = tern_param_buf(kb, "partial", s->t, TERN_READ);
    tern_v has = tern_param_buf(kb, "has", TERN_T_I32, TERN_READ);
    tern_v count = tern_param_scalar(kb, "count", TERN_T_I32);
    tern_v init = tern_param_scalar(kb, "init", s->t);
    tern_v result = tern_param_buf(kb, "result", s->t, TERN_WRITE);
    tern_v vals = tern_shared(kb, "vals", s->t, GROUP);
    tern_v flags = tern_shared(kb, "flags", TERN_T_I32, GROUP);
    tern_v tid = tern_local_id(kb, 0);
    tern_v acc = tern_var(kb, "acc", convert(tern_int(0), s->t));
    tern_v got = tern_var(kb, "got", tern_bool(false));
    TERN_FOR(kb, i, tid, count, tern_int(GROUP)) {
        TERN_IF(kb, tern_ne(tern_load(has, i), tern_int(0))) { fold(kb, s->fn, acc, got, tern_load(partial, i)); }
    }
    tern_store(vals, tid, acc);
    tern_store(flags, tid, tern_cast(got, TERN_T_I32));
    tern_barrier(kb);
    group_tree(kb, s->fn, vals, flags, tid);
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        TERN_IF(kb, tern_ne(tern_load(flags, tern_int(0)), tern_int(0))) {
            tern_store(result, tern_int(0), tern_call(kb, s->fn, init, tern_load(vals, tern_int(0))));
        }
        TERN_ELSE(kb) { tern_store(result, tern_int(0), init); }
    }
}

static void index_of_trace(tern_kb *kb, void *user) {
    const gen_spec *s = user;
    tern_v a = tern_param_buf(kb, "a", s->a, TERN_READ);
    tern_v value = tern_param_scalar(kb, "value", s->t);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I64);
    tern_v first = tern_param_buf(kb, "first", TERN_T_U32, TERN_READ_WRITE);
    tern_v i = index64(kb);
    TERN_IF(kb, tern_land(tern_lt(i, n), tern_eq(tern_load(a, tern_min(i, tern_sub(n, tern_int(1)))), value))) {
        tern_atomic_min(first, tern_int(0), tern_cast(i, TERN_T_U32));
    }
}

/* ---- shared checks ---- */

static tern_error *check_fn(const tern_kernel *fn, const char *op, int params) {
    TERN_TRY(tern_kernel_check_pure(fn, op));
    if (fn->nparams != params)
        return tern_errorf("%s: kernel '%s' takes %d parameters; %s passes %d", op, fn->name, fn->nparams, op, params);
    return NULL;
}

static tern_error *check_buf(const tern_arg *b, const char *op, const char *what) {
    if (b->kind == TERN_ARG_SCALAR || !ir_type_is_storage(b->type))
        return tern_errorf("%s: %s must be a buffer of a numeric element type", op, what);
    if (b->len > 0 && !b->mem) return tern_errorf("%s: %s is an invalid view", op, what);
    return NULL;
}

/* The wrapper kernel for (op, spec), traced on first use. */
static tern_error *wrapper(tern_rt *rt, const char *op, tern_trace_fn trace, gen_spec *s, const tern_kernel **out) {
    char key[160], name[64];
    snprintf(key, sizeof key, "%s|%016llx|%s|%d|%d|%d|%d", op, (unsigned long long)s->fn->hash, s->fn->name,
             s->out, s->a, s->b, s->t);
    snprintf(name, sizeof name, "%s_%.40s", op, s->fn->name);
    return rt_wrapper_get(rt, key, name, trace, s, out);
}

static tern_dims groups_for(size_t n) {
    size_t g = (n + GROUP - 1) / GROUP;
    return tern_dims1((uint32_t)(g ? g : 1));
}

/* ---- the operations ---- */

tern_error *tern_rt_build(tern_rt *rt, tern_arg out, const tern_kernel *fn) {
    if (!rt) return tern_errorf("build: the runtime is NULL");
    TERN_TRY(check_fn(fn, "build", 1));
    TERN_TRY(check_buf(&out, "build", "out"));
    tern_type it = param_type(fn, 0);
    if (it != TERN_T_I32 && it != TERN_T_I64)
        return tern_errorf("build: kernel '%s' must take its index as i32 or i64, not %s", fn->name, tern_type_name(it));
    if (it == TERN_T_I32 && out.len > (size_t)INT32_MAX)
        return tern_errorf("build: kernel '%s' takes an i32 index but out has %zu elements", fn->name, out.len);
    if (out.len == 0) return NULL;
    if (out.len / GROUP >= (size_t)INT32_MAX) return tern_errorf("build: out is too large");
    gen_spec s = {fn, out.type, TERN_T_VOID, TERN_T_VOID, TERN_T_VOID};
    const tern_kernel *k;
    TERN_TRY(wrapper(rt, "build", build_trace, &s, &k));
    tern_arg args[] = {out, tern_arg_i64((int64_t)out.len)};
    return tern_error_wrap(tern_launch(rt, k, groups_for(out.len), tern_dims1(GROUP), args, 2), "build");
}

tern_error *tern_rt_zip_with(tern_rt *rt, tern_arg out, tern_arg a, tern_arg b, const tern_kernel *fn) {
    if (!rt) return tern_errorf("zip_with: the runtime is NULL");
    TERN_TRY(check_fn(fn, "zip_with", 2));
    TERN_TRY(check_buf(&out, "zip_with", "out"));
    TERN_TRY(check_buf(&a, "zip_with", "a"));
    TERN_TRY(check_buf(&b, "zip_with", "b"));
    if (a.len != out.len || b.len != out.len)
        return tern_errorf("zip_with: out, a and b have %zu, %zu and %zu elements; they must be equal", out.len,
                           a.len, b.len);
    for (int p = 0; p < 2; p++) {
        tern_type want = tern_type_value(p ? b.type : a.type);
        if (param_type(fn, p) != want)
            return tern_errorf("zip_with: kernel '%s' parameter %d is %s but %s holds %s values", fn->name, p + 1,
                               tern_type_name(param_type(fn, p)), p ? "b" : "a", tern_type_name(want));
    }
    if (out.len == 0) return NULL;
    if (out.len / GROUP >= (size_t)INT32_MAX) return tern_errorf("zip_with: out is too large");
    gen_spec s = {fn, out.type, a.type, b.type, TERN_T_VOID};
    const tern_kernel *k;
    TERN_TRY(wrapper(rt, "zip_with", zip_trace, &s, &k));
    tern_arg args[] = {out, a, b, tern_arg_i64((int64_t)out.len)};
    return tern_error_wrap(tern_launch(rt, k, groups_for(out.len), tern_dims1(GROUP), args, 4), "zip_with");
}

/* A scalar argument of value type t holding x (converted as tern_cast would). */
static tern_arg scalar_of(tern_type t, double x) {
    switch (t) {
    case TERN_T_F32: return tern_arg_f32((float)x);
    case TERN_T_I32: return tern_arg_i32(x != x ? 0 : x <= INT32_MIN ? INT32_MIN : x >= INT32_MAX ? INT32_MAX : (int32_t)x);
    case TERN_T_U32: return tern_arg_u32(x != x || x <= 0 ? 0 : x >= UINT32_MAX ? UINT32_MAX : (uint32_t)x);
    case TERN_T_I64: return tern_arg_i64(x != x ? 0 : x <= -9.2233720368547758e18 ? INT64_MIN : x >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)x);
    default: return tern_arg_u64(x != x || x <= 0 ? 0 : x >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)x);
    }
}

static double value_as_double(tern_type t, const void *p) {
    switch (t) {
    case TERN_T_F32: return *(const float *)p;
    case TERN_T_I32: return *(const int32_t *)p;
    case TERN_T_U32: return *(const uint32_t *)p;
    case TERN_T_I64: return (double)*(const int64_t *)p;
    default: return (double)*(const uint64_t *)p;
    }
}

tern_error *tern_rt_reduce(tern_rt *rt, tern_arg a, double init, const tern_kernel *fn, double *out) {
    if (!rt || !out) return tern_errorf("reduce: %s is NULL", rt ? "out" : "the runtime");
    TERN_TRY(check_fn(fn, "reduce", 2));
    TERN_TRY(check_buf(&a, "reduce", "a"));
    tern_type t = tern_type_value(a.type);
    if (param_type(fn, 0) != t || param_type(fn, 1) != t || tern_kernel_result_type(fn) != t)
        return tern_errorf("reduce: kernel '%s' must take two %s and return one, as a holds %s values", fn->name,
                           tern_type_name(t), tern_type_name(t));
    if (a.len == 0) {
        /* nothing to combine: init, as the buffer's value type holds it */
        tern_arg v = scalar_of(t, init);
        *out = t == TERN_T_F32 ? (double)(float)v.value.f : t == TERN_T_I32 || t == TERN_T_I64 ? (double)v.value.i
                                                                                                : (double)v.value.u;
        return NULL;
    }
    if (a.len / GROUP >= (size_t)INT32_MAX) return tern_errorf("reduce: a is too large");
    gen_spec s = {fn, TERN_T_VOID, a.type, TERN_T_VOID, t};
    const tern_kernel *k1, *k2;
    TERN_TRY(wrapper(rt, "reduce", reduce1_trace, &s, &k1));
    TERN_TRY(wrapper(rt, "reduce_final", reduce2_trace, &s, &k2));
    size_t groups = (a.len + GROUP - 1) / GROUP;
    if (groups > MAX_GROUPS) groups = MAX_GROUPS;
    tern_dbuf partial = {0}, has = {0}, result = {0};
    tern_error *err = tern_rt_alloc(rt, t, groups, &partial);
    if (!err) err = tern_rt_alloc(rt, TERN_T_I32, groups, &has);
    if (!err) err = tern_rt_alloc(rt, t, 1, &result);
    if (!err) {
        tern_arg args[] = {a, tern_arg_dev(partial), tern_arg_dev(has), tern_arg_i64((int64_t)a.len)};
        err = tern_launch(rt, k1, tern_dims1((uint32_t)groups), tern_dims1(GROUP), args, 4);
    }
    if (!err) {
        tern_arg args[] = {tern_arg_dev(partial), tern_arg_dev(has), tern_arg_i32((int32_t)groups), scalar_of(t, init),
                           tern_arg_dev(result)};
        err = tern_launch(rt, k2, tern_dims1(1), tern_dims1(GROUP), args, 5);
    }
    unsigned char value[8] = {0};
    if (!err) err = tern_rt_download(rt, value, result);
    if (!err) *out = value_as_double(t, value);
    tern_rt_free(rt, &partial);
    tern_rt_free(rt, &has);
    tern_rt_free(rt, &result);
    return tern_error_wrap(err, "reduce");
}

/* value as the buffer holds it (rounded to f16/bf16, ...), or false when no element of
 * that type can equal it (an integer buffer and 2.5, or a value out of range). */
static bool value_in_type(tern_type elem, double value, tern_arg *out) {
    tern_type t = tern_type_value(elem);
    if (t != TERN_T_F32) {
        if (value != floor(value)) return false;
        double lo = t == TERN_T_I32 ? INT32_MIN : t == TERN_T_I64 ? -9.2233720368547758e18 : 0;
        double hi = elem == TERN_T_U16 ? UINT16_MAX : t == TERN_T_I32 ? INT32_MAX : t == TERN_T_U32 ? UINT32_MAX
                  : t == TERN_T_I64 ? 9.2233720368547758e18 : 1.8446744073709552e19;
        if (value < lo || value > hi) return false;
        *out = scalar_of(t, value);
        return true;
    }
    float f = (float)value;
    /* round through the storage type, so a value given in double finds its element */
    if (elem == TERN_T_BF16) f = tern_bf16_to_f32(tern_f32_to_bf16(f));
    if (elem == TERN_T_F16) f = tern_f16_to_f32(tern_f32_to_f16(f));
    *out = tern_arg_f32(f);
    return f == f; /* NaN equals nothing */
}

tern_error *tern_rt_index_of(tern_rt *rt, tern_arg a, double value, int64_t *out) {
    if (!rt || !out) return tern_errorf("index_of: %s is NULL", rt ? "out" : "the runtime");
    *out = -1;
    TERN_TRY(check_buf(&a, "index_of", "a"));
    if (a.len >= UINT32_MAX) return tern_errorf("index_of: buffers of 2^32 - 1 or more elements are not supported");
    tern_arg v;
    if (a.len == 0 || !value_in_type(a.type, value, &v)) return NULL;
    gen_spec s = {NULL, TERN_T_VOID, a.type, TERN_T_VOID, tern_type_value(a.type)};
    char key[64];
    snprintf(key, sizeof key, "index_of|%d", a.type);
    const tern_kernel *k;
    TERN_TRY(rt_wrapper_get(rt, key, "index_of", index_of_trace, &s, &k));
    tern_dbuf first = {0};
    uint32_t none = UINT32_MAX, found = UINT32_MAX;
    tern_error *err = tern_rt_alloc(rt, TERN_T_U32, 1, &first);
    if (!err) err = tern_rt_upload(rt, first, &none);
    if (!err) {
        tern_arg args[] = {a, v, tern_arg_i64((int64_t)a.len), tern_arg_dev(first)};
        err = tern_launch(rt, k, groups_for(a.len), tern_dims1(GROUP), args, 4);
    }
    if (!err) err = tern_rt_download(rt, &found, first);
    if (!err) *out = found == UINT32_MAX ? -1 : (int64_t)found;
    tern_rt_free(rt, &first);
    return tern_error_wrap(err, "index_of");
}
