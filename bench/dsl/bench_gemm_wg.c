/* A whole GEMM in the DSL from its warpgroup products, to see how near cuBLASLt's rate a
 * kernel of ours gets on a training step's product, and what a GELU epilogue costs it:
 * GPT-2's fc product, C [M, N] = A [M, K] B [K, N] (M = 16,384 rows; 124M: K = 768, N =
 * 3,072, 1.5B: 1,600 and 6,400; A and B row-major bf16, as the layer norm's output and the
 * fc weight), either plain or with the fc's epilogue: aux = A B + bias, C = gelu(aux), both
 * bf16; or the fc projection's backward product of the same shape (dY [M, C] @ W [C, 4C])
 * with its DGELU epilogue, C = A B gelu'(aux) at a given aux.
 *
 * The kernel (the best of those measured, bench/h200/NOTES.md runs 149-163): persistent,
 * one threadgroup a multiprocessor walking 128 x 256 tiles of C in one pipe (TERN_PIPE).
 * Warpgroup 2 is the producer: its first thread copies each 64-wide k slice of A and B into a
 * ring of 4 slots with two tile copies (TMA on CUDA); warpgroups 0 and 1 chain their products
 * (tern_wgmma_bf16_async, 64 rows each) across the consume blocks, and each tile's last
 * consume block stores its epilogue through threadgroup memory (tern_pipe_sync) while the
 * producer copies the next tile's first slices. Lost and removed (in commit cfc09c5): the
 * lockstep kernels whose 256 threads all copied and multiplied (chained 128 x 256, 128 x 128
 * two groups a multiprocessor), the tile copies without the persistent loop (128 x 256, and
 * 128 x 128 two groups a multiprocessor), and the persistent loop with 3 slots.
 *
 * Variants written after run 163, not yet timed on a GPU (the NOTES' thirty-fifth session):
 * _pf (DGELU: the tile's aux asked into L2 at its first consume block; run 163 timed it before
 * the aux loads moved ahead of the stores), _g8 (tiles in bands of 8 m blocks), and _ho
 * (the kernel library's gemm_wg, src/kernels/gemm_wg.c: the epilogue stored by the
 * producer's warpgroup while the consumers multiply the next tile, so the tensor cores stop
 * only to stage the accumulators), and _bt
 * (B given as [N, K], as the step's DGELU product has it: dY W^T with W [4C, C], and as
 * bench_ops' cuBLASLt DGELU line runs it).
 *
 * What it lacks against cuBLASLt's kernels besides: clusters sharing a slice's copy (TMA
 * multicast). Checks 4,096 sampled elements of C (and aux) against a double
 * reference on the host; prints ms and TFLOP/s, 10 launches between synchronisations, the
 * best of 7. bench_ops (`bench_ops cuda "matmul bf16 fc B16 T1024"`) times cuBLASLt on the
 * same products.
 *
 *     bench_gemm_wg [runtime [rows [only|all [xl]]]]
 *
 * (default: cuda 16384; rows a multiple of 128; only: the variants whose kernel name contains
 * it; xl: 1.5B's product).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/half.h"
#include "kernels/gemm_wg.h"
#include "tern/kernel.h"

/* The tile (BM x BN), a k slice's width, the consumers' threads, the ring's slots, and the
 * groups of a launch (one a multiprocessor of an H100 or H200: 132). */
enum { BM = 128, BN = 256, BK = 64, THREADS = 256, STAGES = 4, GROUPS = 132 };
/* The product's shape (124M's fc, or 1.5B's with "xl"), constants to the traced kernels. */
static int N = 3072, K = 768;

/* A variant: the epilogue (plain C; bias, GELU and aux; or dgelu: C = A B times GELU's
 * derivative at a given aux, the fc projection's backward product), or sum_only: each thread
 * stores only the sum of its accumulators (the k loop's time without the epilogue's; C is not
 * checked). */
