/* tern_wait_previous and tern_prefetch: the rules checked at trace time (top level only; no
 * store to device memory and no exit before the wait; prefetch of readable buffer
 * parameters), purity and inlining, the dump, the three emitters (PTX griddepcontrol and
 * prefetch on CUDA, compiled by NVRTC for sm_90 and sm_80; OpenCL's prefetch; comments on
 * Metal), and runs on the host interpreter (and OpenCL when present) with the results of
 * the same kernel without them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/kernel.h"

#define N 200
#define GROUP 64

/* y[i] = w[i] * x[i] + bias[i / 8], w and bias prefetched before the wait when `pdl`. The
 * threadgroup array is written before the wait (allowed: no other kernel sees it). */
static void axpb(tern_kb *kb, void *user) {
    bool pdl = *(const bool *)user;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    tern_v w = tern_param_buf(kb, "w", TERN_T_BF16, TERN_READ);
    tern_v bias = tern_param_buf(kb, "bias", TERN_T_F32, TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v scratch = tern_shared(kb, "scratch", TERN_T_F32, GROUP);
    tern_v i = tern_global_id(kb, 0), tid = tern_local_id(kb, 0);
    tern_store(scratch, tid, tern_f32(1.0f));
    if (pdl) {
        TERN_IF(kb, tern_lt(i, n)) {
            tern_prefetch(w, i);
            tern_prefetch(bias, tern_div(i, tern_int(8)));
        }
        tern_wait_previous(kb);
        tern_wait_previous(kb); /* a second wait does nothing */
    }
    tern_barrier(kb);
    TERN_IF(kb, tern_lt(i, n)) {
        tern_v v = tern_fma(tern_load(w, i), tern_load(x, i), tern_load(bias, tern_div(i, tern_int(8))));
        tern_store(y, i, tern_mul(v, tern_load(scratch, tid)));
    }
}

/* ---- trace-time rules ---- */

static void t_wait_in_block(tern_kb *kb, void *u) {
    (void)u;
    TERN_IF(kb, tern_lt(tern_global_id(kb, 0), tern_int(4))) { tern_wait_previous(kb); }
}
static void t_wait_after_store(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    TERN_IF(kb, tern_lt(tern_global_id(kb, 0), tern_int(4))) { tern_store(y, tern_global_id(kb, 0), tern_f32(1)); }
    tern_wait_previous(kb);
}
static void t_wait_after_atomic(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_I32, TERN_READ_WRITE);
    tern_atomic_add(y, tern_int(0), tern_int(1));
    tern_wait_previous(kb);
}
static void t_wait_after_exit(tern_kb *kb, void *u) {
    (void)u;
    TERN_IF(kb, tern_lt(tern_global_id(kb, 0), tern_int(4))) { tern_exit(kb); }
    tern_wait_previous(kb);
}
static void t_prefetch_shared(tern_kb *kb, void *u) {
    (void)u;
    tern_prefetch(tern_shared(kb, "s", TERN_T_F32, 32), tern_int(0));
}
static void t_prefetch_write_only(tern_kb *kb, void *u) {
    (void)u;
    tern_prefetch(tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE), tern_int(0));
}
static void t_prefetch_float_index(tern_kb *kb, void *u) {
    (void)u;
    tern_prefetch(tern_param_buf(kb, "x", TERN_T_F32, TERN_READ), tern_f32(1));
}

static void expect_error(const char *name, tern_trace_fn fn, const char *needle) {
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, fn, NULL, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_pdl.c:"),
           "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_rules(void) {
    expect_error("wait_in_block", t_wait_in_block, "wait_previous inside a block");
    expect_error("wait_after_store", t_wait_after_store, "wait_previous after 'store y[");
    expect_error("wait_after_atomic", t_wait_after_atomic, "nothing may write device memory or exit before the wait");
    expect_error("wait_after_exit", t_wait_after_exit, "wait_previous after 'exit'");
    expect_error("prefetch_shared", t_prefetch_shared, "prefetch of threadgroup array 's'");
    expect_error("prefetch_write_only", t_prefetch_write_only, "prefetch on buffer 'y', which is declared TERN_WRITE");
    expect_error("prefetch_float_index", t_prefetch_float_index, "prefetch: the index is f32");
}

/* ---- purity and tern_call ---- */

static void f_waits(tern_kb *kb, void *u) {
    (void)u;
    tern_v a = tern_param_scalar(kb, "a", TERN_T_F32);
    tern_wait_previous(kb);
    tern_result(kb, tern_mul(a, tern_f32(3)));
}
static tern_kernel *g_fn;
static void k_calls(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_READ_WRITE);
    tern_v i = tern_global_id(kb, 0);
    tern_store(y, i, tern_call(kb, g_fn, tern_load(y, i)));
}

static void test_purity_and_call(void) {
    CHECK_OK(tern_kernel_build("f_waits", f_waits, NULL, &g_fn));
    if (!g_fn) return;
    CHECK_OK(tern_kernel_check_pure(g_fn, "zip_with"));
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("k_calls", k_calls, NULL, &k));
    char *dump = k ? tern_kernel_dump(k) : NULL;
    /* the caller loads before the call: inlining the function's wait would break the rule */
    CHECKF(dump && !strstr(dump, "wait_previous") && strstr(dump, "mul"), "%s", dump ? dump : "(null)");
    free(dump);
    tern_kernel_free(k);
    tern_kernel_free(g_fn);
    g_fn = NULL;
}

