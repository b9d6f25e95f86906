/* The warpgroup GEMM with its epilogue handed to the producer (gemm_wg.h). Measured against
 * cuBLASLt in bench/dsl/bench_gemm_wg.c; the variants that lost are in bench/h200/NOTES.md
 * (runs 149-163: lockstep kernels whose threads all copy and multiply, producers of 16-byte
 * copies, the epilogue in the consumers' last consume block, exp2 forms of GELU). */
#include "kernels/gemm_wg.h"

#include <stdio.h>

#include "kernels/kutil.h"

enum {
    BM = GK_GEMM_WG_TILE_M, BN = GK_GEMM_WG_TILE_N, BK = GK_GEMM_WG_SLICE,
    CONSUMERS = 256,            /* the two multiplying warpgroups' threads */
    STAGES = 3,                 /* the ring's slots */
    SLICE = BM * BK + BK * BN,  /* a slot: A's 128 x 64 and B's 64 x 256 */
    LDS = BN + 8,               /* the staging's row, padded against bank conflicts */
    CHUNKS = 8,                 /* the producer stores a tile in 8 chunks of 16 rows */
    CHUNK_PIECES = BM / CHUNKS * BN / 8, /* 16-byte pieces a chunk: 4 a producer thread */
};

/* GPT-2's GELU, tanh form: 0.5 x (1 + t), t = tanh(u), u = x (k0 + k1 x^2), k0 = sqrt(2/pi),
 * k1 = 0.044715 k0, with t from tern_tanh_approx: on CUDA one special-function instruction,
 * whose unit a GELU over a 128 x 256 tile waits for (run 163: exp2 and rsqrt, two such
 * instructions an element, were 4% slower). Its error (2^-10 at most, relative) is below
 * the bf16 rounding of the result. */
#define K0 0.7978845608028654
#define K1 (0.7978845608028654 * 0.044715)
static tern_v tanh_u(tern_v x) {
    return tern_tanh_approx(tern_mul(x, tern_fma(tern_f32((float)K1), tern_mul(x, x), tern_f32((float)K0))));
}
tern_v gk_gemm_wg_gelu(tern_v x) {
    tern_v half_x = tern_mul(tern_f32(0.5f), x);
    return tern_fma(half_x, tanh_u(x), half_x);
}
/* Its derivative: 0.5 (1 + t) + 0.5 x (1 - t^2) u', u' = k0 + 3 k1 x^2. */
tern_v gk_gemm_wg_gelu_grad(tern_v x) {
    tern_v t = tanh_u(x), x2 = tern_mul(x, x);
    tern_v du = tern_fma(tern_f32((float)(3 * K1)), x2, tern_f32((float)K0));
    tern_v half_x = tern_mul(tern_f32(0.5f), x);
    tern_v slope = tern_mul(tern_mul(half_x, du), tern_fma(tern_neg(t), t, tern_f32(1.0f)));
    return tern_add(tern_fma(tern_f32(0.5f), t, tern_f32(0.5f)), slope);
}

/* The traced kernel's parameters and the thread's indices. */
typedef struct gemm {
    const gk_gemm_wg_opts *o;
    tern_v A, B, C, bias, aux, addend, tiles_total; /* aux: GELU's output or DGELU's input */
    tern_v tiles, staged; /* threadgroup: the ring's slots; the staged tile [BM][LDS] bf16 */
    tern_v tid, w, r0w, t4; /* local index, warpgroup, the thread's first row in its warpgroup's 64, lane % 4 */
    tern_v acc[BN / 2];     /* a consumer thread's accumulators */
    tern_v sums, sum[2][8]; /* col_sums: the partial sums' buffer; a thread's sums of 8 columns in 2 row classes */
} gemm;

/* Tile `tile`'s first row m0 and column n0 in C: n-tiles fastest, or (band) m-fastest inside
 * bands of `band` m blocks, the last band as many as are left. */
