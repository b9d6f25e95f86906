/* A whole GEMM in the DSL from its warpgroup products, to see how near cuBLASLt's rate a
 * kernel of ours gets on a training step's product, and what a GELU epilogue costs it:
 * GPT-2 124M's fc product, C [M, N] = A [M, K] B [K, N] (M = 16,384 rows, K = 768, N =
 * 3,072; A and B row-major bf16, as the layer norm's output and the fc weight), either plain
 * or with the fc's epilogue: aux = A B + bias, C = gelu(aux), both bf16.
 *
 * A threadgroup of two warpgroups (256 threads) makes a 128 x BN tile of C (BN 256 or 128),
 * each warpgroup 64 rows (tern_wgmma_bf16, n = BN, k = BK, both operands from threadgroup
 * tiles: A's rows K-major, B's k rows). The k loop stages its BK = 64 wide slices of A and B
 * (128 measured slower, run 151) with asynchronous copies STAGES - 1 slices ahead into a
 * ring of STAGES buffers: a slice's step waits for its copies, passes one barrier (after
 * which the buffer the previous step read may be refilled), starts the next copies and
 * multiplies. The epilogue stages the tile in threadgroup memory and stores it in 16-byte
 * pieces along rows.
 *
 * What it lacks against cuBLASLt's kernels: TMA loads, producer and consumer warpgroups,
 * a persistent schedule whose epilogue overlaps the next tile's main loop (docs/gpu-kernels.md,
 * "What the DSL lacks"). Checks 4,096 sampled elements of C (and aux) against a double
 * reference on the host; prints ms and TFLOP/s, 10 launches between synchronisations, the
 * best of 7. bench_ops (`bench_ops cuda "B16 T1024"`) times cuBLASLt on the same products.
 *
 *     bench_gemm_wg [runtime [rows [groups [only|all [xl]]]]]
 *
 * (default: cuda 16384 132; rows a multiple of 128; groups: the persistent kernel's, one a
 * multiprocessor; only: run the variants whose kernel name contains it; xl: GPT-2 1.5B's fc
 * product, [rows, 1600] @ [1600, 6400], variants whose BN divides 6,400)
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/half.h"
#include "tern/kernel.h"

enum { BM = 128, BK = 64, THREADS = 256 };
/* The product's shape, GPT-2 124M's fc unless asked for 1.5B's ("xl": K 1,600, N 6,400); the
 * kernels are traced with it as constants. */
static int N = 3072, K = 768;

/* A variant: the epilogue, the tile's columns BN (128 or 256), the ring's slices; sum_only:
 * each thread stores only the sum of its accumulators (the main loop's time without the
 * epilogue's stores; C is not checked); chained: the k loop's products chained
 * asynchronously (below). */
typedef struct gemm_spec {
    bool gelu;
    int bn, stages;
    bool sum_only, chained;
    bool split; /* k_gemm_split: persistent, the epilogue in a warpgroup of its own */
    bool exp2;  /* the GELU's exponential as exp2 (CUDA: ex2.approx, one instruction) */
    bool dgelu; /* split only: the GELU's backward product, C = (A B^T) gelu'(aux), B [N, K] */
} gemm_spec;

/* GPT-2's GELU (tanh form) as x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3). */
/* The same from exp2 of -2u log2(e): on CUDA one ex2.approx.ftz instead of expf's range
 * reduction around it (about 2 ulp; subnormal results flushed, where x / (1 + 2^126) is 0 in
 * bf16 anyway). */
static tern_v gelu_exp2(tern_v x) {
    tern_v u = tern_mul(tern_f32(-2.0f * 1.4426950408889634f * 0.7978845608028654f),
                        tern_fma(tern_mul(tern_f32(0.044715f), x), tern_mul(x, x), x));
    return tern_div(x, tern_add(tern_f32(1.0f), tern_exp2(u)));
}

static tern_v gelu(tern_v x) {
    tern_v u = tern_mul(tern_f32(0.7978845608028654f), tern_fma(tern_mul(tern_f32(0.044715f), x), tern_mul(x, x), x));
    return tern_div(x, tern_add(tern_f32(1.0f), tern_exp(tern_mul(tern_f32(-2.0f), u))));
}

