/* tern_store_bulk and its commit, wait and fence: the builder's checks (each naming the
 * operation, the kernel and the line), purity, the rule that nothing writes device memory
 * before tern_wait_previous, the dump, the three emitters (PTX cp.async.bulk on CUDA, compiled
 * by NVRTC for sm_90, and for sm_80 where the issuing thread copies the run itself; loops on
 * OpenCL and Metal), the host interpreter's count, alignment and bounds checks, and a kernel
 * that reuses its tile across stores run on the interpreter (and on TERN_GPU's runtime when it
 * names another: OpenCL under ctest, cuda on the GPU machine), compared with plain C exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/half.h"
#include "tern/kernel.h"

#define GROUP 128 /* threads per threadgroup */
#define GROUPS 3
#define ROWS 16   /* rows of a tile, one storing thread each */
#define COLS 64   /* bf16 elements of a full row (128 bytes) */
#define TILES 3   /* tiles per group, through the same threadgroup array */
#define LD (COLS + 8) /* the tile's row stride: rows 144 bytes apart, each on 16 bytes */
#define OUT_LD 200    /* the output's row stride (400 bytes: rows on 16 bytes) */

/* ---- the tile kernel ----
 * Group g fills its tile t (ROWS x COLS bf16 at stride LD) with v(g, t, r, c), every thread
 * writing elements other threads store; then thread r < ROWS stores row r's first len(r)
 * elements to out row (g TILES + t) ROWS + r, where len(r) = (r % 9) * 8 (0 .. 64: empty,
 * partial and whole runs), from column off(r) = (r % 3) * 8 of the tile where the run still
 * ends inside the row (len <= 48), else 0. The tile is written again for t + 1 only after the
 * stores' wait and a barrier: on CUDA a store still reading it would put tile t + 1's values
 * in tile t's rows. */

static int run_len(int r) { return (r % 9) * 8; }
static int run_off(int r) { return run_len(r) <= 48 ? (r % 3) * 8 : 0; }
static float tile_value(int g, int t, int r, int c) { return (float)(((g * 7 + t * 5 + r * 3 + c) % 61) - 30); }

static void tile_kernel(tern_kb *kb, void *user) {
    (void)user;
    tern_v out = tern_param_buf(kb, "out", TERN_T_BF16, TERN_WRITE);
    tern_v tile = tern_shared(kb, "tile", TERN_T_BF16, ROWS * LD);
    tern_v tid = tern_local_id(kb, 0), g = tern_group_id(kb, 0);
    TERN_FOR(kb, t, tern_int(0), tern_int(TILES), tern_int(1)) {
        /* element e = r COLS + c, written by thread (ROWS COLS - 1 - e) % GROUP */
        TERN_FOR(kb, e, tid, tern_int(ROWS * COLS), tern_int(GROUP)) {
            tern_v me = tern_sub(tern_int(ROWS * COLS - 1), e);
            tern_v r = tern_div(me, tern_int(COLS)), c = tern_rem(me, tern_int(COLS));
            tern_v v = tern_add(tern_add(tern_mul(g, tern_int(7)), tern_mul(t, tern_int(5))),
                                tern_add(tern_mul(r, tern_int(3)), c));
            v = tern_sub(tern_rem(v, tern_int(61)), tern_int(30));
            tern_store(tile, tern_add(tern_mul(r, tern_int(LD)), c), tern_cast(v, TERN_T_F32));
        }
        tern_store_bulk_fence(kb);
        tern_barrier(kb);
        TERN_IF(kb, tern_lt(tid, tern_int(ROWS))) {
            tern_v len = tern_mul(tern_rem(tid, tern_int(9)), tern_int(8));
            tern_v off = tern_select(tern_le(len, tern_int(48)), tern_mul(tern_rem(tid, tern_int(3)), tern_int(8)),
                                     tern_int(0));
            tern_v row = tern_add(tern_mul(tern_add(tern_mul(g, tern_int(TILES)), t), tern_int(ROWS)), tid);
            tern_v from = tern_add(tern_mul(tid, tern_int(LD)), off);
            tern_store_bulk(out, tern_mul(row, tern_int(OUT_LD)), tile, from, len);
        }
        tern_store_bulk_commit(kb);
        tern_store_bulk_wait(kb, 0);
        tern_barrier(kb);
    }
}

