/* tern_wgmma_bf16 and its tiles (tern_shared_tiles, tern_wg_tile_index): the builder's checks
 * (each naming the operation, the kernel and the line), purity, the dump, the emitters (CUDA's
 * wgmma.mma_async for sm_90a and its fallback; OpenCL's and Metal's emulation), NVRTC for
 * sm_90a, sm_90 and sm_80, the interpreter's checks, and products of every operand placement
 * against plain C on the interpreter and on TERN_GPU's runtime when it names another (OpenCL
 * under ctest, cuda on the H200: scripts/h200/wgmma.sh). The operands are small integers, so
 * every sum is exact in f32 in any order and the results must match exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/half.h"
#include "tern/kernel.h"

#define GROUP 256 /* two warpgroups */
#define GROUPS 2
#define WGS (GROUPS * GROUP / 128) /* products in a launch */

/* One product's shape and its operands' places. */
typedef struct wg_case {
    const char *name;
    int n, k;
    int a_place;    /* 0 registers, 1 a K-major tile (64 rows of k), 2 a tile of k rows */
    bool b_k_rows;  /* B's tile is k rows of n (else n rows of k) */
    int extra_rows; /* the tiles are taller by this (a multiple of 8) and the operands start
                     * that many rows down, at a multiple of 512 elements */
} wg_case;

/* Tile rows of an operand whose used rows are `used`. */
static int tile_rows(const wg_case *c, int used) { return used + c->extra_rows; }
/* The tile array's elements per warpgroup for an operand of `used` rows and `cols` columns. */
static int tile_elems(const wg_case *c, int used, int cols) { return (cols + 63) / 64 * tile_rows(c, used) * 64; }

/* This thread's registers of A [64 x k] (row-major at A[base]) in tern_mma_bf16's a layout:
 * rows row0 (= 16 j + g) and row0 + 8, columns 2 t .. of each step of 16. */
static void load_a(tern_v A, tern_v base, int k, tern_v row0, tern_v t, tern_v *a) {
    for (int s = 0; s < k / 16; s++)
        for (int r = 0; r < 8; r++) {
            tern_v m = tern_add(row0, tern_int(r & 2 ? 8 : 0));
            tern_v kk = tern_add(tern_mul(t, tern_int(2)), tern_int(16 * s + (r & 4 ? 8 : 0) + (r & 1)));
            a[8 * s + r] = tern_load(A, tern_add(base, tern_add(tern_mul(m, tern_int(k)), kk)));
        }
}

/* The index in a row-major [64 x n] matrix of this thread's accumulator e: row row0 (+ 8),
 * column 8 (e / 4) + 2 t (+ 1). */
static tern_v frag_at(int n, tern_v row0, tern_v t, int e) {
    tern_v m = tern_add(row0, tern_int(e % 4 >= 2 ? 8 : 0));
    tern_v col = tern_add(tern_mul(t, tern_int(2)), tern_int(8 * (e / 4) + (e & 1)));
    return tern_add(tern_mul(m, tern_int(n)), col);
}

/* The runtime, or NULL (said) when it cannot open here. */
static tern_rt *open_runtime(const char *runtime) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        printf("test_kernel_wgmma: %s skipped: %s\n", runtime, tern_error_message(err));
        tern_error_free(err);
        return NULL;
    }
    return rt;
}

/* ---- the kernel ----
 * Product q = group * 2 + warpgroup: D[q] = A[q] B[q] + C[q], A [64][k], B [k][n], C and D
 * [64][n], all f32 in memory (A and B small integers, exact in bf16). The warpgroup's threads
 * store its tiles element by element (through tern_wg_tile_index), then a barrier, then the
 * product, each thread storing its fragment of D. */