typedef struct gemm_spec {
    bool gelu, dgelu, sum_only;
    bool prefetch;  /* dgelu: the tile's aux asked into L2 at its first consume block (the
                     * hand-off: by the producer at the tile's first produce block) */
    int group_m;    /* tiles walked m-fastest in bands of this many m blocks (0: n fastest) */
    bool handoff;   /* gk_gemm_wg: the epilogue by the producer while the next tile multiplies */
    bool b_nk;      /* B given as [N, K] (the step's DGELU product: dY W^T, W [4C, C]), else [K, N] */
} gemm_spec;

/* The kernel's buffers and the values the epilogue needs. */
typedef struct gemm_io {
    tern_v C, bias, aux; /* C [M, N]; bias [N] and aux [M, N] with the GELU (aux read for dgelu) */
    tern_v staged;       /* threadgroup [BM / 2][BN + 8] bf16 */
    tern_v tid, w, r0w, t4; /* local index, warpgroup, the thread's first row in its warpgroup's 64, lane % 4 */
} gemm_io;

/* The tile's epilogue, inside its last consume block (d[4 b + r] is C[16 sg + g + 8 (r / 2)][8
 * b + 2 t + r % 2] of warpgroup w's 64 rows): in two passes, warpgroup `pass` puts its rows
 * plus bias into the staging (bf16: the aux), and all 256 consumers store them in 16-byte
 * pieces along rows, C the GELU of the aux; a pipe_sync before each half (the rows before are
 * out of the staging) and after it (the staging is whole). Then the accumulators are cleared
 * for the next tile. sum_only: each thread's sum of its accumulators, nothing staged. */
static void epilogue(tern_kb *kb, const gemm_spec *s, const gemm_io *io, tern_v *acc, tern_v m0, tern_v n0) {
    enum { LDS = BN + 8, ROWS = BM / 2 };
    if (s->sum_only) {
        tern_v sum = tern_f32(0);
        for (int j = 0; j < BN / 2; j++) sum = tern_add(sum, acc[j]);
        tern_store(io->C, tern_add(tern_mul(tern_group_id(kb, 0), tern_int(THREADS)), io->tid), sum);
    }
    for (int pass = 0; pass < 2 && !s->sum_only; pass++) {
        tern_pipe_sync(kb);
        TERN_IF(kb, tern_eq(io->w, tern_int(pass))) {
            for (int b8 = 0; b8 < BN / 8; b8++) {
                tern_v c = tern_add(tern_int(8 * b8), tern_mul(io->t4, tern_int(2)));
                tern_v bias2[2] = {tern_f32(0), tern_f32(0)};
                if (s->gelu) tern_load_vec(io->bias, tern_add(n0, c), 2, bias2);
                for (int h = 0; h < 2; h++) {
                    tern_v at = tern_add(tern_mul(tern_add(io->r0w, tern_int(8 * h)), tern_int(LDS)), c);
                    tern_v x[2] = {tern_add(acc[4 * b8 + 2 * h], bias2[0]),
                                   tern_add(acc[4 * b8 + 2 * h + 1], bias2[1])};
                    tern_store_vec(io->staged, at, 2, x);
                }
            }
        }
        tern_pipe_sync(kb);
        enum { PIECES = ROWS * BN / 8 / THREADS }; /* 16-byte pieces a thread stores */
        tern_v at[PIECES], pre[PIECES][8];
        for (int q = 0; q < PIECES; q++) {
            tern_v e = tern_add(io->tid, tern_int(q * THREADS));
            tern_v row = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
            tern_v grow = tern_add(m0, tern_add(tern_int(pass * ROWS), row)); /* the row in C */
            at[q] = tern_add(tern_mul(grow, tern_int(N)), tern_add(n0, c));
            /* dgelu: every piece's aux asked for before the first store (C might be aux, as
             * far as the compiler knows, so a load after a store waits for it: 8 memory
             * latencies a pass where this is one) */
            if (s->dgelu) tern_load_vec(io->aux, at[q], 8, pre[q]);
        }
        for (int q = 0; q < PIECES; q++) {
            tern_v e = tern_add(io->tid, tern_int(q * THREADS));
            tern_v row = tern_div(e, tern_int(BN / 8)), c = tern_mul(tern_rem(e, tern_int(BN / 8)), tern_int(8));
            tern_v x[8];
            tern_load_vec(io->staged, tern_add(tern_mul(row, tern_int(LDS)), c), 8, x);
            if (s->dgelu)
                for (int i = 0; i < 8; i++)
                    x[i] = tern_mul(x[i], gk_gemm_wg_gelu_grad(pre[q][i])); /* the library's GELU */
            if (s->gelu) {
                tern_store_vec(io->aux, at[q], 8, x);
                for (int i = 0; i < 8; i++) x[i] = gk_gemm_wg_gelu(x[i]);
            }
            tern_store_vec(io->C, at[q], 8, x);
        }
    }
    for (int j = 0; j < BN / 2; j++) tern_assign(acc[j], tern_f32(0));
}

