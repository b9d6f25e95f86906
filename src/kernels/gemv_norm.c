/* The GEMV kernels' norm prologue (matmul's LAYERNORM and RMSNORM): each group computes the
 * statistics of A's m rows itself, right after the wait, and stages x through the norm.
 *
 * Every thread adds its elements tid, tid + G, ... of each row in order, then a SIMD sum,
 * then the SIMD groups' sums in group order from threadgroup memory: deterministic, the
 * same bits in every group of the grid, a barrier a pass (LAYERNORM: the mean, then the sum
 * of squares about it, as layernorm's kernel; RMSNORM: one pass). Resident (k in one chunk,
 * at most GK_GEMV_NORM_PER_THREAD elements a row a thread, 16 in all: the host decides,
 * src/gpu_core/gemv.c): each thread loads its elements of A's rows once, into registers
 * that the statistics and the staging both read, and its elements of the weights with
 * them, or before the wait when nothing in flight writes them. Otherwise x is read for each
 * pass and again by the staging (L1), and the weights as x is staged (prefetched into L2
 * before the wait). Measured on the H200: the non-resident form made GPT-2's decoding
 * slower than a separate layer norm kernel, the resident one faster (bench/h200/NOTES.md,
 * runs 81-82). */
#include "kernels/gemv.h"

/* A resident prologue's weights for this thread's elements (nw, nb). */
static void load_norm_weights(gemv_params *p, tern_v tid) {
    for (int i = 0; i < p->NE; i++) {
        tern_v e = tern_min(tern_add(tid, tern_int(i * p->G)), tern_sub(p->K, tern_int(1)));
        p->nw[i] = tern_load(p->norm_w, e);
        p->nb[i] = p->norm == GK_GEMV_LAYERNORM ? tern_load(p->norm_b, e) : tern_int(0);
    }
}

/* Before the wait: the prologue's weights into L2, a 64-byte line a thread at a time, or,
 * resident and early, into this thread's registers. */
void gemv_norm_prefetch(tern_kb *kb, gemv_params *p, tern_v tid) {
    if (!p->norm) return;
    if (p->resident && p->weights_early) {
        load_norm_weights(p, tid);
        return;
    }
    int line = 32; /* elements: 64 bytes of bf16, 128 of f32 */
    TERN_FOR(kb, e, tern_mul(tid, tern_int(line)), p->K, tern_int(p->G * line)) {
        tern_prefetch(p->norm_w, e);
        if (p->norm == GK_GEMV_LAYERNORM) tern_prefetch(p->norm_b, e);
    }
}