static void k_product(tern_kb *kb, void *user) {
    const wg_case *c = user;
    const int n = c->n, k = c->k;
    tern_v A = tern_param_buf(kb, "A", TERN_T_F32, TERN_READ);
    tern_v B = tern_param_buf(kb, "B", TERN_T_F32, TERN_READ);
    tern_v C = tern_param_buf(kb, "C", TERN_T_F32, TERN_READ);
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE);
    int b_used = c->b_k_rows ? k : n, b_cols = c->b_k_rows ? n : k;
    int a_used = c->a_place == 2 ? k : 64, a_cols = c->a_place == 2 ? 64 : k;
    int b_size = tile_elems(c, b_used, b_cols), a_size = c->a_place ? tile_elems(c, a_used, a_cols) : 0;
    tern_v bt = tern_shared_tiles(kb, "bt", (size_t)b_size * 2);
    tern_v at = c->a_place ? tern_shared_tiles(kb, "at", (size_t)a_size * 2) : bt; /* bt: unused */
    tern_v tid = tern_local_index(kb);
    tern_v wg = tern_div(tid, tern_int(128)), t128 = tern_rem(tid, tern_int(128));
    tern_v q = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(2)), wg);
    /* this warpgroup's tiles start `extra_rows` rows into its part of each array */
    tern_v b_at = tern_add(tern_mul(wg, tern_int(b_size)), tern_int(c->extra_rows * 64));
    tern_v a_at = tern_add(tern_mul(wg, tern_int(a_size)), tern_int(c->extra_rows * 64));
    /* B: element (kk, col) of B[q] to the tile's (row, column) */
    TERN_FOR(kb, e, t128, tern_int(k * n), tern_int(128)) {
        tern_v kk = tern_div(e, tern_int(n)), col = tern_rem(e, tern_int(n));
        tern_v x = tern_load(B, tern_add(tern_mul(q, tern_int(k * n)), e));
        tern_v idx = c->b_k_rows ? tern_wg_tile_index(b_at, tile_rows(c, b_used), kk, col)
                                 : tern_wg_tile_index(b_at, tile_rows(c, b_used), col, kk);
        tern_store(bt, idx, x);
    }
    if (c->a_place) {
        TERN_FOR(kb, e, t128, tern_int(64 * k), tern_int(128)) {
            tern_v m = tern_div(e, tern_int(k)), kk = tern_rem(e, tern_int(k));
            tern_v x = tern_load(A, tern_add(tern_mul(q, tern_int(64 * k)), e));
            tern_v idx = c->a_place == 2 ? tern_wg_tile_index(a_at, tile_rows(c, a_used), kk, m)
                                         : tern_wg_tile_index(a_at, tile_rows(c, a_used), m, kk);
            tern_store(at, idx, x);
        }
    }
    tern_barrier(kb);
    /* this thread's rows (16 j + g, + 8) and column pairs (8 b + 2 t) */
    tern_v lane = tern_rem(tid, tern_int(32)), j = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v g = tern_div(lane, tern_int(4)), t = tern_rem(lane, tern_int(4));
    tern_v row0 = tern_add(tern_mul(j, tern_int(16)), g);
    tern_v a[128], cv[128], d[128];
    if (!c->a_place) load_a(A, tern_mul(q, tern_int(64 * k)), k, row0, t, a);
    for (int e = 0; e < n / 2; e++) cv[e] = tern_load(C, tern_add(tern_mul(q, tern_int(64 * n)), frag_at(n, row0, t, e)));
    tern_wg_tile b_tile = {bt, b_at, tile_rows(c, b_used), c->b_k_rows};
    tern_wg_tile a_tile = {at, a_at, tile_rows(c, a_used), c->a_place == 2};
    tern_wgmma_bf16(kb, n, k, c->a_place ? NULL : a, c->a_place ? &a_tile : NULL, &b_tile, cv, d);
    for (int e = 0; e < n / 2; e++) tern_store(D, tern_add(tern_mul(q, tern_int(64 * n)), frag_at(n, row0, t, e)), d[e]);
}

