/* Flash attention kernels (see flash.h), after the FlashAttention-2 scheme: the
 * forward pass walks the key tiles up to the diagonal with an online softmax, keeping the
 * running row maximum and sum; the backward pass recomputes the probabilities from the
 * saved logsumexp, once per key tile for dK and dV and once per query tile for dQ, so that
 * no two groups write the same gradient (deterministic, no atomics). With grouped key/value
 * heads (flash.h) a dK, dV group owns a key tile of one key/value head and walks the query
 * tiles of each of its query heads in turn, summing into the same accumulators.
 *
 * Each SIMD group owns 16 rows of its tile and multiplies with tern_mma_bf16 (16 x 8 x 16
 * tiles; the fragment layout is documented in tern/kernel.h: lane l holds rows g = l / 4
 * and g + 8, columns 2t and 2t + 1 with t = l % 4, of each 16 x 8 result). The accumulator
 * of one product is reused directly as the A operand of the next (columns 16kk .. 16kk+15
 * are the result tiles 2kk and 2kk + 1), which is what keeps P and dS in registers. The
 * operand tiles the four SIMD groups share (K and V, or Q and dO) are copied into
 * threadgroup memory as bf16 rows, padded by 16 bytes so that the eight rows one matrix load
 * touches fall in different banks; tern_load_matrix reads the B fragments from them, as
 * they are for products by a tile's transpose (Q K^T) and transposed for products by the
 * tile (P V), so no tile is stored twice. */
#include "kernels/flash.h"

#include <math.h>
#include <stdio.h>

#define TILE GK_FLASH_TILE
#define THREADS GK_FLASH_THREADS
#define MAX_HS 128

/* What a kernel is built for: the head size, the group's threads and the tuning options. */
typedef struct fl_build {
    int hs, threads;
    gk_flash_opts opts;
} fl_build;

/* The lane's place in the fragments, and the group's head. */
typedef struct fl_ctx {
    tern_kb *kb;
    int hs, KS, NT, LD; /* head size; k-steps and 8-wide tiles over it; shared row stride */
    /* opts.wgmma where the head size allows: tiles [TILE, hs] swizzled (tern_wg_tile_index)
     * instead of [TILE, LD] rows, products by tern_wgmma_bf16 (a warpgroup is the group's
     * four SIMD groups, their 64 rows) */
    bool wg;
    int tile_size;      /* the elements of one staged tile: TILE hs (wg) or TILE LD */
    tern_v *xv;         /* wg, the backward kernels: 2 x TILE / 2 variables, the two results
                         * of a product pair in flight (product_rows_n_pair) */
    int threads, rows;  /* the group's threads, and its query or key rows (16 per SIMD group) */
    tern_v tid, lane, warp, g, t;
    tern_v B, T, NH, C, b, h, bh;
    /* grouped heads (group > 1): kvh the key/value head (h / group), KV the key/value
     * heads, stride qkv's row (C + 2 KV hs); with group = 1 kvh is h and qkv [B, T, 3, NH, hs] */
    int group;
    tern_v kvh, KV, stride;
    /* the offset in a [TILE, LD] tile of the row start this lane gives tern_load_matrix: for
     * B fragments of M^T (rows of M the n) and of M (rows the k); see the two products */
    tern_v lm_rows_n, lm_rows_k;
} fl_ctx;

/* kv_heads: the grid's second dimension runs over (b, key/value head), not (b, query head):
 * h and bh then name the group's first query head, which the kernel moves over the group
 * (with_query_head). */
static fl_ctx fl_begin(tern_kb *kb, const fl_build *build, tern_v B, tern_v T, tern_v NH, bool kv_heads) {
    int hs = build->hs, group = build->opts.group > 1 ? build->opts.group : 1;
    fl_ctx f = {.kb = kb, .hs = hs, .KS = hs / 16, .NT = hs / 8, .LD = hs + 8, .threads = build->threads,
                .rows = build->threads / 2, .group = group};
    f.wg = build->opts.wgmma && (hs == 64 || hs == 128) && f.threads % 128 == 0;
    f.tile_size = f.wg ? TILE * hs : TILE * f.LD;
    tern_max_threads(kb, f.threads);
    /* min_groups counts groups of THREADS: as many registers per thread for larger groups */
    if (build->opts.min_groups) tern_min_groups(kb, (build->opts.min_groups * THREADS + f.threads - 1) / f.threads);
    f.tid = tern_local_id(kb, 0);
    f.lane = tern_simd_lane(kb);
    f.warp = tern_simd_group(kb);
    f.g = tern_div(f.lane, tern_int(4));
    f.t = tern_rem(f.lane, tern_int(4));
    f.B = B, f.T = T, f.NH = NH;
    f.C = tern_mul(NH, tern_int(hs));
    f.bh = tern_group_id(kb, 1);
    if (group == 1) {
        f.b = tern_div(f.bh, NH);
        f.h = tern_rem(f.bh, NH);
        f.kvh = f.h;
    } else {
        f.KV = tern_div(NH, tern_int(group));
        f.stride = tern_add(f.C, tern_mul(f.KV, tern_int(2 * hs)));
        if (kv_heads) {
            f.b = tern_div(f.bh, f.KV);
            f.kvh = tern_rem(f.bh, f.KV);
            f.h = tern_mul(f.kvh, tern_int(group));
            f.bh = tern_add(tern_mul(f.b, NH), f.h);
        } else {
            f.b = tern_div(f.bh, NH);
            f.h = tern_rem(f.bh, NH);
            f.kvh = tern_div(f.h, tern_int(group));
        }
    }
    /* lane l names row l % 8 of matrix q = l / 8; u = l % 8, q = 2 hi + lo */
    tern_v u = tern_rem(f.lane, tern_int(8)), lo = tern_rem(tern_div(f.lane, tern_int(8)), tern_int(2));
    tern_v hi = tern_div(f.lane, tern_int(16));
    f.lm_rows_n = tern_add(tern_mul(tern_add(tern_mul(hi, tern_int(8)), u), tern_int(f.LD)), tern_mul(lo, tern_int(8)));
    f.lm_rows_k = tern_add(tern_mul(tern_add(tern_mul(lo, tern_int(8)), u), tern_int(f.LD)), tern_mul(hi, tern_int(8)));
    return f;
}

/* The index of element (row, 0) of the group's matrix `part` (0 Q of query head h, 1 K and
 * 2 V of key/value head kvh) in a qkv-like buffer (parts = 3: [B, T, 3, NH, hs], or grouped
 * [B, T, (NH + 2 KV) hs]), or (parts = 1) of query head h in a [B, T, NH, hs] one; rows past
 * T read row T - 1. */
static tern_v row_index(const fl_ctx *f, int parts, int part, tern_v row) {
    tern_v r = tern_min(row, tern_sub(f->T, tern_int(1)));
    tern_v tok = tern_add(tern_mul(f->b, f->T), r);
    if (f->group > 1 && parts == 3) {
        tern_v head = tern_mul(part ? f->kvh : f->h, tern_int(f->hs));
        tern_v chan = part == 0 ? head : part == 1 ? tern_add(f->C, head)
                                                   : tern_add(tern_add(f->C, tern_mul(f->KV, tern_int(f->hs))), head);
        return tern_add(tern_mul(tok, f->stride), chan);
    }
    tern_v base = parts == 3 ? tern_add(tern_mul(tok, tern_int(3)), tern_int(part)) : tok;
    return tern_add(tern_mul(base, f->C), tern_mul(f->h, tern_int(f->hs)));
}

/* f moved to query head m of its key/value head's group (grouped BACKWARD_KV): Q, dO, lse,
 * D and dS^T are then that head's. */
static fl_ctx with_query_head(const fl_ctx *f, tern_v m) {
    fl_ctx q = *f;
    q.h = tern_add(tern_mul(f->kvh, tern_int(f->group)), m);
    q.bh = tern_add(tern_mul(f->b, f->NH), q.h);
    return q;
}

/* The A fragment of k-step kk from rows (index of element (row, 0)) r and r8 = row + 8 of a
 * row-major matrix: columns 16kk + 2t (+1) and 16kk + 2t + 8 (+9). */
static void a_frag(const fl_ctx *f, tern_v buf, tern_v r, tern_v r8, int kk, tern_v a[8]) {
    tern_v c = tern_add(tern_mul(f->t, tern_int(2)), tern_int(16 * kk));
    tern_v c8 = tern_add(c, tern_int(8));
    tern_load_vec(buf, tern_add(r, c), 2, a);
    tern_load_vec(buf, tern_add(r8, c), 2, a + 2);
    tern_load_vec(buf, tern_add(r, c8), 2, a + 4);
    tern_load_vec(buf, tern_add(r8, c8), 2, a + 6);
}

/* The A fragment of k-step kk made from result tiles x[2kk] and x[2kk + 1] (16 x 8 each). */
static void a_from_acc(tern_v x[][4], int kk, tern_v a[8]) {
    for (int i = 0; i < 4; i++) {
        a[i] = x[2 * kk][i];
        a[4 + i] = x[2 * kk + 1][i];
    }
}

/* A product's A operand, the SIMD group's 16 rows over the head dimension: fragments held
 * in registers, or (warpgroup products, product_rows_n_pair only) the warpgroup's 64 rows as
 * a staged tile. */
