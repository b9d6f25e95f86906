/* Pipes (TERN_PIPE, tern/kernel.h): a producer warpgroup (or one warp) copying slices of B
 * into a ring that two consumer warpgroups multiply from, step by step. Kernels traced with
 * their steps unrolled, the products chained across consume blocks (lag 1; with setmaxnreg;
 * with a one-warp producer), and one whose steps are a loop at run time (lag 0, each product
 * waited for in its block); each way of copying, 16 bytes a thread or a whole tile at once
 * (tern_copy_tile: TMA on CUDA's sm_90, from a matrix whose slices sit two panels wide at
 * column 64); the consumers' accumulators poisoned in the producer's threads after the pipe
 * on the interpreter; a tile copy outside its matrix refused there; the tracer's
 * refusals; threadgroup memory other than the ring handed from the consumers to the producer
 * in the ring's order (the hand-off a GEMM's epilogue uses); the emitters (CUDA's two
 * branches with mbarriers and setmaxnreg, the lockstep targets' barriers before each block);
 * NVRTC for sm_90a and sm_80; and both kernels on the interpreter and on TERN_GPU's runtime
 * when it names another (OpenCL under ctest, cuda on the H200). Small integer operands: every
 * sum is exact in f32 in any order, so the results must match exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nvrtc_check.h"
#include "tern/half.h"
#include "tern/kernel.h"

enum {
    GROUPS = 2,
    WGS = GROUPS * 2, /* consumer warpgroups in a launch */
    PN = 64,      /* the product's columns */
    PK = 64,      /* a step's k: one panel */
    STEPS = 7,    /* slices of B through the ring */
    SLICE = PN * PK,
    /* tern_copy_tile's B: a matrix [GROUPS * STEPS * PN / 2][TILE_COLS] whose slice (g, s)
     * is rows (g STEPS + s) PN / 2 .., columns 64 .. 191: B[g][s][n][k] at column 64 + k for
     * n < PN / 2, 128 + k for the rest (a 32 x 128 box lands as the 64 x 64 tile) */
    TILE_COLS = 192,
    TILE_ROWS = GROUPS * STEPS * PN / 2,
};

/* ---- the kernels ----
 * Per consumer warpgroup q = group * 2 + w: D[q] = sum over steps s of A[q] B[group][s], A
 * [64][PK] and B [PN][PK] (B's rows are its columns: k runs along them) bf16, D [64][PN] f32.
 * Before the pipe every thread stages the two A tiles; in the pipe the producer copies B's
 * slices 16 bytes at a time into the ring (slot s % stages), the consumers multiply. After
 * it the consumers store D and the producer E[group][t] = its steps counted + t. */
typedef struct pipe_kernel {
    bool unrolled; /* the steps traced one by one (products chained, lag 1) or a loop (lag 0) */
    int regs;      /* setmaxnreg for the consumers (the producer 40), 0 none */
    int producers; /* the producer's threads: its warpgroup (128) or its first warp (32) */
    bool tiles;    /* B's slices by tern_copy_tile from the matrix above, else tern_copy_async */
    bool sync;     /* D stored in the last consume block, each thread its partner's (local index
                    * ^ 1) through threadgroup memory and a tern_pipe_sync (unrolled only) */
    bool hand;     /* unrolled, 3 stages: consume steps 1 and 3 put each consumer's acc[0] into a
                    * threadgroup array `hand` [256], which produce steps 3 and 5 (whose slots
                    * those blocks freed) store to H [GROUPS][2][256]; consume step 3 rewrites it
                    * after produce step 3 read it (it waits for that block's slot) */
} pipe_kernel;

/* The steps after which `hand` holds acc[0], and the produce steps that read it. */
enum { HAND_STEPS = 2 };
static const int hand_consume[HAND_STEPS] = {1, 3}, hand_produce[HAND_STEPS] = {3, 5};

