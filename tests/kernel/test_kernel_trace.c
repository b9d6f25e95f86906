/* The DSL's rejections: type errors at trace time (naming the kernel and the C line),
 * misuse of blocks, purity, launch argument checks, and the host interpreter's run-time
 * checks (bounds, divergent barriers, division by zero, alignment). Also the dump, the
 * hash and the compiler-log parsing that maps a target's error to a DSL statement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dsl/compile_error.h"
#include "tern/kernel.h"

/* Builds a kernel from `fn` and expects an error containing the kernel name, `needle`
 * and this file's name (the C line of the offending call). */
static void expect_trace_error(const char *name, tern_trace_fn fn, const char *needle) {
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, fn, NULL, &k);
    CHECKF(err != NULL, "kernel %s built; expected an error with '%s'", name, needle);
    if (!err) {
        tern_kernel_free(k);
        return;
    }
    const char *msg = tern_error_message(err);
    char quoted[96];
    snprintf(quoted, sizeof quoted, "kernel '%s'", name);
    CHECKF(strstr(msg, quoted) && strstr(msg, needle), "%s: '%s' lacks '%s' or the kernel name", name, msg, needle);
    CHECKF(strstr(msg, "test_kernel_trace.c:") != NULL, "%s: '%s' names no source line", name, msg);
    CHECK(k == NULL);
    tern_error_free(err);
}

#define P_F32(kb, n) tern_param_buf(kb, n, TERN_T_F32, TERN_READ_WRITE)
#define GID(kb) tern_global_id(kb, 0)