static void run_case(const char *runtime, const wg_case *c, const tern_kernel *kern) {
    tern_rt *rt = open_runtime(runtime);
    if (!rt) return;
    const int n = c->n, k = c->k;
    size_t na = (size_t)WGS * 64 * k, nb = (size_t)WGS * k * n, nc = (size_t)WGS * 64 * n;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C = malloc(nc * sizeof *C);
    float *D = malloc(nc * sizeof *D), *want = malloc(nc * sizeof *want);
    if (!A || !B || !C || !D || !want) {
        CHECKF(false, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < na; i++) A[i] = (float)((int)((i * 7 + 3) % 9) - 4);
    for (size_t i = 0; i < nb; i++) B[i] = (float)((int)((i * 5 + 1) % 7) - 3);
    for (size_t i = 0; i < nc; i++) C[i] = (float)((int)(i % 11) - 5), D[i] = -12345.0f;
    for (int q = 0; q < WGS; q++)
        for (int m = 0; m < 64; m++)
            for (int col = 0; col < n; col++) {
                double s = C[((size_t)q * 64 + m) * n + col];
                for (int kk = 0; kk < k; kk++)
                    s += (double)A[((size_t)q * 64 + m) * k + kk] * B[((size_t)q * k + kk) * n + col];
                want[((size_t)q * 64 + m) * n + col] = (float)s;
            }
    tern_arg args[] = {tern_arg_host_in(TERN_T_F32, A, na), tern_arg_host_in(TERN_T_F32, B, nb),
                       tern_arg_host_in(TERN_T_F32, C, nc), tern_arg_host(TERN_T_F32, D, nc)};
    CHECK_OK(tern_launch(rt, kern, tern_dims1(GROUPS), tern_dims1(GROUP), args, 4));
    int bad = 0;
    for (size_t i = 0; i < nc; i++)
        if (D[i] != want[i] && bad++ < 5)
            fprintf(stderr, "  %s %s: D[%zu] = %g, want %g\n", runtime, c->name, i, D[i], want[i]);
    CHECKF(bad == 0, "%s, case %s: %d of %zu results differ", runtime, c->name, bad, nc);
done:
    free(A);
    free(B);
    free(C);
    free(D);
    free(want);
    tern_rt_close(rt);
}

static const wg_case cases[] = {
    {"regs_kmajor_n64_k64", 64, 64, 0, false, 0},    /* S = Q K^T: q in registers, K's rows */
    {"regs_krows_n64_k64", 64, 64, 0, true, 0},      /* O += P V: V's rows are k */
    {"tile_kmajor_n128_k128", 128, 128, 1, false, 0}, /* two panels along k */
    {"tile_krows_n128_k32", 128, 32, 2, true, 0},    /* two panels along n */
    {"regs_kmajor_n8_k16", 8, 16, 0, false, 0},
    {"regs_kmajor_n256_k16", 256, 16, 0, false, 0},
    {"tall_tiles_n64_k64", 64, 64, 1, false, 8},     /* operands 8 rows into taller tiles */
    {"tall_krows_n64_k80", 64, 80, 2, true, 16},     /* k not a multiple of 64 */
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void expect_in(const char *what, const char *text, const char *needle, bool present);
static int nvrtc(const tern_kernel *k, const char *arch);

/* ---- the asynchronous form ----
 * Per warpgroup q: x = C + A B1 and y = C + A B2 in flight together; after tern_wgmma_wait(1)
 * x is done (stored as D1), then x += A B2 is issued behind y; after tern_wgmma_wait(0), D2 =
 * y and D3 = x. Then a loop of four products into z = C, each waited for in its iteration:
 * D4 = C + sum of A B_t. Then a chain: three products into u = C issued back to back, each
 * on the one before, one wait for all: D5 = C + A B_0 + A B_1 + A B_2. A [64 x 32] in
 * registers, B1, B2 and B_t [32 x 64] K-major tiles. */
#define AS_K 32
#define AS_N 64

static void k_async(tern_kb *kb, void *user) {
    (void)user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_F32, TERN_READ);  /* [WGS][64][AS_K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_F32, TERN_READ);  /* [WGS][4][AS_K][AS_N] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_F32, TERN_READ);  /* [WGS][64][AS_N] */
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE); /* [WGS][5][64][AS_N] */
    const int tile = AS_N * AS_K; /* one B in memory */
    const int st = AS_N * 64;     /* ... and as a tile: n rows of a 64-column panel */
    tern_v bt = tern_shared_tiles(kb, "bt", (size_t)st * 4 * 2);
    tern_v tid = tern_local_index(kb), wg = tern_div(tid, tern_int(128)), t128 = tern_rem(tid, tern_int(128));
    tern_v q = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(2)), wg);
    TERN_FOR(kb, e, t128, tern_int(4 * tile), tern_int(128)) {
        tern_v which = tern_div(e, tern_int(tile)), rest = tern_rem(e, tern_int(tile));
        tern_v kk = tern_div(rest, tern_int(AS_N)), col = tern_rem(rest, tern_int(AS_N));
        tern_v at = tern_add(tern_mul(wg, tern_int(4 * st)), tern_mul(which, tern_int(st)));
        tern_store(bt, tern_wg_tile_index(at, AS_N, col, kk), tern_load(B, tern_add(tern_mul(q, tern_int(4 * tile)), e)));
    }
    tern_barrier(kb);
    tern_v lane = tern_rem(tid, tern_int(32)), j = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v g = tern_div(lane, tern_int(4)), t = tern_rem(lane, tern_int(4));
    tern_v row0 = tern_add(tern_mul(j, tern_int(16)), g);
    tern_v a[AS_K / 2], x[AS_N / 2], y[AS_N / 2], z[AS_N / 2], u[AS_N / 2];
    load_a(A, tern_mul(q, tern_int(64 * AS_K)), AS_K, row0, t, a);
    tern_v at_c[AS_N / 2];
    for (int e = 0; e < AS_N / 2; e++) {
        at_c[e] = frag_at(AS_N, row0, t, e);
        tern_v c0 = tern_load(C, tern_add(tern_mul(q, tern_int(64 * AS_N)), at_c[e]));
        char name[16];
        snprintf(name, sizeof name, "x%d", e);
        x[e] = tern_var(kb, name, c0);
        snprintf(name, sizeof name, "y%d", e);
        y[e] = tern_var(kb, name, c0);
        snprintf(name, sizeof name, "z%d", e);
        z[e] = tern_var(kb, name, c0);
        snprintf(name, sizeof name, "u%d", e);
        u[e] = tern_var(kb, name, c0);
    }
    tern_v base = tern_mul(wg, tern_int(4 * st));
    tern_wg_tile b1 = {bt, base, AS_N, false}, b2 = {bt, tern_add(base, tern_int(st)), AS_N, false};
    tern_wgmma_bf16_async(kb, AS_N, AS_K, a, NULL, &b1, x);
    tern_wgmma_bf16_async(kb, AS_N, AS_K, a, NULL, &b2, y);
    tern_wgmma_wait(kb, 1); /* x is done, y may not be */
    tern_v out = tern_mul(q, tern_int(5 * 64 * AS_N));
    for (int e = 0; e < AS_N / 2; e++) tern_store(D, tern_add(out, at_c[e]), x[e]);
    tern_wgmma_bf16_async(kb, AS_N, AS_K, a, NULL, &b2, x);
    tern_wgmma_wait(kb, 0);
    for (int e = 0; e < AS_N / 2; e++) {
        tern_store(D, tern_add(tern_add(out, tern_int(64 * AS_N)), at_c[e]), y[e]);
        tern_store(D, tern_add(tern_add(out, tern_int(2 * 64 * AS_N)), at_c[e]), x[e]);
    }
    TERN_FOR(kb, it, tern_int(0), tern_int(4), tern_int(1)) {
        tern_wg_tile bi = {bt, tern_add(base, tern_mul(it, tern_int(st))), AS_N, false};
        tern_wgmma_bf16_async(kb, AS_N, AS_K, a, NULL, &bi, z);
        tern_wgmma_wait(kb, 0);
    }
    for (int e = 0; e < AS_N / 2; e++) tern_store(D, tern_add(tern_add(out, tern_int(3 * 64 * AS_N)), at_c[e]), z[e]);
    for (int it = 0; it < 3; it++) { /* the chain */
        tern_wg_tile bi = {bt, tern_add(base, tern_int(it * st)), AS_N, false};
        tern_wgmma_bf16_async(kb, AS_N, AS_K, a, NULL, &bi, u);
    }
    tern_wgmma_wait(kb, 0);
    for (int e = 0; e < AS_N / 2; e++) tern_store(D, tern_add(tern_add(out, tern_int(4 * 64 * AS_N)), at_c[e]), u[e]);
}