/* D [q][m][n] of warpgroup q = group * 2 + wg's accumulator j in thread tid of it (the
 * product's c layout: d[4 b + r] is D[16 sg + g + 8 (r / 2)][8 b + 2 t + r % 2]). */
static tern_v d_index(tern_v group, tern_v tid, int j) {
    tern_v wg = tern_div(tid, tern_int(128)), lane = tern_rem(tid, tern_int(32));
    tern_v sg = tern_rem(tern_div(tid, tern_int(32)), tern_int(4)), t = tern_rem(lane, tern_int(4));
    tern_v m = tern_add(tern_add(tern_mul(sg, tern_int(16)), tern_div(lane, tern_int(4))),
                        tern_int(j % 4 >= 2 ? 8 : 0));
    tern_v col = tern_add(tern_mul(t, tern_int(2)), tern_int(8 * (j / 4) + (j & 1)));
    tern_v q = tern_add(tern_mul(group, tern_int(2)), wg);
    return tern_add(tern_mul(q, tern_int(64 * PN)), tern_add(tern_mul(m, tern_int(PN)), col));
}

static void k_pipe(tern_kb *kb, void *user) {
    const pipe_kernel *o = user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);  /* [WGS][64][PK] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);  /* [GROUPS][STEPS][PN][PK], or the matrix */
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE);  /* [WGS][64][PN] */
    tern_v E = tern_param_buf(kb, "E", TERN_T_F32, TERN_WRITE);  /* [GROUPS][128] */
    tern_v F = tern_param_buf(kb, "F", TERN_T_F32, TERN_WRITE);  /* [GROUPS][128] */
    tern_v H = o->hand ? tern_param_buf(kb, "H", TERN_T_F32, TERN_WRITE) : F; /* [GROUPS][HAND_STEPS][256] */
    const int group_size = 256 + o->producers;
    tern_max_threads(kb, group_size);
    const int stages = o->unrolled ? 3 : 2, a_tiles = 2 * 64 * PK;
    tern_v tiles = tern_shared_tiles(kb, "tiles", (size_t)a_tiles + (size_t)stages * SLICE);
    tern_v stage = o->sync ? tern_shared(kb, "stage", TERN_T_F32, 256 * PN / 2) : tiles; /* [256][PN / 2] */
    tern_v hand = o->hand ? tern_shared(kb, "hand", TERN_T_F32, 256) : tiles;
    tern_v tid = tern_local_index(kb), wg = tern_div(tid, tern_int(128)), t128 = tern_rem(tid, tern_int(128));
    tern_v group = tern_group_id(kb, 0);
    TERN_FOR(kb, e, tid, tern_int(a_tiles), tern_int(group_size)) {
        tern_v w = tern_div(e, tern_int(64 * PK)), rest = tern_rem(e, tern_int(64 * PK));
        tern_v m = tern_div(rest, tern_int(PK)), kk = tern_rem(rest, tern_int(PK));
        tern_store(tiles, tern_wg_tile_index(tern_mul(w, tern_int(64 * PK)), 64, m, kk),
                   tern_load(A, tern_add(tern_mul(group, tern_int(a_tiles)), e)));
    }
    tern_barrier(kb);
    tern_v acc[PN / 2];
    for (int j = 0; j < PN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    tern_v steps = tern_var(kb, "steps", tern_int(0));
    tern_v b_group = tern_mul(group, tern_int(STEPS * SLICE));
    tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = stages, .lag = o->unrolled ? 1 : 0,
                   .producer_regs = o->regs ? 40 : 0, .consumer_regs = o->regs};
    TERN_PIPE(kb, &p) {
        /* what both roles use: the ring's base after the A tiles */
        tern_v ring = tern_int(a_tiles);
#define PRODUCE_SLICE(s, s_at)                                                                            \
    TERN_PRODUCE(kb) {                                                                                    \
        tern_v step = tern_pipe_step(kb), slot = tern_add(ring, tern_mul(tern_rem(step, tern_int(stages)), \
                                                                         tern_int(SLICE)));               \
        tern_wg_tile box = {tiles, slot, PN / 2, false};                                                  \
        if (o->tiles)                                                                                     \
            tern_copy_tile(kb, &box, B, TILE_COLS,                                                        \
                           tern_mul(tern_add(tern_mul(group, tern_int(STEPS)), s), tern_int(PN / 2)),     \
                           tern_int(64), 2 * PK);                                                         \
        for (int c = 0; c < (o->tiles ? 0 : SLICE / 8 / o->producers); c++) {                            \
            tern_v x = tern_add(t128, tern_int(c * o->producers));                                        \
            tern_v n = tern_div(x, tern_int(PK / 8)), k8 = tern_mul(tern_rem(x, tern_int(PK / 8)), tern_int(8)); \
            tern_v src = tern_add(b_group, tern_add(tern_mul(s, tern_int(SLICE)), tern_add(tern_mul(n, tern_int(PK)), k8))); \
            tern_copy_async(tiles, tern_wg_tile_index(slot, PN, n, k8), B, src, 8);                       \
        }                                                                                                 \
        tern_assign(steps, tern_add(steps, tern_int(1)));                                                 \
        for (int h = 0; h < HAND_STEPS; h++)                                                              \
            if (o->hand && o->unrolled && s_at == hand_produce[h])                                        \
                for (int half = 0; half < 2; half++) {                                                    \
                    tern_v i = tern_add(t128, tern_int(128 * half));                                      \
                    tern_v at = tern_add(tern_mul(group, tern_int(HAND_STEPS * 256)), tern_int(256 * h)); \
                    tern_store(H, tern_add(at, i), tern_load(hand, i));                                   \
                }                                                                                         \
    }
#define CONSUME_SLICE(pending, hand_it)                                                                   \
    TERN_CONSUME(kb) {                                                                                    \
        tern_v slot = tern_add(ring, tern_mul(tern_rem(tern_pipe_step(kb), tern_int(stages)), tern_int(SLICE))); \
        tern_wg_tile a = {tiles, tern_mul(wg, tern_int(64 * PK)), 64, false};                             \
        tern_wg_tile b = {tiles, slot, PN, false};                                                        \
        tern_wgmma_bf16_async(kb, PN, PK, NULL, &a, &b, acc);                                             \
        tern_wgmma_wait(kb, (hand_it) ? 0 : (pending));                                                   \
        if (hand_it) tern_store(hand, tid, acc[0]);                                                       \
    }
        if (o->unrolled) {
            /* the producer one step ahead: stages 3 - lag 1 - 1 */
            for (int s = 0; s <= STEPS; s++) {
                bool hand_it = o->hand && (s - 1 == hand_consume[0] || s - 1 == hand_consume[1]);
                if (s < STEPS) PRODUCE_SLICE(tern_int(s), s);
                if (s >= 1 && !(o->sync && s == STEPS)) CONSUME_SLICE(s == STEPS ? 0 : 1, hand_it);
                if (o->sync && s == STEPS) TERN_CONSUME(kb) {
                    tern_v step = tern_pipe_step(kb);
                    tern_v slot = tern_add(ring, tern_mul(tern_rem(step, tern_int(stages)), tern_int(SLICE)));
                    tern_wg_tile a = {tiles, tern_mul(wg, tern_int(64 * PK)), 64, false};
                    tern_wg_tile b = {tiles, slot, PN, false};
                    tern_wgmma_bf16_async(kb, PN, PK, NULL, &a, &b, acc);
                    tern_wgmma_wait(kb, 0);
                    for (int j = 0; j < PN / 2; j++)
                        tern_store(stage, tern_add(tern_mul(tid, tern_int(PN / 2)), tern_int(j)), acc[j]);
                    tern_pipe_sync(kb);
                    tern_v partner = tern_xor(tid, tern_int(1));
                    for (int j = 0; j < PN / 2; j++)
                        tern_store(D, d_index(group, partner, j),
                                   tern_load(stage, tern_add(tern_mul(partner, tern_int(PN / 2)), tern_int(j))));
                }
            }
        } else {
            PRODUCE_SLICE(tern_int(0), -1);
            TERN_FOR(kb, s, tern_int(1), tern_int(STEPS), tern_int(1)) {
                PRODUCE_SLICE(s, -1);
                CONSUME_SLICE(0, false);
            }
            CONSUME_SLICE(0, false);
        }
#undef PRODUCE_SLICE
#undef CONSUME_SLICE
    }
    TERN_IF(kb, tern_lt(wg, tern_int(2))) {
        if (!o->sync)
            for (int j = 0; j < PN / 2; j++) tern_store(D, d_index(group, tid, j), acc[j]);
    }
    TERN_ELSE(kb) {
        tern_store(E, tern_add(tern_mul(group, tern_int(128)), t128),
                   tern_cast(tern_add(steps, t128), TERN_T_F32));
        /* the consumers' accumulator, which has no value in the producer's threads after
         * the pipe: the interpreter poisons it */
        tern_store(F, tern_add(tern_mul(group, tern_int(128)), t128), acc[0]);
    }
}