typedef struct fl_a {
    tern_v (*frag)[8];
    const tern_wg_tile *tile; /* when set, frag is unused */
} fl_a;

/* The A fragment of k-step kk. */
static void a_get(const fl_a *A, int kk, tern_v a[8]) {
    for (int i = 0; i < 8; i++) a[i] = A->frag[kk][i];
}

/* A staged tile's shared memory: `bufs` tiles of f->tile_size elements. */
static tern_v fl_tiles(tern_kb *kb, const fl_ctx *f, const char *name, size_t bufs) {
    return f->wg ? tern_shared_tiles(kb, name, bufs * (size_t)f->tile_size)
                 : tern_shared(kb, name, TERN_T_BF16, bufs * (size_t)f->tile_size);
}

/* The index of element (row, col) of the staged tile at off (col a multiple of 8 keeps its
 * eight columns consecutive in both layouts). */
static tern_v tile_at(const fl_ctx *f, tern_v off, tern_v row, tern_v col) {
    if (f->wg) return tern_wg_tile_index(off, TILE, row, col);
    return tern_add(off, tern_add(tern_mul(row, tern_int(f->LD)), col));
}

/* Stages rows r0 .. r0 + TILE - 1 of head matrix `part` (of a buffer with `parts` parts) into
 * shared memory, every thread of the group helping, as dst [TILE, LD] (element (row, col) at
 * row LD + col): 16 bytes per global read and per shared write, the eight lanes of a
 * quarter-warp on one row. A bf16 value stored as it was loaded moves as bits (the CUDA
 * emitter's bf16 pairs), so this is a copy. The copy goes to dst + off; with `async` by
 * asynchronous copies (the pipelined kernels), which the caller commits and waits for. */
static void stage_tile_copy(const fl_ctx *f, tern_v dst, tern_v off, tern_v src, int parts, int part, tern_v r0,
                            bool async) {
    int per_row = f->hs / 8, total = TILE * per_row, n = f->threads;
    for (int i = 0; i < (total + n - 1) / n; i++) {
        tern_v v = tern_add(f->tid, tern_int(i * n));
        if ((i + 1) * n > total) tern_if(f->kb, tern_lt(v, tern_int(total)));
        tern_v row = tern_div(v, tern_int(per_row));
        tern_v col = tern_mul(tern_rem(v, tern_int(per_row)), tern_int(8));
        tern_v from = tern_add(row_index(f, parts, part, tern_add(r0, row)), col);
        if (async) {
            tern_copy_async(dst, tile_at(f, off, row, col), src, from, 8);
        } else {
            tern_v x[8];
            tern_load_vec(src, from, 8, x);
            tern_store_vec(dst, tile_at(f, off, row, col), 8, x);
        }
        if ((i + 1) * n > total) tern_end(f->kb);
    }
}

/* stage_tile_copy at once into dst itself. */
static void stage_tile_indexed(const fl_ctx *f, tern_v dst, tern_v src, int parts, int part, tern_v r0) {
    stage_tile_copy(f, dst, tern_int(0), src, parts, part, r0, false);
}

static void stage_tile(const fl_ctx *f, tern_v dst, tern_v src, int parts, int part, tern_v r0) {
    stage_tile_indexed(f, dst, src, parts, part, r0);
}

/* ---- pipelined staging (opts.pipelined) ----
 * The tiles a group walks are staged one ahead, with asynchronous copies into the other of
 * two shared buffers, so that loading tile i + 1 overlaps the products on tile i instead of
 * every SIMD group stalling on its loads between two barriers. A tile's step is then:
 *   wait for this thread's copies of tile i; barrier (tile i is complete for everyone, and
 *   everyone is done with tile i - 1, whose buffer is the one refilled next);
 *   start the copies of tile i + 1 (if the group walks one), commit; compute on tile i.
 * One barrier a tile instead of two, and no registers hold the next tile. */

/* The element offset of buffer (i mod n) of n buffers of `size` elements each. */
static tern_v pipe_offset_n(tern_v i, int size, int n) { return tern_mul(tern_rem(i, tern_int(n)), tern_int(size)); }

/* ... of a double buffer. */
static tern_v pipe_offset(tern_v i, int size) { return pipe_offset_n(i, size, 2); }

/* stage_tile_indexed with asynchronous copies into dst + off: 16 bytes a copy. */
static void stage_tile_async(const fl_ctx *f, tern_v dst, tern_v off, tern_v src, int parts, int part, tern_v r0) {
    stage_tile_copy(f, dst, off, src, parts, part, r0, true);
}

/* The top of a pipelined tile's step (above): waits for the tile, then, when `more`, starts
 * copying the next one with `issue` (its state and the next tile's index). */
typedef void (*fl_issue)(const fl_ctx *f, const void *state, tern_v next);
static void pipe_step(tern_kb *kb, const fl_ctx *f, tern_v more, fl_issue issue, const void *state, tern_v next) {
    tern_copy_async_wait(kb, 0);
    tern_barrier(kb);
    TERN_IF(kb, more) { issue(f, state, next); }
    tern_copy_async_commit(kb);
}

/* The same with n buffers, n - 1 tiles staged ahead: the wait leaves the n - 2 newest
 * batches in flight (every step commits one batch, empty past the last tile, so that the
 * count holds), and `next` is the tile n - 1 ahead, into the buffer tile i - 1 left. */
static void pipe_step_n(tern_kb *kb, const fl_ctx *f, int n, tern_v more, fl_issue issue, const void *state,
                        tern_v next) {
    tern_copy_async_wait(kb, n - 2);
    tern_barrier(kb);
    TERN_IF(kb, more) { issue(f, state, next); }
    tern_copy_async_commit(kb);
}

/* Stages TILE floats of a [B, NH, T] row vector (lse or D) from position r0 (clamped),
 * each times `mul`. */
static void stage_rows(const fl_ctx *f, tern_v dst, tern_v src, tern_v r0, tern_v mul) {
    TERN_IF(f->kb, tern_lt(f->tid, tern_int(TILE))) {
        tern_v r = tern_min(tern_add(r0, f->tid), tern_sub(f->T, tern_int(1)));
        tern_store(dst, f->tid, tern_mul(tern_load(src, tern_add(tern_mul(f->bh, f->T), r)), mul));
    }
}

/* The softmax runs in base 2 (exp2 is one hardware instruction; exp is several): scores
 * are scaled by scale log2(e), maxima and logsumexps kept in that unit. */
static tern_v log2e(void) { return tern_f32(1.44269504088896341f); }

/* The 16 x 8 results of a product of the group's 16 rows: s[j] = A B_j for j < n. */
static void zero_tiles(tern_v x[][4], int n) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 4; i++) x[j][i] = tern_f32(0.0f);
}

/* x[j] (j < nj) = A M^T over the head dimension for rows 8 (j0 + j) .. of M: A from
 * `A`, M [TILE, LD] in shared memory with rows the n: B[k][n] = M[n][k]. One
 * tern_load_matrix gives the B fragments of n-tiles j and j + 1 at k-step kk: matrices
 * (rows 8j, columns 16kk), (8j, 16kk + 8), (8j + 8, 16kk), (8j + 8, 16kk + 8), read as they
 * are (lm_rows_n). */
static void product_rows_n(tern_kb *kb, const fl_ctx *f, const fl_a *A, tern_v M, tern_v Mo, int j0, int nj,
                           tern_v x[][4]) {
    if (f->wg) { /* B = M^T: the tile's rows 8 j0 .. are the n */
        tern_v a[MAX_HS / 2], c[TILE / 2], d[TILE / 2];
        for (int kk = 0; kk < f->KS; kk++) a_get(A, kk, a + 8 * kk);
        for (int e = 0; e < 4 * nj; e++) c[e] = tern_f32(0.0f);
        tern_wg_tile b = {M, tern_add(Mo, tern_int(8 * j0 * 64)), TILE, false};
        tern_wgmma_bf16(kb, 8 * nj, f->hs, a, NULL, &b, c, d);
        for (int j = 0; j < nj; j++)
            for (int i = 0; i < 4; i++) x[j][i] = d[4 * j + i];
        return;
    }
    tern_v at = tern_add(f->lm_rows_n, Mo);
    zero_tiles(x, nj);
    /* k-steps outside: consecutive products are independent, so the tensor cores' latency
     * overlaps instead of chaining */
    for (int kk = 0; kk < f->KS; kk++) {
        tern_v a[8];
        a_get(A, kk, a);
        for (int j = 0; j < nj; j += 2) {
            tern_v b[8], d[4];
            tern_load_matrix(M, tern_add(at, tern_int(8 * (j0 + j) * f->LD + 16 * kk)), false, b);
            for (int h = 0; h < 2; h++) {
                tern_mma_bf16(kb, a, b + 4 * h, x[j + h], d);
                for (int i = 0; i < 4; i++) x[j + h][i] = d[i];
            }
        }
    }
}

/* acc[n] += X M for X the 16 x 16 nk result tiles x (as A operands) and rows 16 kk0 ..
 * 16 (kk0 + nk) - 1 of M [TILE, LD] in shared memory, rows the k. One tern_load_matrix,
 * transposed, gives the B fragments of n-tiles n and n + 1 at k-step kk: matrices (rows
 * 16kk, columns 8n), (16kk + 8, 8n), (16kk, 8n + 8), (16kk + 8, 8n + 8) (lm_rows_k). */