static void t_mixed(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x");
    tern_store(x, GID(kb), tern_add(tern_load(x, GID(kb)), GID(kb)));
}
static void t_exp_int(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x");
    tern_store(x, GID(kb), tern_cast(tern_exp(GID(kb)), TERN_T_F32));
}
static void t_store_type(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_I32, TERN_WRITE);
    tern_store(y, GID(kb), tern_f32(1.0f));
}
static void t_load_write_only(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_store(y, GID(kb), tern_load(y, tern_int(0)));
}
static void t_store_read_only(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_READ);
    tern_store(y, GID(kb), tern_f32(0));
}
static void t_atomic_f16(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F16, TERN_READ_WRITE);
    tern_atomic_add(y, GID(kb), tern_f32(1));
}
static void t_atomic_min_f32(tern_kb *kb, void *u) {
    (void)u;
    tern_atomic_min(P_F32(kb, "y"), GID(kb), tern_f32(1));
}
static void t_atomic_read_only(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_I32, TERN_READ);
    tern_atomic_add(y, GID(kb), tern_int(1));
}
static void t_scope(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x");
    tern_v inner = tern_f32(0);
    TERN_IF(kb, tern_lt(GID(kb), tern_int(3))) { inner = tern_load(x, GID(kb)); }
    tern_store(x, GID(kb), inner);
}
static void t_unclosed(tern_kb *kb, void *u) {
    (void)u;
    tern_if(kb, tern_bool(true));
}
static void t_else_alone(tern_kb *kb, void *u) {
    (void)u;
    tern_else(kb);
    tern_end(kb);
}
static void t_break_outside(tern_kb *kb, void *u) {
    (void)u;
    tern_break(kb);
}
static void t_if_int(tern_kb *kb, void *u) {
    (void)u;
    TERN_IF(kb, GID(kb)) {}
}
static void t_literal_range(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_U32, TERN_WRITE);
    tern_store(y, GID(kb), tern_add(tern_cast(GID(kb), TERN_T_U32), tern_int(-1)));
}
static void t_poison(tern_kb *kb, void *u) {
    (void)u;
    tern_v folded = tern_add(tern_f32(1.0f), tern_i32(2)); /* no kernel here yet */
    tern_store(P_F32(kb, "x"), GID(kb), folded);
}
static void t_bad_name(tern_kb *kb, void *u) {
    (void)u;
    tern_param_buf(kb, "2x", TERN_T_F32, TERN_READ);
}
static void t_dup_name(tern_kb *kb, void *u) {
    (void)u;
    tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_param_scalar(kb, "x", TERN_T_I32);
}
static void t_vec_width(tern_kb *kb, void *u) {
    (void)u;
    tern_v out[4];
    tern_load_vec(P_F32(kb, "x"), tern_int(0), 3, out);
}
static void t_simd_bool(tern_kb *kb, void *u) {
    (void)u;
    tern_simd_sum(tern_lt(GID(kb), tern_int(4)));
}
static void t_shuffle_lane(tern_kb *kb, void *u) {
    (void)u;
    tern_simd_shuffle(tern_load(P_F32(kb, "x"), GID(kb)), tern_f32(1));
}
/* An MMA's fragments, 16 values per thread from buffer x. */
static void mma_fragments(tern_kb *kb, tern_v x, tern_v a[8], tern_v b[4], tern_v c[4]) {
    for (int j = 0; j < 8; j++) a[j] = tern_load(x, tern_add(tern_mul(GID(kb), tern_int(16)), tern_int(j)));
    for (int j = 0; j < 4; j++) b[j] = tern_load(x, tern_add(tern_mul(GID(kb), tern_int(16)), tern_int(8 + j)));
    for (int j = 0; j < 4; j++) c[j] = tern_load(x, tern_add(tern_mul(GID(kb), tern_int(16)), tern_int(12 + j)));
}
static void t_mma_int(tern_kb *kb, void *u) {
    (void)u;
    tern_v a[8], b[4], c[4], d[4];
    mma_fragments(kb, P_F32(kb, "x"), a, b, c);
    b[2] = GID(kb);
    tern_mma_bf16(kb, a, b, c, d);
}
static void t_mma_bool(tern_kb *kb, void *u) {
    (void)u;
    tern_v a[8], b[4], c[4], d[4];
    mma_fragments(kb, P_F32(kb, "x"), a, b, c);
    c[3] = tern_lt(GID(kb), tern_int(3));
    tern_mma_bf16(kb, a, b, c, d);
}
static void t_mma_null_a(tern_kb *kb, void *u) {
    (void)u;
    tern_v a[8], b[4], c[4], d[4];
    mma_fragments(kb, P_F32(kb, "x"), a, b, c);
    tern_mma_bf16(kb, NULL, b, c, d);
}
static void t_mma_null_d(tern_kb *kb, void *u) {
    (void)u;
    tern_v a[8], b[4], c[4];
    mma_fragments(kb, P_F32(kb, "x"), a, b, c);
    tern_mma_bf16(kb, a, b, c, NULL);
}
static void t_mma_unset(tern_kb *kb, void *u) {
    (void)u;
    tern_v a[8], b[4], c[4], d[4];
    mma_fragments(kb, P_F32(kb, "x"), a, b, c);
    memset(&a[5], 0, sizeof a[5]);
    tern_mma_bf16(kb, a, b, c, d);
}
static void t_print_holes(tern_kb *kb, void *u) {
    (void)u;
    tern_print(kb, "{} and {}", GID(kb));
}
static void t_after_result(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_result(kb, x);
    tern_add(x, x);
}
static void t_result_in_block(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    TERN_IF(kb, tern_gt(x, tern_f32(0))) { tern_result(kb, x); }
}
static void t_step_zero(tern_kb *kb, void *u) {
    (void)u;
    TERN_FOR(kb, i, tern_int(0), tern_int(4), tern_int(0)) {}
}
static void t_float_bounds(tern_kb *kb, void *u) {
    (void)u;
    TERN_FOR(kb, i, tern_f32(0), tern_f32(4), tern_f32(1)) {}
}
static void t_shared_big(tern_kb *kb, void *u) {
    (void)u;
    tern_shared(kb, "big", TERN_T_F32, 1u << 20);
}
static void t_assign_type(tern_kb *kb, void *u) {
    (void)u;
    tern_v v = tern_var(kb, "acc", tern_f32(0));
    tern_assign(v, GID(kb));
}
static void t_bitcast_size(tern_kb *kb, void *u) {
    (void)u;
    tern_bitcast(tern_load(P_F32(kb, "x"), GID(kb)), TERN_T_I64);
}
static void t_max_threads(tern_kb *kb, void *u) {
    (void)u;
    tern_max_threads(kb, 2000);
}
static void t_min_groups_alone(tern_kb *kb, void *u) {
    (void)u;
    tern_min_groups(kb, 2);
}
static void t_min_groups_range(tern_kb *kb, void *u) {
    (void)u;
    tern_max_threads(kb, 64);
    tern_min_groups(kb, 33);
}
static void k_bounded(tern_kb *kb, void *u) {
    (void)u;
    tern_max_threads(kb, 64);
    if (u) tern_min_groups(kb, *(const int *)u);
    tern_store(P_F32(kb, "x"), GID(kb), tern_f32(1));
}
static void t_zero_value(tern_kb *kb, void *u) {
    (void)u;
    tern_v nothing;
    memset(&nothing, 0, sizeof nothing);
    tern_store(P_F32(kb, "x"), GID(kb), nothing);
}