static tern_rt *open_runtime(const char *runtime) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        printf("test_kernel_pipe: %s skipped: %s\n", runtime, tern_error_message(err));
        tern_error_free(err);
        return NULL;
    }
    return rt;
}

static void run_pipe(const char *runtime, const char *name, const tern_kernel *kern, const pipe_kernel *o) {
    tern_rt *rt = open_runtime(runtime);
    if (!rt) return;
    const int producers = o->producers;
    enum { NA = WGS * 64 * PK, NB = GROUPS * STEPS * SLICE, ND = WGS * 64 * PN, NE = GROUPS * 128 };
    enum { NM = TILE_ROWS * TILE_COLS, NH = GROUPS * HAND_STEPS * 256 };
    static uint16_t A[NA], B[NB], M[NM];
    static float Af[NA], Bf[NB], D[ND], E[NE], F[NE], H[NH];
    for (int i = 0; i < NA; i++) A[i] = tern_f32_to_bf16(Af[i] = (float)((i * 5 + 2) % 7 - 3));
    for (int i = 0; i < NB; i++) B[i] = tern_f32_to_bf16(Bf[i] = (float)((i * 3 + 1) % 5 - 2));
    for (int i = 0; i < NM; i++) M[i] = tern_f32_to_bf16(99.0f); /* columns 0 .. 63: not copied */
    for (int gs = 0; gs < GROUPS * STEPS; gs++)
        for (int n = 0; n < PN; n++)
            for (int kk = 0; kk < PK; kk++)
                M[(gs * (PN / 2) + n % (PN / 2)) * TILE_COLS + 64 + (n / (PN / 2)) * 64 + kk] =
                    B[(gs * PN + n) * PK + kk];
    for (int i = 0; i < ND; i++) D[i] = -12345.0f;
    for (int i = 0; i < NE; i++) E[i] = -12345.0f;
    for (int i = 0; i < NH; i++) H[i] = -12345.0f;
    tern_arg args[] = {tern_arg_host_in(TERN_T_BF16, A, NA),
                       o->tiles ? tern_arg_host_in(TERN_T_BF16, M, NM) : tern_arg_host_in(TERN_T_BF16, B, NB),
                       tern_arg_host(TERN_T_F32, D, ND), tern_arg_host(TERN_T_F32, E, NE),
                       tern_arg_host(TERN_T_F32, F, NE), tern_arg_host(TERN_T_F32, H, NH)};
    size_t nargs = o->hand ? 6 : 5;
    CHECK_OK(tern_launch(rt, kern, tern_dims1(GROUPS), tern_dims1((uint32_t)(256 + producers)), args, nargs));
    int bad = 0;
    for (int q = 0; q < WGS; q++)
        for (int m = 0; m < 64; m++)
            for (int n = 0; n < PN; n++) {
                double want = 0;
                for (int s = 0; s < STEPS; s++)
                    for (int kk = 0; kk < PK; kk++)
                        want += (double)Af[(q * 64 + m) * PK + kk] * Bf[((q / 2 * STEPS + s) * PN + n) * PK + kk];
                float got = D[(q * 64 + m) * PN + n];
                if (got != (float)want && bad++ < 5)
                    fprintf(stderr, "  %s %s: D[%d][%d][%d] = %g, want %g\n", runtime, name, q, m, n, got, want);
            }
    CHECKF(bad == 0, "%s %s, the consumers' products: %d of %d results differ", runtime, name, bad, (int)ND);
    bad = 0;
    for (int i = 0; i < NE; i++)
        if (E[i] != (i % 128 < producers ? (float)(STEPS + i % 128) : -12345.0f)) bad++;
    CHECKF(bad == 0, "%s %s, the producer's steps: %d of %d differ", runtime, name, bad, (int)NE);
    bad = 0;
    for (int g = 0; g < GROUPS && o->hand; g++) /* H[g][h][t]: consumer thread t's acc[0] after step hand_consume[h] */
        for (int h = 0; h < HAND_STEPS; h++)
            for (int t = 0; t < 256; t++) {
                int q = g * 2 + t / 128, lane = t % 32, m = t % 128 / 32 * 16 + lane / 4, n = lane % 4 * 2;
                double want = 0;
                for (int st = 0; st <= hand_consume[h]; st++)
                    for (int kk = 0; kk < PK; kk++)
                        want += (double)Af[(q * 64 + m) * PK + kk] * Bf[((g * STEPS + st) * PN + n) * PK + kk];
                float got = H[(g * HAND_STEPS + h) * 256 + t];
                if (got != (float)want && bad++ < 5)
                    fprintf(stderr, "  %s %s: H[%d][%d][%d] = %g, want %g\n", runtime, name, g, h, t, got, want);
            }
    CHECKF(bad == 0, "%s %s, what the consumers handed to the producer: %d of %d differ", runtime, name, bad,
           (int)NH);
    if (!strcmp(runtime, "host")) {
        bad = 0;
        for (int i = 0; i < NE; i++) {
            uint32_t bits;
            memcpy(&bits, &F[i], sizeof bits);
            bad += i % 128 < producers && bits != 0xa5a5a5a5u;
        }
        CHECKF(bad == 0, "host %s: the consumers' variable in the producer's threads is not poisoned (%d of %d)",
               name, bad, (int)NE);
    }
    if (o->tiles && !strcmp(runtime, "host")) {
        /* one row short: the last group's last box is not inside the matrix */
        args[1] = tern_arg_host_in(TERN_T_BF16, M, NM - TILE_COLS);
        tern_error *err =
            tern_launch(rt, kern, tern_dims1(GROUPS), tern_dims1((uint32_t)(256 + producers)), args, nargs);
        const char *msg = err ? tern_error_message(err) : "";
        CHECKF(err && strstr(msg, "copy_tile of rows 416 .. 447, columns 64 .. 191 from 'B' (447 x 192): the box "
                                  "is not inside the matrix"),
               "host %s, a box outside the matrix: got '%s'", name, err ? msg : "no error");
        tern_error_free(err);
    }
    tern_rt_close(rt);
}