static void tile_origin(const gemm *g, tern_v tile, tern_v *m0, tern_v *n0) {
    int nt = g->o->n / BN, band = g->o->band;
    if (!band) {
        *n0 = tern_mul(tern_rem(tile, tern_int(nt)), tern_int(BN));
        *m0 = tern_mul(tern_div(tile, tern_int(nt)), tern_int(BM));
        return;
    }
    tern_v first_m = tern_mul(tern_div(tile, tern_int(band * nt)), tern_int(band));
    tern_v left = tern_sub(tern_div(g->tiles_total, tern_int(nt)), first_m); /* m blocks from the band's first */
    tern_v width = tern_min(left, tern_int(band));
    tern_v r = tern_rem(tile, tern_int(band * nt));
    *m0 = tern_mul(tern_add(first_m, tern_rem(r, width)), tern_int(BM));
    *n0 = tern_mul(tern_div(r, width), tern_int(BN));
}

/* A slice's B part at `at` of the ring: BK rows of k, BN wide (B [k, n]), or BN rows of n,
 * BK wide (b_nk, as the product reads it best). */
static tern_wg_tile b_tile(const gemm *g, tern_v at) {
    return (tern_wg_tile){g->tiles, at, g->o->b_nk ? BN : BK, !g->o->b_nk};
}

/* A produce block's copies of k slice t of the tile at (m0, n0) into the slot at `slot`. */
static void copy_slice(tern_kb *kb, const gemm *g, tern_v slot, int t, tern_v m0, tern_v n0) {
    tern_wg_tile a = {g->tiles, slot, BM, false}, b = b_tile(g, tern_add(slot, tern_int(BM * BK)));
    tern_v k0 = tern_int(t * BK);
    tern_copy_tile(kb, &a, g->A, g->o->k, m0, k0, BK);
    if (g->o->b_nk) tern_copy_tile(kb, &b, g->B, g->o->k, n0, k0, BK);
    else tern_copy_tile(kb, &b, g->B, g->o->n, k0, n0, BN);
}

/* A consume block's product of the slice at `slot` into the accumulators: warpgroup w's rows
 * 64 w .. of A. */
static void multiply_slice(tern_kb *kb, const gemm *g, tern_v slot) {
    tern_wg_tile a = {g->tiles, tern_add(slot, tern_mul(g->w, tern_int(64 * BK))), BM, false};
    tern_wg_tile b = b_tile(g, tern_add(slot, tern_int(BM * BK)));
    tern_wgmma_bf16_async(kb, BN, BK, NULL, &a, &b, g->acc);
}

/* The tile's accumulators (plus bias) into the staging, then cleared for the next tile.
 * acc[4 b + r] is C[16 sg + g + 8 (r / 2)][8 b + 2 t + r % 2] of warpgroup w's 64 rows. */
static void stage_tile(const gemm *g, tern_v n0) {
    bool bias = g->o->epilogue == GK_GEMM_WG_GELU || g->o->bias;
    for (int b8 = 0; b8 < BN / 8; b8++) {
        tern_v c = tern_add(tern_int(8 * b8), tern_mul(g->t4, tern_int(2)));
        tern_v bias2[2] = {tern_f32(0), tern_f32(0)};
        if (bias) tern_load_vec(g->bias, tern_add(n0, c), 2, bias2);
        for (int h = 0; h < 2; h++) {
            tern_v row = tern_add(tern_mul(g->w, tern_int(64)), tern_add(g->r0w, tern_int(8 * h)));
            tern_v x[2] = {tern_add(g->acc[4 * b8 + 2 * h], bias2[0]), tern_add(g->acc[4 * b8 + 2 * h + 1], bias2[1])};
            tern_store_vec(g->staged, tern_add(tern_mul(row, tern_int(LDS)), c), 2, x);
        }
    }
    for (int j = 0; j < BN / 2; j++) tern_assign(g->acc[j], tern_f32(0));
}

/* Pieces first, first + stride, ... (count of them, at most 8) of the staged tile whose C
 * starts at (m0, n0), out through the epilogue by one thread: each piece 8 staged values of
 * a row. What the epilogue reads (DGELU's aux, the addend) is asked for before the first
 * store: C may be that memory as far as the compiler knows, so a load after a store would
 * wait for it, a memory latency a piece. */