static void run_async(const char *runtime, const tern_kernel *kern) {
    tern_rt *rt = open_runtime(runtime);
    if (!rt) return;
    enum { NA = WGS * 64 * AS_K, NB = WGS * 4 * AS_K * AS_N, NC = WGS * 64 * AS_N, ND = 5 * NC };
    static float A[NA], B[NB], C[NC], D[ND], want[ND];
    for (int i = 0; i < NA; i++) A[i] = (float)((i * 5 + 2) % 7 - 3);
    for (int i = 0; i < NB; i++) B[i] = (float)((i * 3 + 1) % 5 - 2);
    for (int i = 0; i < NC; i++) C[i] = (float)(i % 13 - 6);
    for (int i = 0; i < ND; i++) D[i] = -12345.0f;
    for (int q = 0; q < WGS; q++)
        for (int m = 0; m < 64; m++)
            for (int col = 0; col < AS_N; col++) {
                double p[4] = {0, 0, 0, 0}; /* A B_t */
                for (int u = 0; u < 4; u++)
                    for (int kk = 0; kk < AS_K; kk++)
                        p[u] += (double)A[(q * 64 + m) * AS_K + kk] * B[((q * 4 + u) * AS_K + kk) * AS_N + col];
                double c = C[(q * 64 + m) * AS_N + col];
                float *w = want + (size_t)q * 5 * 64 * AS_N + m * AS_N + col;
                w[0] = (float)(c + p[0]);
                w[64 * AS_N] = (float)(c + p[1]);
                w[2 * 64 * AS_N] = (float)(c + p[0] + p[1]);
                w[3 * 64 * AS_N] = (float)(c + p[0] + p[1] + p[2] + p[3]);
                w[4 * 64 * AS_N] = (float)(c + p[0] + p[1] + p[2]);
            }
    tern_arg args[] = {tern_arg_host_in(TERN_T_F32, A, NA), tern_arg_host_in(TERN_T_F32, B, NB),
                       tern_arg_host_in(TERN_T_F32, C, NC), tern_arg_host(TERN_T_F32, D, ND)};
    CHECK_OK(tern_launch(rt, kern, tern_dims1(GROUPS), tern_dims1(GROUP), args, 4));
    int bad = 0;
    for (int i = 0; i < ND; i++)
        if (D[i] != want[i] && bad++ < 5) fprintf(stderr, "  %s async: D[%d] = %g, want %g\n", runtime, i, D[i], want[i]);
    CHECKF(bad == 0, "%s, the asynchronous products: %d of %d results differ", runtime, bad, (int)ND);
    tern_rt_close(rt);
}

