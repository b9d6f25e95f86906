/* tern_wgmma_bf16 in the interpreter: each warpgroup's product from its tiles and registers,
 * k added in order from C (what the OpenCL and Metal emulations do too, a tern_mma_bf16 per
 * step of 16). The asynchronous form is made at once, into its accumulator variables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/interp_ctx.h"
#include "tern/half.h"

enum { WG = 128 };

static float tile_elem(const ibuf *b, size_t at) {
    uint16_t h;
    memcpy(&h, b->base + at * 2, 2);
    return tern_bf16_to_f32(h);
}

/* The tile index of warpgroup `base` (uniform across it, a multiple of 512, the tile in
 * bounds: `used` rows of `cols` columns in panels of 64); -1 after an error. */
static int64_t tile_at(ictx *c, int32_t ins, int32_t idx, const ibuf *b, int base, int rows, int used,
                       int cols, const char *which) {
    const ev *x = IREG(c, idx);
    for (int l = base + 1; l < base + WG; l++)
        if (x[l].i != x[base].i) {
            ictx_fail(c, ins, l, "wgmma_bf16: %s's tile index %lld differs from %lld in the same warpgroup; "
                      "a tile is the warpgroup's", which, (long long)x[l].i, (long long)x[base].i);
            return -1;
        }
    int64_t at = x[base].i;
    int64_t need = at + (int64_t)((cols + 63) / 64 - 1) * rows * 64 + (int64_t)used * 64;
    if (at < 0 || at % 512 || (uint64_t)need > b->len) {
        ictx_fail(c, ins, base, "wgmma_bf16: %s's tile at %lld (%d rows of %d columns, panels %d rows apart) "
                  "is %s of its array (%zu elements)", which, (long long)at, used, cols, rows,
                  at % 512 ? "not at a multiple of 512 elements" : "out of bounds", b->len);
        return -1;
    }
    return at;
}

/* How many threads of each warpgroup are here (all of them, or none: a role's block) into
 * count[]; a threadgroup's last warpgroup may be partial (a pipe's producer of a few warps),
 * and then may not multiply. False after an error. */
static bool warpgroups_here(ictx *c, int32_t ins, const int32_t *lanes, int n_here, int *count) {
    for (int i = 0; i < n_here; i++) count[lanes[i] / WG]++;
    for (int w = 0; w < (c->T + WG - 1) / WG; w++)
        if (count[w] != 0 && count[w] != WG) {
            ictx_fail(c, ins, w * WG, "wgmma_bf16 reached by %d of warpgroup %d's %d threads; a warpgroup "
                      "product is its whole warpgroup's", count[w], w, WG);
            return false;
        }
    return true;
}

void interp_wgmma(ictx *c, int32_t ins, const int32_t *lanes, int n_here) {
    const ir_ins *in = &c->k->ins[ins];
    if (c->T % WG && !(in->aux & IR_WG_ROLE)) {
        ictx_fail(c, ins, -1, "wgmma_bf16 in a threadgroup of %d threads; warpgroup products need a "
                  "multiple of %d", c->T, WG);
        return;
    }
    /* outside a role the whole threadgroup multiplies (as the emulating targets need) */
    if (!(in->aux & IR_WG_ROLE) && n_here != c->T) {
        ictx_fail(c, ins, -1, "wgmma_bf16 reached by %d of the %d threads; SIMD-group operations need "
                  "threadgroup-uniform control flow", n_here, c->T);
        return;
    }

    ir_wg_shape s = ir_wg_unpack(in->imm);
    const int n = s.n, k = s.k;
    bool a_tile = in->a[1] >= 0;
    const int32_t *ops = &c->k->extra[in->a[0]];
    const int32_t a_idx = a_tile ? ops[0] : -1, b_idx = ops[a_tile ? 1 : k / 2];
    const int32_t *cv = ops + (a_tile ? 2 : k / 2 + 1);
    float *A = malloc((size_t)64 * k * sizeof *A), *B = malloc((size_t)k * n * sizeof *B);
    int *here = calloc((size_t)((c->T + WG - 1) / WG), sizeof *here);
    if (!A || !B || !here) {
        ictx_fail(c, ins, -1, "out of memory");
        goto done;
    }
    if (!warpgroups_here(c, ins, lanes, n_here, here)) goto done;
    for (int base = 0; base + WG <= c->T; base += WG) {
        if (!here[base / WG]) continue; /* outside the role */
        /* A [64][k] */
        if (a_tile) {
            const ibuf *b = &c->bufs[in->a[1]];
            int64_t at = s.a_k_rows ? tile_at(c, ins, a_idx, b, base, s.a_rows, k, 64, "A")
                                    : tile_at(c, ins, a_idx, b, base, s.a_rows, 64, k, "A");
            if (at < 0) goto done;
            for (int m = 0; m < 64; m++)
                for (int kk = 0; kk < k; kk++)
                    A[m * k + kk] = tile_elem(b, (size_t)at + (s.a_k_rows ? tern_wg_tile_offset(s.a_rows, kk, m)
                                                                           : tern_wg_tile_offset(s.a_rows, m, kk)));
        } else {
            /* register 8 st + r of lane l in SIMD group j: tern_mma_bf16's a layout for rows 16 j .. */
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < TERN_SIMD_WIDTH; l++)
                    for (int st = 0; st < k / 16; st++)
                        for (int r = 0; r < 8; r++) {
                            int m = 16 * j + l / 4 + (r & 2 ? 8 : 0);
                            int kk = 16 * st + 2 * (l % 4) + (r & 4 ? 8 : 0) + (r & 1);
                            float x = IREG(c, ops[8 * st + r])[base + 32 * j + l].f;
                            A[m * k + kk] = tern_bf16_to_f32(tern_f32_to_bf16(x));
                        }
        }
        /* B [k][n] */
        const ibuf *bb = &c->bufs[in->a[2]];
        int64_t at = s.b_k_rows ? tile_at(c, ins, b_idx, bb, base, s.b_rows, k, n, "B")
                                : tile_at(c, ins, b_idx, bb, base, s.b_rows, n, k, "B");
        if (at < 0) goto done;
        for (int kk = 0; kk < k; kk++)
            for (int col = 0; col < n; col++)
                B[kk * n + col] = tile_elem(bb, (size_t)at + (s.b_k_rows ? tern_wg_tile_offset(s.b_rows, kk, col)
                                                                         : tern_wg_tile_offset(s.b_rows, col, kk)));
        /* d[4 b + r] of lane l in SIMD group j: D[16 j + l / 4 + 8 (r / 2)][8 b + 2 (l % 4) + r % 2] */
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < TERN_SIMD_WIDTH; l++)
                for (int e = 0; e < n / 2; e++) {
                    int blk = e / 4, r = e % 4;
                    int m = 16 * j + l / 4 + (r & 2 ? 8 : 0), col = 8 * blk + 2 * (l % 4) + (r & 1);
                    int lane = base + 32 * j + l;
                    /* asynchronous: the accumulators are variables, C in and D out */
                    ev *from = in->aux & IR_WG_ASYNC ? IVAR(c, cv[e]) : IREG(c, cv[e]);
                    ev *to = in->aux & IR_WG_ASYNC ? IVAR(c, cv[e]) : IREG(c, in->dst + e);
                    float acc = from[lane].f;
                    for (int kk = 0; kk < k; kk++) acc = fmaf(A[m * k + kk], B[kk * n + col], acc);
                    to[lane] = ev_from_f(acc);
                }
    }
done:
    free(A);
    free(B);
    free(here);
}