static void store_pieces(const gemm *g, tern_v first, int count, int stride, tern_v m0, tern_v n0, int classes) {
    const gk_gemm_wg_opts *o = g->o;
    bool reads = o->epilogue == GK_GEMM_WG_DGELU || o->addend;
    tern_v at[8], srow[8], in[8][8];
    for (int q = 0; q < count; q++) {
        tern_v e = tern_add(first, tern_int(q * stride));
        tern_v row = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
        at[q] = tern_add(tern_mul(tern_add(m0, row), tern_int(o->n)), tern_add(n0, c));
        srow[q] = tern_add(tern_mul(row, tern_int(LDS)), c);
        if (reads) tern_load_vec(o->addend ? g->addend : g->aux, at[q], 8, in[q]);
    }
    for (int q = 0; q < count; q++) {
        tern_v x[8];
        tern_load_vec(g->staged, srow[q], 8, x);
        for (int i = 0; i < 8; i++) {
            if (o->epilogue == GK_GEMM_WG_DGELU) x[i] = tern_mul(x[i], gk_gemm_wg_gelu_grad(in[q][i]));
            if (o->addend) x[i] = tern_add(x[i], in[q][i]);
        }
        if (o->epilogue == GK_GEMM_WG_GELU) {
            tern_store_vec(g->aux, at[q], 8, x);
            for (int i = 0; i < 8; i++) x[i] = gk_gemm_wg_gelu(x[i]);
        }
        for (int i = 0; i < 8 && o->col_sums; i++) {
            tern_v sum = g->sum[q % classes][i];
            tern_assign(sum, tern_add(sum, x[i]));
        }
        tern_store_vec(g->C, at[q], 8, x);
    }
}

/* col_sums: a thread's sums of its 8 columns (8 (lane % 32) on from n0) out to the partial
 * sums, then cleared. A tile's rows r, r + 8, ... (the class r) go to partial row
 * m0 / 16 + r: the thread's classes are first, first + 4, ... (classes of them). Every
 * thread storing a tile's pieces first + j stride (stride a multiple of 32) holds the same
 * 8 columns in each and rows e / 32: the producer's 128 threads (stride 128) two classes,
 * ptid / 32 and ptid / 32 + 4; the consumers' 256 (stride 256) one, tid / 32. */
static void flush_sums(const gemm *g, tern_v lane_of, tern_v first_class, int classes, tern_v m0, tern_v n0) {
    if (!g->o->col_sums) return;
    tern_v col = tern_add(n0, tern_mul(tern_rem(lane_of, tern_int(32)), tern_int(8)));
    for (int k = 0; k < classes; k++) {
        tern_v row = tern_add(tern_div(m0, tern_int(16)), tern_add(first_class, tern_int(4 * k)));
        tern_v at = tern_add(tern_mul(row, tern_int(g->o->n)), col);
        tern_store_vec(g->sums, at, 4, g->sum[k]);
        tern_store_vec(g->sums, tern_add(at, tern_int(4)), 4, g->sum[k] + 4);
        for (int i = 0; i < 8; i++) tern_assign(g->sum[k][i], tern_f32(0));
    }
}

/* The tile at (m0, n0)'s aux asked into L2 by a producer thread: 4 of its 128-byte lines. */
static void prefetch_aux(const gemm *g, tern_v ptid, tern_v m0, tern_v n0) {
    for (int j = 0; j < 4; j++) {
        tern_v line = tern_add(ptid, tern_int(j * 128)); /* 4 lines a row of 256 */
        tern_v row = tern_add(m0, tern_div(line, tern_int(4)));
        tern_v col = tern_add(n0, tern_mul(tern_rem(line, tern_int(4)), tern_int(64)));
        tern_prefetch(g->aux, tern_add(tern_mul(row, tern_int(g->o->n)), col));
    }
}

/* A tile's origin, the origin of the one before it in the group (whose staging the
 * producer stores), and what a step of its k loop needs. */
typedef struct tile_step {
    tern_v tile, first, ptid; /* the tile, the group's first, the producer's thread (0 .. 127) */
    tern_v m0, n0, pm0, pn0;
    int kt; /* k slices */
} tile_step;

/* Step t of a tile's k loop, traced unrolled: the produce block of slice t (t < KT), in
 * steps 1 .. CHUNKS also storing a chunk of the group's previous tile, and the consume block
 * of slice t - 1 (t >= 1), the last (t = KT) staging the tile. (Not a runtime loop: a
 * product may not stay in flight across a traced loop's iterations, kernel.h, and waiting
 * for each slice's would stall the tensor cores every slice.) */