/* A function that prints: not pure. */
static void f_prints(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_print(kb, "x={}\n", x);
    tern_result(kb, x);
}
static tern_kernel *g_impure;
static void t_call_impure(tern_kb *kb, void *u) {
    (void)u;
    tern_call(kb, g_impure, tern_f32(1));
}

static void test_trace_errors(void) {
    expect_trace_error("mixed", t_mixed, "add of f32 and i32: operand types differ");
    expect_trace_error("exp_int", t_exp_int, "exp is not defined for i32");
    expect_trace_error("store_type", t_store_type, "is f32, expected i32");
    expect_trace_error("load_write_only", t_load_write_only, "declared TERN_WRITE");
    expect_trace_error("store_read_only", t_store_read_only, "declared TERN_READ");
    expect_trace_error("atomic_f16", t_atomic_f16, "atomics take i32 or u32 buffers");
    expect_trace_error("atomic_min_f32", t_atomic_min_f32, "atomic_min on f32 buffer 'y'");
    expect_trace_error("atomic_read_only", t_atomic_read_only, "declare it TERN_READ_WRITE");
    expect_trace_error("scope", t_scope, "outside the block it was made in");
    expect_trace_error("unclosed", t_unclosed, "never closed");
    expect_trace_error("else_alone", t_else_alone, "else must come right after an if");
    expect_trace_error("break_outside", t_break_outside, "break outside a loop");
    expect_trace_error("if_int", t_if_int, "is i32, expected bool");
    expect_trace_error("literal_range", t_literal_range, "the literal -1 does not fit u32");
    expect_trace_error("poison", t_poison, "constant expression add(f32, i32)");
    expect_trace_error("bad_name", t_bad_name, "not a C identifier");
    expect_trace_error("dup_name", t_dup_name, "already a parameter");
    expect_trace_error("vec_width", t_vec_width, "widths are 2 or 4");
    expect_trace_error("simd_bool", t_simd_bool, "simd_sum of bool");
    expect_trace_error("shuffle_lane", t_shuffle_lane, "must be i32 or u32");
    expect_trace_error("mma_int", t_mma_int, "mma_bf16's b[2] is i32, expected f32");
    expect_trace_error("mma_bool", t_mma_bool, "mma_bf16's c[3] is bool, expected f32");
    expect_trace_error("mma_null_a", t_mma_null_a, "mma_bf16: a is NULL");
    expect_trace_error("mma_null_d", t_mma_null_d, "mma_bf16: d is NULL");
    expect_trace_error("mma_unset", t_mma_unset, "mma_bf16's a[5] is not a value");
    expect_trace_error("print_holes", t_print_holes, "the format has 2 {} for 1 values");
    expect_trace_error("after_result", t_after_result, "after tern_result");
    expect_trace_error("result_in_block", t_result_in_block, "tern_result inside a block");
    expect_trace_error("step_zero", t_step_zero, "the step must be positive");
    expect_trace_error("float_bounds", t_float_bounds, "they must be integers");
    expect_trace_error("shared_big", t_shared_big, "threadgroup memory is limited");
    expect_trace_error("assign_type", t_assign_type, "is i32, expected f32");
    expect_trace_error("bitcast_size", t_bitcast_size, "the types must have the same size");
    expect_trace_error("zero_value", t_zero_value, "not a value");
    expect_trace_error("max_threads", t_max_threads, "max_threads: 2000 is not in 1..1024");
    expect_trace_error("min_groups_alone", t_min_groups_alone, "min_groups needs tern_max_threads");
    expect_trace_error("min_groups", t_min_groups_range, "min_groups: 33 is not in 1..32");
    CHECK_OK(tern_kernel_build("prints", f_prints, NULL, &g_impure));
    expect_trace_error("call_impure", t_call_impure, "kernel 'prints' is not pure: it calls print");
    tern_kernel_free(g_impure);

    tern_kernel *k = NULL;
    CHECK_ERR(tern_kernel_build("kernel", t_mixed, NULL, &k), "keyword or builtin");
    CHECK_ERR(tern_kernel_build("no spaces", t_mixed, NULL, &k), "not a C identifier");
    CHECK_ERR(tern_kernel_build("nothing", NULL, NULL, &k), "trace function is NULL");
    CHECK(k == NULL);
}