static void run_tile_kernel(const char *runtime, const tern_kernel *k) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        printf("test_kernel_store_bulk: %s skipped: %s\n", runtime, tern_error_message(err));
        tern_error_free(err);
        return;
    }
    enum { NOUT = GROUPS * TILES * ROWS * OUT_LD };
    static uint16_t out[NOUT], want[NOUT];
    const uint16_t marker = tern_f32_to_bf16(-12345.0f); /* no value is this */
    for (int i = 0; i < NOUT; i++) out[i] = want[i] = marker;
    for (int g = 0; g < GROUPS; g++)
        for (int t = 0; t < TILES; t++)
            for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < run_len(r); c++) {
                    size_t at = (size_t)((g * TILES + t) * ROWS + r) * OUT_LD + (size_t)c;
                    want[at] = tern_f32_to_bf16(tile_value(g, t, r, run_off(r) + c));
                }
    tern_arg args[] = {tern_arg_host(TERN_T_BF16, out, NOUT)};
    CHECK_OK(tern_launch(rt, k, tern_dims1(GROUPS), tern_dims1(GROUP), args, 1));
    int bad = 0;
    for (int i = 0; i < NOUT; i++)
        if (out[i] != want[i] && bad++ < 5)
            fprintf(stderr, "  %s: out[%d] = %g, want %g\n", runtime, i, tern_bf16_to_f32(out[i]),
                    tern_bf16_to_f32(want[i]));
    CHECKF(bad == 0, "%s, kernel '%s': %d of %d elements differ", runtime, tern_kernel_name(k), bad, NOUT);
    tern_rt_close(rt);
}

/* ---- the builder's checks ---- */

static void e_dst_shared(tern_kb *kb, void *u) {
    (void)u;
    tern_v s = tern_shared(kb, "s", TERN_T_F32, 64), s2 = tern_shared(kb, "s2", TERN_T_F32, 64);
    tern_store_bulk(s2, tern_int(0), s, tern_int(0), tern_int(4));
}
static void e_src_device(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ), y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_store_bulk(y, tern_int(0), x, tern_int(0), tern_int(4));
}
static void e_read_only(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_store_bulk(x, tern_int(0), tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), tern_int(4));
}
static void e_types(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_BF16, TERN_WRITE);
    tern_store_bulk(y, tern_int(0), tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), tern_int(4));
}
static void e_count_type(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_store_bulk(y, tern_int(0), tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), tern_f32(4));
}
static void e_pending(tern_kb *kb, void *u) {
    (void)u;
    tern_store_bulk_wait(kb, 8);
}
static void e_before_wait(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_store_bulk(y, tern_int(0), tern_shared(kb, "s", TERN_T_F32, 64), tern_int(0), tern_int(4));
    tern_wait_previous(kb);
}

static void expect_error(const char *name, tern_trace_fn fn, const char *needle) {
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, fn, NULL, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_store_bulk.c:"),
           "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_builder_errors(void) {
    expect_error("dst_shared", e_dst_shared, "store_bulk to threadgroup array 's2': it writes device memory");
    expect_error("src_device", e_src_device, "store_bulk from buffer parameter 'x': it copies from threadgroup memory");
    expect_error("dst_read_only", e_read_only, "store_bulk to buffer 'x', which is declared TERN_READ");
    expect_error("types", e_types,
                 "store_bulk from f32 threadgroup array 's' to bf16 buffer 'y': the element types differ");
    expect_error("count_type", e_count_type, "store_bulk: the element count is f32; it is an integer");
    expect_error("pending", e_pending, "store_bulk_wait: pending 8 is not in 0..7");
    expect_error("before_wait", e_before_wait, "wait_previous after 'store_bulk");
}

/* ---- purity ---- */

static void p_store(tern_kb *kb, void *u) {
    (void)u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_store_bulk(y, tern_int(0), tern_shared(kb, "s", TERN_T_F32, 4), tern_int(0), tern_int(4));
}
static void p_fence(tern_kb *kb, void *u) {
    (void)u;
    tern_v a = tern_param_scalar(kb, "a", TERN_T_F32);
    tern_store_bulk_fence(kb);
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
    expect_impure("stores", p_store,
                  "zip_with: kernel 'stores' is not pure: it stores to buffer 'y' (store_bulk from 's')");
    expect_impure("fences", p_fence, "kernel 'fences' is not pure: it uses asynchronous copies");
}

/* ---- dump and the emitters ---- */

static void expect_in(const char *what, const char *text, const char *needle, bool present) {
    bool found = text && strstr(text, needle);
    CHECKF(found == present, "%s %s '%s':\n%s", what, present ? "lacks" : "has", needle, text ? text : "(null)");
}