static void accumulate_rows_k(tern_kb *kb, const fl_ctx *f, tern_v x[][4], tern_v M, tern_v Mo, int kk0, int nk,
                              tern_v acc[][4]) {
    if (f->wg) { /* B = M: the tile's rows 16 kk0 .. are the k */
        tern_v a[TILE / 2], c[MAX_HS / 2], d[MAX_HS / 2];
        for (int kk = 0; kk < nk; kk++) a_from_acc(x, kk, a + 8 * kk);
        for (int n = 0; n < f->NT; n++)
            for (int i = 0; i < 4; i++) c[4 * n + i] = acc[n][i];
        tern_wg_tile b = {M, tern_add(Mo, tern_int(16 * kk0 * 64)), TILE, true};
        tern_wgmma_bf16(kb, f->hs, 16 * nk, a, NULL, &b, c, d);
        for (int n = 0; n < f->NT; n++)
            for (int i = 0; i < 4; i++) tern_assign(acc[n][i], d[4 * n + i]);
        return;
    }
    tern_v at = tern_add(f->lm_rows_k, Mo);
    for (int kk = 0; kk < nk; kk++) {
        tern_v a[8];
        a_from_acc(x, kk, a);
        for (int n = 0; n < f->NT; n += 2) {
            tern_v b[8];
            tern_load_matrix(M, tern_add(at, tern_int(16 * (kk0 + kk) * f->LD + 8 * n)), true, b);
            for (int h = 0; h < 2; h++) {
                tern_v c[4], d[4];
                for (int i = 0; i < 4; i++) c[i] = acc[n + h][i];
                tern_mma_bf16(kb, a, b + 4 * h, c, d);
                for (int i = 0; i < 4; i++) tern_assign(acc[n + h][i], d[i]);
            }
        }
    }
}

/* With f->wg: starts x1 = A1 M1^T into f->xv and x2 = A2 M2^T into f->xv + TILE / 2 (rows
 * 8 j0 .. of the tiles), asynchronously, x1 first (tern_wgmma_wait(kb, 1) completes it). */
static void product_pair_start(tern_kb *kb, const fl_ctx *f, const fl_a *A1, tern_v M1, const fl_a *A2, tern_v M2,
                               tern_v Mo, int j0, int nj) {
    const fl_a *As[2] = {A1, A2};
    tern_v Ms[2] = {M1, M2};
    for (int p = 0; p < 2; p++) {
        tern_v *acc = f->xv + p * (TILE / 2), a[MAX_HS / 2];
        for (int e = 0; e < 4 * nj; e++) tern_assign(acc[e], tern_f32(0.0f));
        if (!As[p]->tile)
            for (int kk = 0; kk < f->KS; kk++) a_get(As[p], kk, a + 8 * kk);
        tern_wg_tile b = {Ms[p], tern_add(Mo, tern_int(8 * j0 * 64)), TILE, false};
        tern_wgmma_bf16_async(kb, 8 * nj, f->hs, As[p]->tile ? NULL : a, As[p]->tile, &b, acc);
    }
}

/* Product `which` (0 or 1) of a started pair as result tiles, once a wait covers it. */
static void pair_result(const fl_ctx *f, int which, int nj, tern_v x[][4]) {
    for (int j = 0; j < nj; j++)
        for (int i = 0; i < 4; i++) x[j][i] = f->xv[which * (TILE / 2) + 4 * j + i];
}

/* Two independent products x1 = A1 M1^T and x2 = A2 M2^T (product_rows_n each, the same
 * tile rows): with f->wg both go to the tensor cores at once, asynchronously, into f->xv, and
 * are waited for together. */
static void product_rows_n_pair(tern_kb *kb, const fl_ctx *f, const fl_a *A1, tern_v M1, const fl_a *A2, tern_v M2,
                                tern_v Mo, int j0, int nj, tern_v x1[][4], tern_v x2[][4]) {
    if (!f->wg) {
        product_rows_n(kb, f, A1, M1, Mo, j0, nj, x1);
        product_rows_n(kb, f, A2, M2, Mo, j0, nj, x2);
        return;
    }
    product_pair_start(kb, f, A1, M1, A2, M2, Mo, j0, nj);
    tern_wgmma_wait(kb, 0);
    pair_result(f, 0, nj, x1);
    pair_result(f, 1, nj, x2);
}

/* With f->wg: starts acc += X M (accumulate_rows_k's product) asynchronously. */
static void accumulate_start(tern_kb *kb, const fl_ctx *f, tern_v x[][4], tern_v M, tern_v acc[][4], tern_v Mo,
                             int kk0, int nk) {
    tern_v a[TILE / 2], c[MAX_HS / 2];
    for (int kk = 0; kk < nk; kk++) a_from_acc(x, kk, a + 8 * kk);
    for (int n = 0; n < f->NT; n++)
        for (int i = 0; i < 4; i++) c[4 * n + i] = acc[n][i];
    tern_wg_tile b = {M, tern_add(Mo, tern_int(16 * kk0 * 64)), TILE, true};
    tern_wgmma_bf16_async(kb, f->hs, 16 * nk, a, NULL, &b, c);
}

/* f->xv for the product pairs of the wg backward kernels. */
static void pair_vars(tern_kb *kb, fl_ctx *f, tern_v xv[TILE]) {
    if (!f->wg) return;
    for (int e = 0; e < TILE; e++) {
        char name[16];
        snprintf(name, sizeof name, "xv%d", e);
        xv[e] = tern_var(kb, name, tern_f32(0.0f));
    }
    f->xv = xv;
}

/* Variables for 16 x hs accumulators, zeroed. */
static void acc_vars(tern_kb *kb, int NT, const char *name, tern_v acc[][4]) {
    char buf[32];
    for (int n = 0; n < NT; n++)
        for (int i = 0; i < 4; i++) {
            snprintf(buf, sizeof buf, "%s%d_%d", name, n, i);
            acc[n][i] = tern_var(kb, buf, tern_f32(0.0f));
        }
}

/* Row r's 16 x hs accumulator tiles acc to buf (rows r and r + 8 of head matrix `part`,
 * those below T), each value times scale_lo (row g) or scale_hi (row g + 8). */
static void store_rows(const fl_ctx *f, tern_v buf, int parts, int part, tern_v r, tern_v acc[][4],
                       tern_v scale_lo, tern_v scale_hi) {
    tern_v r8 = tern_add(r, tern_int(8));
    tern_v base = row_index(f, parts, part, r), base8 = row_index(f, parts, part, r8);
    for (int n = 0; n < f->NT; n++) {
        tern_v col = tern_add(tern_mul(f->t, tern_int(2)), tern_int(8 * n));
        tern_v lo[2] = {tern_mul(acc[n][0], scale_lo), tern_mul(acc[n][1], scale_lo)};
        tern_v hi[2] = {tern_mul(acc[n][2], scale_hi), tern_mul(acc[n][3], scale_hi)};
        TERN_IF(f->kb, tern_lt(r, f->T)) { tern_store_vec(buf, tern_add(base, col), 2, lo); }
        TERN_IF(f->kb, tern_lt(r8, f->T)) { tern_store_vec(buf, tern_add(base8, col), 2, hi); }
    }
}

/* Sum or max of a value over the four lanes that share a row. */
static tern_v quad_max(tern_v x) {
    x = tern_max(x, tern_simd_shuffle_xor(x, tern_int(1)));
    return tern_max(x, tern_simd_shuffle_xor(x, tern_int(2)));
}
static tern_v quad_sum(tern_v x) {
    x = tern_add(x, tern_simd_shuffle_xor(x, tern_int(1)));
    return tern_add(x, tern_simd_shuffle_xor(x, tern_int(2)));
}

/* The column (key or query position) of element i of result tile j, for a tile at c0. */
static tern_v col_of(const fl_ctx *f, tern_v c0, int j, int i) {
    return tern_add(c0, tern_add(tern_mul(f->t, tern_int(2)), tern_int(8 * j + (i & 1))));
}

/* What a kernel over query rows does with one key tile at k0 (state: its own), `masked`
 * for the tiles that hold keys after some of the group's rows. */
typedef void (*fl_key_tile)(tern_kb *kb, const fl_ctx *f, const void *state, tern_v k0, bool masked);

/* The key tiles of query block qb (rows qb TILE ..) in order: those before the block
 * unmasked, then its diagonal tile masked. */
static void walk_key_tiles(tern_kb *kb, const fl_ctx *f, tern_v qb, fl_key_tile fn, const void *state) {
    TERN_FOR(kb, kt, tern_int(0), qb, tern_int(1)) { fn(kb, f, state, tern_mul(kt, tern_int(TILE)), false); }
    fn(kb, f, state, tern_mul(qb, tern_int(TILE)), true);
}

/* The query block of this group, of `tiles` key tiles, and the group's rows: r = the SIMD
 * group's first row (its lane's g), r8 = r + 8. The last blocks have the most key tiles:
 * they go first. */
static tern_v query_block(tern_kb *kb, const fl_ctx *f, tern_v tiles, tern_v *r, tern_v *r8) {
    tern_v qb = tern_sub(tern_sub(tiles, tern_int(1)), tern_group_id(kb, 0));
    *r = tern_add(tern_add(tern_mul(qb, tern_int(f->rows)), tern_mul(f->warp, tern_int(16))), f->g);
    *r8 = tern_add(*r, tern_int(8));
    return qb;
}