/* ---- purity ---- */

static void p_pure(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_result(kb, tern_mul(x, tern_f32(2)));
}
static void p_store(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = P_F32(kb, "y");
    tern_store(y, tern_int(0), tern_f32(1));
    tern_result(kb, tern_f32(1));
}
static void p_atomic(tern_kb *kb, void *u) {
    (void)u;
    tern_result(kb, tern_cast(tern_atomic_add(tern_param_buf(kb, "c", TERN_T_I32, TERN_READ_WRITE), tern_int(0), tern_int(1)), TERN_T_F32));
}
static void p_barrier(tern_kb *kb, void *u) {
    (void)u;
    tern_barrier(kb);
    tern_result(kb, tern_f32(1));
}
static void p_fence(tern_kb *kb, void *u) {
    (void)u;
    tern_fence_device(kb);
    tern_result(kb, tern_f32(1));
}
static void p_thread(tern_kb *kb, void *u) {
    (void)u;
    tern_result(kb, tern_cast(GID(kb), TERN_T_F32));
}
static void p_mma(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_v a[8] = {x, x, x, x, x, x, x, x}, b[4] = {x, x, x, x}, c[4] = {x, x, x, x}, d[4];
    tern_mma_bf16(kb, a, b, c, d);
    tern_result(kb, d[0]);
}
static void p_no_result(tern_kb *kb, void *u) {
    (void)u;
    tern_param_scalar(kb, "x", TERN_T_F32);
}

static void expect_impure(const char *name, tern_trace_fn fn, const char *needle) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, fn, NULL, &k));
    if (!k) return;
    tern_error *err = tern_kernel_check_pure(k, "zip_with");
    CHECKF(err != NULL, "%s passed the purity check", name);
    if (err) {
        char want[128];
        snprintf(want, sizeof want, "zip_with: kernel '%s' is not ", name);
        CHECKF(strstr(tern_error_message(err), want) && strstr(tern_error_message(err), needle),
               "'%s' lacks '%s' / '%s'", tern_error_message(err), want, needle);
        tern_error_free(err);
    }
    tern_kernel_free(k);
}

