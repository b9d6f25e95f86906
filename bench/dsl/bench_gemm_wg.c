/* A whole GEMM in the DSL from its warpgroup products, to see how near cuBLASLt's rate a
 * kernel of ours gets on a training step's product, and what a GELU epilogue costs it:
 * GPT-2's fc product, C [M, N] = A [M, K] B [K, N] (M = 16,384 rows; 124M: K = 768, N =
 * 3,072, 1.5B: 1,600 and 6,400; A and B row-major bf16, as the layer norm's output and the
 * fc weight), either plain or with the fc's epilogue: aux = A B + bias, C = gelu(aux), both
 * bf16.
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
 *     bench_gemm_wg [runtime [rows [only|all [xl]]]]
 *
 * (default: cuda 16384; rows a multiple of 128; only: the variants whose kernel name contains
 * it; xl: 1.5B's product, the variants whose BN divides 6,400). A persistent variant whose
 * epilogue was a third warpgroup's (warpgroup roles) lost to these and is gone
 * (bench/h200/NOTES.md, run 156).
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
/* The product's shape (124M's fc, or 1.5B's with "xl"), constants to the traced kernels. */
static int N = 3072, K = 768;

/* A variant: the epilogue, the tile's columns BN (128 or 256), the ring's slices; sum_only:
 * each thread stores only the sum of its accumulators (the main loop's time without the
 * epilogue's stores; C is not checked); chained: the k loop's products chained
 * asynchronously (below). */
typedef struct gemm_spec {
    bool gelu;
    int bn, stages;
    bool sum_only, chained;
    bool tiles; /* a pipe: a producer warpgroup's tile copies (TMA), the two warpgroups consuming */
    bool persist; /* and persistent: each group's tiles in one pipe, the epilogue in its last block */
} gemm_spec;

/* Persistent launches: a group a multiprocessor (an H100's or H200's 132). */
enum { PERSIST_GROUPS = 132 };

/* GPT-2's GELU (tanh form) as x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), in few
 * instructions: the exponential as exp2 (CUDA: ex2.approx) of x (c + 0.044715 c x^2), c = -2
 * log2(e) sqrt(2/pi), and the division as x r r, r = rsqrt(1 + that) (MUFU.RSQ; an infinite
 * exponential gives r = 0, the limit). expf and an IEEE division made the epilogue take
 * 0.158 ms more than the plain one's (run 159). */
static tern_v gelu(tern_v x) {
    const double c = -2.0 * 1.4426950408889634 * 0.7978845608028654;
    tern_v e = tern_exp2(tern_mul(x, tern_fma(tern_f32((float)(c * 0.044715)), tern_mul(x, x), tern_f32((float)c))));
    tern_v r = tern_rsqrt(tern_add(tern_f32(1.0f), e));
    return tern_mul(tern_mul(x, r), r);
}

/* Starts copying slice kt of A (rows m0 .., columns k0 ..) and of B (rows k0 .., columns
 * n0 ..) into the ring buffer at off: 16 bytes a copy, 4 of A's and 8 of B's a thread. */
static void issue_slice(int BN, tern_v tiles, tern_v off, tern_v A, tern_v B, tern_v m0, tern_v n0, tern_v kt,
                        tern_v tid) {
    tern_v k0 = tern_mul(kt, tern_int(BK));
    for (int q = 0; q < BM * BK / 8 / THREADS; q++) {
        tern_v e = tern_add(tid, tern_int(q * THREADS));
        tern_v r = tern_div(e, tern_int(BK / 8)), c = tern_mul(tern_rem(e, tern_int(BK / 8)), tern_int(8));
        tern_v src = tern_add(tern_mul(tern_add(m0, r), tern_int(K)), tern_add(k0, c));
        tern_copy_async(tiles, tern_wg_tile_index(off, BM, r, c), A, src, 8);
    }
    tern_v boff = tern_add(off, tern_int(BM * BK));
    for (int q = 0; q < BK * BN / 8 / THREADS; q++) {
        tern_v e = tern_add(tid, tern_int(q * THREADS));
        tern_v r = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
        tern_v src = tern_add(tern_mul(tern_add(k0, r), tern_int(N)), tern_add(n0, c));
        tern_copy_async(tiles, tern_wg_tile_index(boff, BK, r, c), B, src, 8);
    }
}