/* ---- the tracer's refusals ---- */

enum {
    E_STORE, E_EARLY, E_AHEAD, E_UNBALANCED, E_LAG, E_THREADS, E_NESTED, E_BREAK, E_STEP_OUTSIDE, E_ROLE,
    E_BARRIER, E_REGS, E_LOOP_UNBALANCED, E_OUTSIDE, E_POOL, E_WARP_REGS, E_TILE_CONSUME, E_TILE_WIDTH,
    E_TILE_ROWS, E_TILE_SOURCE, E_TILE_REGION, E_SYNC_OUTSIDE, E_SYNC_NESTED, E_SYNC_VALUE,
};

static void e_pipe(tern_kb *kb, void *u) {
    int what = *(const int *)u;
    tern_max_threads(kb, what == E_THREADS ? 256 : what == E_WARP_REGS ? 288 : 384);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v mat = tern_param_buf(kb, "mat", TERN_T_BF16, TERN_READ);
    tern_v tiles = tern_shared_tiles(kb, "t", 8192), acc[8];
    for (int j = 0; j < 8; j++) {
        char name[8];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    tern_wg_tile at = {tiles, tern_int(0), 64, false}, bt = {tiles, tern_int(4096), 16, false};
    tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = 2, .lag = what == E_AHEAD ? 1 : 0};
    if (what == E_REGS) p.producer_regs = 20;
    if (what == E_POOL) p.producer_regs = 40, p.consumer_regs = 240;
    if (what == E_WARP_REGS) p.producer_regs = 40, p.consumer_regs = 232;
    if (what == E_OUTSIDE) {
        TERN_CONSUME(kb) { tern_var(kb, "x", tern_f32(1)); }
        return;
    }
    if (what == E_STEP_OUTSIDE) {
        TERN_PIPE(kb, &p) { tern_var(kb, "s", tern_pipe_step(kb)); }
        return;
    }
    TERN_PIPE(kb, &p) {
        switch (what) {
        case E_STORE: tern_store(out, tern_int(0), tern_f32(1)); break;
        case E_EARLY:
            TERN_CONSUME(kb) { tern_var(kb, "x", tern_f32(1)); }
            break;
        case E_AHEAD:
            TERN_PRODUCE(kb) { tern_var(kb, "x", tern_f32(1)); }
            TERN_PRODUCE(kb) { tern_var(kb, "y", tern_f32(1)); }
            break;
        case E_UNBALANCED:
            TERN_PRODUCE(kb) { tern_var(kb, "x", tern_f32(1)); }
            break;
        case E_LAG:
            TERN_PRODUCE(kb) { tern_var(kb, "x", tern_f32(1)); }
            TERN_CONSUME(kb) { tern_wgmma_bf16_async(kb, 16, 16, NULL, &at, &bt, acc); }
            TERN_PRODUCE(kb) { tern_var(kb, "y", tern_f32(1)); }
            TERN_CONSUME(kb) { tern_wgmma_wait(kb, 0); }
            break;
        case E_NESTED:
            TERN_PIPE(kb, &p) { tern_var(kb, "x", tern_f32(1)); }
            break;
        case E_BREAK:
            TERN_FOR(kb, i, tern_int(0), tern_int(2), tern_int(1)) { tern_break(kb); }
            break;
        case E_ROLE:
            TERN_ROLE(kb, 0, 1) { tern_var(kb, "x", tern_f32(1)); }
            break;
        case E_BARRIER: tern_barrier(kb); break;
        case E_TILE_REGION: tern_copy_tile(kb, &at, mat, 64, tern_int(0), tern_int(0), 64); break;
        case E_SYNC_OUTSIDE: tern_pipe_sync(kb); break;
        case E_SYNC_NESTED:
        case E_SYNC_VALUE:
            TERN_PRODUCE(kb) { tern_var(kb, "x", tern_f32(1)); }
            TERN_CONSUME(kb) {
                tern_v before = tern_mul(tern_local_index(kb), tern_int(3));
                if (what == E_SYNC_NESTED) {
                    TERN_IF(kb, tern_lt(before, tern_int(9))) { tern_pipe_sync(kb); }
                } else {
                    tern_pipe_sync(kb);
                    tern_store(out, before, tern_f32(1));
                }
            }
            break;
        case E_TILE_CONSUME:
        case E_TILE_WIDTH:
        case E_TILE_ROWS:
        case E_TILE_SOURCE: {
            tern_wg_tile box = {tiles, tern_int(0), what == E_TILE_ROWS ? 12 : 64, false};
            int width = what == E_TILE_WIDTH ? 96 : 64;
            tern_v src = what == E_TILE_SOURCE ? out : mat;
            TERN_PRODUCE(kb) {
                if (what != E_TILE_CONSUME) tern_copy_tile(kb, &box, src, 64, tern_int(0), tern_int(0), width);
            }
            TERN_CONSUME(kb) {
                if (what == E_TILE_CONSUME) tern_copy_tile(kb, &box, src, 64, tern_int(0), tern_int(0), width);
            }
            break;
        }
        case E_LOOP_UNBALANCED:
            TERN_PRODUCE(kb) { tern_var(kb, "x", tern_f32(1)); }
            TERN_FOR(kb, i, tern_int(0), tern_int(2), tern_int(1)) {
                TERN_CONSUME(kb) { tern_var(kb, "y", tern_f32(1)); }
            }
            break;
        default:
            TERN_PRODUCE(kb) { tern_var(kb, "x", tern_f32(1)); }
            TERN_CONSUME(kb) { tern_var(kb, "y", tern_f32(1)); }
            break;
        }
    }
}