static void test_purity(void) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("twice", p_pure, NULL, &k));
    CHECK_OK(tern_kernel_check_pure(k, "build"));
    CHECK(tern_kernel_is_function(k) && tern_kernel_result_type(k) == TERN_T_F32);
    tern_kernel_free(k);
    expect_impure("prints", f_prints, "pure: it calls print");
    expect_impure("stores", p_store, "pure: it stores to buffer 'y'");
    expect_impure("atomics_fn", p_atomic, "pure: it uses atomics");
    expect_impure("barriers", p_barrier, "pure: it uses a barrier");
    expect_impure("fences", p_fence, "pure: it uses a memory fence");
    expect_impure("threads", p_thread, "pure: it reads the thread attribute global_id");
    expect_impure("mma_fn", p_mma, "pure: it uses SIMD-group operations");
    expect_impure("no_result", p_no_result, "a function: it has no tern_result");
}

/* ---- launches: argument checks and the interpreter's run-time checks ---- */

static void k_scale(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    TERN_IF(kb, tern_lt(GID(kb), n)) { tern_store(y, GID(kb), tern_mul(tern_load(x, GID(kb)), tern_f32(2))); }
}
static void k_oob(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x");
    tern_store(x, GID(kb), tern_load(x, tern_add(GID(kb), tern_int(1)))); /* the last thread reads past the end */
}
static void k_divergent_barrier(tern_kb *kb, void *u) {
    (void)u;
    TERN_IF(kb, tern_lt(tern_local_id(kb, 0), tern_int(16))) { tern_barrier(kb); }
}
static void k_divergent_simd(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x");
    TERN_IF(kb, tern_lt(tern_simd_group(kb), tern_int(1))) { tern_store(x, GID(kb), tern_simd_sum(tern_load(x, GID(kb)))); }
}
static void k_mma(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x"), a[8], b[4], c[4];
    mma_fragments(kb, x, a, b, c);
    tern_mma_bf16(kb, a, b, c, c); /* d may be c */
    tern_store(x, GID(kb), tern_add(c[0], c[3]));
}
static void k_divergent_mma(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = P_F32(kb, "x"), a[8], b[4], c[4], d[4];
    TERN_IF(kb, tern_lt(tern_simd_group(kb), tern_int(1))) {
        mma_fragments(kb, x, a, b, c);
        tern_mma_bf16(kb, a, b, c, d);
        tern_store(x, GID(kb), d[0]);
    }
}
static void k_div_zero(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_I32, TERN_READ_WRITE);
    tern_store(y, GID(kb), tern_div(tern_int(7), tern_load(y, GID(kb))));
}
static void k_misaligned(tern_kb *kb, void *u) {
    (void)u;
    tern_v v[4];
    tern_load_vec(P_F32(kb, "x"), tern_add(tern_mul(GID(kb), tern_int(4)), tern_int(2)), 4, v);
}
static void k_runtime_step(tern_kb *kb, void *u) {
    (void)u;
    tern_v s = tern_param_scalar(kb, "s", TERN_T_I32);
    TERN_FOR(kb, i, tern_int(0), tern_int(4), s) {}
}

