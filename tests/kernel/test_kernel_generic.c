/* The generic operations (build, zip_with, reduce, index_of) on the runtime TERN_GPU names,
 * and through the host functions the cpu handler calls, against plain C. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/half.h"
#include "tern/kernel.h"

/* i -> i * i / 2 (i64 index, f32 result) */
static void f_square(tern_kb *kb, void *u) {
    (void)u;
    tern_v i = tern_param_scalar(kb, "i", TERN_T_I64);
    tern_v x = tern_cast(i, TERN_T_F32);
    tern_result(kb, tern_mul(tern_mul(x, x), tern_f32(0.5f)));
}
/* i -> i % 7 - 3 (i32 index, i32 result, stored into a u16 or f32 buffer) */
static void f_mod(tern_kb *kb, void *u) {
    (void)u;
    tern_v i = tern_param_scalar(kb, "i", TERN_T_I32);
    tern_result(kb, tern_sub(tern_rem(i, tern_int(7)), tern_int(3)));
}
/* (x, y) -> x * y + 1 with a loop inside */
static void f_combine(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_v y = tern_param_scalar(kb, "y", TERN_T_F32);
    tern_v acc = tern_var(kb, "acc", tern_f32(1.0f));
    TERN_FOR(kb, k, tern_int(0), tern_int(2), tern_int(1)) { tern_assign(acc, tern_fma(x, y, acc)); }
    tern_result(kb, acc);
}
static void f_add_f32(tern_kb *kb, void *u) {
    (void)u;
    tern_result(kb, tern_add(tern_param_scalar(kb, "a", TERN_T_F32), tern_param_scalar(kb, "b", TERN_T_F32)));
}
static void f_max_i32(tern_kb *kb, void *u) {
    (void)u;
    tern_result(kb, tern_max(tern_param_scalar(kb, "a", TERN_T_I32), tern_param_scalar(kb, "b", TERN_T_I32)));
}
static void f_add_u32(tern_kb *kb, void *u) {
    (void)u;
    tern_result(kb, tern_add(tern_param_scalar(kb, "a", TERN_T_U32), tern_param_scalar(kb, "b", TERN_T_U32)));
}
static void f_scale_print(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_scalar(kb, "x", TERN_T_F32);
    tern_v y = tern_param_scalar(kb, "y", TERN_T_F32);
    tern_print(kb, "x={}\n", x);
    tern_result(kb, tern_mul(x, y));
}

static tern_kernel *build(const char *name, tern_trace_fn fn) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, fn, NULL, &k));
    return k;
}

