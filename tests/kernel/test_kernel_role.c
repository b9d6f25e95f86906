/* Warpgroup roles (TERN_ROLE, tern/kernel.h): a threadgroup of three warpgroups in which
 * warpgroups 0 and 1 chain asynchronous products across role blocks separated by barriers
 * while warpgroup 2, in the role's else, does other work; the tracer's refusals (collectives
 * in a role, roles nested, a role's product waited for or left outside its role) and the
 * interpreter's (a role's warpgroup not whole); the emitters (CUDA's wgmma in the role's if,
 * OpenCL's and Metal's product per thread, without barriers); NVRTC for sm_90a and sm_80;
 * and the kernel on the interpreter and on TERN_GPU's runtime when it names another (OpenCL
 * under ctest, cuda on the H200). Small integer operands: every sum is exact in f32 in any
 * order, so the results must match exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nvrtc_check.h"
#include "tern/kernel.h"

enum {
    GROUP = 384, /* three warpgroups */
    GROUPS = 2,
    PRODUCERS = 2,           /* warpgroups 0 and 1 multiply */
    WGS = GROUPS * PRODUCERS, /* products in a launch */
    RN = 64,                 /* the product's columns */
    RK = 32,                 /* and its k */
    SLICES = 3,              /* products chained, one a role block */
};

/* ---- the kernel ----
 * Per multiplying warpgroup q = group * 2 + w: D[q] = C[q] + sum over s of A[q] B[q][s], A
 * [64][RK], B [RK][RN], C and D [64][RN], f32 in memory. Each slice s: a barrier, then the
 * role (warpgroups 0, 1) issues A B_s onto its accumulators and waits with one product
 * pending (the last slice's wait leaves it in flight past the block), while warpgroup 2 (the
 * else) writes E[group][s][thread] = 1000 s + thread. A last role block waits for the rest
 * and stores D. */
static void k_role(tern_kb *kb, void *user) {
    (void)user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_F32, TERN_READ);  /* [WGS][64][RK] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_F32, TERN_READ);  /* [WGS][SLICES][RK][RN] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_F32, TERN_READ);  /* [WGS][64][RN] */
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE); /* [WGS][64][RN] */
    tern_v E = tern_param_buf(kb, "E", TERN_T_F32, TERN_WRITE); /* [GROUPS][SLICES][128] */
    const int a_tile = 64 * 64, b_tile = RN * 64; /* A: 64 rows of k; B: RN rows of k (one panel each) */
    const int per_wg = a_tile + SLICES * b_tile;
    tern_v tiles = tern_shared_tiles(kb, "tiles", (size_t)PRODUCERS * per_wg);
    tern_v tid = tern_local_index(kb), wg = tern_div(tid, tern_int(128)), t128 = tern_rem(tid, tern_int(128));
    tern_v q = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(PRODUCERS)), wg);
    tern_v acc[RN / 2], at_c[RN / 2];
    tern_v lane = tern_rem(tid, tern_int(32)), j = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v row0 = tern_add(tern_mul(j, tern_int(16)), tern_div(lane, tern_int(4))), t = tern_rem(lane, tern_int(4));
    TERN_ROLE(kb, 0, PRODUCERS) { /* the multiplying warpgroups stage their own tiles */
        tern_v base = tern_mul(wg, tern_int(per_wg));
        TERN_FOR(kb, e, t128, tern_int(64 * RK), tern_int(128)) {
            tern_v m = tern_div(e, tern_int(RK)), kk = tern_rem(e, tern_int(RK));
            tern_store(tiles, tern_wg_tile_index(base, 64, m, kk), tern_load(A, tern_add(tern_mul(q, tern_int(64 * RK)), e)));
        }
        TERN_FOR(kb, e, t128, tern_int(SLICES * RK * RN), tern_int(128)) {
            tern_v s = tern_div(e, tern_int(RK * RN)), rest = tern_rem(e, tern_int(RK * RN));
            tern_v kk = tern_div(rest, tern_int(RN)), col = tern_rem(rest, tern_int(RN));
            tern_v at = tern_add(base, tern_add(tern_int(a_tile), tern_mul(s, tern_int(b_tile))));
            tern_store(tiles, tern_wg_tile_index(at, RN, col, kk),
                       tern_load(B, tern_add(tern_mul(q, tern_int(SLICES * RK * RN)), e)));
        }
    }
    for (int e = 0; e < RN / 2; e++) {
        tern_v m = tern_add(row0, tern_int(e % 4 >= 2 ? 8 : 0));
        tern_v col = tern_add(tern_mul(t, tern_int(2)), tern_int(8 * (e / 4) + (e & 1)));
        at_c[e] = tern_add(tern_mul(q, tern_int(64 * RN)), tern_add(tern_mul(m, tern_int(RN)), col));
        char name[16];
        snprintf(name, sizeof name, "acc%d", e);
        acc[e] = tern_var(kb, name, tern_f32(0));
    }
    TERN_ROLE(kb, 0, PRODUCERS) {
        for (int e = 0; e < RN / 2; e++) tern_assign(acc[e], tern_load(C, at_c[e]));
    }
    for (int s = 0; s < SLICES; s++) {
        tern_barrier(kb);
        TERN_ROLE(kb, 0, PRODUCERS) {
            tern_v base = tern_mul(wg, tern_int(per_wg));
            tern_wg_tile a = {tiles, base, 64, false};
            tern_wg_tile b = {tiles, tern_add(base, tern_int(a_tile + s * b_tile)), RN, false};
            tern_wgmma_bf16_async(kb, RN, RK, NULL, &a, &b, acc);
            tern_wgmma_wait(kb, 1);
        }
        TERN_ELSE(kb) {
            tern_v at = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(SLICES * 128)), tern_int(s * 128));
            tern_store(E, tern_add(at, t128), tern_add(tern_f32((float)(1000 * s)), tern_cast(t128, TERN_T_F32)));
        }
    }
    TERN_ROLE(kb, 0, PRODUCERS) {
        tern_wgmma_wait(kb, 0);
        for (int e = 0; e < RN / 2; e++) tern_store(D, at_c[e], acc[e]);
    }
}