/* Its derivative: s + 2 x s (1 - s) u', s = 1 / (1 + exp(-2u)), u' = sqrt(2/pi) (1 + 3
 * 0.044715 x^2); 0 where exp overflows (x far below 0). */
static tern_v gelu_grad(tern_v x) {
    tern_v x2 = tern_mul(x, x);
    tern_v u = tern_mul(tern_f32(0.7978845608028654f), tern_fma(tern_mul(tern_f32(0.044715f), x), x2, x));
    tern_v e = tern_exp(tern_mul(tern_f32(-2.0f), u));
    tern_v sg = tern_div(tern_f32(1.0f), tern_add(tern_f32(1.0f), e));
    tern_v du = tern_mul(tern_f32(0.7978845608028654f), tern_fma(tern_f32(3.0f * 0.044715f), x2, tern_f32(1.0f)));
    tern_v g = tern_add(sg, tern_mul(tern_mul(tern_mul(tern_mul(tern_f32(2.0f), x), sg), tern_mul(e, sg)), du));
    return tern_select(tern_gt(e, tern_f32(3.0e38f)), tern_f32(0.0f), g);
}

/* Starts copying slice kt of A (rows m0 .., columns k0 ..) and of B (rows k0 .., columns
 * n0 ..; b_n_rows: B is [N, K], its rows n0 .., columns k0 .., a tile of BN rows of k) into
 * the ring buffer at off: 16 bytes a copy, 4 of A's and BN / 32 of B's a thread. */
static void issue_slice(int BN, tern_v tiles, tern_v off, tern_v A, tern_v B, tern_v m0, tern_v n0, tern_v kt,
                        tern_v tid, bool b_n_rows) {
    /* (the copying threads are THREADS = 256: both kernels' multiplying warpgroups) */
    tern_v k0 = tern_mul(kt, tern_int(BK));
    for (int q = 0; q < BM * BK / 8 / THREADS; q++) {
        tern_v e = tern_add(tid, tern_int(q * THREADS));
        tern_v r = tern_div(e, tern_int(BK / 8)), c = tern_mul(tern_rem(e, tern_int(BK / 8)), tern_int(8));
        tern_v src = tern_add(tern_mul(tern_add(m0, r), tern_int(K)), tern_add(k0, c));
        tern_copy_async(tiles, tern_wg_tile_index(off, BM, r, c), A, src, 8);
    }
    tern_v boff = tern_add(off, tern_int(BM * BK));
    for (int q = 0; q < BK * BN / 8 / THREADS && b_n_rows; q++) {
        tern_v e = tern_add(tid, tern_int(q * THREADS));
        tern_v r = tern_div(e, tern_int(BK / 8)), c = tern_mul(tern_rem(e, tern_int(BK / 8)), tern_int(8));
        tern_v src = tern_add(tern_mul(tern_add(n0, r), tern_int(K)), tern_add(k0, c));
        tern_copy_async(tiles, tern_wg_tile_index(boff, BN, r, c), B, src, 8);
    }
    for (int q = 0; q < BK * BN / 8 / THREADS && !b_n_rows; q++) {
        tern_v e = tern_add(tid, tern_int(q * THREADS));
        tern_v r = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
        tern_v src = tern_add(tern_mul(tern_add(k0, r), tern_int(N)), tern_add(n0, c));
        tern_copy_async(tiles, tern_wg_tile_index(boff, BK, r, c), B, src, 8);
    }
}

/* This thread's accumulators as pairs for a staged tile of rows LDS apart: pair p = 2 b + h
 * (acc[2 p], acc[2 p + 1], plus the bias with the GELU epilogue) goes to element at[p] of the
 * tile. d[4 b + r] is C[16 sg + g + 8 (r / 2)][8 b + 2 t + r % 2] of warpgroup w's 64 rows. */