/* Both kernels' start: the parameters (A [M, K], B [K, N], C [M, N]; bias [N] and aux [M, N]
 * written with the GELU, aux read for dgelu; the tile count (M / BM) (N / BN)), the
 * threads' indices, and the accumulators (BN / 2 f32 a consumer thread, zero). */
static void gemm_start(tern_kb *kb, const gemm_spec *s, gemm_io *io, tern_v *A, tern_v *B, tern_v *total,
                       tern_v *acc) {
    *A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ);
    *B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ);
    *io = (gemm_io){.C = tern_param_buf(kb, "C", TERN_T_BF16, TERN_WRITE)};
    if (s->gelu) {
        io->bias = tern_param_buf(kb, "bias", TERN_T_BF16, TERN_READ);
        io->aux = tern_param_buf(kb, "aux", TERN_T_BF16, TERN_WRITE);
    }
    if (s->dgelu) io->aux = tern_param_buf(kb, "aux", TERN_T_BF16, TERN_READ);
    *total = tern_param_scalar(kb, "tile_count", TERN_T_I32);
    tern_max_threads(kb, THREADS + 128);
    io->tid = tern_local_index(kb);
    io->w = tern_div(io->tid, tern_int(128));
    tern_v lane = tern_rem(io->tid, tern_int(32)), sg = tern_rem(tern_div(io->tid, tern_int(32)), tern_int(4));
    io->r0w = tern_add(tern_mul(sg, tern_int(16)), tern_div(lane, tern_int(4)));
    io->t4 = tern_rem(lane, tern_int(4));
    for (int j = 0; j < BN / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
    }
}

/* A slice's B part at `at` of the ring: BK rows of k, BN wide (B [K, N]), or BN rows of n,
 * BK wide (b_nk: B [N, K], K-major as the product reads it best); and its tile copy. */
static tern_wg_tile b_tile(const gemm_spec *s, tern_v tiles, tern_v at) {
    return (tern_wg_tile){tiles, at, s->b_nk ? BN : BK, !s->b_nk};
}
static void copy_b(tern_kb *kb, const gemm_spec *s, const tern_wg_tile *b, tern_v B, int t, tern_v n0) {
    if (s->b_nk) tern_copy_tile(kb, b, B, K, n0, tern_int(t * BK), BK);
    else tern_copy_tile(kb, b, B, N, tern_int(t * BK), n0, BN);
}

/* Tile `tile`'s first row m0 and column n0 in C (n-tiles fastest). */
static void tile_origin(tern_v tile, tern_v *m0, tern_v *n0) {
    *n0 = tern_mul(tern_rem(tile, tern_int(N / BN)), tern_int(BN));
    *m0 = tern_mul(tern_div(tile, tern_int(N / BN)), tern_int(BM));
}