static tern_rt *open_runtime(const char *runtime) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        printf("test_kernel_role: %s skipped: %s\n", runtime, tern_error_message(err));
        tern_error_free(err);
        return NULL;
    }
    return rt;
}

static void run_role(const char *runtime, const tern_kernel *kern) {
    tern_rt *rt = open_runtime(runtime);
    if (!rt) return;
    enum { NA = WGS * 64 * RK, NB = WGS * SLICES * RK * RN, NC = WGS * 64 * RN, NE = GROUPS * SLICES * 128 };
    static float A[NA], B[NB], C[NC], D[NC], E[NE];
    for (int i = 0; i < NA; i++) A[i] = (float)((i * 5 + 2) % 7 - 3);
    for (int i = 0; i < NB; i++) B[i] = (float)((i * 3 + 1) % 5 - 2);
    for (int i = 0; i < NC; i++) C[i] = (float)(i % 13 - 6);
    for (int i = 0; i < NC; i++) D[i] = -12345.0f;
    for (int i = 0; i < NE; i++) E[i] = -12345.0f;
    tern_arg args[] = {tern_arg_host_in(TERN_T_F32, A, NA), tern_arg_host_in(TERN_T_F32, B, NB),
                       tern_arg_host_in(TERN_T_F32, C, NC), tern_arg_host(TERN_T_F32, D, NC),
                       tern_arg_host(TERN_T_F32, E, NE)};
    CHECK_OK(tern_launch(rt, kern, tern_dims1(GROUPS), tern_dims1(GROUP), args, 5));
    int bad = 0;
    for (int q = 0; q < WGS; q++)
        for (int m = 0; m < 64; m++)
            for (int col = 0; col < RN; col++) {
                double want = C[(q * 64 + m) * RN + col];
                for (int s = 0; s < SLICES; s++)
                    for (int kk = 0; kk < RK; kk++)
                        want += (double)A[(q * 64 + m) * RK + kk] * B[((q * SLICES + s) * RK + kk) * RN + col];
                float got = D[(q * 64 + m) * RN + col];
                if (got != (float)want && bad++ < 5)
                    fprintf(stderr, "  %s: D[%d][%d][%d] = %g, want %g\n", runtime, q, m, col, got, want);
            }
    CHECKF(bad == 0, "%s, the role's chained products: %d of %d results differ", runtime, bad, (int)NC);
    bad = 0;
    for (int g = 0; g < GROUPS; g++)
        for (int s = 0; s < SLICES; s++)
            for (int i = 0; i < 128; i++)
                if (E[(g * SLICES + s) * 128 + i] != (float)(1000 * s + i)) bad++;
    CHECKF(bad == 0, "%s, the else's stores: %d of %d differ", runtime, bad, (int)NE);
    tern_rt_close(rt);
}