/* The tile's epilogue from the accumulators (d[4 b + r] is C[16 sg + g + 8 (r / 2)][8 b + 2 t
 * + r % 2] of warpgroup w's 64 rows): staged in the ring's threadgroup memory, then stored in
 * 16-byte pieces; or, sum_only, each thread's sum. Threads from THREADS on (a pipe's producer
 * warp) take no part but the barriers. */
static void epilogue(tern_kb *kb, const gemm_spec *s, tern_v tiles, const tern_v *acc, tern_v tid, tern_v m0,
                     tern_v n0, tern_v C, tern_v aux, tern_v bias) {
    const int BN = s->bn;
    tern_v w = tern_div(tid, tern_int(128)), mine = tern_lt(tid, tern_int(THREADS));
    if (s->sum_only) {
        if (s->tiles) tern_if(kb, mine);
        tern_v sum = tern_f32(0);
        for (int j = 0; j < BN / 2; j++) sum = tern_add(sum, acc[j]);
        tern_v g_id = tern_add(tern_mul(tern_group_id(kb, 1), tern_group_count(kb, 0)), tern_group_id(kb, 0));
        tern_store(C, tern_add(tern_mul(g_id, tern_int(THREADS)), tid), sum);
        if (s->tiles) tern_end(kb);
        return;
    }
    tern_v lane = tern_rem(tid, tern_int(32)), sg = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v g = tern_div(lane, tern_int(4)), t = tern_rem(lane, tern_int(4));
    tern_v r0w = tern_add(tern_mul(sg, tern_int(16)), g), r0 = tern_add(tern_mul(w, tern_int(64)), r0w); /* in the tile */
    /* The tile's C (and aux) go to threadgroup memory first, rows BN + 8 apart (a SIMD
     * group's pairs land on 32 different banks), then out in 16-byte stores along rows: from
     * registers, two columns a store, the epilogue took 0.058 ms instead of 0.022 (run 152). */
    const int LDS = BN + 8, OUT_TILE = BM * LDS;
    tern_barrier(kb); /* nobody reads the ring any more */
    if (s->tiles) tern_if(kb, mine);
    for (int b = 0; b < BN / 8; b++) {
        tern_v c = tern_add(tern_int(8 * b), tern_mul(t, tern_int(2)));
        tern_v bias2[2];
        if (s->gelu) tern_load_vec(bias, tern_add(n0, c), 2, bias2);
        for (int h = 0; h < 2; h++) {
            tern_v sat = tern_add(tern_mul(tern_add(r0, tern_int(8 * h)), tern_int(LDS)), c);
            tern_v x[2] = {acc[4 * b + 2 * h], acc[4 * b + 2 * h + 1]};
            if (s->gelu) {
                for (int i = 0; i < 2; i++) x[i] = tern_add(x[i], bias2[i]);
                tern_store_vec(tiles, tern_add(sat, tern_int(OUT_TILE)), 2, x);
                for (int i = 0; i < 2; i++) x[i] = gelu(x[i]);
            }
            tern_store_vec(tiles, sat, 2, x);
        }
    }
    if (s->tiles) tern_end(kb);
    tern_barrier(kb);
    if (s->tiles) tern_if(kb, mine);
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
    if (s->tiles) tern_end(kb);
}

static void k_gemm_pipe(tern_kb *kb, const gemm_spec *s);
static void k_gemm_persist(tern_kb *kb, const gemm_spec *s);