/* ---- forward ---- */

/* What one key tile of the forward pass reads and updates. */
typedef struct fwd_state {
    tern_v qkv, Ks, Vs, scale2, r, r8;
    bool pipelined;
    int bufs;    /* pipelined: the tile buffers (2) */
    tern_v last; /* pipelined: the last key tile the group walks */
    fl_a qa;               /* the group's Q fragments */
    tern_v *m, *l;         /* running row maxima and sums (rows r and r8) */
    tern_v (*o)[4];        /* the output accumulators */
} fwd_state;

/* Pipelined: starts copying key tile `next` into the buffer next % bufs of Ks and Vs. */
static void forward_issue(const fl_ctx *f, const void *state, tern_v next) {
    const fwd_state *st = state;
    tern_v off = pipe_offset_n(next, f->tile_size, st->bufs), k0 = tern_mul(next, tern_int(TILE));
    stage_tile_async(f, st->Ks, off, st->qkv, 3, 1, k0);
    stage_tile_async(f, st->Vs, off, st->qkv, 3, 2, k0);
}

/* The online softmax of one key tile's scores s (at k0; the causal mask where `masked`):
 * the running maxima m and sums l updated, s replaced by P = exp(scale s - m) (base 2), and
 * alpha[h] = exp(m_old - m_new), the factor the output accumulators take. The maxima are of
 * the raw scores, scaled once per row (the scale is positive), so that each score is scaled
 * inside its exponential's multiply-add. */
static void online_softmax(const fl_ctx *f, const fwd_state *st, tern_v s[][4], tern_v k0, bool masked,
                           tern_v alpha[2]) {
    tern_v mx[2] = {tern_f32(-INFINITY), tern_f32(-INFINITY)};
    for (int j = 0; j < TILE / 8; j++)
        for (int i = 0; i < 4; i++) {
            tern_v row = i < 2 ? st->r : st->r8;
            if (masked) s[j][i] = tern_select(tern_le(col_of(f, k0, j, i), row), s[j][i], tern_f32(-INFINITY));
            mx[i / 2] = tern_max(mx[i / 2], s[j][i]);
        }
    tern_v neg_m[2];
    for (int h = 0; h < 2; h++) {
        /* finite: tile 0, the first, has a key at or before every row; a later tile with
         * none (walk_key_tiles) leaves m, and with alpha = 1 and P = 0 l and o, unchanged */
        tern_v mnew = quad_max(tern_max(st->m[h], tern_mul(mx[h], st->scale2)));
        alpha[h] = tern_exp2(tern_sub(st->m[h], mnew));
        tern_assign(st->m[h], mnew);
        neg_m[h] = tern_neg(st->m[h]);
    }
    tern_v sum[2] = {tern_f32(0.0f), tern_f32(0.0f)};
    for (int j = 0; j < TILE / 8; j++)
        for (int i = 0; i < 4; i++) {
            s[j][i] = tern_exp2(tern_fma(s[j][i], st->scale2, neg_m[i / 2]));
            sum[i / 2] = tern_add(sum[i / 2], s[j][i]);
        }
    for (int h = 0; h < 2; h++) tern_assign(st->l[h], tern_fma(st->l[h], alpha[h], sum[h]));
}

/* The key tile at k0: scores, online softmax, o += P V. Only the diagonal tiles need the
 * causal mask (`masked`): the kernel walks the others without it, and the diagonal last. */
static void forward_tile(tern_kb *kb, const fl_ctx *f, const void *state, tern_v k0, bool masked) {
    const fwd_state *st = state;
    tern_v off = tern_int(0); /* where the tile is in Ks and Vs */
    if (st->pipelined) {
        tern_v kt = tern_div(k0, tern_int(TILE)), next = tern_add(kt, tern_int(1));
        off = pipe_offset_n(kt, f->tile_size, st->bufs);
        pipe_step(kb, f, tern_le(next, st->last), forward_issue, st, next);
    } else {
        tern_barrier(kb); /* everyone is done with the previous tiles */
        stage_tile(f, st->Ks, st->qkv, 3, 1, k0);
        stage_tile(f, st->Vs, st->qkv, 3, 2, k0);
        tern_barrier(kb);
    }
    tern_v s[TILE / 8][4], alpha[2];
    product_rows_n(kb, f, &st->qa, st->Ks, off, 0, TILE / 8, s);
    online_softmax(f, st, s, k0, masked, alpha);
    for (int n = 0; n < f->NT; n++)
        for (int i = 0; i < 4; i++) tern_assign(st->o[n][i], tern_mul(st->o[n][i], alpha[i / 2]));
    accumulate_rows_k(kb, f, s, st->Vs, off, 0, TILE / 16, st->o);
}

static void trace_forward(tern_kb *kb, void *user) {
    const fl_build *u = user;
    tern_v qkv = tern_param_buf(kb, "qkv", TERN_T_BF16, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_BF16, TERN_WRITE);
    tern_v lse = tern_param_buf(kb, "lse", TERN_T_F32, TERN_WRITE);
    tern_v B = tern_param_scalar(kb, "B", TERN_T_I32);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    fl_ctx f = fl_begin(kb, u, B, T, NH, false);
    int KS = f.KS, NT = f.NT;
    bool pipelined = u->opts.pipelined;
    size_t bufs = pipelined ? 2 : 1;
    tern_v Ks = fl_tiles(kb, &f, "Ks", bufs);
    tern_v Vs = fl_tiles(kb, &f, "Vs", bufs);
    tern_v scale2 = tern_mul(scale, log2e());

    tern_v tiles = tern_div(tern_add(T, tern_int(TILE - 1)), tern_int(TILE));
    tern_v r, r8, qb = query_block(kb, &f, tiles, &r, &r8);
    tern_v qa[MAX_HS / 16][8];
    for (int kk = 0; kk < KS; kk++) a_frag(&f, qkv, row_index(&f, 3, 0, r), row_index(&f, 3, 0, r8), kk, qa[kk]);

    tern_v m[2] = {tern_var(kb, "m_lo", tern_f32(-INFINITY)), tern_var(kb, "m_hi", tern_f32(-INFINITY))};
    tern_v l[2] = {tern_var(kb, "l_lo", tern_f32(0.0f)), tern_var(kb, "l_hi", tern_f32(0.0f))};
    tern_v o[MAX_HS / 8][4];
    acc_vars(kb, NT, "o", o);

    fwd_state st = {.qkv = qkv, .Ks = Ks, .Vs = Vs, .scale2 = scale2, .r = r, .r8 = r8, .qa = {.frag = qa},
                    .m = m, .l = l, .o = o, .pipelined = pipelined, .bufs = (int)bufs};
    if (pipelined) {
        /* the block's diagonal tile, the last it walks; tile 0 staged ahead */
        st.last = qb;
        forward_issue(&f, &st, tern_int(0));
        tern_copy_async_commit(kb);
    }
    walk_key_tiles(kb, &f, qb, forward_tile, &st);
    /* each lane summed its own columns: the row sums need the quad */
    tern_v total[2] = {quad_sum(l[0]), quad_sum(l[1])};
    tern_v inv[2] = {tern_div(tern_f32(1.0f), total[0]), tern_div(tern_f32(1.0f), total[1])};
    store_rows(&f, out, 1, 0, r, o, inv[0], inv[1]);
    TERN_IF(kb, tern_eq(f.t, tern_int(0))) {
        TERN_IF(kb, tern_lt(r, T)) {
            tern_store(lse, tern_add(tern_mul(f.bh, T), r),
                       tern_mul(tern_add(m[0], tern_log2(total[0])), tern_f32(0.693147180559945309f)));
        }
        TERN_IF(kb, tern_lt(r8, T)) {
            tern_store(lse, tern_add(tern_mul(f.bh, T), r8),
                       tern_mul(tern_add(m[1], tern_log2(total[1])), tern_f32(0.693147180559945309f)));
        }
    }
}

/* ---- D = rowsum(dO * O): a few lanes per (b, t, h) row ----
 * The row's 16-byte chunks go to consecutive lanes (delta_lanes of them), so that a warp's
 * loads cover whole rows side by side: one thread walking its row's 128 bytes alone used
 * half of every 32-byte sector a warp load touched. */

/* The lanes per row: 8 when the row's chunks (hs / 8) divide by 8, else 4 or 2 (hs is a
 * multiple of 16: an even number of chunks). */
static int delta_lanes(int hs) {
    int chunks = hs / 8;
    return chunks % 8 == 0 ? 8 : chunks % 4 == 0 ? 4 : 2;
}