/* ---- the tracer's refusals ---- */

typedef struct role_err {
    int what; /* 0 a barrier in a role, 1 a SIMD-group operation, 2 A in registers, 3 roles nested,
               * 4 a role's product waited for outside it, 5 read in the else, 6 left in flight past
               * the block around the role, 7 a barrier in the role's else, 8 a bad range, 9 a
               * product left in flight by a role's else */
} role_err;

static void e_role(tern_kb *kb, void *u) {
    const role_err *o = u;
    tern_v tiles = tern_shared_tiles(kb, "t", 8192), a[8], acc[8];
    for (int j = 0; j < 8; j++) {
        a[j] = tern_f32(1);
        char name[8];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    tern_wg_tile at = {tiles, tern_int(0), 64, false}, bt = {tiles, tern_int(4096), 16, false};
    switch (o->what) {
    case 0: TERN_ROLE(kb, 0, 1) { tern_barrier(kb); } break;
    case 1:
        TERN_ROLE(kb, 0, 1) { tern_var(kb, "s", tern_simd_sum(tern_cast(tern_local_index(kb), TERN_T_F32))); }
        break;
    case 2:
        TERN_ROLE(kb, 0, 1) {
            tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &bt, acc);
            tern_wgmma_wait(kb, 0);
        }
        break;
    case 3: TERN_ROLE(kb, 0, 1) { TERN_ROLE(kb, 1, 1) { tern_var(kb, "x", tern_f32(1)); } } break;
    case 4:
        TERN_ROLE(kb, 0, 1) { tern_wgmma_bf16_async(kb, 16, 16, NULL, &at, &bt, acc); }
        tern_wgmma_wait(kb, 0);
        break;
    case 5:
        TERN_ROLE(kb, 0, 1) { tern_wgmma_bf16_async(kb, 16, 16, NULL, &at, &bt, acc); }
        TERN_ELSE(kb) { tern_var(kb, "early", acc[0]); }
        TERN_ROLE(kb, 0, 1) { tern_wgmma_wait(kb, 0); }
        break;
    case 6:
        TERN_FOR(kb, i, tern_int(0), tern_int(2), tern_int(1)) {
            TERN_ROLE(kb, 0, 1) { tern_wgmma_bf16_async(kb, 16, 16, NULL, &at, &bt, acc); }
        }
        break;
    case 7:
        TERN_ROLE(kb, 0, 1) { tern_var(kb, "x", tern_f32(1)); }
        TERN_ELSE(kb) { tern_barrier(kb); }
        break;
    case 8: TERN_ROLE(kb, 1, 0) { tern_var(kb, "x", tern_f32(1)); } break;
    case 9:
        TERN_ROLE(kb, 0, 1) { tern_var(kb, "x", tern_f32(1)); }
        TERN_ELSE(kb) { tern_wgmma_bf16_async(kb, 16, 16, NULL, &at, &bt, acc); }
        break;
    }
}