/* The tracer's rules for the asynchronous form. */
typedef struct as_err {
    int what; /* 0 read early, 1 assign early, 2 no wait in the block, 3 none at the end, 4 a
               * nested wait, 5 acc a value, 6 pending 8, 7 acc twice, 8 a product on part of
               * another's accumulators (not a chain), 9 a chain across blocks */
} as_err;

static void e_async(tern_kb *kb, void *u) {
    const as_err *o = u;
    tern_v t = tern_shared_tiles(kb, "t", 8192), a[8], acc[8];
    for (int j = 0; j < 8; j++) {
        a[j] = tern_f32(1);
        char name[8];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = o->what == 5 ? tern_f32(0) : tern_var(kb, name, tern_f32(0));
    }
    if (o->what == 7) acc[3] = acc[1];
    tern_wg_tile b = {t, tern_int(0), 16, false};
    switch (o->what) {
    case 0:
    case 1:
    case 3:
    case 5:
    case 7:
        tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, acc);
        if (o->what == 0) tern_var(kb, "early", acc[2]);
        if (o->what == 1) tern_assign(acc[0], tern_f32(2));
        break;
    case 2:
        TERN_IF(kb, tern_lt(tern_local_index(kb), tern_int(1000))) { tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, acc); }
        break;
    case 4:
        tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, acc);
        TERN_IF(kb, tern_lt(tern_local_index(kb), tern_int(1000))) { tern_wgmma_wait(kb, 0); }
        tern_wgmma_wait(kb, 0);
        break;
    case 6: tern_wgmma_wait(kb, 8); break;
    case 8: {
        tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, acc);
        tern_v part[8];
        for (int j = 0; j < 8; j++) part[j] = j < 7 ? acc[j + 1] : tern_var(kb, "other", tern_f32(0));
        tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, part);
        tern_wgmma_wait(kb, 0);
        break;
    }
    case 9:
        tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, acc);
        TERN_IF(kb, tern_lt(tern_local_index(kb), tern_int(1000))) {
            tern_wgmma_bf16_async(kb, 16, 16, a, NULL, &b, acc);
            tern_wgmma_wait(kb, 0);
        }
        tern_wgmma_wait(kb, 0);
        break;
    }
}