static void trace_delta(tern_kb *kb, void *user) {
    int hs = ((const fl_build *)user)->hs, L = delta_lanes(hs), per = hs / 8 / L;
    tern_v out = tern_param_buf(kb, "out", TERN_T_BF16, TERN_READ);
    tern_v dout = tern_param_buf(kb, "dout", TERN_T_BF16, TERN_READ);
    tern_v D = tern_param_buf(kb, "D", TERN_T_F32, TERN_WRITE);
    tern_v B = tern_param_scalar(kb, "B", TERN_T_I32);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v gid = tern_global_id(kb, 0);
    tern_v i = tern_div(gid, tern_int(L)), part = tern_rem(gid, tern_int(L)); /* row (b T + t) NH + h */
    tern_v rows = tern_mul(tern_mul(B, T), NH);
    tern_v ic = tern_min(i, tern_sub(rows, tern_int(1))); /* lanes past the end read the last row */
    tern_v acc = tern_f32(0.0f);
    for (int c = 0; c < per; c++) {
        tern_v at = tern_add(tern_mul(ic, tern_int(hs)), tern_mul(tern_add(part, tern_int(c * L)), tern_int(8)));
        tern_v x[8], y[8];
        tern_load_vec(out, at, 8, x);
        tern_load_vec(dout, at, 8, y);
        for (int j = 0; j < 8; j++) acc = tern_fma(x[j], y[j], acc);
    }
    /* the row's lanes are consecutive and aligned: a butterfly over them */
    for (int m = 1; m < L; m *= 2) acc = tern_add(acc, tern_simd_shuffle_xor(acc, tern_int(m)));
    TERN_IF(kb, tern_land(tern_lt(i, rows), tern_eq(part, tern_int(0)))) {
        tern_v h = tern_rem(i, NH), bt = tern_div(i, NH);
        tern_v b = tern_div(bt, T), t = tern_rem(bt, T);
        tern_store(D, tern_add(tern_mul(tern_add(tern_mul(b, NH), h), T), t), acc);
    }
}

uint32_t gk_flash_delta_groups(int B, int T, int NH, int hs) {
    size_t threads = (size_t)B * T * NH * (size_t)delta_lanes(hs);
    return (uint32_t)((threads + THREADS - 1) / THREADS);
}

/* ---- backward ---- */

/* The backward kernels' parameters (in launch order) and context. */
typedef struct fl_bwd {
    tern_v qkv, dout, lse, D, dqkv, T, scale;
    fl_ctx f;
} fl_bwd;

static fl_bwd bwd_begin(tern_kb *kb, const fl_build *u, bool kv_heads) {
    fl_bwd p;
    p.qkv = tern_param_buf(kb, "qkv", TERN_T_BF16, TERN_READ);
    p.dout = tern_param_buf(kb, "dout", TERN_T_BF16, TERN_READ);
    p.lse = tern_param_buf(kb, "lse", TERN_T_F32, TERN_READ);
    p.D = tern_param_buf(kb, "D", TERN_T_F32, TERN_READ);
    p.dqkv = tern_param_buf(kb, "dqkv", TERN_T_BF16, TERN_WRITE);
    tern_v B = tern_param_scalar(kb, "B", TERN_T_I32);
    p.T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    p.scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    p.f = fl_begin(kb, u, B, p.T, NH, kv_heads);
    return p;
}

/* dK and dV, one key tile per group */

/* What one query tile of the dK, dV pass reads and updates. */
typedef struct bkv_state {
    tern_v qkv, dout, lse, D, Qs, dOs, Ls, Ds, T, scale, scale2, r, r8;
    fl_a ka, va;               /* the group's K and V fragments */
    tern_v (*dk)[4], (*dv)[4]; /* the accumulators */
    bool kv_halves;
    tern_v dsg; /* ds_saved: where dS^T / scale goes, or 0 */
    tern_v DSt, k0; /* ds_saved: the tile's dS^T staged [TILE, TILE + 8]; the group's first key */
    bool ds_saved;
    bool pipelined;
    tern_v tiles;    /* query tiles of the sequence */
    tern_v off, loff; /* the current tile's place in Qs and dOs, and in Ls and Ds */
} bkv_state;

/* The elements of one head's dS^T before key tile kt, and (kt the tile count) in all:
 * TILE rows of T - TILE i queries for each tile i < kt (gk_flash_ds_len). */
static size_t ds_before_host(size_t kt, size_t T) { return TILE * (kt * T - TILE * (kt * (kt - 1) / 2)); }
static tern_v ds_before(tern_v kt, tern_v T) {
    tern_v pairs = tern_div(tern_mul(kt, tern_sub(kt, tern_int(1))), tern_int(2));
    return tern_mul(tern_int(TILE), tern_sub(tern_mul(kt, T), tern_mul(tern_int(TILE), pairs)));
}

/* ds_saved: element (k0 + row, q) of the group's head in the key-major dS^T, k0 the first key
 * of a key tile and q >= k0 (gk_flash_ds_len's layout). */
static tern_v ds_tile_index(const fl_ctx *f, tern_v k0, tern_v row, tern_v q) {
    tern_v tiles = tern_div(tern_add(f->T, tern_int(TILE - 1)), tern_int(TILE));
    tern_v head = tern_mul(f->bh, ds_before(tiles, f->T));
    tern_v at = tern_add(tern_mul(row, tern_sub(f->T, k0)), tern_sub(q, k0));
    return tern_add(tern_add(head, ds_before(tern_div(k0, tern_int(TILE)), f->T)), at);
}

/* The same for any key (its tile found by division). */
static tern_v ds_index(const fl_ctx *f, tern_v key, tern_v q) {
    tern_v k0 = tern_mul(tern_div(key, tern_int(TILE)), tern_int(TILE));
    return ds_tile_index(f, k0, tern_sub(key, k0), q);
}

size_t gk_flash_ds_len(int B, int T, int NH) {
    size_t tiles = ((size_t)T + TILE - 1) / TILE;
    return (size_t)B * (size_t)NH * ds_before_host(tiles, (size_t)T) + TILE;
}

/* Puts this lane's dS^T values of result tile j (keys r, r8; queries q, q + 1 of col_of) into
 * the staged tile, as bf16 pairs; copy_ds then writes the whole tile out in 16-byte rows
 * (lane-sized scattered stores cost more than the products they save: run 27). */
static void stage_ds_out(const fl_ctx *f, const bkv_state *st, int j, tern_v d[4]) {
    tern_v col = tern_add(tern_mul(f->t, tern_int(2)), tern_int(8 * j));
    for (int h = 0; h < 2; h++) {
        tern_v row = tern_add(tern_add(tern_mul(f->warp, tern_int(16)), f->g), tern_int(8 * h));
        tern_v pair[2] = {d[2 * h], d[2 * h + 1]};
        tern_store_vec(st->DSt, tern_add(tern_mul(row, tern_int(TILE + 8)), col), 2, pair);
    }
}

/* The staged dS^T tile (keys k0 .., queries q0 ..) to the [B NH, T, T] buffer: 16 bytes per
 * store, rows and 8-query runs past T left out (T is a multiple of 8). The rows handed to the
 * copy engine instead (tern_store_bulk, a row a thread, the fence, and the reads waited for
 * before the next tile) made the warpgroup kernel 23% slower: bench/h200/NOTES.md, run 172. */
static void copy_ds(tern_kb *kb, const fl_ctx *f, const bkv_state *st, tern_v q0) {
    tern_barrier(kb); /* every SIMD group's values are in the tile */
    int per_row = TILE / 8, total = TILE * per_row, n = f->threads;
    for (int i = 0; i < (total + n - 1) / n; i++) {
        tern_v v = tern_add(f->tid, tern_int(i * n));
        tern_v row = tern_div(v, tern_int(per_row));
        tern_v col = tern_mul(tern_rem(v, tern_int(per_row)), tern_int(8));
        tern_v key = tern_add(st->k0, row), q = tern_add(q0, col);
        TERN_IF(kb, tern_land(tern_lt(v, tern_int(total)), tern_land(tern_lt(key, st->T), tern_lt(q, st->T)))) {
            tern_v x[8];
            tern_load_vec(st->DSt, tern_add(tern_mul(row, tern_int(TILE + 8)), col), 8, x);
            /* the tile's own index: no division by TILE a store (ds_index would) */
            tern_store_vec(st->dsg, ds_tile_index(f, st->k0, row, q), 8, x);
        }
    }
}

/* Queries 8 j0 .. 8 (j0 + nj) - 1 of the staged tile at q0: P^T and dS^T for the group's keys,
 * then dV += P^T dO and dK += dS^T Q. With warpgroup products, P^T is made while dP^T is
 * still on the tensor cores, and the last two products are left in flight unless `wait`
 * (backward_kv_tile copies dS^T out under them, then waits). */