static void test_launch_checks(tern_rt *rt) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("scale", k_scale, NULL, &k));
    float x[64] = {0}, y[64];
    tern_arg ok[] = {tern_arg_host_in(TERN_T_F32, x, 64), tern_arg_host(TERN_T_F32, y, 64), tern_arg_i32(64)};
    CHECK_OK(tern_launch(rt, k, tern_dims1(2), tern_dims1(32), ok, 3));
    CHECK_ERR(tern_launch(rt, k, tern_dims1(2), tern_dims1(32), ok, 2), "kernel 'scale' takes 3 arguments, 2 given");
    tern_arg scalar_for_buf[] = {tern_arg_i32(1), ok[1], ok[2]};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(32), scalar_for_buf, 3),
              "argument 1 ('x') must be a f32 buffer, given a i32 scalar");
    int32_t ints[64];
    tern_arg wrong_elem[] = {tern_arg_host_in(TERN_T_I32, ints, 64), ok[1], ok[2]};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(32), wrong_elem, 3), "given a i32 host array");
    tern_arg read_only[] = {ok[0], tern_arg_host_in(TERN_T_F32, y, 64), ok[2]};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(32), read_only, 3), "passed read-only");
    tern_arg wrong_scalar[] = {ok[0], ok[1], tern_arg_f32(64)};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(32), wrong_scalar, 3),
              "argument 3 ('n') must be a i32 scalar, given a f32 scalar");
    tern_dbuf bad = {NULL, 0, 64, TERN_T_F32};
    tern_arg bad_view[] = {tern_arg_dev(bad), ok[1], ok[2]};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(32), bad_view, 3), "invalid view");
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(2048), ok, 3), "more than 1024 threads");
    CHECK_ERR(tern_launch(rt, k, tern_dims1(0), tern_dims1(32), ok, 3), "empty grid");
    tern_kernel_free(k);

    CHECK_OK(tern_kernel_build("twice", p_pure, NULL, &k));
    CHECK_ERR(tern_launch(rt, k, tern_dims1(1), tern_dims1(32), NULL, 0), "is a function");
    tern_kernel_free(k);

    CHECK_OK(tern_kernel_build("bounded", k_bounded, NULL, &k));
    float b[256];
    tern_arg bs[] = {tern_arg_host(TERN_T_F32, b, 256)};
    CHECK_OK(tern_launch(rt, k, tern_dims1(4), tern_dims1(64), bs, 1));
    CHECK_ERR(tern_launch(rt, k, tern_dims1(2), tern_dims1(128), bs, 1), "the kernel declares at most 64");
    tern_kernel_free(k);
    /* the occupancy hint reaches CUDA's launch bounds and changes the kernel's identity */
    int groups = 3;
    tern_kernel *hinted = NULL;
    CHECK_OK(tern_kernel_build("bounded", k_bounded, NULL, &k));
    CHECK_OK(tern_kernel_build("bounded", k_bounded, &groups, &hinted));
    if (k && hinted) {
        char *plain = NULL, *cu = NULL;
        CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &plain));
        CHECK_OK(tern_kernel_emit(hinted, TERN_TARGET_CUDA, &cu));
        CHECK(plain && strstr(plain, "__launch_bounds__(64) bounded("));
        CHECK(cu && strstr(cu, "__launch_bounds__(64, 3) bounded("));
        CHECK(tern_kernel_hash(k) != tern_kernel_hash(hinted));
        free(plain);
        free(cu);
    }
    tern_kernel_free(hinted);
    tern_kernel_free(k);

    CHECK_OK(tern_kernel_build("divergent_simd", k_divergent_simd, NULL, &k));
    float z[96] = {0};
    tern_arg zs[] = {tern_arg_host(TERN_T_F32, z, 96)};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(2), tern_dims1(48), zs, 1), "multiple of 32");
    tern_kernel_free(k);

    /* an MMA needs whole SIMD groups too; its dump names the fragments */
    CHECK_OK(tern_kernel_build("mma", k_mma, NULL, &k));
    static float mx[96 * 16];
    tern_arg ms[] = {tern_arg_host(TERN_T_F32, mx, 96 * 16)};
    CHECK_ERR(tern_launch(rt, k, tern_dims1(2), tern_dims1(48), ms, 1), "multiple of 32");
    CHECK_OK(tern_launch(rt, k, tern_dims1(3), tern_dims1(32), ms, 1));
    char *dump = tern_kernel_dump(k);
    CHECKF(dump && strstr(dump, "..+3: f32 = mma_bf16 a {") && strstr(dump, "}, b {") && strstr(dump, "}, c {"),
           "dump:\n%s", dump ? dump : "(null)");
    free(dump);
    tern_kernel_free(k);
}