static void staged_pairs(const gemm_spec *s, tern_v tid, tern_v bias, tern_v n0, const tern_v *acc, int LDS,
                         tern_v *at, tern_v *x) {
    tern_v w = tern_div(tid, tern_int(128)), lane = tern_rem(tid, tern_int(32));
    tern_v sg = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v g = tern_div(lane, tern_int(4)), t = tern_rem(lane, tern_int(4));
    tern_v r0 = tern_add(tern_mul(w, tern_int(64)), tern_add(tern_mul(sg, tern_int(16)), g)); /* in the tile */
    for (int b = 0; b < s->bn / 8; b++) {
        tern_v c = tern_add(tern_int(8 * b), tern_mul(t, tern_int(2)));
        tern_v bias2[2];
        if (s->gelu) tern_load_vec(bias, tern_add(n0, c), 2, bias2);
        for (int h = 0; h < 2; h++) {
            int p = 2 * b + h;
            at[p] = tern_add(tern_mul(tern_add(r0, tern_int(8 * h)), tern_int(LDS)), c);
            for (int i = 0; i < 2; i++) x[2 * p + i] = s->gelu ? tern_add(acc[2 * p + i], bias2[i]) : acc[2 * p + i];
        }
    }
}

static void k_gemm(tern_kb *kb, void *user) {
    const gemm_spec *s = user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);  /* [M, K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);  /* [K, N] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_BF16, TERN_WRITE); /* [M, N] */
    tern_v bias = {0}, aux = {0};
    if (s->gelu) {
        bias = tern_param_buf(kb, "bias", TERN_T_BF16, TERN_READ); /* [N] */
        aux = tern_param_buf(kb, "aux", TERN_T_BF16, TERN_WRITE);  /* [M, N] */
    }
    const int BN = s->bn, STAGES = s->stages, A_SLICE = BM * BK, SLICE = A_SLICE + BK * BN, KT = K / BK;
    tern_max_threads(kb, THREADS);
    /* two threadgroups a multiprocessor where their rings fit (227 KB): one's epilogue and
     * barriers then overlap the other's products */
    if ((size_t)STAGES * SLICE * 2 * 2 <= 227 * 1024) tern_min_groups(kb, 2);
    tern_v tid = tern_local_index(kb);
    tern_v n0 = tern_mul(tern_group_id(kb, 0), tern_int(BN)), m0 = tern_mul(tern_group_id(kb, 1), tern_int(BM));
    /* the ring, which the epilogue's staged tiles (C and aux, BM rows of BN + 8) reuse */
    size_t ring = (size_t)STAGES * SLICE, staged = (size_t)2 * BM * (BN + 8);
    tern_v tiles = tern_shared_tiles(kb, "tiles", ring > staged ? ring : staged);
    tern_v acc[128];
    for (int j = 0; j < BN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    tern_v w = tern_div(tid, tern_int(128));
    if (s->chained) {
        /* The slices unrolled as the kernel is traced, each product chained onto the one
         * before (tern_wgmma_bf16_async on the same accumulators) and left in flight while the
         * next slice's copies are waited for and issued: the tensor cores need not drain at
         * every slice. Copies run AHEAD = STAGES - 2 slices ahead, so that the buffer refilled
         * at slice kt is slice kt - 2's, whose product the wait after slice kt - 1's issue
         * completed (in every warpgroup, by the barrier). */
        const int AHEAD = STAGES - 2;
        for (int p = 0; p < AHEAD; p++) {
            issue_slice(BN, tiles, tern_int(p * SLICE), A, B, m0, n0, tern_int(p), tid, false);
            tern_copy_async_commit(kb);
        }
        for (int kt = 0; kt < KT; kt++) {
            tern_copy_async_wait(kb, AHEAD - 1);
            tern_barrier(kb);
            if (kt + AHEAD < KT)
                issue_slice(BN, tiles, tern_int((kt + AHEAD) % STAGES * SLICE), A, B, m0, n0, tern_int(kt + AHEAD),
                            tid, false);
            tern_copy_async_commit(kb);
            tern_v off = tern_int(kt % STAGES * SLICE);
            tern_wg_tile a = {tiles, tern_add(off, tern_mul(w, tern_int(64 * 64))), BM, false}; /* row 64 w */
            tern_wg_tile b = {tiles, tern_add(off, tern_int(A_SLICE)), BK, true};
            tern_wgmma_bf16_async(kb, BN, BK, NULL, &a, &b, acc);
            tern_wgmma_wait(kb, 1);
        }
        tern_wgmma_wait(kb, 0);
    } else {
        for (int p = 0; p < STAGES - 1; p++) { /* the first STAGES - 1 slices (KT >= STAGES) */
            issue_slice(BN, tiles, tern_int(p * SLICE), A, B, m0, n0, tern_int(p), tid, false);
            tern_copy_async_commit(kb);
        }
        TERN_FOR(kb, kt, tern_int(0), tern_int(KT), tern_int(1)) {
            tern_copy_async_wait(kb, STAGES - 2);
            tern_barrier(kb); /* slice kt is in; everyone is done with slice kt - 1's buffer */
            tern_v next = tern_add(kt, tern_int(STAGES - 1));
            TERN_IF(kb, tern_lt(next, tern_int(KT))) {
                issue_slice(BN, tiles, tern_mul(tern_rem(next, tern_int(STAGES)), tern_int(SLICE)), A, B, m0, n0,
                            next, tid, false);
            }
            tern_copy_async_commit(kb); /* empty past the last slice, so that the wait's count holds */
            tern_v off = tern_mul(tern_rem(kt, tern_int(STAGES)), tern_int(SLICE));
            tern_wg_tile a = {tiles, tern_add(off, tern_mul(w, tern_int(64 * 64))), BM, false}; /* row 64 w */
            tern_wg_tile b = {tiles, tern_add(off, tern_int(A_SLICE)), BK, true};
            tern_v d[128];
            tern_wgmma_bf16(kb, BN, BK, NULL, &a, &b, acc, d);
            for (int j = 0; j < BN / 2; j++) tern_assign(acc[j], d[j]);
        }
    }
    if (s->sum_only) {
        tern_v sum = tern_f32(0);
        for (int j = 0; j < BN / 2; j++) sum = tern_add(sum, acc[j]);
        tern_v g_id = tern_add(tern_mul(tern_group_id(kb, 1), tern_group_count(kb, 0)), tern_group_id(kb, 0));
        tern_store(C, tern_add(tern_mul(g_id, tern_int(THREADS)), tid), sum);
        return;
    }
    /* The tile's C (and aux) go to threadgroup memory first, rows BN + 8 apart (a SIMD
     * group's pairs land on 32 different banks), then out in 16-byte stores along rows: from
     * registers, two columns a store, the epilogue took 0.058 ms instead of 0.022 (run 152). */
    const int LDS = BN + 8, OUT_TILE = BM * LDS;
    tern_copy_async_wait(kb, 0);
    tern_barrier(kb); /* nobody reads the ring any more */
    tern_v pair_at[128], sx[256];
    staged_pairs(s, tid, bias, n0, acc, LDS, pair_at, sx);
    for (int p = 0; p < BN / 4; p++) {
        tern_v pair[2] = {sx[2 * p], sx[2 * p + 1]};
        if (s->gelu) {
            tern_store_vec(tiles, tern_add(pair_at[p], tern_int(OUT_TILE)), 2, pair);
            for (int i = 0; i < 2; i++) pair[i] = gelu(pair[i]);
        }
        tern_store_vec(tiles, pair_at[p], 2, pair);
    }
    tern_barrier(kb);
    for (int q = 0; q < BM * BN / 8 / THREADS; q++) {
        tern_v e = tern_add(tid, tern_int(q * THREADS));
        tern_v row = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
        tern_v sat = tern_add(tern_mul(row, tern_int(LDS)), c);
        tern_v at = tern_add(tern_mul(tern_add(m0, row), tern_int(N)), tern_add(n0, c));
        tern_v x[8];
        tern_load_vec(tiles, sat, 8, x);
        tern_store_vec(C, at, 8, x);
        if (s->gelu) {
            tern_load_vec(tiles, tern_add(sat, tern_int(OUT_TILE)), 8, x);
            tern_store_vec(aux, at, 8, x);
        }
    }
}