static void expect_async_error(const char *name, int what, const char *needle) {
    as_err o = {what};
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, e_async, &o, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name), "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_async_errors(void) {
    expect_async_error("read_early", 0, "variable 'acc2' read while a wgmma_bf16_async product writes it; tern_wgmma_wait first");
    expect_async_error("assign_early", 1, "variable 'acc0' assigned while a wgmma_bf16_async product writes it");
    expect_async_error("block_end", 2, "a wgmma_bf16_async product issued in this block is still in flight at its end");
    expect_async_error("kernel_end", 3, "kernel 'kernel_end': 1 wgmma_bf16_async product is still in flight at its end");
    expect_async_error("nested_wait", 4, "wgmma_wait inside a block while a product issued outside it is in flight");
    expect_async_error("acc_value", 5, "wgmma_bf16_async: acc[0] is not an f32 variable in scope (tern_var)");
    expect_async_error("pending", 6, "wgmma_wait: pending 8 is not in 0..7");
    expect_async_error("acc_twice", 7, "wgmma_bf16_async: acc[3] is also an earlier accumulator of the product");
    expect_async_error("not_a_chain", 8, "variable 'acc1' is an accumulator while a wgmma_bf16_async product writes it");
    expect_async_error("chain_in_block", 9, "variable 'acc0' is an accumulator while a wgmma_bf16_async product writes it");
}

static void test_async(void) {
    test_async_errors();
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("async_products", k_async, NULL, &k));
    if (!k) return;
    char *dump = tern_kernel_dump(k), *cu = NULL, *cl = NULL;
    expect_in("dump", dump, "wgmma_bf16_async m64n64k32 a {", true);
    expect_in("dump", dump, "acc {x0, x1,", true);
    expect_in("dump", dump, "wgmma_wait 1 (32 accumulators done)", true);
    free(dump);
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
    expect_in("cuda", cu, "wgmma.wait_group.sync.aligned 1;", true);
    expect_in("cuda", cu, "asm volatile(\"\" : \"+f\"(x0), \"+f\"(x1),", true); /* the completed accumulators */
    expect_in("cuda", cu, "\"+f\"(y31) : ", true);
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_OPENCL, &cl));
    expect_in("opencl", cl, "/* wgmma_wait 1: products are made at once here */", true);
    free(cu);
    free(cl);
    const char *archs[] = {"sm_90a", "sm_80"};
    for (int a = 0; a < 2; a++)
        if (nvrtc(k, archs[a]) < 0) break;
    run_async("host", k);
    const char *gpu = getenv("TERN_GPU");
    if (gpu && *gpu && strcmp(gpu, "host")) run_async(gpu, k);
    tern_kernel_free(k);
}

/* ---- the builder's checks ---- */

/* One product that the builder refuses, by its options. */
typedef struct e_opts {
    int n, k;
    bool a_tile_too; /* A given both ways */
    bool plain;      /* B in a tern_shared array */
    bool k_rows;     /* B's tile has k rows */
    int rows;        /* B's tile's rows */
    bool at_f32;     /* B's index an f32 */
} e_opts;

static void e_product(tern_kb *kb, void *u) {
    const e_opts *o = u;
    tern_v t = o->plain ? tern_shared(kb, "plain", TERN_T_BF16, 8192) : tern_shared_tiles(kb, "t", 8192);
    tern_v a[8], c[128], d[128];
    for (int j = 0; j < 8; j++) a[j] = tern_f32(0);
    for (int j = 0; j < 128; j++) c[j] = tern_f32(0);
    tern_wg_tile b = {t, o->at_f32 ? tern_f32(0) : tern_int(0), o->rows, o->k_rows};
    tern_wgmma_bf16(kb, o->n, o->k, a, o->a_tile_too ? &b : NULL, &b, c, d);
}

static void e_index_rows(tern_kb *kb, void *u) {
    (void)u;
    tern_v t = tern_shared_tiles(kb, "t", 8192);
    tern_store(t, tern_wg_tile_index(tern_int(0), 12, tern_local_index(kb), tern_int(0)), tern_f32(1));
}