static void k_step(tern_kb *kb, const gemm *g, const tile_step *s, int t) {
    if (t < s->kt) TERN_PRODUCE(kb) {
        tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
        copy_slice(kb, g, slot, t, s->m0, s->n0);
        if (g->o->prefetch && t == 0) prefetch_aux(g, s->ptid, s->m0, s->n0);
        if (t >= 1 && t <= CHUNKS) TERN_IF(kb, tern_ne(s->tile, s->first)) {
            tern_v from = tern_add(s->ptid, tern_int((t - 1) * CHUNK_PIECES));
            store_pieces(g, from, CHUNK_PIECES / 128, 128, s->pm0, s->pn0, 2);
            if (t == CHUNKS) flush_sums(g, s->ptid, tern_div(s->ptid, tern_int(32)), 2, s->pm0, s->pn0);
        }
    }
    if (t >= 1) TERN_CONSUME(kb) {
        tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
        multiply_slice(kb, g, slot);
        tern_wgmma_wait(kb, t == s->kt ? 0 : 1);
        if (t == s->kt) stage_tile(g, s->n0);
    }
}

static void params(tern_kb *kb, gemm *g) {
    const gk_gemm_wg_opts *o = g->o;
    g->A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);
    g->B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);
    g->C = tern_param_buf(kb, "C", TERN_T_BF16, o->addend ? TERN_READ_WRITE : TERN_WRITE);
    if (o->epilogue == GK_GEMM_WG_GELU || o->bias) g->bias = tern_param_buf(kb, "bias", TERN_T_BF16, TERN_READ);
    if (o->epilogue != GK_GEMM_WG_PLAIN)
        g->aux = tern_param_buf(kb, "aux", TERN_T_BF16, o->epilogue == GK_GEMM_WG_GELU ? TERN_WRITE : TERN_READ);
    if (o->addend) g->addend = tern_param_buf(kb, "addend", TERN_T_BF16, TERN_READ);
    if (o->col_sums) g->sums = tern_param_buf(kb, "sums", TERN_T_F32, TERN_WRITE);
    g->tiles_total = tern_param_scalar(kb, "tile_count", TERN_T_I32);
}

/* Group g takes tiles g, g + groups, ... The ring orders the hand-off without a barrier of
 * its own (the pipe's contract on threadgroup memory outside the ring, kernel.h): the
 * staging written in consume step S is read from produce step S + 2 (whose slot that block
 * freed: 3 slots, lag 1), and written again in consume step S + KT, which waits for produce
 * step S + KT to end, after S + 9 where the chunks end (KT >= 9). The group's last tile is
 * stored after the pipe by the consumers' threads. 3 slots of 48 KB and the 66 KB staging
 * take 210 KB; no setmaxnreg (ptxas gives each of the 384 threads 154-168 registers). */