static void k_gemm(tern_kb *kb, void *user) {
    const gemm_spec *s = user;
    if (s->persist) {
        k_gemm_persist(kb, s);
        return;
    }
    if (s->tiles) {
        k_gemm_pipe(kb, s);
        return;
    }
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
            issue_slice(BN, tiles, tern_int(p * SLICE), A, B, m0, n0, tern_int(p), tid);
            tern_copy_async_commit(kb);
        }
        for (int kt = 0; kt < KT; kt++) {
            tern_copy_async_wait(kb, AHEAD - 1);
            tern_barrier(kb);
            if (kt + AHEAD < KT)
                issue_slice(BN, tiles, tern_int((kt + AHEAD) % STAGES * SLICE), A, B, m0, n0, tern_int(kt + AHEAD),
                            tid);
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
            issue_slice(BN, tiles, tern_int(p * SLICE), A, B, m0, n0, tern_int(p), tid);
            tern_copy_async_commit(kb);
        }
        TERN_FOR(kb, kt, tern_int(0), tern_int(KT), tern_int(1)) {
            tern_copy_async_wait(kb, STAGES - 2);
            tern_barrier(kb); /* slice kt is in; everyone is done with slice kt - 1's buffer */
            tern_v next = tern_add(kt, tern_int(STAGES - 1));
            TERN_IF(kb, tern_lt(next, tern_int(KT))) {
                issue_slice(BN, tiles, tern_mul(tern_rem(next, tern_int(STAGES)), tern_int(SLICE)), A, B, m0, n0,
                            next, tid);
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
    tern_copy_async_wait(kb, 0);
    epilogue(kb, s, tiles, acc, tid, m0, n0, C, aux, bias);
}

/* The k loop as a pipe: warpgroup 2 (its first thread) copies each slice's A (128 x 64, one
 * panel) and B (64 k rows x BN, BN / 64 panels) with tern_copy_tile into a ring of STAGES
 * slots, AHEAD = STAGES - 2 steps ahead in the trace (stages - lag - 1); warpgroups 0 and 1 chain their
 * products across the consume blocks, one left in flight (lag 1). On CUDA each role runs on
 * its own: the producer waits only for a slot to be freed, the consumers for its bytes. */
static void k_gemm_pipe(tern_kb *kb, const gemm_spec *s) {
    tern_v A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);  /* [M, K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);  /* [K, N] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_BF16, TERN_WRITE); /* [M, N] */
    tern_v bias = {0}, aux = {0};
    if (s->gelu) {
        bias = tern_param_buf(kb, "bias", TERN_T_BF16, TERN_READ); /* [N] */
        aux = tern_param_buf(kb, "aux", TERN_T_BF16, TERN_WRITE);  /* [M, N] */
    }
    const int BN = s->bn, STAGES = s->stages, A_SLICE = BM * BK, SLICE = A_SLICE + BK * BN, KT = K / BK, AHEAD = STAGES - 2;
    /* a whole producer warpgroup, whose registers setmaxnreg gives to the consumers: with a
     * producer of one warp (288 threads) a multiprocessor quarter holds three warps, and
     * ptxas allows 168 registers a thread, too few for the 128 accumulators (spills) */
    /* 128 x 128 tiles: two threadgroups a multiprocessor (3 slots of 32 KB each), one's
     * epilogue beside the other's products, each with a producer of one warp (setmaxnreg's
     * warpgroup would leave 80 registers a thread, and ptxas needs 90 for the product) */
    const bool two = BN == 128;
    tern_max_threads(kb, THREADS + (two ? 32 : 128));
    if (two) tern_min_groups(kb, 2);
    tern_v tid = tern_local_index(kb);
    tern_v n0 = tern_mul(tern_group_id(kb, 0), tern_int(BN)), m0 = tern_mul(tern_group_id(kb, 1), tern_int(BM));
    size_t ring = (size_t)STAGES * SLICE, staged = (size_t)2 * BM * (BN + 8);
    tern_v tiles = tern_shared_tiles(kb, "tiles", ring > staged ? ring : staged);
    tern_v acc[128];
    for (int j = 0; j < BN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    tern_v w = tern_div(tid, tern_int(128));
    tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = STAGES, .lag = 1, .producer_regs = two ? 0 : 40,
                   .consumer_regs = two ? 0 : 232};
    TERN_PIPE(kb, &p) {
        for (int t = 0; t < KT + AHEAD; t++) {
            if (t < KT) TERN_PRODUCE(kb) {
                tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
                tern_wg_tile a = {tiles, slot, BM, false}, b = {tiles, tern_add(slot, tern_int(A_SLICE)), BK, true};
                tern_copy_tile(kb, &a, A, K, m0, tern_int(t * BK), BK);
                tern_copy_tile(kb, &b, B, N, tern_int(t * BK), n0, BN);
            }
            if (t >= AHEAD) TERN_CONSUME(kb) {
                tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
                tern_wg_tile a = {tiles, tern_add(slot, tern_mul(w, tern_int(64 * 64))), BM, false}; /* row 64 w */
                tern_wg_tile b = {tiles, tern_add(slot, tern_int(A_SLICE)), BK, true};
                tern_wgmma_bf16_async(kb, BN, BK, NULL, &a, &b, acc);
                tern_wgmma_wait(kb, t == KT + AHEAD - 1 ? 0 : 1);
            }
        }
    }
    epilogue(kb, s, tiles, acc, tid, m0, n0, C, aux, bias);
}

