/* tern_copy_async, tern_copy_async_commit and tern_copy_async_wait: the builder's checks
 * (each naming the operation, the kernel and the line), purity, the dump and the hash, the
 * three emitters (PTX cp.async on CUDA, compiled by NVRTC for sm_90, sm_80 and for sm_75,
 * where the copy falls back to a plain one; copies made at once on OpenCL and Metal), the
 * host interpreter's bounds and alignment checks, and a double-buffered kernel run on the
 * interpreter (and on TERN_GPU's runtime when it names another: OpenCL under ctest),
 * compared with plain C exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/half.h"
#include "tern/kernel.h"

#define GROUP 64  /* threads per threadgroup */
#define GROUPS 3
#define TILES 5   /* tiles per group: odd, so the last tile lands in buffer 0 */
#define XT 512    /* bf16 elements of a tile of x: 16 bytes a thread */
#define YT 256    /* f32 elements of a tile of y: 16 bytes a thread */

/* ---- the double-buffered kernel ----
 * Group g reads tiles g*TILES .. g*TILES+TILES-1 of x (bf16) and y (f32). Tile t+1 is copied
 * into one half of the threadgroup arrays while tile t is read from the other; thread `tid`
 * copies its own 16 bytes of each tile (in one, two or four copies, depending on the thread:
 * the copies are per thread, not collectives) and reads those of thread 63 - tid, so every
 * value read crossed from another thread's copy through the wait and the barrier. out[tid of
 * group g] = sum over t of (t + 1) * (its mirror's 8 elements of x's tile t), out[GROUPS *
 * GROUP + ...] the same over y: small integers, exact in f32 in any order. */

typedef struct db_opts {
    int pending; /* the wait's count: 1 (tile t landed, t + 1 may be in flight) or 0 (all) */
} db_opts;

typedef struct db_ctx {
    tern_kb *kb;
    tern_v x, y, xs, ys, tid, group;
} db_ctx;

/* `total` elements from src[src_at] to dst[dst_at] in `parts` copies. */
static void copy_parts(tern_v dst, tern_v dst_at, tern_v src, tern_v src_at, int total, int parts) {
    int n = total / parts;
    for (int p = 0; p < parts; p++)
        tern_copy_async(dst, tern_add(dst_at, tern_int(p * n)), src, tern_add(src_at, tern_int(p * n)), n);
}

/* This thread's copies of tile `tile` into the half tile % 2 of xs and ys: 8 bf16 in 1, 2 or 4
 * copies (16, 8, 4 bytes) by tid % 4, 4 f32 in 1, 2 or 4 copies by tid % 3. */
static void stage(const db_ctx *d, tern_v tile) {
    tern_kb *kb = d->kb;
    tern_v half = tern_rem(tile, tern_int(2));
    tern_v global_tile = tern_add(tern_mul(d->group, tern_int(TILES)), tile);
    tern_v xdst = tern_add(tern_mul(half, tern_int(XT)), tern_mul(d->tid, tern_int(8)));
    tern_v xsrc = tern_add(tern_mul(global_tile, tern_int(XT)), tern_mul(d->tid, tern_int(8)));
    tern_v rx = tern_rem(d->tid, tern_int(4));
    TERN_IF(kb, tern_lor(tern_eq(rx, tern_int(0)), tern_eq(rx, tern_int(3)))) { copy_parts(d->xs, xdst, d->x, xsrc, 8, 1); }
    TERN_ELSE(kb) {
        TERN_IF(kb, tern_eq(rx, tern_int(1))) { copy_parts(d->xs, xdst, d->x, xsrc, 8, 2); }
        TERN_ELSE(kb) { copy_parts(d->xs, xdst, d->x, xsrc, 8, 4); }
    }
    tern_v ydst = tern_add(tern_mul(half, tern_int(YT)), tern_mul(d->tid, tern_int(4)));
    tern_v ysrc = tern_add(tern_mul(global_tile, tern_int(YT)), tern_mul(d->tid, tern_int(4)));
    tern_v ry = tern_rem(d->tid, tern_int(3));
    TERN_IF(kb, tern_eq(ry, tern_int(0))) { copy_parts(d->ys, ydst, d->y, ysrc, 4, 1); }
    TERN_ELSE(kb) {
        TERN_IF(kb, tern_eq(ry, tern_int(1))) { copy_parts(d->ys, ydst, d->y, ysrc, 4, 2); }
        TERN_ELSE(kb) { copy_parts(d->ys, ydst, d->y, ysrc, 4, 4); }
    }
}