/* ---- dump and emitters ---- */

static void expect_in(const char *what, const char *text, const char *needle, bool present) {
    bool found = text && strstr(text, needle);
    CHECKF(found == present, "%s %s '%s':\n%s", what, present ? "lacks" : "has", needle, text ? text : "(null)");
}

static void test_text(const tern_kernel *k, const tern_kernel *plain) {
    char *dump = tern_kernel_dump(k);
    expect_in("dump", dump, "prefetch w[", true);
    expect_in("dump", dump, "prefetch bias[", true);
    expect_in("dump", dump, "\n  wait_previous\n", true);
    free(dump);
    CHECK(tern_kernel_hash(k) != tern_kernel_hash(plain));
    char *cu = NULL, *cl = NULL, *mtl = NULL, *cu_plain = NULL;
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_OPENCL, &cl));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_METAL, &mtl));
    CHECK_OK(tern_kernel_emit(plain, TERN_TARGET_CUDA, &cu_plain));
    expect_in("cuda", cu, "asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");", true);
    expect_in("cuda", cu, "#if __CUDA_ARCH__ >= 900", true);
    expect_in("cuda", cu, "tern_wait_previous();", true);
    expect_in("cuda", cu, "tern_prefetch_l2(&w[", true);
    expect_in("cuda", cu, "prefetch.global.L2", true);
    expect_in("cuda", cu, "griddepcontrol.launch_dependents;", true);
    /* every kernel lets its successor launch; only waiting ones get the wait */
    expect_in("cuda (plain)", cu_plain, "griddepcontrol.launch_dependents;", true);
    expect_in("cuda (plain)", cu_plain, "griddepcontrol.wait", false);
    expect_in("cuda (plain)", cu_plain, "prefetch", false);
    expect_in("opencl", cl, "prefetch(&w[", true);
    expect_in("opencl", cl, "/* wait_previous: launches run one after the other */", true);
    expect_in("metal", mtl, "/* prefetch &w[", true);
    expect_in("metal", mtl, "no prefetch on this target */", true);
    expect_in("metal", mtl, "/* wait_previous:", true);
    free(cu);
    free(cl);
    free(mtl);
    free(cu_plain);
    for (int a = 0; a < 2; a++) {
        const char *arch = a ? "sm_80" : "sm_90"; /* sm_80: the wait compiles to nothing */
        void *cubin = NULL;
        size_t size = 0;
        tern_error *err = tern_nvrtc_compile(k, arch, &cubin, &size);
        if (err && strstr(tern_error_message(err), "not built in")) {
            tern_error_free(err);
            break;
        }
        CHECKF(!err && cubin && size > 0, "%s: %s", arch, err ? tern_error_message(err) : "no cubin");
        tern_error_free(err);
        free(cubin);
    }
}

/* ---- runs: the same results with and without ---- */

static void run(tern_rt *rt, const tern_kernel *k, const uint16_t *x, const uint16_t *w, const float *bias,
                float *y) {
    for (int i = 0; i < N; i++) y[i] = -1.0f;
    tern_arg args[] = {tern_arg_host(TERN_T_F32, y, N), tern_arg_host_in(TERN_T_BF16, x, N),
                       tern_arg_host_in(TERN_T_BF16, w, N), tern_arg_host_in(TERN_T_F32, bias, N / 8),
                       tern_arg_i32(N)};
    CHECK_OK(tern_launch(rt, k, tern_dims1((N + GROUP - 1) / GROUP), tern_dims1(GROUP), args, 5));
}

static void test_runs(const char *runtime, const tern_kernel *k, const tern_kernel *plain) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        printf("test_kernel_pdl: %s skipped: %s\n", runtime, tern_error_message(err));
        tern_error_free(err);
        return;
    }
    uint16_t x[N], w[N];
    float bias[N / 8], y[N], want[N];
    for (int i = 0; i < N; i++) {
        x[i] = (uint16_t)(0x3f80 + (i * 37) % 128); /* bf16 numbers in [1, 2) */
        w[i] = (uint16_t)(0xbf80 + (i * 11) % 128); /* and in (-2, -1] */
    }
    for (int i = 0; i < N / 8; i++) bias[i] = (float)i * 0.25f + 0.125f; /* no result is -1 */
    run(rt, plain, x, w, bias, want);
    run(rt, k, x, w, bias, y);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += y[i] != want[i] || want[i] == -1.0f;
    CHECKF(bad == 0, "%s: %d of %d results differ (y[0] = %g, want %g)", runtime, bad, N, y[0], want[0]);
    tern_rt_close(rt);
}

int main(void) {
    test_rules();
    test_purity_and_call();
    bool yes = true, no = false;
    tern_kernel *k = NULL, *plain = NULL;
    CHECK_OK(tern_kernel_build("axpb_pdl", axpb, &yes, &k));
    CHECK_OK(tern_kernel_build("axpb", axpb, &no, &plain));
    if (k && plain) {
        test_text(k, plain);
        test_runs("host", k, plain);
        const char *gpu = getenv("TERN_GPU");
        if (gpu && *gpu && strcmp(gpu, "host")) test_runs(gpu, k, plain);
    }
    tern_kernel_free(k);
    tern_kernel_free(plain);
    return check_summary("test_kernel_pdl");
}