static void test_text(const tern_kernel *k) {
    char *dump = tern_kernel_dump(k);
    expect_in("dump", dump, "store_bulk out[", true);
    expect_in("dump", dump, "] <- tile[", true);
    expect_in("dump", dump, "\n  store_bulk_fence\n", false); /* inside the loop: indented deeper */
    expect_in("dump", dump, "store_bulk_fence\n", true);
    expect_in("dump", dump, "store_bulk_commit\n", true);
    expect_in("dump", dump, "store_bulk_wait 0\n", true);
    free(dump);

    char *cu = NULL, *cl = NULL, *mtl = NULL;
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_OPENCL, &cl));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_METAL, &mtl));
    expect_in("cuda", cu, "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;", true);
    expect_in("cuda", cu, "cp.async.bulk.commit_group;", true);
    expect_in("cuda", cu, "cp.async.bulk.wait_group.read %0;", true);
    expect_in("cuda", cu, "fence.proxy.async.shared::cta;", true);
    expect_in("cuda", cu, "#if __CUDA_ARCH__ >= 900", true);
    expect_in("cuda", cu, "tern_store_bulk(&out[", true);
    expect_in("cuda", cu, ") * 2u);", true);
    expect_in("cuda", cu, "tern_store_bulk_wait<0>();", true);
    expect_in("cuda", cu, "__shared__ __align__(16) unsigned short tile[", true);
    expect_in("opencl", cl, "{ __global uint4 *tern_bd = (__global uint4 *)&out[", true);
    expect_in("opencl", cl, "__local const uint4 *tern_bs", true);
    expect_in("opencl", cl, "__attribute__((aligned(16)))", true);
    expect_in("opencl", cl, "/* store_bulk_wait 0: bulk stores are made at once here */", true);
    expect_in("opencl", cl, "cp.async", false);
    expect_in("metal", mtl, "{ device uint4 *tern_bd = (device uint4 *)&out[", true);
    expect_in("metal", mtl, "threadgroup const uint4 *tern_bs", true);
    expect_in("metal", mtl, "/* store_bulk_fence: bulk stores are made at once here */", true);
    free(cu);
    free(cl);
    free(mtl);

    /* sm_90 (the bulk copy), sm_80 (the issuing thread's own loop) */
    const char *archs[] = {"sm_90", "sm_80"};
    for (int a = 0; a < 2; a++) {
        tern_error *err = tern_nvrtc_compile(k, archs[a], NULL, NULL);
        if (err && strstr(tern_error_message(err), "not built in")) {
            printf("test_kernel_store_bulk: nvrtc skipped (not built in)\n");
            tern_error_free(err);
            return;
        }
        CHECKF(err == NULL, "%s for %s: %s", tern_kernel_name(k), archs[a], err ? tern_error_message(err) : "");
        tern_error_free(err);
    }
}

/* ---- the interpreter's checks ---- */

typedef struct bad_store {
    int dst, src, n; /* the first group's thread 1 stores n f32 from s[src] to y[dst] */
} bad_store;

static void r_store(tern_kb *kb, void *u) {
    const bad_store *b = u;
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_v s = tern_shared(kb, "s", TERN_T_F32, 32);
    TERN_IF(kb, tern_eq(tern_local_id(kb, 0), tern_int(1))) {
        tern_store_bulk(y, tern_int(b->dst), s, tern_int(b->src), tern_int(b->n));
    }
    tern_store_bulk_commit(kb);
    tern_store_bulk_wait(kb, 0);
}

static void expect_run_error(tern_rt *rt, const char *name, bad_store b, const char *needle) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, r_store, &b, &k));
    if (!k) return;
    static float y[64];
    tern_arg arg = tern_arg_host(TERN_T_F32, y, 64);
    tern_error *err = tern_launch(rt, k, tern_dims1(1), tern_dims1(4), &arg, 1);
    const char *msg = err ? tern_error_message(err) : "success";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_store_bulk.c:"),
           "%s: got '%s', want '%s'", name, msg, needle);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_interpreter_checks(void) {
    tern_rt *rt = NULL;
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return;
    expect_run_error(rt, "count", (bad_store){0, 0, 6},
                     "store_bulk of 6 elements of 4 bytes: the count is a multiple of 4 (16 bytes) in thread (1,0,0)");
    expect_run_error(rt, "misaligned", (bad_store){2, 0, 4},
                     "store_bulk to 'y' of 4 elements at index 2 (view offset 0) is not aligned to 4 elements");
    expect_run_error(rt, "past_dst", (bad_store){56, 0, 16},
                     "store_bulk of 16 elements from 's' at 0 to 'y' at 56 runs past an end (32 and 64 elements)");
    expect_run_error(rt, "past_src", (bad_store){0, 28, 8},
                     "store_bulk of 8 elements from 's' at 28 to 'y' at 0 runs past an end (32 and 64 elements)");
    tern_rt_close(rt);
}

int main(void) {
    test_builder_errors();
    test_purity();
    test_interpreter_checks();
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("tile_stores", tile_kernel, NULL, &k));
    if (k) {
        test_text(k);
        run_tile_kernel("host", k);
        const char *gpu = getenv("TERN_GPU");
        if (gpu && *gpu && strcmp(gpu, "host")) run_tile_kernel(gpu, k);
    }
    tern_kernel_free(k);
    return check_summary("test_kernel_store_bulk");
}