/* acc += w * buf[half * size + mirror * count + j] for j < count. */
static void accumulate(tern_v acc, tern_v buf, tern_v half, int size, tern_v mirror, int count, tern_v w) {
    tern_v base = tern_add(tern_mul(half, tern_int(size)), tern_mul(mirror, tern_int(count)));
    for (int j = 0; j < count; j++)
        tern_assign(acc, tern_add(acc, tern_mul(w, tern_load(buf, tern_add(base, tern_int(j))))));
}

static void double_buffered(tern_kb *kb, void *user) {
    const db_opts *o = user;
    db_ctx d = {.kb = kb};
    d.x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    d.y = tern_param_buf(kb, "y", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    d.xs = tern_shared(kb, "xs", TERN_T_BF16, 2 * XT);
    d.ys = tern_shared(kb, "ys", TERN_T_F32, 2 * YT);
    d.tid = tern_local_id(kb, 0);
    d.group = tern_group_id(kb, 0);
    tern_v acc_x = tern_var(kb, "acc_x", tern_f32(0)), acc_y = tern_var(kb, "acc_y", tern_f32(0));
    tern_v mirror = tern_sub(tern_int(GROUP - 1), d.tid);
    stage(&d, tern_int(0));
    tern_copy_async_commit(kb);
    TERN_FOR(kb, t, tern_int(0), tern_int(TILES), tern_int(1)) {
        tern_v next = tern_add(t, tern_int(1));
        TERN_IF(kb, tern_lt(next, tern_int(TILES))) { stage(&d, next); }
        tern_copy_async_commit(kb); /* empty after the last tile: the count stays uniform */
        tern_copy_async_wait(kb, o->pending); /* this thread's copies of tile t have landed */
        tern_barrier(kb);                     /* ... and every thread's */
        tern_v half = tern_rem(t, tern_int(2)), w = tern_cast(next, TERN_T_F32);
        accumulate(acc_x, d.xs, half, XT, mirror, 8, w);
        accumulate(acc_y, d.ys, half, YT, mirror, 4, w);
        tern_barrier(kb); /* everyone has read this half before tile t + 2 is copied into it */
    }
    tern_v at = tern_global_id(kb, 0);
    tern_store(out, at, acc_x);
    tern_store(out, tern_add(at, tern_int(GROUPS * GROUP)), acc_y);
}

static void want_double_buffered(const uint16_t *x, const float *y, float *want) {
    for (int g = 0; g < GROUPS; g++)
        for (int tid = 0; tid < GROUP; tid++) {
            float ax = 0, ay = 0;
            int mirror = GROUP - 1 - tid;
            for (int t = 0; t < TILES; t++) {
                const uint16_t *xt = x + (size_t)(g * TILES + t) * XT + mirror * 8;
                const float *yt = y + (size_t)(g * TILES + t) * YT + mirror * 4;
                for (int j = 0; j < 8; j++) ax += (float)(t + 1) * tern_bf16_to_f32(xt[j]);
                for (int j = 0; j < 4; j++) ay += (float)(t + 1) * yt[j];
            }
            want[g * GROUP + tid] = ax;
            want[GROUPS * GROUP + g * GROUP + tid] = ay;
        }
}

static void run_double_buffered(const char *runtime, const tern_kernel *k) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        printf("test_kernel_copy_async: %s skipped: %s\n", runtime, tern_error_message(err));
        tern_error_free(err);
        return;
    }
    enum { NX = GROUPS * TILES * XT, NY = GROUPS * TILES * YT, NOUT = 2 * GROUPS * GROUP };
    static uint16_t x[NX];
    static float y[NY], out[NOUT], want[NOUT];
    for (int i = 0; i < NX; i++) x[i] = tern_f32_to_bf16((float)((i * 37) % 101 - 50)); /* exact in bf16 */
    for (int i = 0; i < NY; i++) y[i] = (float)((i * 53) % 2001 - 1000);
    for (int i = 0; i < NOUT; i++) out[i] = -12345.0f; /* no result is this */
    want_double_buffered(x, y, want);
    tern_arg args[] = {tern_arg_host_in(TERN_T_BF16, x, NX), tern_arg_host_in(TERN_T_F32, y, NY),
                       tern_arg_host(TERN_T_F32, out, NOUT)};
    CHECK_OK(tern_launch(rt, k, tern_dims1(GROUPS), tern_dims1(GROUP), args, 3));
    int bad = 0;
    for (int i = 0; i < NOUT; i++)
        if (out[i] != want[i] && bad++ < 5) fprintf(stderr, "  %s: out[%d] = %g, want %g\n", runtime, i, out[i], want[i]);
    CHECKF(bad == 0, "%s, kernel '%s': %d of %d results differ", runtime, tern_kernel_name(k), bad, NOUT);
    tern_rt_close(rt);
}