/* A produce block's copies of k slice t of the tile at (m0, n0) into the ring's slot at `slot`. */
static void copy_slice(tern_kb *kb, const gemm_spec *s, tern_v tiles, tern_v slot, tern_v A, tern_v B, int t,
                       tern_v m0, tern_v n0) {
    tern_wg_tile a = {tiles, slot, BM, false}, b = b_tile(s, tiles, tern_add(slot, tern_int(BM * BK)));
    tern_copy_tile(kb, &a, A, K, m0, tern_int(t * BK), BK);
    copy_b(kb, s, &b, B, t, n0);
}

/* A consume block's product of the slice at `slot` into the accumulators: warpgroup w's
 * rows 64 w .. of A. */
static void multiply_slice(tern_kb *kb, const gemm_spec *s, const gemm_io *io, tern_v tiles, tern_v slot, tern_v *acc) {
    tern_wg_tile a = {tiles, tern_add(slot, tern_mul(io->w, tern_int(64 * BK))), BM, false};
    tern_wg_tile b = b_tile(s, tiles, tern_add(slot, tern_int(BM * BK)));
    tern_wgmma_bf16_async(kb, BN, BK, NULL, &a, &b, acc);
}

/* The tile at (m0, n0)'s aux asked into L2: its 4 lines of 128 bytes a row, lines first,
 * first + stride, ... (count of them) by this thread. */
static void prefetch_aux(const gemm_io *io, tern_v first, int count, int stride, tern_v m0, tern_v n0) {
    for (int j = 0; j < count; j++) {
        tern_v line = tern_add(first, tern_int(j * stride));
        tern_v row = tern_add(m0, tern_div(line, tern_int(4)));
        tern_v col = tern_add(n0, tern_mul(tern_rem(line, tern_int(4)), tern_int(64)));
        tern_prefetch(io->aux, tern_add(tern_mul(row, tern_int(N)), col));
    }
}

/* The GEMM: GROUPS groups walk the tiles (group g takes tiles g, g + GROUPS, ..., n-tiles
 * fastest) in one pipe, the producer's tile copies AHEAD = STAGES - 2 steps ahead of the
 * consumers in the trace (stages - lag - 1; on CUDA as far as the free slots let it), the
 * consumers' products chained with one in flight (lag 1). 4 slots of 48 KB and the 33 KB
 * staging take 225 KB of the 227. */