/* Warpgroup 2's work on one vector of the staged tile (element e / (BN / 8) of its rows, 8
 * columns from 8 (e % (BN / 8))): aux = the staged x, C = gelu(x), or C = x when plain;
 * dgelu: C = x gelu'(aux), x staged in f32. */
static void store_staged(const gemm_spec *s, tern_v stage, tern_v C, tern_v aux, tern_v m0, tern_v n0, tern_v e) {
    const int BN = s->bn, LDS = BN + 8;
    tern_v row = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
    tern_v x[8], at = tern_add(tern_mul(row, tern_int(LDS)), c);
    tern_v out = tern_add(tern_mul(tern_add(m0, row), tern_int(N)), tern_add(n0, c));
    if (s->dgelu) {
        tern_v pre[8];
        tern_load_vec(stage, at, 4, x);
        tern_load_vec(stage, tern_add(at, tern_int(4)), 4, x + 4);
        tern_load_vec(aux, out, 8, pre);
        for (int i = 0; i < 8; i++) x[i] = tern_mul(x[i], gelu_grad(pre[i]));
        tern_store_vec(C, out, 8, x);
        return;
    }
    tern_load_vec(stage, at, 8, x);
    if (s->gelu) {
        tern_store_vec(aux, out, 8, x);
        for (int i = 0; i < 8; i++) x[i] = s->exp2 ? gelu_exp2(x[i]) : gelu(x[i]);
    }
    tern_store_vec(C, out, 8, x);
}