/* ---- the builder's checks ---- */

static void e_dst_device(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_READ_WRITE);
    tern_copy_async(y, tern_int(0), x, tern_int(0), 4);
}
static void e_src_shared(tern_kb *kb, void *u) {
    (void)u;
    tern_v s = tern_shared(kb, "s", TERN_T_F32, 64), s2 = tern_shared(kb, "s2", TERN_T_F32, 64);
    tern_copy_async(s, tern_int(0), s2, tern_int(0), 4);
}
static void e_size(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_copy_async(tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), x, tern_int(0), 3);
}
static void e_size_bf16(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    tern_copy_async(tern_shared(kb, "s", TERN_T_BF16, 64), tern_int(0), x, tern_int(0), 1);
}
static void e_size_zero(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_copy_async(tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), x, tern_int(0), 0);
}
static void e_types(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    tern_copy_async(tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), x, tern_int(0), 4);
}
static void e_write_only(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_copy_async(tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), y, tern_int(0), 4);
}
static void e_not_buffer(tern_kb *kb, void *u) {
    (void)u;
    tern_v s = tern_shared(kb, "s", TERN_T_F32, 64);
    tern_copy_async(s, tern_int(0), tern_local_id(kb, 0), tern_int(0), 4);
}
static void e_index_type(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_copy_async(tern_shared(kb, "s", TERN_T_F32, 64), tern_f32(0), x, tern_int(0), 4);
}
static void e_pending(tern_kb *kb, void *u) {
    (void)u;
    tern_copy_async_wait(kb, 8);
}

static void expect_error(const char *name, tern_trace_fn fn, const char *needle) {
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, fn, NULL, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_copy_async.c:"),
           "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_builder_errors(void) {
    expect_error("dst_device", e_dst_device,
                 "copy_async to buffer parameter 'y': it copies into threadgroup memory");
    expect_error("src_shared", e_src_shared,
                 "copy_async from threadgroup array 's2': it copies from device memory");
    expect_error("size_12", e_size, "copy_async of 3 f32 elements (12 bytes): a copy is 4, 8 or 16 bytes (f32: n = 1, 2 or 4)");
    expect_error("size_2", e_size_bf16, "copy_async of 1 bf16 element (2 bytes): a copy is 4, 8 or 16 bytes (bf16: n = 2, 4 or 8)");
    expect_error("size_0", e_size_zero, "copy_async of 0 elements: n must be positive");
    expect_error("types", e_types, "copy_async from bf16 buffer 'x' to f32 threadgroup array 's': the element types differ");
    expect_error("src_write_only", e_write_only, "copy_async from buffer 'y', which is declared TERN_WRITE");
    expect_error("not_buffer", e_not_buffer, "copy_async's source is not a buffer of this kernel");
    expect_error("index_type", e_index_type, "copy_async: the index is f32");
    expect_error("pending", e_pending, "copy_async_wait: pending 8 is not in 0..7");
}

/* ---- purity ---- */

static void p_copy(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_copy_async(tern_shared(kb, "s", TERN_T_F32, 4), tern_int(0), x, tern_int(0), 4);
}
static void p_commit(tern_kb *kb, void *u) {
    (void)u;
    tern_v a = tern_param_scalar(kb, "a", TERN_T_F32);
    tern_copy_async_commit(kb);
    tern_result(kb, a);
}
static void p_wait(tern_kb *kb, void *u) {
    (void)u;
    tern_v a = tern_param_scalar(kb, "a", TERN_T_F32);
    tern_copy_async_wait(kb, 0);
    tern_result(kb, a);
}

static void expect_impure(const char *name, tern_trace_fn fn, const char *needle) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, fn, NULL, &k));
    if (!k) return;
    CHECK_ERR(tern_kernel_check_pure(k, "zip_with"), needle);
    tern_kernel_free(k);
}