static void trace(tern_kb *kb, void *user) {
    gemm g = {.o = user};
    const int KT = g.o->k / BK;
    params(kb, &g);
    tern_max_threads(kb, GK_GEMM_WG_THREADS);
    g.tid = tern_local_index(kb);
    g.w = tern_div(g.tid, tern_int(128));
    tern_v lane = tern_rem(g.tid, tern_int(32)), sg = tern_rem(tern_div(g.tid, tern_int(32)), tern_int(4));
    g.r0w = tern_add(tern_mul(sg, tern_int(16)), tern_div(lane, tern_int(4)));
    g.t4 = tern_rem(lane, tern_int(4));
    for (int j = 0; j < BN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        g.acc[j] = tern_var(kb, name, tern_f32(0));
    }
    for (int k = 0; k < 2 && g.o->col_sums; k++)
        for (int i = 0; i < 8; i++) {
            char name[16];
            snprintf(name, sizeof name, "sum%d_%d", k, i);
            g.sum[k][i] = tern_var(kb, name, tern_f32(0));
        }
    tern_v ptid = tern_sub(g.tid, tern_int(CONSUMERS)); /* the producer's threads: 0 .. 127 */
    g.tiles = tern_shared_tiles(kb, "tiles", (size_t)STAGES * SLICE);
    g.staged = tern_shared(kb, "staged", TERN_T_BF16, (size_t)BM * LDS);
    tern_v first = tern_group_id(kb, 0), count = tern_group_count(kb, 0);
    tern_wait_previous(kb); /* A (and aux, the addend) come from the kernels before */
    tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = STAGES, .lag = 1};
    TERN_PIPE(kb, &p) {
        TERN_FOR(kb, tile, first, g.tiles_total, count) {
            tile_step s = {.tile = tile, .first = first, .ptid = ptid, .kt = KT};
            tile_origin(&g, tile, &s.m0, &s.n0);
            tile_origin(&g, tern_sub(tile, count), &s.pm0, &s.pn0);
            for (int t = 0; t <= KT; t++) k_step(kb, &g, &s, t);
        }
    }
    /* the group's last tile, from its staging, by the consumers' threads, 8 pieces at a time */
    tern_barrier(kb);
    tern_v after_first = tern_sub(tern_sub(g.tiles_total, tern_int(1)), first); /* tiles after the group's first */
    tern_v last = tern_add(first, tern_mul(count, tern_div(after_first, count)));
    tern_v lm0, ln0;
    tile_origin(&g, last, &lm0, &ln0);
    /* (a group past the last tile has none: more groups than tiles) */
    TERN_IF(kb, tern_and(tern_lt(g.tid, tern_int(CONSUMERS)), tern_lt(first, g.tiles_total))) {
        for (int k = 0; k < 2 && g.o->col_sums; k++) /* the producer's variables: no value here */
            for (int i = 0; i < 8; i++) tern_assign(g.sum[k][i], tern_f32(0));
        for (int q = 0; q < BM * BN / 8 / CONSUMERS; q += 8)
            store_pieces(&g, tern_add(g.tid, tern_int(q * CONSUMERS)), 8, CONSUMERS, lm0, ln0, 1);
        flush_sums(&g, g.tid, tern_div(g.tid, tern_int(32)), 1, lm0, ln0);
    }
}

bool gk_gemm_wg_fits(int m, int n, int k) {
    return m > 0 && n > 0 && m % BM == 0 && n % BN == 0 && k % BK == 0 && k >= GK_GEMM_WG_MIN_K &&
           k <= GK_GEMM_WG_MAX_K && (int64_t)m * n <= INT32_MAX && (int64_t)m * k <= INT32_MAX &&
           (int64_t)n * k <= INT32_MAX;
}

int gk_gemm_wg_tiles(int m, int n) { return (m / BM) * (n / BN); }

uint32_t gk_gemm_wg_groups(int m, int n, int multiprocessors) {
    int tiles = gk_gemm_wg_tiles(m, n);
    return (uint32_t)(tiles < multiprocessors ? tiles : multiprocessors);
}

tern_error *gk_gemm_wg_build(const gk_gemm_wg_opts *opts, tern_kernel **out) {
    *out = NULL;
    const gk_gemm_wg_opts *o = opts;
    if (o->n <= 0 || o->n % BN || o->k < GK_GEMM_WG_MIN_K || o->k > GK_GEMM_WG_MAX_K || o->k % BK)
        return tern_errorf("gemm_wg: n %d and k %d (n a multiple of %d, k of %d from %d to %d)", o->n, o->k, BN, BK,
                           GK_GEMM_WG_MIN_K, GK_GEMM_WG_MAX_K);
    if ((o->bias || o->addend) && o->epilogue != GK_GEMM_WG_PLAIN)
        return tern_errorf("gemm_wg: a bias or addend option with the GELU or DGELU epilogue");
    if (o->prefetch && o->epilogue != GK_GEMM_WG_DGELU) return tern_errorf("gemm_wg: prefetch without DGELU");
    if (o->band < 0 || o->band > 64) return tern_errorf("gemm_wg: bands of %d m blocks (0 to 64)", o->band);
    static const char *const names[] = {"", "_gelu", "_dgelu"};
    char name[64];
    snprintf(name, sizeof name, "gemm_wg%s_%dx%d%s", names[o->epilogue], o->n, o->k, o->b_nk ? "_bt" : "");
    return tern_kernel_build(name, trace, (void *)o, out);
}