/* The interpreter's checks (host runtime only: GPUs do not check). */
static void expect_run_error(tern_rt *rt, const char *name, tern_trace_fn fn, tern_arg arg, tern_dims group,
                             const char *needle) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, fn, NULL, &k));
    if (!k) return;
    tern_error *err = tern_launch(rt, k, tern_dims1(2), group, &arg, (size_t)tern_kernel_param_count(k));
    CHECKF(err && strstr(tern_error_message(err), needle) && strstr(tern_error_message(err), name) &&
               strstr(tern_error_message(err), "test_kernel_trace.c:"),
           "%s: got '%s', want '%s'", name, err ? tern_error_message(err) : "success", needle);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_interpreter_checks(tern_rt *rt) {
    float x[128] = {0};
    int32_t zeros[128] = {0};
    expect_run_error(rt, "oob", k_oob, tern_arg_host(TERN_T_F32, x, 64), tern_dims1(32),
                     "load from 'x' at index 64 is out of bounds (64 elements) in thread (31,0,0) of threadgroup (1,0,0)");
    expect_run_error(rt, "divergent_barrier", k_divergent_barrier, tern_arg_host(TERN_T_F32, x, 64), tern_dims1(32),
                     "barrier reached by 16 of the 32 threads");
    expect_run_error(rt, "divergent_simd", k_divergent_simd, tern_arg_host(TERN_T_F32, x, 128), tern_dims1(64),
                     "simd_sum reached by 32 of the 64 threads");
    static float m[128 * 16];
    expect_run_error(rt, "divergent_mma", k_divergent_mma, tern_arg_host(TERN_T_F32, m, 128 * 16), tern_dims1(64),
                     "mma_bf16 reached by 32 of the 64 threads");
    expect_run_error(rt, "div_zero", k_div_zero, tern_arg_host(TERN_T_I32, zeros, 128), tern_dims1(32),
                     "integer division by zero");
    expect_run_error(rt, "misaligned", k_misaligned, tern_arg_host(TERN_T_F32, x, 128), tern_dims1(8),
                     "is not aligned to 4 elements");
    expect_run_error(rt, "runtime_step", k_runtime_step, tern_arg_i32(0), tern_dims1(32), "step is not positive");
}

/* ---- dump, hash, names ---- */

static void h_const(tern_kb *kb, void *u) {
    float f = *(const float *)u;
    tern_v x = P_F32(kb, "x");
    tern_v float_ = tern_name(tern_mul(tern_load(x, GID(kb)), tern_f32(f)), "float");
    tern_store(x, GID(kb), float_);
}

static void test_dump_hash_names(void) {
    float a = 2, b = 3;
    tern_kernel *k1 = NULL, *k2 = NULL, *k3 = NULL;
    CHECK_OK(tern_kernel_build("h", h_const, &a, &k1));
    CHECK_OK(tern_kernel_build("h", h_const, &a, &k2));
    CHECK_OK(tern_kernel_build("h", h_const, &b, &k3));
    if (!k1 || !k2 || !k3) goto done;
    CHECK(tern_kernel_hash(k1) == tern_kernel_hash(k2));
    CHECK(tern_kernel_hash(k1) != tern_kernel_hash(k3)); /* a different baked-in constant */
    char *dump = tern_kernel_dump(k1);
    CHECKF(dump && strstr(dump, "kernel h(x: f32* read_write)") && strstr(dump, "mul") && strstr(dump, "store x["),
           "dump:\n%s", dump ? dump : "(null)");
    free(dump);
    /* a user name that is a keyword is renamed in every target */
    for (int t = 0; t < 3; t++) {
        char *src = NULL;
        CHECK_OK(tern_kernel_emit(k1, (tern_target)t, &src));
        CHECKF(src && strstr(src, " v_float = ") && !strstr(src, " float = "), "%s source:\n%s",
               tern_target_name((tern_target)t), src ? src : "");
        free(src);
    }
    CHECK(tern_kernel_param_count(k1) == 1);
    tern_param_info p = tern_kernel_param(k1, 0);
    CHECK(!strcmp(p.name, "x") && p.is_buffer && p.type == TERN_T_F32 && p.intent == TERN_READ_WRITE);
done:
    tern_kernel_free(k1);
    tern_kernel_free(k2);
    tern_kernel_free(k3);
}