static void backward_kv_slice(tern_kb *kb, const fl_ctx *f, const bkv_state *st, tern_v q0, bool diagonal, int j0,
                              int nj, bool wait) {
    /* P^T [keys, queries] = exp(scale K Q^T - lse[q]) where q >= key and q < T */
    tern_v p[TILE / 8][4], dp[TILE / 8][4]; /* and dP^T = V dO^T */
    if (f->wg) {
        product_pair_start(kb, f, &st->ka, st->Qs, &st->va, st->dOs, st->off, j0, nj);
        tern_wgmma_wait(kb, 1); /* S^T done, dP^T may not be */
        pair_result(f, 0, nj, p);
    } else {
        product_rows_n_pair(kb, f, &st->ka, st->Qs, &st->va, st->dOs, st->off, j0, nj, p, dp);
    }
    /* this lane's queries of tile j are q and q + 1 (even q), so lse and D come in pairs */
    for (int j = 0; j < nj; j++) {
        tern_v L[2];
        tern_load_vec(st->Ls, tern_add(tern_sub(col_of(f, q0, j0 + j, 0), q0), st->loff), 2, L);
        for (int i = 0; i < 4; i++) {
            tern_v q = col_of(f, q0, j0 + j, i), key = i < 2 ? st->r : st->r8;
            tern_v live = tern_lt(q, st->T);
            if (diagonal) live = tern_land(tern_ge(q, key), live);
            tern_v pe = tern_exp2(tern_fma(p[j][i], st->scale2, tern_neg(L[i & 1])));
            p[j][i] = tern_select(live, pe, tern_f32(0.0f));
        }
    }
    if (f->wg) {
        accumulate_start(kb, f, p, st->dOs, st->dv, st->off, j0 / 2, nj / 2); /* dV += P^T dO */
        tern_wgmma_wait(kb, 1); /* dP^T done, dV may not be */
        pair_result(f, 1, nj, dp);
    }
    for (int j = 0; j < nj; j++) {
        tern_v D[2];
        tern_load_vec(st->Ds, tern_add(tern_sub(col_of(f, q0, j0 + j, 0), q0), st->loff), 2, D);
        /* dS^T / scale = P^T (dP^T - D[q]), dS the gradient of the unscaled scores: the
         * scale multiplies dK once, as it is stored */
        for (int i = 0; i < 4; i++) dp[j][i] = tern_mul(p[j][i], tern_sub(dp[j][i], D[i & 1]));
    }
    if (st->ds_saved)
        for (int j = 0; j < nj; j++) stage_ds_out(f, st, j0 + j, dp[j]);
    /* dV += P^T dO (with f->wg started above), dK += dS^T Q / scale */
    if (f->wg) {
        accumulate_start(kb, f, dp, st->Qs, st->dk, st->off, j0 / 2, nj / 2);
        if (wait) tern_wgmma_wait(kb, 0);
    } else {
        accumulate_rows_k(kb, f, p, st->dOs, st->off, j0 / 2, nj / 2, st->dv);
        accumulate_rows_k(kb, f, dp, st->Qs, st->off, j0 / 2, nj / 2, st->dk);
    }
}

/* Pipelined: starts copying query tile `next`'s Q and dO rows into the other halves of Qs
 * and dOs (which half: counted from the group's own tile, the first it walks). */
static void backward_kv_issue(const fl_ctx *f, const void *state, tern_v next) {
    const bkv_state *st = state;
    tern_v rel = tern_sub(next, tern_div(st->k0, tern_int(TILE)));
    tern_v off = pipe_offset(rel, f->tile_size), q0 = tern_mul(next, tern_int(TILE));
    stage_tile_async(f, st->Qs, off, st->qkv, 3, 0, q0);
    stage_tile_async(f, st->dOs, off, st->dout, 1, 0, q0);
}

/* The query tile at q0. Queries before the key (the causal mask) occur only in the diagonal
 * tile, the group's first; queries past T only in the last. With kv_halves the tile is
 * walked in two slices of TILE / 2 queries, so that half as many scores are live at once
 * (this kernel holds K, V, dK and dV fragments besides: registers limit its occupancy). */
static void backward_kv_tile(tern_kb *kb, const fl_ctx *f, const bkv_state *st, tern_v q0, bool diagonal) {
    if (!st->pipelined) {
        tern_barrier(kb);
        stage_tile(f, st->Qs, st->qkv, 3, 0, q0);
        stage_tile(f, st->dOs, st->dout, 1, 0, q0);
        stage_rows(f, st->Ls, st->lse, q0, log2e());
        stage_rows(f, st->Ds, st->D, q0, tern_f32(1.0f));
        tern_barrier(kb);
    }
    bkv_state cur = *st;
    tern_v lse_next = tern_f32(0.0f), D_next = tern_f32(0.0f), nrow = tern_int(0);
    if (st->pipelined) {
        /* the tiles walk from the group's own (buffer 0) upwards */
        tern_v qt = tern_div(q0, tern_int(TILE)), rel = tern_sub(qt, tern_div(st->k0, tern_int(TILE)));
        tern_v next = tern_add(qt, tern_int(1)), rel_next = tern_add(rel, tern_int(1));
        cur.off = pipe_offset(rel, f->tile_size);
        cur.loff = pipe_offset(rel, TILE);
        pipe_step(kb, f, tern_lt(next, st->tiles), backward_kv_issue, st, next);
        /* the next tile's lse and D: loaded now, stored after the products (a register
         * each, not a stall between barriers) */
        tern_v row = tern_min(tern_add(tern_mul(next, tern_int(TILE)), tern_min(f->tid, tern_int(TILE - 1))),
                              tern_sub(st->T, tern_int(1)));
        tern_v at = tern_add(tern_mul(f->bh, st->T), row);
        lse_next = tern_load(st->lse, at); /* times log2(e) at the store: no wait for the load here */
        D_next = tern_load(st->D, at);
        nrow = tern_add(pipe_offset(rel_next, TILE), f->tid);
    }
    int slices = st->kv_halves ? 2 : 1, nj = TILE / 8 / slices;
    for (int i = 0; i < slices; i++) backward_kv_slice(kb, f, &cur, q0, diagonal, i * nj, nj, i < slices - 1);
    if (st->pipelined) {
        /* the other buffer: nobody reads it before the next tile's barrier */
        TERN_IF(kb, tern_lt(f->tid, tern_int(TILE))) {
            tern_store(st->Ls, nrow, tern_mul(lse_next, log2e()));
            tern_store(st->Ds, nrow, D_next);
        }
    }
    if (st->ds_saved) copy_ds(kb, f, st, q0); /* the next tile's first barrier protects DSt */
    if (f->wg) tern_wgmma_wait(kb, 0); /* the last dK and dV products, copy_ds done under them */
}

/* Pipelined: the group's own query tile kt, the first it walks, staged ahead into buffer 0. */
static void backward_kv_prologue(tern_kb *kb, const fl_ctx *f, const bkv_state *st, tern_v kt) {
    backward_kv_issue(f, st, kt);
    tern_copy_async_commit(kb);
    stage_rows(f, st->Ls, st->lse, st->k0, log2e());
    stage_rows(f, st->Ds, st->D, st->k0, tern_f32(1.0f));
}

/* The query tiles of key tile kt: its own (the diagonal), then those after it. */
static void backward_kv_walk(tern_kb *kb, const fl_ctx *f, const bkv_state *st, tern_v kt) {
    backward_kv_tile(kb, f, st, tern_mul(kt, tern_int(TILE)), true);
    TERN_FOR(kb, qt, tern_add(kt, tern_int(1)), st->tiles, tern_int(1)) {
        backward_kv_tile(kb, f, st, tern_mul(qt, tern_int(TILE)), false);
    }
}

static void trace_backward_kv(tern_kb *kb, void *user) {
    const fl_build *u = user;
    fl_bwd in = bwd_begin(kb, u, true);
    tern_v qkv = in.qkv, dout = in.dout, lse = in.lse, D = in.D, dqkv = in.dqkv, scale = in.scale, T = in.T;
    fl_ctx f = in.f;
    tern_v xv[TILE];
    pair_vars(kb, &f, xv);
    int KS = f.KS, NT = f.NT;
    bool pipelined = u->opts.pipelined;
    size_t bufs = pipelined ? 2 : 1;
    tern_v Qs = fl_tiles(kb, &f, "Qs", bufs);
    tern_v dOs = fl_tiles(kb, &f, "dOs", bufs);
    tern_v scale2 = tern_mul(scale, log2e());
    tern_v Ls = tern_shared(kb, "Ls", TERN_T_F32, bufs * TILE);
    tern_v Ds = tern_shared(kb, "Ds", TERN_T_F32, bufs * TILE);
    tern_v dsg = u->opts.ds_saved ? tern_param_buf(kb, "dsg", TERN_T_BF16, TERN_WRITE) : tern_int(0);
    tern_v DSt = u->opts.ds_saved ? tern_shared(kb, "DSt", TERN_T_BF16, (size_t)TILE * (TILE + 8)) : tern_int(0);

    /* the first key tiles see the most query tiles: group 0 takes tile 0 */
    tern_v kt = tern_group_id(kb, 0);
    tern_v tiles = tern_div(tern_add(T, tern_int(TILE - 1)), tern_int(TILE));
    tern_v r = tern_add(tern_add(tern_mul(kt, tern_int(TILE)), tern_mul(f.warp, tern_int(16))), f.g);
    tern_v r8 = tern_add(r, tern_int(8));
    bkv_state st = {.qkv = qkv, .dout = dout, .lse = lse, .D = D, .Qs = Qs, .dOs = dOs, .Ls = Ls, .Ds = Ds,
                    .T = T, .scale = scale, .scale2 = scale2, .r = r, .r8 = r8, .kv_halves = u->opts.kv_halves,
                    .dsg = dsg, .DSt = DSt, .k0 = tern_mul(kt, tern_int(TILE)), .ds_saved = u->opts.ds_saved,
                    .pipelined = pipelined, .tiles = tiles, .off = tern_int(0), .loff = tern_int(0)};
    if (pipelined && f.group == 1) backward_kv_prologue(kb, &f, &st, kt);
    /* the group's K and V rows, the A operands of every tile's first two products: with
     * warpgroup products staged once as tiles (the first tile's barrier covers the stores),
     * which leaves 32 registers a thread to the rest; else fragments in registers */
    tern_v ka[MAX_HS / 16][8], va[MAX_HS / 16][8];
    tern_wg_tile kt_tile, vt_tile;
    if (f.wg) {
        tern_v Ks = fl_tiles(kb, &f, "Ks", 1), Vs = fl_tiles(kb, &f, "Vs", 1);
        stage_tile(&f, Ks, qkv, 3, 1, st.k0);
        stage_tile(&f, Vs, qkv, 3, 2, st.k0);
        kt_tile = (tern_wg_tile){Ks, tern_int(0), TILE, false};
        vt_tile = (tern_wg_tile){Vs, tern_int(0), TILE, false};
        st.ka = (fl_a){.tile = &kt_tile};
        st.va = (fl_a){.tile = &vt_tile};
    } else {
        for (int kk = 0; kk < KS; kk++) {
            a_frag(&f, qkv, row_index(&f, 3, 1, r), row_index(&f, 3, 1, r8), kk, ka[kk]);
            a_frag(&f, qkv, row_index(&f, 3, 2, r), row_index(&f, 3, 2, r8), kk, va[kk]);
        }
        st.ka = (fl_a){.frag = ka};
        st.va = (fl_a){.frag = va};
    }
    tern_v dk[MAX_HS / 8][4], dv[MAX_HS / 8][4];
    acc_vars(kb, NT, "dk", dk);
    acc_vars(kb, NT, "dv", dv);
    st.dk = dk, st.dv = dv;

    if (f.group == 1) {
        backward_kv_walk(kb, &f, &st, kt);
    } else {
        /* the group's query heads one after another into the same accumulators */
        TERN_FOR(kb, m, tern_int(0), tern_int(f.group), tern_int(1)) {
            fl_ctx fq = with_query_head(&f, m);
            if (pipelined) {
                tern_barrier(kb); /* everyone is done with the previous head's last tile */
                backward_kv_prologue(kb, &fq, &st, kt);
            }
            backward_kv_walk(kb, &fq, &st, kt);
        }
    }
    tern_v one = tern_f32(1.0f);
    store_rows(&f, dqkv, 3, 1, r, dk, scale, scale); /* dS's scale, taken out of the loop */
    store_rows(&f, dqkv, 3, 2, r, dv, one, one);
}