static void k_gemm(tern_kb *kb, void *user) {
    const gemm_spec *s = user;
    enum { SLICE = BM * BK + BK * BN, AHEAD = STAGES - 2 };
    const int KT = K / BK, NT = N / BN;
    tern_v A, B, total, acc[BN / 2];
    gemm_io io;
    gemm_start(kb, s, &io, &A, &B, &total, acc);
    tern_v tiles = tern_shared_tiles(kb, "tiles", (size_t)STAGES * SLICE);
    io.staged = tern_shared(kb, "staged", TERN_T_BF16, (size_t)BM / 2 * (BN + 8));
    tern_pipe p = {.producer_first = 2, .producer_count = 1, .stages = STAGES, .lag = 1, .producer_regs = 40,
                   .consumer_regs = 232};
    TERN_PIPE(kb, &p) {
        TERN_FOR(kb, tile, tern_group_id(kb, 0), total, tern_group_count(kb, 0)) {
            tern_v m0, n0;
            tile_origin(tile, &m0, &n0);
            if (s->group_m) { /* band tile / (G NT), m-fastest inside it */
                tern_v band = tern_div(tile, tern_int(s->group_m * NT)), r = tern_rem(tile, tern_int(s->group_m * NT));
                m0 = tern_mul(tern_add(tern_mul(band, tern_int(s->group_m)), tern_rem(r, tern_int(s->group_m))),
                              tern_int(BM));
                n0 = tern_mul(tern_div(r, tern_int(s->group_m)), tern_int(BN));
            }
            for (int t = 0; t < KT + AHEAD; t++) {
                if (t < KT) TERN_PRODUCE(kb) {
                    tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
                    copy_slice(kb, s, tiles, slot, A, B, t, m0, n0);
                }
                if (t >= AHEAD) TERN_CONSUME(kb) {
                    tern_v slot = tern_mul(tern_rem(tern_pipe_step(kb), tern_int(STAGES)), tern_int(SLICE));
                    multiply_slice(kb, s, &io, tiles, slot, acc);
                    if (s->prefetch && t == AHEAD) prefetch_aux(&io, io.tid, 2, THREADS, m0, n0); /* 2 lines a thread */
                    bool last = t == KT + AHEAD - 1;
                    tern_wgmma_wait(kb, last ? 0 : 1);
                    if (last) epilogue(kb, s, &io, acc, m0, n0);
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
                    const uint16_t *aux, bool with_gelu, const uint16_t *pre) {
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
        if (pre) { /* dgelu at the given pre-activation */
            double p = tern_bf16_to_f32(pre[r * N + col]), u = 0.7978845608028654 * (p + 0.044715 * p * p * p);
            double t = tanh(u), du = 0.7978845608028654 * (1 + 3 * 0.044715 * p * p);
            want = x * (0.5 * (1 + t) + 0.5 * p * (1 - t * t) * du);
        }
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
    uint16_t *bits = malloc(most * sizeof *bits), *auxh = malloc(nc * sizeof *auxh), *pre = malloc(nc * sizeof *pre);
    tern_dbuf A = {0}, B = {0}, Bt = {0}, C = {0}, Bias = {0}, Aux = {0}, Pre = {0};
    int rc = 0;
    if (!err && (!a || !b || !bias || !bits || !auxh || !pre)) err = tern_errorf("out of memory");
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, na, &A);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nb, &B);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nb, &Bt);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nc, &C);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, N, &Bias);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nc, &Aux);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, nc, &Pre);
    unsigned state = 7;
    if (!err) {
        for (size_t i = 0; i < na; i++) a[i] = rand_bf16(&state, &bits[i]);
        err = tern_rt_upload(rt, A, bits);
    }
    if (!err) {
        for (size_t i = 0; i < nb; i++) b[i] = rand_bf16(&state, &bits[i]) / 16;
        for (size_t i = 0; i < nb; i++) bits[i] = tern_f32_to_bf16(b[i]); /* exact: a power of 2 */
        err = tern_rt_upload(rt, B, bits);
        for (size_t k = 0; k < (size_t)K && !err; k++) /* B^T [N, K] */
            for (size_t n = 0; n < (size_t)N; n++) bits[n * K + k] = tern_f32_to_bf16(b[k * N + n]);
        if (!err) err = tern_rt_upload(rt, Bt, bits);
    }
    if (!err) {
        for (int i = 0; i < N; i++) bias[i] = rand_bf16(&state, &bits[i]);
        err = tern_rt_upload(rt, Bias, bits);
    }
    if (!err) { /* dgelu's pre-activations, -4 .. 4 */
        for (size_t i = 0; i < nc; i++) pre[i] = tern_f32_to_bf16(4 * rand_bf16(&state, &pre[i]));
        err = tern_rt_upload(rt, Pre, pre);
    }
    static const gemm_spec variants[] = {{.gelu = false},
                                         {.gelu = true},
                                         {.dgelu = true},
                                         {.dgelu = true, .prefetch = true},
                                         {.sum_only = true},
                                         {.sum_only = true, .group_m = 8},
                                         {.gelu = true, .group_m = 8},
                                         {.handoff = true},
                                         {.gelu = true, .handoff = true},
                                         {.dgelu = true, .handoff = true},
                                         {.dgelu = true, .b_nk = true},
                                         {.dgelu = true, .handoff = true, .b_nk = true},
                                         {.dgelu = true, .handoff = true, .prefetch = true, .b_nk = true},
                                         {.gelu = true, .handoff = true, .group_m = 8},
                                         {.dgelu = true, .handoff = true, .b_nk = true, .group_m = 8}};
    for (size_t v = 0; v < sizeof variants / sizeof *variants && !err; v++) {
        const gemm_spec *spec = &variants[v];
        char name[48];
        snprintf(name, sizeof name, "gemm_wg_%s%s%s%s%s",
                 spec->sum_only ? "sum" : spec->gelu ? "gelu" : spec->dgelu ? "dgelu" : "plain",
                 spec->prefetch ? "_pf" : "", spec->group_m ? "_g8" : "",
                 spec->handoff ? "_ho" : "", spec->b_nk ? "_bt" : "");
        if (only && !strstr(name, only)) continue;
        if (spec->group_m && (M / BM) % spec->group_m) continue; /* bands of whole m blocks */
        tern_kernel *k = NULL;
        /* C and aux cleared first: a variant that skips an element cannot pass on another's */
        for (size_t i = 0; i < nc; i++) bits[i] = 0;
        err = tern_rt_upload(rt, C, bits);
        if (!err) err = tern_rt_upload(rt, Aux, bits);
        gk_gemm_wg_opts wg = {.n = N, .k = K, .b_nk = spec->b_nk, .prefetch = spec->prefetch, .band = spec->group_m};
        wg.epilogue = spec->gelu ? GK_GEMM_WG_GELU : spec->dgelu ? GK_GEMM_WG_DGELU : GK_GEMM_WG_PLAIN;
        if (!err && spec->handoff) err = gk_gemm_wg_build(&wg, &k); /* the kernel library's */
        else if (!err) err = tern_kernel_build(name, k_gemm, (void *)spec, &k);
        int32_t tiles = (M / BM) * (N / BN);
        tern_arg args[6] = {tern_arg_dev(A), tern_arg_dev(spec->b_nk ? Bt : B), tern_arg_dev(C), tern_arg_dev(Bias),
                            tern_arg_dev(Aux)};
        int nargs = spec->gelu ? 5 : 3;
        if (spec->dgelu) args[nargs++] = tern_arg_dev(Pre);
        args[nargs++] = tern_arg_i32(tiles);
        tern_dims grid = tern_dims1((uint32_t)(tiles < GROUPS ? tiles : GROUPS));
        double best = 1e30;
        for (int run = -1; run < 7 && !err; run++) { /* run -1: the warm-up (and the compile) */
            double t0 = now();
            for (int c = 0; c < 10 && !err; c++)
                err = tern_launch(rt, k, grid, tern_dims1(THREADS + 128),
                                  args, nargs);
            if (!err) err = tern_rt_sync(rt);
            double dt = (now() - t0) / 10;
            if (run >= 0 && dt < best) best = dt;
        }
        if (!err) err = tern_rt_download(rt, bits, C);
        if (!err && spec->gelu) err = tern_rt_download(rt, auxh, Aux);
        if (!err) {
            double e = spec->sum_only ? 0 : check(M, a, b, bias, bits, auxh, spec->gelu, spec->dgelu ? pre : NULL);
            char label[40];
            snprintf(label, sizeof label, "%s%s%s%s%s",
                     spec->sum_only ? "k loop alone" : spec->gelu ? "gelu+aux+bias" : spec->dgelu ? "dgelu" : "plain",
                     spec->prefetch ? " pf" : "", spec->group_m ? " g8" : "",
                     spec->handoff ? " handoff" : "", spec->b_nk ? " Bt" : "");
            printf("gemm_wg %-20s %dx%d tiles, %d slots of BK %d, persistent: %dx%d @ %dx%d: %.3f ms, %.1f TFLOP/s; ",
                   label, BM,
                   BN, spec->handoff ? 3 : STAGES, BK, M, K, K, N, best * 1e3, 2.0 * M * N * K / best * 1e-12);
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
    tern_rt_free(rt, &Bt);
    tern_rt_free(rt, &C);
    tern_rt_free(rt, &Bias);
    tern_rt_free(rt, &Aux);
    tern_rt_free(rt, &Pre);
    if (rt) tern_rt_close(rt);
    free(a);
    free(b);
    free(bias);
    free(bits);
    free(auxh);
    free(pre);
    return rc;
}