static void expect_error(const char *name, tern_trace_fn fn, const void *user, const char *needle) {
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, fn, (void *)user, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_wgmma.c:"),
           "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_builder_errors(void) {
    static const e_opts shape = {12, 16, .rows = 64}, shape_k = {16, 24, .rows = 64},
                        both = {16, 16, .a_tile_too = true, .rows = 64}, plain = {16, 16, .plain = true, .rows = 64},
                        krows_n = {32, 16, .k_rows = true, .rows = 64}, rows = {64, 16, .rows = 32},
                        at_type = {16, 16, .rows = 64, .at_f32 = true};
    expect_error("shape", e_product, &shape, "wgmma_bf16: n 12, k 16; n is a multiple of 8 from 8 to 256");
    expect_error("shape_k", e_product, &shape_k, "wgmma_bf16: n 16, k 24;");
    expect_error("both", e_product, &both, "wgmma_bf16: a and a_tile are both given; A is one of them");
    expect_error("plain_shared", e_product, &plain, "wgmma_bf16: B's tile is in 'plain', not a tern_shared_tiles array");
    expect_error("krows_n", e_product, &krows_n,
                 "wgmma_bf16: n 32 with B's tile of k rows; such a tile's rows are whole panels of 64");
    expect_error("rows", e_product, &rows, "wgmma_bf16: B's tile has 32 rows; it needs at least 64, a multiple of 8");
    expect_error("at_type", e_product, &at_type, "wgmma_bf16: B's tile index is f32; it is an i32");
    expect_error("index_rows", e_index_rows, NULL, "wg_tile_index: a tile of 12 rows; rows are a multiple of 8");
}

/* ---- the interpreter's checks ---- */

typedef struct r_opts {
    int at;        /* B's tile index (threads 64 .. 127 of a warpgroup add `skew`) */
    int skew;
    size_t elems;  /* the tile array's size */
} r_opts;

static void r_product(tern_kb *kb, void *u) {
    const r_opts *o = u;
    tern_v t = tern_shared_tiles(kb, "t", o->elems), a[8], c[8], d[8];
    for (int j = 0; j < 8; j++) a[j] = c[j] = tern_f32(0);
    tern_v half = tern_div(tern_rem(tern_local_index(kb), tern_int(128)), tern_int(64));
    tern_wg_tile b = {t, tern_add(tern_int(o->at), tern_mul(half, tern_int(o->skew))), 16, false};
    tern_wgmma_bf16(kb, 16, 16, a, NULL, &b, c, d);
}

static void expect_run_error(tern_rt *rt, const char *name, r_opts o, int threads, const char *needle) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(name, r_product, &o, &k));
    if (!k) return;
    tern_error *err = tern_launch(rt, k, tern_dims1(1), tern_dims1(threads), NULL, 0);
    const char *msg = err ? tern_error_message(err) : "success";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_wgmma.c:"),
           "%s: got '%s', want '%s'", name, msg, needle);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_interpreter_checks(void) {
    tern_rt *rt = NULL;
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return;
    expect_run_error(rt, "aligned", (r_opts){256, 0, 4096}, 128,
                     "wgmma_bf16: B's tile at 256 (16 rows of 16 columns, panels 16 rows apart) is not at a "
                     "multiple of 512 elements of its array (4096 elements)");
    expect_run_error(rt, "bounds", (r_opts){512, 0, 1024}, 128, "is out of bounds of its array (1024 elements)");
    expect_run_error(rt, "uniform", (r_opts){0, 512, 4096}, 128, "wgmma_bf16: B's tile index 512 differs from 0 "
                                                                 "in the same warpgroup");
    expect_run_error(rt, "threads", (r_opts){0, 0, 4096}, 64, "wgmma_bf16 in a threadgroup of 64 threads; warpgroup "
                                                              "products need a multiple of 128");
    tern_rt_close(rt);
}

/* ---- purity, dump, emitters ---- */

static void p_wgmma(tern_kb *kb, void *u) {
    (void)u;
    tern_v t = tern_shared_tiles(kb, "t", 8192), a[8], c[8], d[8];
    for (int j = 0; j < 8; j++) a[j] = c[j] = tern_f32(1);
    tern_wg_tile b = {t, tern_int(0), 16, false};
    tern_wgmma_bf16(kb, 16, 16, a, NULL, &b, c, d);
    tern_result(kb, d[0]);
}