/* dQ, one query tile per group */

/* What one key tile of the dQ pass reads and updates. */
typedef struct bq_state {
    tern_v qkv, Ks, Vs, scale, scale2, r, r8;
    tern_v *L, *Dr; /* rows r and r8: logsumexp (base 2) and D */
    fl_a qa, da;    /* the group's Q and dO fragments */
    tern_v (*dq)[4];
} bq_state;

/* The key tile at k0; only the diagonal ones, walked last, need the causal mask. */
static void backward_q_tile(tern_kb *kb, const fl_ctx *f, const void *state, tern_v k0, bool masked) {
    const bq_state *st = state;
    tern_barrier(kb);
    stage_tile(f, st->Ks, st->qkv, 3, 1, k0);
    stage_tile(f, st->Vs, st->qkv, 3, 2, k0);
    tern_barrier(kb);
    tern_v p[TILE / 8][4], dp[TILE / 8][4]; /* S = Q K^T, dP = dO V^T */
    product_rows_n_pair(kb, f, &st->qa, st->Ks, &st->da, st->Vs, tern_int(0), 0, TILE / 8, p, dp);
    for (int j = 0; j < TILE / 8; j++)
        for (int i = 0; i < 4; i++) {
            tern_v row = i < 2 ? st->r : st->r8;
            p[j][i] = tern_exp2(tern_fma(p[j][i], st->scale2, tern_neg(st->L[i / 2])));
            if (masked) p[j][i] = tern_select(tern_le(col_of(f, k0, j, i), row), p[j][i], tern_f32(0.0f));
            dp[j][i] = tern_mul(p[j][i], tern_sub(dp[j][i], st->Dr[i / 2]));
        }
    accumulate_rows_k(kb, f, dp, st->Ks, tern_int(0), 0, TILE / 16, st->dq); /* dQ += dS K / scale */
}


/* ds_saved: the dQ pass from the stored dS^T / scale. */
typedef struct bqs_state {
    tern_v qkv, dsg, Ks, DSs, q0, lm; /* lm: this lane's row start for the A fragments of DSs */
    tern_v (*dq)[4];
    bool pipelined;
    int stages;  /* pipelined: buffers of each tile (stages - 1 tiles staged ahead) */
    tern_v last; /* pipelined: the last key tile the group walks */
} bqs_state;

/* The row stride of the staged dS^T tiles of BACKWARD_Q with ds_saved: the group's query
 * rows, padded by 16 bytes; with f->wg a tile of TILE key rows by those query columns,
 * swizzled. */
static int ds_ld(const fl_ctx *f) { return f->rows + 8; }
static int ds_size(const fl_ctx *f) { return TILE * (f->wg ? f->rows : ds_ld(f)); }
static tern_v ds_at(const fl_ctx *f, tern_v off, tern_v key, tern_v query) {
    if (f->wg) return tern_wg_tile_index(off, TILE, key, query);
    return tern_add(off, tern_add(tern_mul(key, tern_int(ds_ld(f))), query));
}

/* Stages keys k0 .. k0 + TILE - 1 of the stored dS^T, queries q0 .. q0 + rows - 1 (the
 * group's), as dst [TILE, rows + 8] at dst + off. Zeros where nothing was stored: keys past
 * T. 16 bytes per load and store, as stage_tile; with `async` the live runs by asynchronous
 * copies (the pipelined kernel), zeros stored at once. */
static void stage_ds_copy(const fl_ctx *f, tern_v dst, tern_v off, tern_v dsg, tern_v k0, tern_v q0, bool async) {
    int per_row = f->rows / 8, total = TILE * per_row, n = f->threads;
    for (int i = 0; i < (total + n - 1) / n; i++) {
        tern_v v = tern_add(f->tid, tern_int(i * n));
        if ((i + 1) * n > total) tern_if(f->kb, tern_lt(v, tern_int(total)));
        tern_v row = tern_div(v, tern_int(per_row));
        tern_v col = tern_mul(tern_rem(v, tern_int(per_row)), tern_int(8));
        tern_v key = tern_add(k0, row), q = tern_add(q0, col);
        tern_v live = tern_lt(key, f->T);
        if (!async) {
            tern_v x[8];
            tern_v from = ds_index(f, tern_min(key, tern_sub(f->T, tern_int(1))), tern_min(q, tern_sub(f->T, tern_int(8))));
            tern_load_vec(dsg, from, 8, x);
            for (int e = 0; e < 8; e++) x[e] = tern_select(live, x[e], tern_f32(0.0f));
            tern_store_vec(dst, ds_at(f, off, row, col), 8, x);
        } else {
            tern_v at = ds_at(f, off, row, col);
            TERN_IF(f->kb, live) {
                tern_copy_async(dst, at, dsg, ds_index(f, key, q), 8);
            }
            TERN_ELSE(f->kb) {
                tern_v z[8];
                for (int e = 0; e < 8; e++) z[e] = tern_f32(0.0f);
                tern_store_vec(dst, at, 8, z);
            }
        }
        if ((i + 1) * n > total) tern_end(f->kb);
    }
}

/* Pipelined: starts copying key tile `next` of K and of the stored dS^T into the other
 * halves of Ks and DSs. */
static void backward_q_saved_issue(const fl_ctx *f, const void *state, tern_v next) {
    const bqs_state *st = state;
    tern_v k0 = tern_mul(next, tern_int(TILE));
    stage_tile_async(f, st->Ks, pipe_offset_n(next, f->tile_size, st->stages), st->qkv, 3, 1, k0);
    stage_ds_copy(f, st->DSs, pipe_offset_n(next, ds_size(f), st->stages), st->dsg, k0, st->q0, true);
}

/* dQ += dS K / scale for the key tile at k0, dS's A fragments read transposed from the
 * staged dS^T (matrices (keys 16 kk, queries 16 w), (16 kk, 16 w + 8), (16 kk + 8, 16 w),
 * (16 kk + 8, 16 w + 8): a_frag's order), K's B fragments as accumulate_rows_k reads them.
 * Masked entries were stored as zeros, so no tile needs the mask. */