/* The persistent form of k_gemm_pipe: PERSIST_GROUPS groups walk the tiles (group g takes
 * tiles g, g + groups, ..., n-tiles fastest) in one pipe, so the producer copies the next
 * tile's first slices while the consumers store the last one. The epilogue is the tile's last
 * consume block: a pipe_sync (everyone has read the staging of the tile before), the tile
 * plus bias into a staging array of its own (bf16: the aux), a pipe_sync, then the staging
 * out in 16-byte pieces, C its GELU, and the accumulators cleared for the next tile. Three
 * slots of 48 KB and the 66 KB staging fill 211 KB of the 227. */
static void k_gemm_persist(tern_kb *kb, const gemm_spec *s) {
    tern_v A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);  /* [M, K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);  /* [K, N] */
    tern_v C = tern_param_buf(kb, "C", TERN_T_BF16, TERN_WRITE); /* [M, N] */
    tern_v bias = {0}, aux = {0};
    if (s->gelu) {
        bias = tern_param_buf(kb, "bias", TERN_T_BF16, TERN_READ); /* [N] */
        aux = tern_param_buf(kb, "aux", TERN_T_BF16, TERN_WRITE);  /* [M, N] */
    }
    tern_v total = tern_param_scalar(kb, "tile_count", TERN_T_I32); /* (M / BM) (N / BN) */
    const int BN = s->bn, STAGES = s->stages, A_SLICE = BM * BK, SLICE = A_SLICE + BK * BN, KT = K / BK;
    /* three slots leave room to stage the whole tile; four, half of it at a time */
    const int AHEAD = STAGES - 2, LDS = BN + 8, NT = N / BN, HALVES = STAGES > 3 ? 2 : 1, ROWS = BM / HALVES;
    tern_max_threads(kb, THREADS + 128);
    tern_v tid = tern_local_index(kb), w = tern_div(tid, tern_int(128));
    tern_v tiles = tern_shared_tiles(kb, "tiles", (size_t)STAGES * SLICE);
    tern_v staged = tern_shared(kb, "staged", TERN_T_BF16, (size_t)ROWS * LDS); /* [ROWS][LDS] */
    tern_v acc[128];
    for (int j = 0; j < BN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
    /* the thread's place in the warpgroup's 64 rows (c layout), and in the staged tile */
    tern_v lane = tern_rem(tid, tern_int(32)), sg = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v g = tern_div(lane, tern_int(4)), t4 = tern_rem(lane, tern_int(4));
    tern_v r0w = tern_add(tern_mul(sg, tern_int(16)), g), r0 = tern_add(tern_mul(w, tern_int(64)), r0w);
    tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = STAGES, .lag = 1, .producer_regs = 40,
                   .consumer_regs = 232};
    TERN_PIPE(kb, &p) {
        TERN_FOR(kb, tile, tern_group_id(kb, 0), total, tern_group_count(kb, 0)) {
            tern_v n0 = tern_mul(tern_rem(tile, tern_int(NT)), tern_int(BN));
            tern_v m0 = tern_mul(tern_div(tile, tern_int(NT)), tern_int(BM));
            for (int t = 0; t < KT + AHEAD; t++) {
                if (t < KT) TERN_PRODUCE(kb) {
                    tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
                    tern_wg_tile a = {tiles, slot, BM, false}, b = {tiles, tern_add(slot, tern_int(A_SLICE)), BK, true};
                    tern_copy_tile(kb, &a, A, K, m0, tern_int(t * BK), BK);
                    tern_copy_tile(kb, &b, B, N, tern_int(t * BK), n0, BN);
                }
                if (t < AHEAD) continue;
                TERN_CONSUME(kb) {
                    tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
                    tern_wg_tile a = {tiles, tern_add(slot, tern_mul(w, tern_int(64 * 64))), BM, false};
                    tern_wg_tile b = {tiles, tern_add(slot, tern_int(A_SLICE)), BK, true};
                    tern_wgmma_bf16_async(kb, BN, BK, NULL, &a, &b, acc);
                    bool last = t == KT + AHEAD - 1;
                    tern_wgmma_wait(kb, last ? 0 : 1);
                    if (last) {
                        /* in HALVES passes of BM / HALVES rows: warpgroup w's rows in pass w */
                        for (int pass = 0; pass < HALVES; pass++) {
                            tern_pipe_sync(kb); /* the rows before are out of the staging */
                            if (HALVES > 1) tern_if(kb, tern_eq(w, tern_int(pass)));
                            for (int b8 = 0; b8 < BN / 8; b8++) {
                                tern_v c = tern_add(tern_int(8 * b8), tern_mul(t4, tern_int(2)));
                                tern_v bias2[2] = {tern_f32(0), tern_f32(0)};
                                if (s->gelu) tern_load_vec(bias, tern_add(n0, c), 2, bias2);
                                for (int h = 0; h < 2; h++) {
                                    tern_v sat = tern_add(tern_mul(tern_add(HALVES > 1 ? r0w : r0, tern_int(8 * h)), tern_int(LDS)), c);
                                    tern_v x[2] = {tern_add(acc[4 * b8 + 2 * h], bias2[0]),
                                                   tern_add(acc[4 * b8 + 2 * h + 1], bias2[1])};
                                    tern_store_vec(staged, sat, 2, x);
                                }
                            }
                            if (HALVES > 1) tern_end(kb);
                            tern_pipe_sync(kb);
                            for (int q = 0; q < ROWS * BN / 8 / THREADS; q++) {
                                tern_v e = tern_add(tid, tern_int(q * THREADS));
                                tern_v row = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
                                tern_v at = tern_add(tern_mul(tern_add(tern_add(m0, tern_int(pass * ROWS)), row), tern_int(N)),
                                                     tern_add(n0, c));
                                tern_v x[8];
                                tern_load_vec(staged, tern_add(tern_mul(row, tern_int(LDS)), c), 8, x);
                                if (s->gelu) {
                                    tern_store_vec(aux, at, 8, x);
                                    for (int i = 0; i < 8; i++) x[i] = gelu(x[i]);
                                }
                                tern_store_vec(C, at, 8, x);
                            }
                        }
                        for (int j = 0; j < BN / 2; j++) tern_assign(acc[j], tern_f32(0));
                    }
                }
            }
        }
    }
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