static void test_on_runtime(tern_rt *rt) {
    tern_kernel *square = build("square", f_square), *mod = build("mod7", f_mod), *comb = build("combine", f_combine);
    tern_kernel *add = build("add_f32", f_add_f32), *mx = build("max_i32", f_max_i32), *addu = build("add_u32", f_add_u32);
    tern_kernel *printing = build("scale", f_scale_print);
    if (!square || !mod || !comb || !add || !mx || !addu || !printing) goto done;
    enum { N = 1000 };
    /* build into f32 and into bf16 (the result converts to the buffer's type) */
    float *f = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N), *h = malloc(sizeof(float) * N);
    uint16_t *bf = malloc(2 * N), *u16 = malloc(2 * N);
    int32_t *ints = malloc(4 * N);
    memset(f, 0xff, sizeof(float) * N);
    memset(bf, 0xff, 2 * N);
    memset(u16, 0xff, 2 * N);
    CHECK_OK(tern_rt_build(rt, tern_arg_host(TERN_T_F32, f, N), square));
    CHECK_OK(tern_rt_build(rt, tern_arg_host(TERN_T_BF16, bf, N), square));
    CHECK_OK(tern_rt_build(rt, tern_arg_host(TERN_T_U16, u16, N), mod));
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = (float)i * (float)i * 0.5f;
        bad += f[i] != want || bf[i] != tern_f32_to_bf16(want) || u16[i] != (uint16_t)(i % 7 - 3);
    }
    CHECKF(bad == 0, "build: %d mismatches", bad);
    /* zip_with */
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i % 13) * 0.25f - 1.0f;
        h[i] = NAN;
    }
    CHECK_OK(tern_rt_zip_with(rt, tern_arg_host(TERN_T_F32, h, N), tern_arg_host_in(TERN_T_F32, f, N),
                              tern_arg_host_in(TERN_T_F32, g, N), comb));
    bad = 0;
    for (int i = 0; i < N; i++) bad += h[i] != fmaf(f[i], g[i], fmaf(f[i], g[i], 1.0f));
    CHECKF(bad == 0, "zip_with: %d mismatches", bad);
    CHECK_ERR(tern_rt_zip_with(rt, tern_arg_host(TERN_T_F32, h, N), tern_arg_host_in(TERN_T_F32, f, N),
                               tern_arg_host_in(TERN_T_F32, g, N), printing),
              "zip_with: kernel 'scale' is not pure: it calls print");
    CHECK_ERR(tern_rt_zip_with(rt, tern_arg_host(TERN_T_F32, h, N), tern_arg_host_in(TERN_T_F32, f, N - 1),
                               tern_arg_host_in(TERN_T_F32, g, N), comb), "must be equal");
    CHECK_ERR(tern_rt_zip_with(rt, tern_arg_host(TERN_T_F32, h, N), tern_arg_host_in(TERN_T_I32, ints, N),
                               tern_arg_host_in(TERN_T_F32, g, N), comb), "holds i32 values");
    CHECK_ERR(tern_rt_build(rt, tern_arg_host(TERN_T_F32, f, N), comb), "takes 2 parameters; build passes 1");
    /* reduce: a float sum (any order: tolerance), an exact integer max and u32 sum */
    double sum = 0, got = 0;
    for (int i = 0; i < N; i++) sum += g[i];
    CHECK_OK(tern_rt_reduce(rt, tern_arg_host_in(TERN_T_F32, g, N), 2.5, add, &got));
    /* 1000 terms of size <= 2 in f32, any order: within 1e-3 */
    CHECKF(fabs(got - (sum + 2.5)) < 1e-3, "reduce sum %.7g, want %.7g", got, sum + 2.5);
    for (int i = 0; i < N; i++) ints[i] = (int32_t)((i * 7919) % 1000) - 500;
    ints[617] = 4242;
    CHECK_OK(tern_rt_reduce(rt, tern_arg_host_in(TERN_T_I32, ints, N), -1e9, mx, &got));
    CHECKF(got == 4242, "reduce max %g", got);
    CHECK_OK(tern_rt_reduce(rt, tern_arg_host_in(TERN_T_I32, ints, 0), 17, mx, &got));
    CHECKF(got == 17, "reduce of nothing gives init: %g", got);
    static uint32_t big[300000];
    uint64_t usum = 5;
    for (uint32_t i = 0; i < 300000; i++) {
        big[i] = i * 2654435761u;
        usum += big[i];
    }
    CHECK_OK(tern_rt_reduce(rt, tern_arg_host_in(TERN_T_U32, big, 300000), 5, addu, &got));
    CHECKF(got == (double)(uint32_t)usum, "reduce u32 sum %.0f, want %u (more groups than one pass takes)", got,
           (uint32_t)usum);
    CHECK_ERR(tern_rt_reduce(rt, tern_arg_host_in(TERN_T_I32, ints, N), 0, add, &got), "must take two i32");
    /* index_of: first occurrence, absent, values no element can equal, bf16 rounding */
    int64_t at = 0;
    ints[700] = 4242;
    CHECK_OK(tern_rt_index_of(rt, tern_arg_host_in(TERN_T_I32, ints, N), 4242, &at));
    CHECK(at == 617);
    CHECK_OK(tern_rt_index_of(rt, tern_arg_host_in(TERN_T_I32, ints, N), 99999, &at));
    CHECK(at == -1);
    CHECK_OK(tern_rt_index_of(rt, tern_arg_host_in(TERN_T_I32, ints, N), 2.5, &at));
    CHECK(at == -1);
    CHECK_OK(tern_rt_index_of(rt, tern_arg_host_in(TERN_T_F32, g, N), NAN, &at));
    CHECK(at == -1);
    bf[333] = tern_f32_to_bf16(0.1f);
    CHECK_OK(tern_rt_index_of(rt, tern_arg_host_in(TERN_T_BF16, bf, N), 0.1, &at));
    CHECKF(at == 333 || (at >= 0 && at < 333 && bf[at] == bf[333]), "index_of bf16 0.1: %lld", (long long)at);
    free(f), free(g), free(h), free(bf), free(u16), free(ints);
done:
    tern_kernel_free(square), tern_kernel_free(mod), tern_kernel_free(comb), tern_kernel_free(add);
    tern_kernel_free(mx), tern_kernel_free(addu), tern_kernel_free(printing);
}

/* The cpu handler's path: tern_bufs of host memory, views with offsets. */
static void test_host_functions(void) {
    tern_kernel *mod = build("mod7", f_mod), *add = build("add_f32", f_add_f32);
    if (!mod || !add) goto done;
    float storage[110];
    for (int i = 0; i < 110; i++) storage[i] = -7.0f;
    tern_buf whole = {storage, 0, 110, TERN_F32};
    tern_buf view = tern_view(whole, 5, 100);
    CHECK_OK(tern_host_build(view, mod));
    int bad = 0;
    for (int i = 0; i < 110; i++) bad += storage[i] != (i < 5 || i >= 105 ? -7.0f : (float)((i - 5) % 7 - 3));
    CHECKF(bad == 0, "host build into a view: %d mismatches", bad);
    double got = 0;
    CHECK_OK(tern_host_reduce(view, 0, add, &got));
    double want = 0;
    for (int i = 0; i < 100; i++) want += (i % 7 - 3);
    CHECKF(got == want, "host reduce %g, want %g", got, want);
    int64_t at = -5;
    CHECK_OK(tern_host_index_of(view, 3, &at));
    CHECK(at == 6);
    CHECK_OK(tern_host_zip_with(view, view, view, add));
    CHECK(storage[5] == -6.0f && storage[104] == 2 * (float)(99 % 7 - 3));
    tern_buf invalid = tern_view(whole, 100, 20);
    CHECK_ERR(tern_host_build(invalid, mod), "invalid view");
done:
    tern_kernel_free(mod);
    tern_kernel_free(add);
}

int main(void) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(NULL, &rt);
    if (err) {
        fprintf(stderr, "%s\n", tern_error_message(err));
        tern_error_free(err);
        return 1;
    }
    printf("runtime %s\n", tern_rt_name(rt));
    test_on_runtime(rt);
    test_on_runtime(rt); /* again: the wrapper kernels come from the runtime's cache */
    tern_rt_close(rt);
    test_host_functions();
    return check_summary("test_kernel_generic");
}