static void backward_q_saved_tile(tern_kb *kb, const fl_ctx *f, const void *state, tern_v k0, bool masked) {
    (void)masked;
    const bqs_state *st = state;
    tern_v koff = tern_int(0), doff = tern_int(0); /* where the tile is in Ks and DSs */
    if (st->pipelined) {
        tern_v kt = tern_div(k0, tern_int(TILE)), next = tern_add(kt, tern_int(st->stages - 1));
        koff = pipe_offset_n(kt, f->tile_size, st->stages);
        doff = pipe_offset_n(kt, ds_size(f), st->stages);
        pipe_step_n(kb, f, st->stages, tern_le(next, st->last), backward_q_saved_issue, st, next);
    } else {
        tern_barrier(kb);
        stage_tile(f, st->Ks, st->qkv, 3, 1, k0);
        stage_ds_copy(f, st->DSs, tern_int(0), st->dsg, k0, st->q0, false);
        tern_barrier(kb);
    }
    if (f->wg) { /* dQ [64 queries, hs] += dS [queries, keys] K [keys, hs]: both tiles' rows are keys;
                  * a warpgroup's queries are its panel of the staged dS^T */
        tern_v panel = tern_mul(tern_div(f->warp, tern_int(4)), tern_int(TILE * 64));
        tern_wg_tile a = {st->DSs, tern_add(doff, panel), TILE, true}, b = {st->Ks, koff, TILE, true};
        tern_v c[MAX_HS / 2], d[MAX_HS / 2];
        for (int n = 0; n < f->NT; n++)
            for (int i = 0; i < 4; i++) c[4 * n + i] = st->dq[n][i];
        tern_wgmma_bf16(kb, f->hs, TILE, NULL, &a, &b, c, d);
        for (int n = 0; n < f->NT; n++)
            for (int i = 0; i < 4; i++) tern_assign(st->dq[n][i], d[4 * n + i]);
        return;
    }
    tern_v lm = tern_add(st->lm, doff), lk = tern_add(f->lm_rows_k, koff);
    for (int kk = 0; kk < TILE / 16; kk++) {
        tern_v a[8];
        tern_load_matrix(st->DSs, tern_add(lm, tern_int(16 * kk * ds_ld(f))), true, a);
        for (int n = 0; n < f->NT; n += 2) {
            tern_v b[8];
            tern_load_matrix(st->Ks, tern_add(lk, tern_int(16 * kk * f->LD + 8 * n)), true, b);
            for (int h = 0; h < 2; h++) {
                tern_v c[4], d[4];
                for (int i = 0; i < 4; i++) c[i] = st->dq[n + h][i];
                tern_mma_bf16(kb, a, b + 4 * h, c, d);
                for (int i = 0; i < 4; i++) tern_assign(st->dq[n + h][i], d[i]);
            }
        }
    }
}

/* BACKWARD_Q with ds_saved: dQ from the dS^T that BACKWARD_KV stored. */
static void trace_backward_q_saved(tern_kb *kb, const fl_build *u, fl_bwd *in) {
    fl_ctx f = in->f;
    tern_v dsg = tern_param_buf(kb, "dsg", TERN_T_BF16, TERN_READ);
    bool pipelined = u->opts.pipelined;
    int stages = u->opts.stages > 2 ? u->opts.stages : 2;
    size_t bufs = pipelined ? (size_t)stages : 1;
    tern_v Ks = fl_tiles(kb, &f, "Ks", bufs);
    tern_v DSs = f.wg ? tern_shared_tiles(kb, "DSs", bufs * (size_t)ds_size(&f))
                      : tern_shared(kb, "DSs", TERN_T_BF16, bufs * (size_t)ds_size(&f));
    tern_v tiles = tern_div(tern_add(in->T, tern_int(TILE - 1)), tern_int(TILE));
    tern_v r, r8, qb = query_block(kb, &f, tiles, &r, &r8);
    /* lane l names row l % 8 of matrix l / 8 = 2 hi + lo: keys 8 hi + l % 8, queries 8 lo */
    tern_v lu = tern_rem(f.lane, tern_int(8)), lo = tern_rem(tern_div(f.lane, tern_int(8)), tern_int(2));
    tern_v hi = tern_div(f.lane, tern_int(16));
    tern_v lm = tern_add(tern_mul(tern_add(tern_mul(hi, tern_int(8)), lu), tern_int(ds_ld(&f))),
                         tern_add(tern_mul(lo, tern_int(8)), tern_mul(f.warp, tern_int(16))));
    tern_v dq[MAX_HS / 8][4];
    acc_vars(kb, f.NT, "dq", dq);
    tern_v last = qb; /* the last key tile the group walks: its diagonal one */
    bqs_state st = {.qkv = in->qkv, .dsg = dsg, .Ks = Ks, .DSs = DSs, .q0 = tern_mul(qb, tern_int(f.rows)), .lm = lm,
                    .dq = dq, .pipelined = pipelined, .stages = stages, .last = last};
    if (pipelined) { /* tiles 0 .. stages - 2 staged ahead, a batch each (empty past the last) */
        for (int i = 0; i < stages - 1; i++) {
            if (i) tern_if(kb, tern_le(tern_int(i), last));
            backward_q_saved_issue(&f, &st, tern_int(i));
            if (i) tern_end(kb);
            tern_copy_async_commit(kb);
        }
    }
    walk_key_tiles(kb, &f, qb, backward_q_saved_tile, &st);
    store_rows(&f, in->dqkv, 3, 0, r, dq, in->scale, in->scale); /* dS's scale, taken out of the loop */
}

static void trace_backward_q(tern_kb *kb, void *user) {
    const fl_build *u = user;
    fl_bwd in = bwd_begin(kb, u, false);
    if (u->opts.ds_saved) {
        trace_backward_q_saved(kb, u, &in);
        return;
    }
    tern_v qkv = in.qkv, dout = in.dout, lse = in.lse, D = in.D, dqkv = in.dqkv, scale = in.scale, T = in.T;
    fl_ctx f = in.f;
    tern_v xv[TILE];
    pair_vars(kb, &f, xv);
    int KS = f.KS, NT = f.NT;
    tern_v Ks = fl_tiles(kb, &f, "Ks", 1);
    tern_v Vs = fl_tiles(kb, &f, "Vs", 1);

    tern_v tiles = tern_div(tern_add(T, tern_int(TILE - 1)), tern_int(TILE));
    tern_v r, r8, qb = query_block(kb, &f, tiles, &r, &r8);
    tern_v qa[MAX_HS / 16][8], da[MAX_HS / 16][8];
    for (int kk = 0; kk < KS; kk++) {
        a_frag(&f, qkv, row_index(&f, 3, 0, r), row_index(&f, 3, 0, r8), kk, qa[kk]);
        a_frag(&f, dout, row_index(&f, 1, 0, r), row_index(&f, 1, 0, r8), kk, da[kk]);
    }
    tern_v last = tern_sub(T, tern_int(1));
    tern_v rows = tern_mul(f.bh, T);
    tern_v L[2] = {tern_mul(tern_load(lse, tern_add(rows, tern_min(r, last))), log2e()),
                   tern_mul(tern_load(lse, tern_add(rows, tern_min(r8, last))), log2e())};
    tern_v scale2 = tern_mul(scale, log2e());
    tern_v Dr[2] = {tern_load(D, tern_add(rows, tern_min(r, last))), tern_load(D, tern_add(rows, tern_min(r8, last)))};
    tern_v dq[MAX_HS / 8][4];
    acc_vars(kb, NT, "dq", dq);

    bq_state st = {.qkv = qkv, .Ks = Ks, .Vs = Vs, .scale = scale, .scale2 = scale2, .r = r, .r8 = r8,
                   .L = L, .Dr = Dr, .qa = {.frag = qa}, .da = {.frag = da}, .dq = dq};
    walk_key_tiles(kb, &f, qb, backward_q_tile, &st);
    store_rows(&f, dqkv, 3, 0, r, dq, scale, scale); /* dS's scale, taken out of the loop */
}

int gk_flash_rows(gk_flash_kernel which, const gk_flash_opts *opts) {
    (void)opts;
    return which == GK_FLASH_DELTA ? THREADS : TILE; /* one tile of query (or key) rows */
}

int gk_flash_threads(gk_flash_kernel which, const gk_flash_opts *opts) {
    return which == GK_FLASH_DELTA ? THREADS : 2 * gk_flash_rows(which, opts);
}

int gk_flash_heads(gk_flash_kernel which, const gk_flash_opts *opts, int NH) {
    int group = opts && opts->group > 1 ? opts->group : 1;
    return which == GK_FLASH_BACKWARD_KV ? NH / group : NH;
}

bool gk_flash_fits(int hs, const size_t *offsets, int count) {
    if (hs <= 0 || hs % 16 || hs > MAX_HS) return false;
    for (int i = 0; i < count; i++)
        if (offsets[i] % 8) return false; /* 16 bytes of bf16 */
    return true;
}

tern_error *gk_flash_kernel_build(gk_flash_kernel which, int hs, const gk_flash_opts *opts,
                                    tern_kernel **out) {
    *out = NULL;
    fl_build u = {.hs = hs, .opts = opts ? *opts : (gk_flash_opts){0}, .threads = gk_flash_threads(which, opts)};
    if (!gk_flash_fits(hs, NULL, 0))
        return tern_errorf("flash attention: head size %d is not a multiple of 16 up to %d", hs, MAX_HS);
    if (u.opts.group < 0) return tern_errorf("flash attention: a group of %d query heads", u.opts.group);
    if (u.opts.stages < 0 || u.opts.stages > GK_FLASH_MAX_STAGES)
        return tern_errorf("flash attention: %d pipeline stages (0, or 2 to %d)", u.opts.stages, GK_FLASH_MAX_STAGES);
    switch (which) {
    case GK_FLASH_FORWARD: return tern_kernel_build("flash_forward", trace_forward, &u, out);
    case GK_FLASH_DELTA: return tern_kernel_build("flash_delta", trace_delta, &u, out);
    case GK_FLASH_BACKWARD_KV: return tern_kernel_build("flash_backward_kv", trace_backward_kv, &u, out);
    case GK_FLASH_BACKWARD_Q: return tern_kernel_build("flash_backward_q", trace_backward_q, &u, out);
    }
    return tern_errorf("unknown flash attention kernel %d", (int)which);
}