/* The largest error of sampled elements against a double reference, relative to 1 + |want|. */
static double check(int M, const float *a, const float *b, const float *bias, const uint16_t *c,
                    const uint16_t *aux, bool with_gelu) {
    double worst = 0;
    unsigned state = 99;
    for (int i = 0; i < 4096; i++) {
        state = state * 1103515245u + 12345u;
        size_t r = (state >> 4) % M;
        state = state * 1103515245u + 12345u;
        size_t col = (state >> 4) % N;
        double x = with_gelu ? bias[col] : 0;
        for (size_t k = 0; k < (size_t)K; k++) x += (double)a[r * K + k] * b[k * N + col];
        double want = x, got = tern_bf16_to_f32(c[r * N + col]);
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
    const char *only = argc > 3 && strcmp(argv[3], "all") ? argv[3] : NULL; /* variants named so */
    bool xl = argc > 4 && !strcmp(argv[4], "xl");
    if (xl) N = 6400, K = 1600;
    if (M < BM || M % BM || (argc > 4 && !xl) || argc > 5) {
        fprintf(stderr, "usage: bench_gemm_wg [runtime [rows, a multiple of %d [only|all [xl]]]]\n", BM);
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
        {.bn = 256, .stages = 4, .tiles = true},
        {.gelu = true, .bn = 256, .stages = 4, .tiles = true},
        {.bn = 256, .stages = 4, .sum_only = true, .tiles = true},
        {.bn = 128, .stages = 3, .tiles = true},
        {.gelu = true, .bn = 128, .stages = 3, .tiles = true},
        {.bn = 128, .stages = 3, .sum_only = true, .tiles = true},
        {.bn = 256, .stages = 3, .tiles = true, .persist = true},
        {.gelu = true, .bn = 256, .stages = 3, .tiles = true, .persist = true},
        {.bn = 256, .stages = 4, .tiles = true, .persist = true},
        {.gelu = true, .bn = 256, .stages = 4, .tiles = true, .persist = true},
    };
    for (size_t v = 0; v < sizeof variants / sizeof *variants && !err; v++) {
        const gemm_spec *spec = &variants[v];
        char name[48];
        snprintf(name, sizeof name, "gemm_wg_%s_%d_%d%s", spec->sum_only ? "sum" : spec->gelu ? "gelu" : "plain",
                 spec->bn, spec->stages, spec->chained ? "_chained" : spec->persist ? "_persist" : spec->tiles ? "_tiles" : "");
        if ((only && !strstr(name, only)) || N % spec->bn) continue;
        tern_kernel *k = NULL;
        /* C and aux cleared first: a variant that skips an element cannot pass on another's */
        for (size_t i = 0; i < nc; i++) bits[i] = 0;
        err = tern_rt_upload(rt, C, bits);
        if (!err) err = tern_rt_upload(rt, Aux, bits);
        if (!err) err = tern_kernel_build(name, k_gemm, (void *)spec, &k);
        int32_t tiles = (M / BM) * (N / spec->bn);
        tern_arg args[6] = {tern_arg_dev(A), tern_arg_dev(B), tern_arg_dev(C), tern_arg_dev(Bias), tern_arg_dev(Aux)};
        int nargs = spec->gelu ? 5 : 3;
        if (spec->persist) args[nargs++] = tern_arg_i32(tiles);
        tern_dims grid = spec->persist ? tern_dims1((uint32_t)(tiles < PERSIST_GROUPS ? tiles : PERSIST_GROUPS))
                                       : tern_dims2((uint32_t)(N / spec->bn), (uint32_t)(M / BM));
        double best = 1e30;
        for (int run = -1; run < 7 && !err; run++) { /* run -1: the warm-up (and the compile) */
            double t0 = now();
            for (int c = 0; c < 10 && !err; c++)
                err = tern_launch(rt, k, grid, tern_dims1(THREADS + (!spec->tiles ? 0 : spec->bn == 128 ? 32 : 128)),
                                  args, nargs);
            if (!err) err = tern_rt_sync(rt);
            double dt = (now() - t0) / 10;
            if (run >= 0 && dt < best) best = dt;
        }
        if (!err) err = tern_rt_download(rt, bits, C);
        if (!err && spec->gelu) err = tern_rt_download(rt, auxh, Aux);
        if (!err) {
            double e = spec->sum_only ? 0 : check(M, a, b, bias, bits, auxh, spec->gelu);
            printf("gemm_wg %-13s BN %d, BK 64, %d slices%s, %dx%d @ %dx%d: %.3f ms, %.1f TFLOP/s; ",
                   spec->sum_only ? "main loop" : spec->gelu ? "gelu+aux+bias" : "plain", spec->bn, spec->stages,
                   spec->chained ? ", chained" : spec->persist ? ", tile copies, persistent" : spec->tiles ? ", tile copies (pipe)" : "", M, K, K, N, best * 1e3,
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