static void expect_in(const char *what, const char *text, const char *needle, bool present) {
    bool found = text && strstr(text, needle);
    CHECKF(found == present, "%s %s '%s'", what, present ? "lacks" : "has", needle);
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

static void test_text(tern_kernel *const *kernels) {
    tern_kernel *p = NULL;
    CHECK_OK(tern_kernel_build("products", p_wgmma, NULL, &p));
    if (p) CHECK_ERR(tern_kernel_check_pure(p, "map"), "map: kernel 'products' is not pure: it uses SIMD-group operations");
    tern_kernel_free(p);
    char *dump = tern_kernel_dump(kernels[0]);
    expect_in("dump", dump, "wgmma_bf16 m64n64k64 a {", true);
    expect_in("dump", dump, ", b bt[", true);
    free(dump);
    dump = tern_kernel_dump(kernels[3]);
    expect_in("dump", dump, "wgmma_bf16 m64n128k32 a at[", true);
    expect_in("dump", dump, "] (32 rows of k), b bt[", true);
    free(dump);
    CHECK(tern_kernel_hash(kernels[0]) != tern_kernel_hash(kernels[1])); /* B's place is part of it */

    char *cu = NULL, *cl = NULL, *mtl = NULL;
    CHECK_OK(tern_kernel_emit(kernels[1], TERN_TARGET_CUDA, &cu));
    CHECK_OK(tern_kernel_emit(kernels[1], TERN_TARGET_OPENCL, &cl));
    CHECK_OK(tern_kernel_emit(kernels[1], TERN_TARGET_METAL, &mtl));
    expect_in("cuda", cu, "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)", true);
    expect_in("cuda", cu, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1,", true);
    expect_in("cuda", cu, "p, 1, 1, 1; }", true); /* B of k rows: transposed */
    expect_in("cuda", cu, "fence.proxy.async.shared::cta;", true);
    expect_in("cuda", cu, "& 1023u) __trap();", true); /* a tile off its 1,024-byte boundary faults */
    expect_in("cuda", cu, "wgmma.commit_group.sync.aligned;", true);
    expect_in("cuda", cu, "wgmma.wait_group.sync.aligned 0;", true);
    expect_in("cuda", cu, "__shared__ __align__(1024) unsigned short bt[", true);
    expect_in("cuda", cu, "tern_mma_bf16(", true); /* the fallback */
    expect_in("opencl", cl, "tern_mma_bf16(", true);
    expect_in("opencl", cl, "tern_wg_at(", true);
    expect_in("opencl", cl, "wgmma", false);
    expect_in("metal", mtl, "tern_mma_bf16(", true);
    expect_in("metal", mtl, "tern_sgitg", true);
    free(cu);
    free(cl);
    free(mtl);
    CHECK_OK(tern_kernel_emit(kernels[2], TERN_TARGET_CUDA, &cu));
    expect_in("cuda", cu, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,", true);
    expect_in("cuda", cu, "p, 1, 1, 0, 0; }", true); /* A and B from K-major tiles */
    free(cu);

    /* sm_90a: wgmma; sm_90 and sm_80: the fallback */
    const char *archs[] = {"sm_90a", "sm_90", "sm_80"};
    for (int i = 0; i < NCASES; i++)
        for (int a = 0; a < 3; a++)
            if (nvrtc(kernels[i], archs[a]) < 0) {
                printf("test_kernel_wgmma: nvrtc skipped (not built in)\n");
                return;
            }
}

int main(void) {
    test_builder_errors();
    test_async();
    test_interpreter_checks();
    tern_kernel *kernels[NCASES] = {0};
    bool built = true;
    for (int i = 0; i < NCASES; i++) {
        CHECK_OK(tern_kernel_build(cases[i].name, k_product, (void *)&cases[i], &kernels[i]));
        built = built && kernels[i];
    }
    if (built) {
        test_text(kernels);
        const char *gpu = getenv("TERN_GPU");
        for (int i = 0; i < NCASES; i++) {
            run_case("host", &cases[i], kernels[i]);
            if (gpu && *gpu && strcmp(gpu, "host")) run_case(gpu, &cases[i], kernels[i]);
        }
    }
    for (int i = 0; i < NCASES; i++) tern_kernel_free(kernels[i]);
    return check_summary("test_kernel_wgmma");
}