/* The same product with its epilogue off the multiplying warpgroups' path: a persistent
 * kernel (one threadgroup a multiprocessor, walking tiles g, g + G, ...) of three warpgroups
 * in two roles (TERN_ROLE). Warpgroups 0 and 1 run the chained k loop of tile t (copies
 * AHEAD = STAGES - 2 slices ahead, the last slices' copies fetching tile t + G's first) and
 * then put its accumulators, plus the bias, as bf16 into a staging tile; warpgroup 2 takes
 * the staged tile t - G apart during tile t's k loop, a share at each slice (16-byte loads,
 * the GELU, 16-byte stores of C and aux), so that the tensor cores need not wait for stores.
 * Every barrier is the whole threadgroup's, outside the roles. */
static void k_gemm_split(tern_kb *kb, void *user) {
    const gemm_spec *s = user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);  /* [M, K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);  /* [K, N] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_BF16, TERN_WRITE); /* [M, N] */
    tern_v bias = {0}, aux = {0};
    if (s->gelu) {
        bias = tern_param_buf(kb, "bias", TERN_T_BF16, TERN_READ); /* [N] */
        aux = tern_param_buf(kb, "aux", TERN_T_BF16, TERN_WRITE);  /* [M, N] */
    }
    if (s->dgelu) aux = tern_param_buf(kb, "pre", TERN_T_BF16, TERN_READ); /* [M, N], the GELU's input */
    tern_v total = tern_param_scalar(kb, "ntiles", TERN_T_I32); /* (M / BM) (N / BN) */
    const int BN = s->bn, STAGES = s->stages, A_SLICE = BM * BK, SLICE = A_SLICE + BK * BN, KT = K / BK;
    const int AHEAD = STAGES - 2, NT = N / BN, LDS = BN + 8;
    tern_max_threads(kb, THREADS + 128);
    tern_v tid = tern_local_index(kb), w = tern_div(tid, tern_int(128)), et = tern_rem(tid, tern_int(128));
    tern_v tiles = tern_shared_tiles(kb, "tiles", (size_t)STAGES * SLICE);
    /* the tile between the roles (dgelu: f32, so that C is rounded once) */
    tern_v stage = tern_shared(kb, "stage", s->dgelu ? TERN_T_F32 : TERN_T_BF16, (size_t)BM * LDS);
    tern_v g = tern_group_id(kb, 0), G = tern_group_count(kb, 0);
    tern_v acc[128];
    for (int j = 0; j < BN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    /* tile t: rows BM (t / NT), columns BN (t % NT) (consecutive groups share A's rows) */
#define TILE_M0(t) tern_mul(tern_div(t, tern_int(NT)), tern_int(BM))
#define TILE_N0(t) tern_mul(tern_rem(t, tern_int(NT)), tern_int(BN))
    TERN_ROLE(kb, 0, 2) {
        for (int p = 0; p < AHEAD; p++) {
            issue_slice(BN, tiles, tern_int(p * SLICE), A, B, TILE_M0(g), TILE_N0(g), tern_int(p), tid, s->dgelu);
            tern_copy_async_commit(kb);
        }
    }
    /* the ring's buffer of the tile's slice 0: slices run on across tiles, KT a tile */
    tern_v slot = tern_var(kb, "slot", tern_int(0));
#define RING(kt) tern_mul(tern_rem(tern_add(slot, tern_int(kt)), tern_int(STAGES)), tern_int(SLICE))
    /* warpgroup 2's share of a staged tile at slice kt: vectors of 8 along rows */
    const int VECS = BM * BN / 8 / 128, PER_SLICE = (VECS + KT - 1) / KT;
    tern_v prev = tern_var(kb, "prev", tern_int(-1)); /* the staged tile, -1 before the first */
    TERN_FOR(kb, t, g, total, G) {
        tern_v m0 = TILE_M0(t), n0 = TILE_N0(t), next = tern_add(t, G);
        for (int kt = 0; kt < KT; kt++) {
            tern_copy_async_wait(kb, AHEAD - 1);
            tern_barrier(kb);
            TERN_ROLE(kb, 0, 2) {
                int ahead = kt + AHEAD;
                tern_v off = RING(ahead);
                if (ahead < KT) {
                    issue_slice(BN, tiles, off, A, B, m0, n0, tern_int(ahead), tid, s->dgelu);
                } else {
                    TERN_IF(kb, tern_lt(next, total)) {
                        issue_slice(BN, tiles, off, A, B, TILE_M0(next), TILE_N0(next), tern_int(ahead - KT), tid,
                                    s->dgelu);
                    }
                }
                tern_copy_async_commit(kb);
                tern_v at = RING(kt);
                tern_wg_tile a = {tiles, tern_add(at, tern_mul(w, tern_int(64 * 64))), BM, false}; /* row 64 w */
                tern_wg_tile b = {tiles, tern_add(at, tern_int(A_SLICE)), s->dgelu ? BN : BK, !s->dgelu};
                tern_wgmma_bf16_async(kb, BN, BK, NULL, &a, &b, acc);
                tern_wgmma_wait(kb, 1);
            }
            TERN_ELSE(kb) {
                TERN_IF(kb, tern_ge(prev, tern_int(0))) {
                    tern_v pm0 = TILE_M0(prev), pn0 = TILE_N0(prev);
                    for (int q = kt * PER_SLICE; q < (kt + 1) * PER_SLICE && q < VECS; q++)
                        store_staged(s, stage, C, aux, pm0, pn0, tern_add(et, tern_int(q * 128)));
                }
            }
        }
        TERN_ROLE(kb, 0, 2) { tern_wgmma_wait(kb, 0); }
        tern_barrier(kb); /* warpgroup 2 is done with the staged tile */
        TERN_ROLE(kb, 0, 2) {
            tern_v at[128], x[256];
            staged_pairs(s, tid, bias, n0, acc, LDS, at, x);
            for (int p = 0; p < BN / 4; p++) tern_store_vec(stage, at[p], 2, &x[2 * p]);
            for (int j = 0; j < BN / 2; j++) tern_assign(acc[j], tern_f32(0));
        }
        tern_assign(prev, t);
        tern_assign(slot, tern_rem(tern_add(slot, tern_int(KT)), tern_int(STAGES)));
    }
    /* the last staged tile (the loop's next barrier orders the staging before its reads) */
    tern_barrier(kb);
    TERN_ROLE(kb, 2, 1) {
        TERN_IF(kb, tern_ge(prev, tern_int(0))) {
            tern_v pm0 = TILE_M0(prev), pn0 = TILE_N0(prev);
            TERN_FOR(kb, q, tern_int(0), tern_int(VECS), tern_int(1)) {
                store_staged(s, stage, C, aux, pm0, pn0, tern_add(et, tern_mul(q, tern_int(128))));
            }
        }
    }
#undef RING
#undef TILE_M0
#undef TILE_N0
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float rand_bf16(unsigned *state, uint16_t *bits) {
    *state = *state * 1103515245u + 12345u;
    float x = (float)((*state >> 8) % 2001) / 1000.0f - 1.0f;
    *bits = tern_f32_to_bf16(x);
    return tern_bf16_to_f32(*bits);
}

/* GELU's derivative in double (the tanh form's). */
static double gelu_grad_ref(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

/* The largest error of sampled elements against a double reference, relative to 1 + |want|;
 * dgelu: C = (A B^T) gelu'(pre) with B [N, K] and pre the aux buffer's values. */
static double check(int M, const float *a, const float *b, const float *bias, const uint16_t *c,
                    const uint16_t *aux, bool with_gelu, bool dgelu) {
    double worst = 0;
    unsigned state = 99;
    for (int i = 0; i < 4096; i++) {
        state = state * 1103515245u + 12345u;
        size_t r = (state >> 4) % M;
        state = state * 1103515245u + 12345u;
        size_t col = (state >> 4) % N;
        double x = with_gelu ? bias[col] : 0;
        for (size_t k = 0; k < (size_t)K; k++) x += (double)a[r * K + k] * b[dgelu ? col * K + k : k * N + col];
        double want = x, got = tern_bf16_to_f32(c[r * N + col]);
        if (dgelu) want = x * gelu_grad_ref(tern_bf16_to_f32(aux[r * N + col]));
        if (with_gelu) {
            double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
            want = 0.5 * x * (1 + tanh(u));
            double e = fabs(tern_bf16_to_f32(aux[r * N + col]) - x) / (1 + fabs(x));
            if (e > worst) worst = e;
        }
        double e = fabs(got - want) / (1 + fabs(want));
        if (e > worst) worst = e;
    }
    return worst;
}

int main(int argc, char **argv) {
    const char *runtime = argc > 1 ? argv[1] : "cuda";
    int M = argc > 2 ? atoi(argv[2]) : 16384;
    int groups = argc > 3 ? atoi(argv[3]) : 132; /* the persistent kernels': a multiprocessor each */
    const char *only = argc > 4 && strcmp(argv[4], "all") ? argv[4] : NULL; /* variants named so */
    if (argc > 5 && !strcmp(argv[5], "xl")) N = 6400, K = 1600;
    if (M < BM || M % BM || groups < 1) {
        fprintf(stderr, "usage: bench_gemm_wg [runtime [rows, a multiple of %d [groups [only|all [xl]]]]]\n", BM);
        return 2;
    }
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *bias = malloc(N * sizeof *bias);
    size_t most = nc > na ? nc : na;
    if (nb > most) most = nb;
    uint16_t *bits = malloc(most * sizeof *bits), *auxh = malloc(nc * sizeof *auxh);
    tern_dbuf A = {0}, B = {0}, C = {0}, Bias = {0}, Aux = {0};
    int rc = 0;
    if (!err && (!a || !b || !bias || !bits || !auxh)) err = tern_errorf("out of memory");
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, na, &A);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nb, &B);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nc, &C);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, N, &Bias);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nc, &Aux);
    unsigned state = 7;
    if (!err) {
        for (size_t i = 0; i < na; i++) a[i] = rand_bf16(&state, &bits[i]);
        err = tern_rt_upload(rt, A, bits);
    }
    if (!err) {
        for (size_t i = 0; i < nb; i++) b[i] = rand_bf16(&state, &bits[i]) / 16;
        for (size_t i = 0; i < nb; i++) bits[i] = tern_f32_to_bf16(b[i]); /* exact: a power of 2 */
        err = tern_rt_upload(rt, B, bits);
    }
    if (!err) {
        for (int i = 0; i < N; i++) bias[i] = rand_bf16(&state, &bits[i]);
        err = tern_rt_upload(rt, Bias, bits);
    }
    /* the variants: tile columns, ring slices, epilogue */
    /* Each the best at something in runs 149-154 (bench/h200/NOTES.md): 128 x 128 tiles,
     * two groups a multiprocessor, for the GELU epilogue; 128 x 256 tiles with the chained
     * k loop for the plain product and the k loop alone. Lost and removed: BK 128, the
     * epilogue from registers, 128 x 128 chained (level, its GELU slower), 4 slices at 128. */
    static const gemm_spec variants[] = {
        {.bn = 128, .stages = 3},
        {.gelu = true, .bn = 128, .stages = 3},
        {.bn = 256, .stages = 4, .chained = true},
        {.gelu = true, .bn = 256, .stages = 4, .chained = true},
        {.bn = 256, .stages = 4, .sum_only = true, .chained = true},
        {.bn = 192, .stages = 4, .chained = true, .split = true},
        {.gelu = true, .bn = 192, .stages = 4, .chained = true, .split = true},
        {.bn = 128, .stages = 4, .chained = true, .split = true},
        {.gelu = true, .bn = 128, .stages = 4, .chained = true, .split = true},
        {.gelu = true, .bn = 128, .stages = 4, .chained = true, .split = true, .exp2 = true},
        {.dgelu = true, .bn = 128, .stages = 4, .chained = true, .split = true},
    };
    for (size_t v = 0; v < sizeof variants / sizeof *variants && !err; v++) {
        const gemm_spec *spec = &variants[v];
        char name[48];
        snprintf(name, sizeof name, "gemm_wg_%s_%d_%d%s",
                 spec->sum_only ? "sum" : spec->gelu ? "gelu" : spec->dgelu ? "dgelu" : "plain",
                 spec->bn, spec->stages,
                 spec->split ? (spec->exp2 ? "_split_exp2" : "_split") : spec->chained ? "_chained" : "");
        if ((only && !strstr(name, only)) || N % spec->bn) continue;
        tern_kernel *k = NULL;
        /* C and aux cleared first: a variant that skips an element cannot pass on another's
         * (dgelu: aux holds the GELU's inputs, in [-3, 3]) */
        for (size_t i = 0; i < nc; i++) bits[i] = 0;
        err = tern_rt_upload(rt, C, bits);
        unsigned pre_state = 5;
        if (spec->dgelu)
            for (size_t i = 0; i < nc; i++) auxh[i] = tern_f32_to_bf16(3 * rand_bf16(&pre_state, &bits[i]));
        if (!err) err = tern_rt_upload(rt, Aux, spec->dgelu ? auxh : bits);
        if (!err) err = tern_kernel_build(name, spec->split ? k_gemm_split : k_gemm, (void *)spec, &k);
        int total = M / BM * (N / spec->bn), nargs = spec->gelu ? 5 : 3;
        tern_arg args[6] = {tern_arg_dev(A), tern_arg_dev(B), tern_arg_dev(C), tern_arg_dev(Bias), tern_arg_dev(Aux)};
        if (spec->dgelu) args[nargs++] = tern_arg_dev(Aux); /* A, B, C, pre */
        if (spec->split) args[nargs++] = tern_arg_i32(total);
        tern_dims grid = spec->split ? tern_dims1((uint32_t)(groups < total ? groups : total))
                                     : tern_dims2((uint32_t)(N / spec->bn), (uint32_t)(M / BM));
        tern_dims block = tern_dims1(spec->split ? THREADS + 128 : THREADS);
        double best = 1e30;
        for (int run = -1; run < 7 && !err; run++) { /* run -1: the warm-up (and the compile) */
            double t0 = now();
            for (int c = 0; c < 10 && !err; c++)
                err = tern_launch(rt, k, grid, block, args, nargs);
            if (!err) err = tern_rt_sync(rt);
            double dt = (now() - t0) / 10;
            if (run >= 0 && dt < best) best = dt;
        }
        if (!err) err = tern_rt_download(rt, bits, C);
        if (!err && spec->gelu) err = tern_rt_download(rt, auxh, Aux);
        if (!err) {
            double e = spec->sum_only ? 0 : check(M, a, b, bias, bits, auxh, spec->gelu, spec->dgelu);
            printf("gemm_wg %-13s BN %d, BK 64, %d slices%s, %dx%d @ %dx%d: %.3f ms, %.1f TFLOP/s; ",
                   spec->sum_only ? "main loop" : spec->gelu ? "gelu+aux+bias" : spec->dgelu ? "dgelu (B^T)" : "plain", spec->bn,
                   spec->stages,
                   spec->split ? (spec->exp2 ? ", split, exp2" : ", split epilogue") : spec->chained ? ", chained" : "",
                   M, K, K, N,
                   best * 1e3,
                   2.0 * M * N * K / best * 1e-12);
            if (spec->sum_only) printf("(not checked: sums only)\n");
            else printf("sampled error %.2g (%s)\n", e, e <= 1e-2 ? "ok" : "FAIL");
            if (e > 1e-2) rc = 1;
        }
        tern_kernel_free(k);
    }
    if (err) {
        fprintf(stderr, "bench_gemm_wg: %s\n", tern_error_message(err));
        tern_error_free(err);
        rc = 1;
    }
    tern_rt_free(rt, &A);
    tern_rt_free(rt, &B);
    tern_rt_free(rt, &C);
    tern_rt_free(rt, &Bias);
    tern_rt_free(rt, &Aux);
    if (rt) tern_rt_close(rt);
    free(a);
    free(b);
    free(bias);
    free(bits);
    free(auxh);
    return rc;
}