/* ---- target compiler errors mapped to statements ---- */

static void test_compile_errors(void) {
    char msg[256];
    CHECK(compile_log_first_error("warning: x\n<source>:12:5: error: expected ';'\nmore", msg, sizeof msg) == 12);
    CHECK(!strcmp(msg, "expected ';'"));
    CHECK(compile_log_first_error("k.cu(7): error: identifier \"q\" is undefined\n", msg, sizeof msg) == 7);
    CHECK(!strcmp(msg, "identifier \"q\" is undefined"));
    CHECK(compile_log_first_error("7 errors generated.\n", msg, sizeof msg) == 0);
    float two = 2;
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("h", h_const, &two, &k));
    if (!k) return;
    /* line 3 of the source comes from instruction 2 in this made-up map */
    int32_t lines[5] = {-1, -1, -1, 2, -1};
    tern_error *err = compile_error(k, "cuda (nvrtc)", "h.cu(4): error: something broke\n", lines, 4);
    CHECKF(strstr(tern_error_message(err), "kernel 'h': the cuda (nvrtc) compiler failed on statement '") &&
               strstr(tern_error_message(err), "(test_kernel_trace.c:") &&
               strstr(tern_error_message(err), "): something broke"),
           "%s", tern_error_message(err));
    tern_error_free(err);
    void *image = NULL;
    size_t size = 0;
    err = tern_nvrtc_compile(k, "sm_1x;", &image, &size);
    CHECK(err && (strstr(tern_error_message(err), "not a CUDA architecture") ||
                  strstr(tern_error_message(err), "not built in")));
    CHECK(image == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

/* ---- tern_fence_device: dump and the three emitters ---- */

static void k_fence(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = P_F32(kb, "y");
    tern_v i = GID(kb);
    tern_store(y, i, tern_f32(1));
    tern_fence_device(kb);
    tern_store(y, tern_add(i, tern_int(1)), tern_load(y, i)); /* the load stays after the fence */
}

static void test_fence_text(void) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("fenced", k_fence, NULL, &k));
    if (!k) return;
    char *dump = tern_kernel_dump(k), *src[3] = {NULL, NULL, NULL};
    CHECKF(dump && strstr(dump, "\n  fence_device\n"), "%s", dump ? dump : "(null)");
    const tern_target targets[3] = {TERN_TARGET_CUDA, TERN_TARGET_OPENCL, TERN_TARGET_METAL};
    const char *want[3] = {"__threadfence();", "mem_fence(CLK_GLOBAL_MEM_FENCE);",
                           "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);"};
    for (int t = 0; t < 3; t++) {
        CHECK_OK(tern_kernel_emit(k, targets[t], &src[t]));
        const char *fence = src[t] ? strstr(src[t], want[t]) : NULL;
        CHECKF(fence && strstr(fence, "y[global_x]"), "target %d lacks '%s' before the load:\n%s", t, want[t],
               src[t] ? src[t] : "(null)");
        free(src[t]);
    }
    free(dump);
    tern_kernel_free(k);
}

int main(void) {
    test_trace_errors();
    test_purity();
    test_fence_text();
    test_dump_hash_names();
    test_compile_errors();
    tern_rt *rt = NULL;
    CHECK_ERR(tern_rt_open("vulkan", &rt), "unknown GPU runtime 'vulkan'");
    CHECK_OK(tern_rt_open("host", &rt));
    if (rt) {
        test_launch_checks(rt);
        test_interpreter_checks(rt);
        tern_rt_close(rt);
    }
    return check_summary("test_kernel_trace");
}