static void expect_role_error(const char *name, int what, const char *needle) {
    role_err o = {what};
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, e_role, &o, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_role.c:"),
           "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_refusals(void) {
    expect_role_error("in_role_barrier", 0, "a barrier inside a warpgroup role's block (tern_role): it needs the whole threadgroup");
    expect_role_error("simd", 1, "a SIMD-group operation inside a warpgroup role's block");
    expect_role_error("registers", 2, "a warpgroup product with A in registers inside a warpgroup role's block");
    expect_role_error("nested", 3, "role: roles do not nest (one is open already)");
    expect_role_error("wait_outside", 4, "wgmma_wait outside a warpgroup role while a product issued in a "
                                         "warpgroup role is in flight; wait for it in its own role");
    expect_role_error("read_in_else", 5, "variable 'acc0' read while a wgmma_bf16_async product writes it");
    expect_role_error("past_loop", 6, "a wgmma_bf16_async product of a warpgroup role is still in flight at the "
                                      "end of the block around the role's block");
    expect_role_error("barrier_in_else", 7, "a barrier inside a warpgroup role's block");
    expect_role_error("range", 8, "role: warpgroups 1 .. 0; the first is 0 or more, the count 1 or more");
    expect_role_error("else_in_flight", 9, "a wgmma_bf16_async product issued in this block is still in flight "
                                           "at its end");
}

/* A role of warpgroup 1 whose product only half the warpgroup reaches, which the interpreter
 * refuses. */
static void r_partial(tern_kb *kb, void *u) {
    (void)u;
    tern_v tiles = tern_shared_tiles(kb, "t", 8192), acc[8];
    for (int j = 0; j < 8; j++) {
        char name[8];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    tern_wg_tile at = {tiles, tern_int(0), 64, false}, bt = {tiles, tern_int(4096), 16, false};
    TERN_ROLE(kb, 1, 1) {
        TERN_IF(kb, tern_lt(tern_rem(tern_local_index(kb), tern_int(128)), tern_int(64))) {
            tern_wgmma_bf16_async(kb, 16, 16, NULL, &at, &bt, acc);
            tern_wgmma_wait(kb, 0);
        }
    }
}

static void test_interpreter(void) {
    tern_rt *rt = open_runtime("host");
    if (!rt) return;
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("partial", r_partial, NULL, &k));
    if (k) {
        tern_error *err = tern_launch(rt, k, tern_dims1(1), tern_dims1(256), NULL, 0);
        const char *msg = err ? tern_error_message(err) : "success";
        CHECKF(err && strstr(msg, "wgmma_bf16 reached by 64 of warpgroup 1's 128 threads"), "partial: got '%s'", msg);
        tern_error_free(err);
    }
    tern_kernel_free(k);
    tern_rt_close(rt);
}

static void expect_in(const char *what, const char *text, const char *needle, bool present) {
    bool found = text && strstr(text, needle);
    CHECKF(found == present, "%s %s '%s'", what, present ? "lacks" : "has", needle);
}

/* The role's product per thread on OpenCL and Metal, no barrier between the role's if and its
 * else; wgmma on CUDA. */
static void test_text(const tern_kernel *k) {
    char *dump = tern_kernel_dump(k), *cu = NULL, *cl = NULL, *mtl = NULL;
    expect_in("dump", dump, "wgmma_bf16_async (role) m64n64k32", true);
    free(dump);
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_OPENCL, &cl));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_METAL, &mtl));
    expect_in("cuda", cu, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", true);
    expect_in("opencl", cl, " = fma(", true);
    expect_in("opencl", cl, "tern_mma_bf16(", false);
    expect_in("metal", mtl, " = fma(", true);
    expect_in("metal", mtl, "tern_mma_bf16(", false);
    /* from the role's product to the else: no barrier between */
    const char *prod = cl ? strstr(cl, " = fma(") : NULL, *bar = prod ? strstr(prod, "barrier(") : NULL;
    const char *els = prod ? strstr(prod, "} else {") : NULL;
    CHECKF(els && (!bar || bar > els), "opencl: a barrier between the role's product and its else");
    free(cu);
    free(cl);
    free(mtl);
    const char *archs[] = {"sm_90a", "sm_80"};
    for (int a = 0; a < 2 && nvrtc_check_compile_for(k, archs[a]) >= 0; a++) {
    }
}

int main(void) {
    test_refusals();
    test_interpreter();
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("role_products", k_role, NULL, &k));
    if (k) {
        test_text(k);
        run_role("host", k);
        const char *gpu = getenv("TERN_GPU");
        if (gpu && *gpu && strcmp(gpu, "host")) run_role(gpu, k);
    }
    tern_kernel_free(k);
    return check_summary("test_kernel_role");
}