/* The statistics of A's M rows over all of k into p->mu and p->rs (the file's comment). */
void gemv_norm_stats(tern_kb *kb, gemv_params *p, tern_v tid, tern_v nred) {
    int NW = p->G / 32, M = p->M, passes = p->norm == GK_GEMV_LAYERNORM ? 2 : 1;
    tern_v Kf = tern_cast(p->K, TERN_T_F32), lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    if (p->resident) { /* this thread's elements once, with the weights when not loaded early */
        if (!p->weights_early) load_norm_weights(p, tid);
        for (int i = 0; i < p->NE; i++) {
            tern_v e = tern_add(tid, tern_int(i * p->G));
            p->nvalid[i] = tern_var(kb, "nvalid", tern_lt(e, p->K));
            tern_v ec = tern_min(e, tern_sub(p->K, tern_int(1)));
            for (int r = 0; r < M; r++)
                p->nx[r][i] = tern_var(kb, "nx", tern_load(p->a, tern_add(tern_mul(tern_int(r), p->lda), ec)));
        }
    }
    for (int pass = 0; pass < passes; pass++) {
        bool plain_sum = pass == 0 && passes == 2; /* the mean's pass */
        tern_v part[GK_GEMV_MAX_M];
        for (int r = 0; r < M; r++) part[r] = tern_var(kb, "npart", tern_f32(0.0f));
        if (p->resident) {
            for (int r = 0; r < M; r++)
                for (int i = 0; i < p->NE; i++) {
                    tern_v x = p->nx[r][i], d = pass == 1 ? tern_sub(x, p->mu[r]) : x;
                    tern_v f = plain_sum ? tern_add(part[r], x) : tern_fma(d, d, part[r]);
                    tern_assign(part[r], tern_select(p->nvalid[i], f, part[r]));
                }
        } else {
            TERN_FOR(kb, e, tid, p->K, tern_int(p->G)) {
                for (int r = 0; r < M; r++) {
                    tern_v x = tern_load(p->a, tern_add(tern_mul(tern_int(r), p->lda), e));
                    tern_v d = pass == 1 ? tern_sub(x, p->mu[r]) : x;
                    tern_assign(part[r], plain_sum ? tern_add(part[r], x) : tern_fma(d, d, part[r]));
                }
            }
        }
        for (int r = 0; r < M; r++) {
            tern_v s = tern_simd_sum(part[r]);
            TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(nred, tern_add(tern_int((pass * M + r) * NW), sg), s); }
        }
        tern_barrier(kb);
        for (int r = 0; r < M; r++) {
            int at = (pass * M + r) * NW;
            tern_v total = tern_load(nred, tern_int(at));
            for (int g = 1; g < NW; g++) total = tern_add(total, tern_load(nred, tern_int(at + g)));
            tern_v mean = tern_div(total, Kf);
            if (plain_sum) p->mu[r] = tern_var(kb, "mu", mean);
            else p->rs[r] = tern_var(kb, "rs", tern_div(tern_f32(1.0f), tern_sqrt(tern_add(mean, p->eps))));
        }
    }
}

/* Threadgroup memory for gemv_norm_stats' sums (0 without a prologue). */
tern_v gemv_norm_scratch(tern_kb *kb, const gemv_params *p) {
    return p->norm ? tern_shared(kb, "nred", TERN_T_F32, (size_t)2 * p->M * (p->G / 32)) : tern_int(0);
}

/* A[r, e] through the prologue: layernorm's (x - mu) rs w + b, rmsnorm's x rs w. */
static tern_v normalised(const gemv_params *p, int r, tern_v x, tern_v w, tern_v b) {
    if (p->norm == GK_GEMV_LAYERNORM) return tern_fma(tern_mul(tern_sub(x, p->mu[r]), p->rs[r]), w, b);
    return tern_mul(tern_mul(x, p->rs[r]), w);
}

/* x[r, e] = norm(A[r, k0 + e]) for e < kc into xs [M, KC] (A's dtype, as a composed norm's
 * output): resident, from this thread's registers (the one chunk, k0 = 0); else read again. */
void gemv_norm_stage(tern_kb *kb, const gemv_params *p, tern_v xs, tern_v k0, tern_v kc, tern_v tid) {
    if (p->resident) { /* the one chunk (k0 = 0) from this thread's registers */
        for (int i = 0; i < p->NE; i++) {
            tern_v e = tern_add(tid, tern_int(i * p->G));
            TERN_IF(kb, p->nvalid[i]) {
                for (int r = 0; r < p->M; r++)
                    tern_store(xs, tern_add(tern_int(r * p->KC), e), normalised(p, r, p->nx[r][i], p->nw[i], p->nb[i]));
            }
        }
        return;
    }
    TERN_FOR(kb, e, tid, kc, tern_int(p->G)) {
        tern_v w = tern_load(p->norm_w, tern_add(k0, e));
        tern_v b = p->norm == GK_GEMV_LAYERNORM ? tern_load(p->norm_b, tern_add(k0, e)) : tern_int(0);
        for (int r = 0; r < p->M; r++) {
            tern_v x = tern_load(p->a, tern_add(tern_add(tern_mul(tern_int(r), p->lda), k0), e));
            tern_store(xs, tern_add(tern_int(r * p->KC), e), normalised(p, r, x, w, b));
        }
    }
}