static void expect_pipe_error(const char *name, int what, const char *needle) {
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build(name, e_pipe, &what, &k);
    const char *msg = err ? tern_error_message(err) : "";
    CHECKF(err && strstr(msg, needle) && strstr(msg, name) && strstr(msg, "test_kernel_pipe.c:"),
           "%s: got '%s', want '%s'", name, err ? msg : "a kernel", needle);
    CHECK(k == NULL);
    tern_error_free(err);
    tern_kernel_free(k);
}

static void test_refusals(void) {
    static const struct {
        const char *name;
        int what;
        const char *needle;
    } refusals[] = {
        {"store", E_STORE, "store in a pipe outside its produce and consume blocks"},
        {"early", E_EARLY, "consume: step 0 before its produce block"},
        {"ahead", E_AHEAD,
         "produce: step 1's slot is still the consumers' until consume block 0 ends (2 stages, lag 1)"},
        {"unbalanced", E_UNBALANCED, "the pipe has 1 produce and 0 consume blocks"},
        {"lag", E_LAG, "consume: 1 wgmma_bf16_async products in flight at the block's end; the pipe's lag (0)"},
        {"threads", E_THREADS,
         "pipe: tern_max_threads(kb, 384) first (now 256), or 288 for a producer of the last warpgroup's first warps"},
        {"warp_regs", E_WARP_REGS, "pipe: setmaxnreg with a producer of 32 threads"},
        {"nested", E_NESTED, "pipe: pipes do not nest"},
        {"in_break", E_BREAK, "break inside a pipe (tern_pipe)"},
        {"step_outside", E_STEP_OUTSIDE, "pipe_step: outside a pipe's produce and consume blocks"},
        {"role", E_ROLE, "role: inside a pipe, whose produce and consume blocks are its roles"},
        {"in_barrier", E_BARRIER, "barrier in a pipe outside its produce and consume blocks"},
        {"regs", E_REGS, "pipe: registers 20 (producer) and 0 (consumers)"},
        {"loop_unbalanced", E_LOOP_UNBALANCED, "this block in a pipe has 0 produce and 1 consume blocks"},
        {"outside", E_OUTSIDE, "consume: outside a pipe (TERN_PIPE)"},
        {"tile_consume", E_TILE_CONSUME, "copy_tile: outside a pipe's produce block"},
        {"tile_region", E_TILE_REGION, "copy_tile: outside a pipe's produce block"},
        {"tile_width", E_TILE_WIDTH, "copy_tile: 96 columns; a copy is 64, 128, 192 or 256 wide"},
        {"tile_rows", E_TILE_ROWS, "copy_tile: a tile of 12 rows; a copy's rows are a multiple of 8"},
        {"tile_source", E_TILE_SOURCE,
         "copy_tile from 'out' (f32, TERN_WRITE): it copies from a readable bf16 buffer"},
        {"sync_outside", E_SYNC_OUTSIDE, "pipe_sync: outside the top level of a pipe's produce or consume block"},
        {"sync_nested", E_SYNC_NESTED, "pipe_sync: outside the top level"},
        {"sync_value", E_SYNC_VALUE, "is used outside the block it was made in"},
        {"pool", E_POOL,
         "pipe: registers 40 (producer) and 240 (consumers) exceed the 168 a thread starts with, on average"},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++)
        expect_pipe_error(refusals[i].name, refusals[i].what, refusals[i].needle);
    /* the balanced default builds */
    int fine = -1;
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("balanced", e_pipe, &fine, &k));
    tern_kernel_free(k);
}