static void test_purity(void) {
    expect_impure("copies", p_copy, "zip_with: kernel 'copies' is not pure: it stores to buffer 's' (copy_async from 'x')");
    expect_impure("commits", p_commit, "kernel 'commits' is not pure: it uses asynchronous copies");
    expect_impure("waits", p_wait, "kernel 'waits' is not pure: it uses asynchronous copies");
}

/* ---- dump, hash and the emitters ---- */

static void expect_in(const char *what, const char *text, const char *needle, bool present) {
    bool found = text && strstr(text, needle);
    CHECKF(found == present, "%s %s '%s':\n%s", what, present ? "lacks" : "has", needle, text ? text : "(null)");
}

/* 1: compiled, 0: failed (a failed check), -1: NVRTC is not built in. */
static int nvrtc(const tern_kernel *k, const char *arch) {
    tern_error *err = tern_nvrtc_compile(k, arch, NULL, NULL);
    if (err && strstr(tern_error_message(err), "not built in")) {
        tern_error_free(err);
        return -1;
    }
    CHECKF(err == NULL, "%s for %s: %s", tern_kernel_name(k), arch, err ? tern_error_message(err) : "");
    tern_error_free(err);
    return err == NULL;
}

static void test_text(const tern_kernel *k, const tern_kernel *k0) {
    char *dump = tern_kernel_dump(k);
    expect_in("dump", dump, "copy_async xs[", true);
    expect_in("dump", dump, "] <- x[", true);
    expect_in("dump", dump, "], 8\n", true);
    expect_in("dump", dump, "], 1\n", true); /* one f32 */
    expect_in("dump", dump, "\n  copy_async_commit\n", true);
    expect_in("dump", dump, "copy_async_wait 1\n", true);
    free(dump);
    /* the pending count is part of the kernel */
    CHECK(tern_kernel_hash(k) != tern_kernel_hash(k0));

    char *cu = NULL, *cl = NULL, *mtl = NULL;
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_OPENCL, &cl));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_METAL, &mtl));
    expect_in("cuda", cu, "cp.async.cg.shared.global [%0], [%1], 16;", true);
    expect_in("cuda", cu, "cp.async.ca.shared.global [%0], [%1], 8;", true);
    expect_in("cuda", cu, "cp.async.ca.shared.global [%0], [%1], 4;", true);
    expect_in("cuda", cu, "(unsigned)__cvta_generic_to_shared(dst)", true);
    expect_in("cuda", cu, ": \"memory\");", true);
    expect_in("cuda", cu, "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");", true);
    expect_in("cuda", cu, "asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(pending) : \"memory\");", true);
    expect_in("cuda", cu, "#if __CUDA_ARCH__ >= 800", true);
    expect_in("cuda", cu, "*(uint4 *)dst = *(const uint4 *)src;", true); /* below sm_80 */
    expect_in("cuda", cu, "tern_copy_async_16(&xs[", true);
    expect_in("cuda", cu, "tern_copy_async_4(&ys[", true);
    expect_in("cuda", cu, "tern_copy_async_commit();", true);
    expect_in("cuda", cu, "tern_copy_async_wait<1>();", true);
    expect_in("cuda", cu, "__shared__ __align__(16) unsigned short xs[1024];", true);
    expect_in("cuda", cu, "__shared__ __align__(16) float ys[512];", true);
    expect_in("opencl", cl, "*(__local uint4 *)&xs[", true);
    expect_in("opencl", cl, " = *(__global const uint2 *)&x[", true);
    expect_in("opencl", cl, "*(__local uint *)&ys[", true);
    expect_in("opencl", cl, "__local ushort xs[1024] __attribute__((aligned(16)));", true);
    expect_in("opencl", cl, "/* copy_async_commit: copies are made at once here */", true);
    expect_in("opencl", cl, "/* copy_async_wait 1: copies are made at once here */", true);
    expect_in("opencl", cl, "cp.async", false);
    expect_in("metal", mtl, "*(threadgroup uint4 *)&xs[", true);
    expect_in("metal", mtl, " = *(device const uint4 *)&x[", true);
    expect_in("metal", mtl, "alignas(16) threadgroup ushort xs[1024];", true);
    expect_in("metal", mtl, "/* copy_async_wait 1: copies are made at once here */", true);
    free(cu);
    free(cl);
    free(mtl);

    /* sm_90 (the H200), sm_80 (cp.async's first), sm_75 (none: the plain copy) */
    const char *archs[] = {"sm_90", "sm_80", "sm_75"};
    for (int a = 0; a < 3; a++) {
        int r = nvrtc(k, archs[a]);
        if (r < 0) {
            printf("test_kernel_copy_async: nvrtc skipped (not built in)\n");
            return;
        }
    }
    nvrtc(k0, "sm_90");
}