static void expect_in(const char *what, const char *text, const char *needle, bool present) {
    bool found = text && strstr(text, needle);
    CHECKF(found == present, "%s %s '%s'", what, present ? "lacks" : "has", needle);
}

/* CUDA: the roles as branches handing slots over through mbarriers, no barrier inside them;
 * OpenCL: the blocks in lockstep, a barrier before each. */
static void test_text(const tern_kernel *k, bool regs, bool tiles) {
    char *cu = NULL, *cl = NULL;
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_CUDA, &cu));
    CHECK_OK(tern_kernel_emit(k, TERN_TARGET_OPENCL, &cl));
    expect_in("cuda", cu, "tern_mbar_wait(&tern_full_", true);
    expect_in("cuda", cu, "tern_mbar_arrive_copies(&tern_full_", true);
    expect_in("cuda", cu, "tern_mbar_arrive(&tern_free_", true);
    expect_in("cuda", cu, "tern_regs_dec<40>();", regs);
    expect_in("cuda", cu, "cp.async.bulk.tensor.2d", tiles);
    expect_in("cuda", cu, "const __grid_constant__ tern_tmap tern_map_0", tiles);
    expect_in("cuda", cu, "tern_mbar_expect(tern_fill, 8192u);", tiles);
    expect_in("opencl", cl, "copy_tile, 32 x 128", tiles);
    const char *branch = cu ? strstr(cu, "if (tern_role_wg >= 2) {") : NULL;
    const char *end = branch ? strstr(branch, "__syncthreads();") : NULL;
    const char *els = branch ? strstr(branch, "} else {") : NULL;
    CHECKF(branch && els && end && end > els, "cuda: a barrier inside the pipe's branches");
    expect_in("opencl", cl, "mbar", false);
    expect_in("opencl", cl, "barrier(CLK_LOCAL_MEM_FENCE", true);
    free(cu);
    free(cl);
    const char *archs[] = {"sm_90a", "sm_80"};
    for (int a = 0; a < 2 && nvrtc_check_compile_for(k, archs[a]) >= 0; a++) {
    }
}

int main(void) {
    test_refusals();
    const struct {
        const char *name;
        pipe_kernel o;
    } kernels[] = {
        {"pipe_unrolled", {true, 0, 128, false, false, false}},
        {"pipe_loop", {false, 0, 128, false, false, false}},
        {"pipe_regs", {true, 232, 128, false, false, false}},
        {"pipe_warp", {true, 0, 32, false, false, false}},
        {"pipe_tiles", {true, 0, 32, true, false, false}},
        {"pipe_tiles_loop", {false, 0, 128, true, false, false}},
        {"pipe_sync", {true, 0, 128, true, true, false}},
        {"pipe_hand", {true, 0, 128, true, false, true}},
    };
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        tern_kernel *k = NULL;
        CHECK_OK(tern_kernel_build(kernels[i].name, k_pipe, (void *)&kernels[i].o, &k));
        if (!k) continue;
        test_text(k, kernels[i].o.regs != 0, kernels[i].o.tiles);
        run_pipe("host", kernels[i].name, k, &kernels[i].o);
        const char *gpu = getenv("TERN_GPU");
        if (gpu && *gpu && strcmp(gpu, "host")) run_pipe(gpu, kernels[i].name, k, &kernels[i].o);
        tern_kernel_free(k);
    }
    return check_summary("test_kernel_pipe");
}