/* The largest pending count compiles (an immediate of cp.async.wait_group). */
static void k_wait7(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_U32, TERN_READ);
    tern_v s = tern_shared(kb, "s", TERN_T_U32, GROUP);
    tern_v tid = tern_local_id(kb, 0);
    tern_copy_async(s, tid, x, tern_global_id(kb, 0), 1);
    tern_copy_async_commit(kb);
    tern_copy_async_wait(kb, 7);
    tern_copy_async_wait(kb, 0);
}

static void test_wait7(void) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("wait7", k_wait7, NULL, &k));
    if (k && nvrtc(k, "sm_90") >= 0) {
        char *cu = NULL;
        CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
        expect_in("cuda", cu, "tern_copy_async_wait<7>();", true);
        expect_in("cuda", cu, "cp.async.cg", true); /* the helpers come as a set */
        free(cu);
    }
    tern_kernel_free(k);
}

/* ---- the interpreter's checks ---- */

static void r_misaligned(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    tern_v s = tern_shared(kb, "s", TERN_T_BF16, 8 * GROUP);
    tern_v tid = tern_local_id(kb, 0);
    tern_copy_async(s, tern_mul(tid, tern_int(8)), x, tern_add(tern_mul(tid, tern_int(8)), tern_int(2)), 8);
}
static void r_dst_oob(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_BF16, TERN_READ);
    tern_v s = tern_shared(kb, "s", TERN_T_BF16, 64);
    tern_v tid = tern_local_id(kb, 0);
    tern_copy_async(s, tern_mul(tid, tern_int(8)), x, tern_int(0), 8);
}
static void r_src_oob(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_v s = tern_shared(kb, "s", TERN_T_F32, 4 * GROUP);
    tern_v tid = tern_local_id(kb, 0);
    tern_copy_async(s, tern_mul(tid, tern_int(4)), x, tern_mul(tern_global_id(kb, 0), tern_int(4)), 4);
}

static void expect_run_error(tern_rt *rt, const char *name, tern_trace_fn fn, tern_arg arg, const char *needle) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, fn, NULL, &k));
    if (!k) return;
    tern_error *err = tern_launch(rt, k, tern_dims1(2), tern_dims1(16), &arg, 1);
    const char *msg = err ? tern_error_message(err) : "success";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_copy_async.c:"),
           "%s: got '%s', want '%s'", name, msg, needle);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_interpreter_checks(void) {
    tern_rt *rt = NULL;
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return;
    static uint16_t x[1024];
    static float f[64];
    expect_run_error(rt, "misaligned", r_misaligned, tern_arg_host_in(TERN_T_BF16, x, 1024),
                     "copy_async from 'x' of 8 elements at index 2 (view offset 0) is not aligned to 8 "
                     "elements in thread (0,0,0)");
    expect_run_error(rt, "dst_oob", r_dst_oob, tern_arg_host_in(TERN_T_BF16, x, 1024),
                     "copy_async to 's' at index 64 is out of bounds (64 elements) in thread (8,0,0)");
    expect_run_error(rt, "src_oob", r_src_oob, tern_arg_host_in(TERN_T_F32, f, 64),
                     "copy_async from 'x' at index 64 is out of bounds (64 elements) in thread (0,0,0) of "
                     "threadgroup (1,0,0)");
    tern_rt_close(rt);
}

int main(void) {
    test_builder_errors();
    test_purity();
    test_wait7();
    test_interpreter_checks();
    db_opts one = {1}, zero = {0};
    tern_kernel *k = NULL, *k0 = NULL;
    CHECK_OK(tern_kernel_build("double_buffered", double_buffered, &one, &k));
    CHECK_OK(tern_kernel_build("double_buffered", double_buffered, &zero, &k0));
    if (k && k0) {
        test_text(k, k0);
        run_double_buffered("host", k);
        run_double_buffered("host", k0);
        const char *gpu = getenv("TERN_GPU");
        if (gpu && *gpu && strcmp(gpu, "host")) {
            run_double_buffered(gpu, k);
            run_double_buffered(gpu, k0);
        }
    }
    tern_kernel_free(k);
    tern_kernel_free(k0);
    return check_summary("test_kernel_copy_async");
}
