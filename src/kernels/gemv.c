/* Matrix products with few rows of A (decoding: one row per sequence), as matrix-vector
 * products that stream B once at memory speed:
 *
 *   C[m, n] = epilogue(alpha * A[m, k] op(B) + beta * C + bias[n]), aux = the value before GELU,
 *
 * for m <= GK_GEMV_MAX_M, one batch entry, A not transposed; A, C, bias, aux f32 or bf16, B
 * f32, bf16 or f16; f32 accumulation in a fixed order (no atomics): the same inputs give
 * the same bits on every run.
 *
 * Both families stage the m rows of A (x) in threadgroup memory, in A's own dtype, once per
 * group and k-chunk of up to KC columns (KC chosen on the host so that m * KC elements fit
 * in GK_GEMV_X_BYTES). Before the staging barrier each thread already issues the loads of
 * its first rows of B, so their memory latency overlaps x's. Before all that, and before
 * tern_wait_previous, each thread prefetches the parts of B and the bias it will read into
 * L2: on CUDA the kernel starts while the previous one (which writes A) still runs; where
 * nothing in flight writes B, GK_GEMV loads its first rows of B before the wait instead
 * (n[11]). The thread that finishes an output loads its C (for beta) and bias right after
 * the wait, not after the sums.
 *
 * GK_GEMV, B [k, n] (Hugging Face's Conv1D layout: GPT-2's qkv, projections, fc): a group of
 * G threads (GK_GEMV_GROUP, or up to 1024 for a long k) owns CT = TC * W consecutive columns
 * of C. Thread t reads the W columns cl = t % TC (one 16-byte load per row of B) of rows kl,
 * kl + TK, ... (kl = t / TC, TK = G / TC threads along k): the TC threads of a row read
 * TC * 16 contiguous bytes, and a SIMD group reads 32 / TC rows at once. Each thread keeps
 * m * W partial sums;
 * the SIMD group adds its k-lanes by a shuffle butterfly (lanes TC, 2 TC, ... apart), the
 * SIMD groups' sums meet in threadgroup memory and are added in group order.
 *
 * GK_GEMV_T, B [n, k] (trans_b: Hugging Face Linear's weights, the logits against a tied
 * embedding): KS SIMD groups (n[5]: 1, 2, 4 or 8, dividing the group's) share GK_GEMV_ROWS
 * rows of B (outputs), each a dot product with x over k: lane l of SIMD group s of the KS
 * (vl = 32 s + l) reads 16-byte words vl, vl + 32 KS, ... of each row (512 contiguous bytes
 * per SIMD group, row and step), n[8] words a row at a time, and keeps m partial
 * sums per row; a SIMD sum, then (KS > 1) the KS groups' sums added in order in threadgroup
 * memory, gives each output. Long rows of few outputs (Llama-3.2-1B's down projection)
 * thereby spread over more groups, each lane with all its loads in flight at once.
 *
 * Spec: t[0] C, t[1] A, t[2] B, t[3] bias, t[4] aux (absent ones 0); n[0] = m (1 ..
 * GK_GEMV_MAX_M); n[1] = W, B's vector width (B's offset and row stride multiples of W, and
 * n (GK_GEMV) or k (GK_GEMV_T) too); n[2] GELU; n[3] has bias; n[4] has aux; n[5] = TC
 * (GK_GEMV; a power of two <= 32), KS for GK_GEMV_T (0 means 1); n[6] = KC (a multiple of 256); n[7] = G
 * (GK_GEMV: 256, 512 or 1024; 0 means GK_GEMV_GROUP, GK_GEMV_T's size); n[8] = GK_GEMV_T's
 * words of a row a lane loads at once (0 means 2), 0 for GK_GEMV; n[9] = 1: the SWIGLU
 * epilogue (GK_GEMV_T only: each row group's first R/2 rows are gate rows j, the rest their
 * up rows n/2 + j, finished together into C [m, n/2]); n[9] = 2: the ROPE epilogue
 * (GK_GEMV_T only: pair p of head h = p / (hd/2) is columns h hd + j and h hd + j + hd/2,
 * j = p mod hd/2, in a row group's first and second R/2 rows, rotated together as they are
 * finished when h is one of the rotated heads), n[10] = hd (n[10] with n[8] and n[9] once
 * held a layer norm fused into the GEMV, deleted: bench/h200/NOTES.md). n[12]: the prologue,
 * GK_GEMV_LAYERNORM or GK_GEMV_RMSNORM with the flags RESIDENT and EARLY (t[5] norm_w, t[6]
 * norm_b): every group computes the rows' statistics itself after the wait and stages x
 * through the norm (gemv_norm.c). n[11] = 1 (k in one chunk): no kernel that may still run writes B or the bias (the host knows which
 * allocations the kernels in flight write: src/gpu_core/inflight.c), so each thread loads
 * its first rows of B, and its output's bias, before tern_wait_previous: decoding's weights
 * stream in while the kernel before still runs, and after the wait only x is waited for;
 * GK_GEMV_T the same with its first words of each row. n[11] = 2 (GK_GEMV only): those rows go
 * to threadgroup memory by asynchronous copies rather than registers (gemv_smem).
 * Parameters: c, a, b, [bias], [aux], [pos (i32 [m]), inv_freq (f32 [hd/2]): ROPE], [norm_w,
 * [norm_b]: a prologue], n, k, lda, ldb, ldc, alpha, beta, [rope_pairs (the rotated heads'
 * pairs, heads hd/2): ROPE], [eps: a prologue].
 * Grid: GK_GEMV ceil(n / (TC W)) groups of G; GK_GEMV_T ceil(n / (GK_GEMV_ROWS *
 * GK_GEMV_GROUP / 32 / KS)) groups of GK_GEMV_GROUP. */
#include <math.h>

#include "kernels/gemv.h"

#define R GK_GEMV_ROWS


static gemv_params params(tern_kb *kb, const gk_spec *s) {
    gemv_params p;
    p.M = s->n[0], p.W = s->n[1], p.KC = s->n[6];
    p.G = s->n[7] ? s->n[7] : GK_GEMV_GROUP;
    p.gelu = s->n[2], p.has_bias = s->n[3], p.has_aux = s->n[4], p.pair = s->n[9], p.hd = s->n[10];
    p.a_size = s->t[1] == TERN_T_F32 ? 4 : 2;
    p.merge = (s->n[12] & GK_GEMV_MERGE) != 0;
    p.S = s->n[13], p.hs = s->n[14], p.J = s->n[15];
    p.c = ku_buf(kb, "c", s->t[0], TERN_READ_WRITE);
    p.a = ku_buf(kb, "a", s->t[1], p.merge ? TERN_READ_WRITE : TERN_READ); /* MERGE: the first group writes A */
    p.b = ku_buf(kb, "b", s->t[2], TERN_READ);
    p.bias = p.has_bias ? ku_buf(kb, "bias", s->t[3], TERN_READ) : tern_int(0);
    p.aux = p.has_aux ? ku_buf(kb, "aux", s->t[4], TERN_WRITE) : tern_int(0);
    bool rope = p.pair == GK_GEMV_ROPE;
    p.pos = rope ? tern_param_buf(kb, "pos", TERN_T_I32, TERN_READ) : tern_int(0);
    p.inv_freq = rope ? tern_param_buf(kb, "inv_freq", TERN_T_F32, TERN_READ) : tern_int(0);
    p.norm = s->n[12] & GK_GEMV_NORM_KIND;
    p.resident = (s->n[12] & GK_GEMV_NORM_RESIDENT) != 0;
    p.weights_early = (s->n[12] & GK_GEMV_NORM_EARLY) != 0;
    p.NE = (p.KC + p.G - 1) / p.G;
    p.norm_w = p.norm ? ku_buf(kb, "norm_w", s->t[5], TERN_READ) : tern_int(0);
    p.norm_b = p.norm == GK_GEMV_LAYERNORM ? ku_buf(kb, "norm_b", s->t[6], TERN_READ) : tern_int(0);
    p.partial = p.merge ? tern_param_buf(kb, "partial", TERN_T_F32, TERN_READ) : tern_int(0);
    p.N = tern_param_scalar(kb, "n", TERN_T_I32);
    p.K = tern_param_scalar(kb, "k", TERN_T_I32);
    p.lda = tern_param_scalar(kb, "lda", TERN_T_I32);
    p.ldb = tern_param_scalar(kb, "ldb", TERN_T_I32);
    p.ldc = tern_param_scalar(kb, "ldc", TERN_T_I32);
    p.alpha = tern_param_scalar(kb, "alpha", TERN_T_F32);
    p.beta = tern_param_scalar(kb, "beta", TERN_T_F32);
    p.rope_pairs = rope ? tern_param_scalar(kb, "rope_pairs", TERN_T_I32) : tern_int(0);
    p.eps = p.norm ? tern_param_scalar(kb, "eps", TERN_T_F32) : tern_int(0);
    return p;
}

/* MERGE: x[r, e] for e < kc from the S parts of row r's head (k0 + e) / hs, merged as the
 * cached attention's split kernel merges them (ku_attention_merge: the same bits), rounded
 * to A's dtype; the first group also stores it in A. */
static void stage_merged(tern_kb *kb, const gemv_params *p, tern_v xs, tern_v k0, tern_v kc, tern_v tid) {
    int S = p->S, hs = p->hs;
    tern_v NH = tern_div(p->K, tern_int(hs));
    tern_v first = tern_eq(tern_group_id(kb, 0), tern_int(0));
    for (int r = 0; r < p->M; r++) {
        TERN_FOR(kb, e, tid, kc, tern_int(p->G)) {
            tern_v k = tern_add(k0, e);
            tern_v h = tern_div(k, tern_int(hs)), d = tern_rem(k, tern_int(hs));
            tern_v rh = tern_add(tern_mul(tern_int(r), NH), h);
            tern_v base = tern_mul(rh, tern_int(S * (hs + 2)));
            /* joined (J > 0): the new position's part too, its score scaled as the attention's */
            tern_v at_new = tern_add(tern_int(GK_AC_NEW_AT(hs)), tern_mul(rh, tern_int(p->J + hs)));
            tern_v c = tern_mul(tern_f32(1.0f / sqrtf((float)hs)), tern_f32(1.4426950408889634f));
            tern_v x = ku_attention_merge_new(p->partial, base, d, hs, S, at_new, p->J, c);
            tern_store(xs, tern_add(tern_int(r * p->KC), e), x);
            TERN_IF(kb, first) { tern_store(p->a, tern_add(tern_mul(tern_int(r), p->lda), k), x); }
        }
    }
}

/* x[r, e] = A[r, k0 + e] for e < kc, into xs [M, KC] (A's dtype: a bf16 A is kept exactly),
 * through the prologue when there is one (rounded to A's dtype, as a composed norm's output).
 * Consecutive threads read consecutive elements of a row. */
static void stage_x(tern_kb *kb, const gemv_params *p, tern_v xs, tern_v k0, tern_v kc, tern_v tid) {
    if (p->norm) {
        gemv_norm_stage(kb, p, xs, k0, kc, tid);
        return;
    }
    if (p->merge) {
        stage_merged(kb, p, xs, k0, kc, tid);
        return;
    }
    for (int r = 0; r < p->M; r++) {
        tern_v arow = tern_add(tern_mul(tern_int(r), p->lda), k0);
        TERN_FOR(kb, e, tid, kc, tern_int(p->G)) {
            tern_store(xs, tern_add(tern_int(r * p->KC), e), tern_load(p->a, tern_add(arow, e)));
        }
    }
}

/* C[r, j] and bias[j] as one output's finishing thread reads them, loaded ahead (NULL
 * where finish is to load them itself). */
typedef struct gemv_ahead {
    tern_v c, bias;
} gemv_ahead;

/* C[r, j] from the finished sum: alpha acc (+ beta C, used only when beta != 0) + bias[j],
 * aux[r, j] = that, then GELU; the same order as the tiled matmul (matmul.c). */
static void finish(tern_kb *kb, const gemv_params *p, tern_v r, tern_v j, tern_v acc, const gemv_ahead *ahead) {
    tern_v at = tern_add(tern_mul(r, p->ldc), j);
    tern_v v = tern_var(kb, "out", tern_mul(p->alpha, acc));
    TERN_IF(kb, tern_ne(p->beta, tern_f32(0.0f))) {
        tern_v old = ahead ? ahead->c : tern_load(p->c, at);
        tern_assign(v, tern_fma(p->alpha, acc, tern_mul(p->beta, old)));
    }
    tern_v x = v;
    if (p->has_bias) x = tern_add(x, ahead ? ahead->bias : tern_load(p->bias, j));
    if (p->has_aux) tern_store(p->aux, tern_add(tern_mul(r, p->N), j), x); /* aux is dense [m, n] */
    if (p->gelu) x = ku_gelu(x);
    tern_store(p->c, at, x);
}

/* The paired epilogues' two rows of B (columns of C) for pair q < n/2: SWIGLU gate row q and
 * up row n/2 + q; ROPE columns h hd + j and h hd + j + hd/2 of head h = q / (hd/2). */
static tern_v pair_first(const gemv_params *p, tern_v q) {
    if (p->pair == GK_GEMV_SWIGLU) return q;
    tern_v half = tern_int(p->hd / 2), h = tern_div(q, half);
    return tern_add(tern_mul(h, tern_int(p->hd)), tern_sub(q, tern_mul(h, half)));
}

static tern_v pair_second(const gemv_params *p, tern_v q) {
    return tern_add(pair_first(p, q), p->pair == GK_GEMV_SWIGLU ? tern_div(p->N, tern_int(2)) : tern_int(p->hd / 2));
}

/* The SWIGLU epilogue's output (r, j), j < n/2, from the sums of gate row j and up row
 * n/2 + j: P = alpha acc + bias, aux [m, n] = P (both halves), C[r, j] = silu(P_g) P_u.
 * beta is 0 (validated): C is not read. */
static void finish_swiglu(const gemv_params *p, tern_v r, tern_v j, tern_v acc_g, tern_v acc_u) {
    tern_v h = tern_div(p->N, tern_int(2));
    tern_v pg = tern_mul(p->alpha, acc_g), pu = tern_mul(p->alpha, acc_u);
    if (p->has_bias) {
        pg = tern_add(pg, tern_load(p->bias, j));
        pu = tern_add(pu, tern_load(p->bias, tern_add(h, j)));
    }
    if (p->has_aux) {
        tern_v at = tern_add(tern_mul(r, p->N), j);
        tern_store(p->aux, at, pg);
        tern_store(p->aux, tern_add(at, h), pu);
    }
    tern_store(p->c, tern_add(tern_mul(r, p->ldc), j), ku_swiglu(pg, pu));
}

/* The ROPE epilogue's pair q of row r: P = alpha acc + bias for its two columns, rotated by
 * a = float(pos[r]) inv_freq[j] as the rope kernel turns them (ku_rope_turn) when q
 * is one of the rotated heads' pairs, stored to C. beta is 0, aux absent (validated). */
static void finish_rope(tern_kb *kb, const gemv_params *p, tern_v r, tern_v q, tern_v acc_1, tern_v acc_2) {
    tern_v c1 = pair_first(p, q), c2 = tern_add(c1, tern_int(p->hd / 2));
    tern_v p1 = tern_mul(p->alpha, acc_1), p2 = tern_mul(p->alpha, acc_2);
    if (p->has_bias) {
        p1 = tern_add(p1, tern_load(p->bias, c1));
        p2 = tern_add(p2, tern_load(p->bias, c2));
    }
    tern_v o1 = tern_var(kb, "rot1", p1), o2 = tern_var(kb, "rot2", p2);
    TERN_IF(kb, tern_lt(q, p->rope_pairs)) {
        tern_v j = tern_rem(q, tern_int(p->hd / 2));
        tern_v a = tern_mul(tern_cast(tern_load(p->pos, r), TERN_T_F32), tern_load(p->inv_freq, j)), t1, t2;
        ku_rope_turn(p1, p2, a, false, &t1, &t2);
        tern_assign(o1, t1);
        tern_assign(o2, t2);
    }
    tern_v row = tern_mul(r, p->ldc);
    tern_store(p->c, tern_add(row, c1), o1);
    tern_store(p->c, tern_add(row, c2), o2);
}

/* A paired epilogue's output (r, q) from its two rows' sums. */
static void finish_pair(tern_kb *kb, const gemv_params *p, tern_v r, tern_v q, tern_v acc_1, tern_v acc_2) {
    if (p->pair == GK_GEMV_SWIGLU) finish_swiglu(p, r, q, acc_1, acc_2);
    else finish_rope(kb, p, r, q, acc_1, acc_2);
}

/* W consecutive elements from index i of a buffer of `size`-byte elements, in accesses of
 * at most 16 bytes. */
static void load_wide(tern_v buf, tern_v i, int w, int size, tern_v *out) {
    int step = w > 16 / size ? 16 / size : w;
    for (int j = 0; j < w; j += step) ku_load(buf, tern_add(i, tern_int(j)), step, out + j);
}

/* ---- B [k, n] ---- */

/* Before the wait: this thread's W columns of every row of B it will read, and of the bias,
 * into L2, while the kernel that writes A still runs (CUDA launches this one early). Only a
 * hint: a B that the previous kernel writes (training's updated weights) is still read
 * after the wait, and sees the new values. */
static void prefetch_b(tern_kb *kb, const gemv_params *p, tern_v kl, int TK, tern_v jc) {
    TERN_FOR(kb, row, kl, p->K, tern_int(TK)) { tern_prefetch(p->b, tern_add(tern_mul(row, p->ldb), jc)); }
    if (p->has_bias) tern_prefetch(p->bias, jc);
}

/* Rows per unrolled step (loads issued together, before the products that use them): 8, or
 * 4 for m > 2 (m W accumulators take registers too), and no more than a thread's rows of a
 * chunk (KC / TK; 6 for GPT-2's k = 768 at TK = 128). */
static int gemv_unroll(int M, int KC, int TK) {
    int u = M <= 2 ? 8 : 4, rows = (KC + TK - 1) / TK;
    return rows < u ? rows : u;
}

/* Where a thread's early row u lies in the early_smem array [U, G, W]. */
static tern_v early_at(int u, int G, int W, tern_v tid) {
    return tern_mul(tern_add(tern_int(u * G), tid), tern_int(W));
}

/* acc[r][w] += x[r, p] * b[w] for one row p of this chunk (b: the row's W values). `valid`,
 * when not NULL, leaves acc unchanged where false (an inf or NaN in a row outside the chunk
 * must not reach the sums, so the product is discarded rather than zeroed). */
static void row_fma(const gemv_params *p, tern_v xs, tern_v row, const tern_v *b, tern_v acc[][8],
                    const tern_v *valid) {
    for (int r = 0; r < p->M; r++) {
        tern_v x = tern_load(xs, tern_add(tern_int(r * p->KC), row));
        for (int w = 0; w < p->W; w++) {
            tern_v f = tern_fma(x, b[w], acc[r][w]);
            tern_assign(acc[r][w], valid ? tern_select(*valid, f, acc[r][w]) : f);
        }
    }
}

void gk_trace_gemv(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    gemv_params p = params(kb, s);
    int M = p.M, W = p.W, G = p.G, NW = G / 32, TC = s->n[5], TK = G / TC, CT = TC * W;
    int U = gemv_unroll(M, p.KC, TK);
    tern_max_threads(kb, G);
    /* B and the bias are written by no kernel that may still run (the host's inflight set),
     * and k is one chunk: the first U rows of B are loaded before the wait */
    bool early = s->n[11] != 0;
    /* n[11] = 2: those rows go to threadgroup memory by asynchronous copies instead of
     * registers, so that few registers are held across the wait and the groups fit beside
     * the previous kernel's */
    bool early_smem = s->n[11] == 2;
    /* each finishing thread finishes one output: its C and bias can be loaded ahead */
    bool ahead_ok = M * CT <= G;
    tern_v xs = tern_shared(kb, "xs", (tern_type)s->t[1], (size_t)M * p.KC); /* x in A's dtype */
    tern_v red = tern_shared(kb, "red", TERN_T_F32, (size_t)NW * M * CT); /* [SIMD group, m, CT] */
    tern_v nred = gemv_norm_scratch(kb, &p);
    /* early_smem: the U rows of each thread, [U, G, W] */
    tern_v bs = early_smem ? tern_shared(kb, "bs", (tern_type)s->t[2], (size_t)U * G * W) : tern_int(0);

    tern_v tid = tern_local_id(kb, 0);
    tern_v cl = tern_rem(tid, tern_int(TC)), kl = tern_div(tid, tern_int(TC));
    tern_v col0 = tern_mul(tern_group_id(kb, 0), tern_int(CT));
    /* this thread's W columns; past n (the last group), the last W columns are read instead
     * and the results dropped (W divides n, so N - W is a whole vector) */
    tern_v jc = tern_min(tern_add(col0, tern_mul(cl, tern_int(W))), tern_sub(p.N, tern_int(W)));

    /* early: the rows loaded below need no prefetch */
    prefetch_b(kb, &p, early ? tern_add(kl, tern_int(U * TK)) : kl, TK, jc);
    tern_v pre_row[8], pre[8][8];
    if (early) {
        tern_v last = tern_sub(p.K, tern_int(1));
        for (int u = 0; u < U; u++) {
            pre_row[u] = tern_min(tern_add(kl, tern_int(u * TK)), last);
            tern_v at = tern_add(tern_mul(pre_row[u], p.ldb), jc);
            if (early_smem) tern_copy_async(bs, early_at(u, G, W, tid), p.b, at, W);
            else ku_load(p.b, at, W, pre[u]);
        }
        if (early_smem) tern_copy_async_commit(kb);
    }
    /* the output this thread finishes: (r_out, j_out), clamped into C */
    tern_v r_out = tern_min(tern_div(tid, tern_int(CT)), tern_int(M - 1));
    tern_v j_out = tern_min(tern_add(col0, tern_rem(tid, tern_int(CT))), tern_sub(p.N, tern_int(1)));
    gemv_ahead ahead = {tern_int(0), tern_int(0)};
    if (ahead_ok && early && p.has_bias) ahead.bias = tern_load(p.bias, j_out);
    gemv_norm_prefetch(kb, &p, tid);
    tern_wait_previous(kb);
    /* C (the residual, when beta != 0) and the bias now, their latency under the product's */
    if (ahead_ok) {
        ahead.c = tern_load(p.c, tern_add(tern_mul(r_out, p.ldc), j_out));
        if (!early && p.has_bias) ahead.bias = tern_load(p.bias, j_out);
    }
    if (p.norm) gemv_norm_stats(kb, &p, tid, nred);

    tern_v acc[GK_GEMV_MAX_M][8];
    for (int r = 0; r < M; r++)
        for (int w = 0; w < W; w++) acc[r][w] = tern_var(kb, "acc", tern_f32(0.0f));

    TERN_FOR(kb, k0, tern_int(0), p.K, tern_int(p.KC)) {
        tern_v kc = tern_min(tern_int(p.KC), tern_sub(p.K, k0));
        tern_v last = tern_sub(kc, tern_int(1));
        /* the first U rows, clamped into the chunk, loaded before x is staged (early: before
         * the wait, above; the one chunk is k0 = 0) */
        for (int u = 0; u < U && !early; u++) {
            pre_row[u] = tern_min(tern_add(kl, tern_int(u * TK)), last);
            ku_load(p.b, tern_add(tern_mul(tern_add(k0, pre_row[u]), p.ldb), jc), W, pre[u]);
        }
        tern_barrier(kb); /* the previous chunk's x is no longer read */
        stage_x(kb, &p, xs, k0, kc, tid);
        if (early_smem) { /* this thread's own copies: its wait makes them visible to it */
            tern_copy_async_wait(kb, 0);
            for (int u = 0; u < U; u++) ku_load(bs, early_at(u, G, W, tid), W, pre[u]);
        }
        tern_barrier(kb);
        for (int u = 0; u < U; u++) {
            tern_v valid = tern_lt(tern_add(kl, tern_int(u * TK)), kc);
            row_fma(&p, xs, pre_row[u], pre[u], acc, &valid);
        }
        /* the rest in steps of U rows (all loads first), then one row at a time */
        tern_v row = tern_var(kb, "row", tern_add(kl, tern_int(U * TK)));
        TERN_WHILE(kb, tern_lt(tern_add(row, tern_int((U - 1) * TK)), kc)) {
            tern_v bv[8][8];
            for (int u = 0; u < U; u++) {
                tern_v pr = tern_add(k0, tern_add(row, tern_int(u * TK)));
                ku_load(p.b, tern_add(tern_mul(pr, p.ldb), jc), W, bv[u]);
            }
            for (int u = 0; u < U; u++) row_fma(&p, xs, tern_add(row, tern_int(u * TK)), bv[u], acc, NULL);
            tern_assign(row, tern_add(row, tern_int(U * TK)));
        }
        TERN_WHILE(kb, tern_lt(row, kc)) {
            tern_v bv[8];
            ku_load(p.b, tern_add(tern_mul(tern_add(k0, row), p.ldb), jc), W, bv);
            row_fma(&p, xs, row, bv, acc, NULL);
            tern_assign(row, tern_add(row, tern_int(TK)));
        }
    }

    /* the SIMD group's k-lanes (lanes with the same cl) by a butterfly; then lanes 0 .. TC-1
     * hold the group's sums of their columns */
    tern_v lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    tern_v sum[GK_GEMV_MAX_M][8];
    for (int r = 0; r < M; r++)
        for (int w = 0; w < W; w++) {
            tern_v v = acc[r][w];
            for (int mask = TC; mask < 32; mask *= 2) v = tern_add(v, tern_simd_shuffle_xor(v, tern_int(mask)));
            sum[r][w] = v;
        }
    TERN_IF(kb, tern_lt(lane, tern_int(TC))) {
        for (int r = 0; r < M; r++) {
            tern_v at = tern_add(tern_mul(tern_add(tern_mul(sg, tern_int(M)), tern_int(r)), tern_int(CT)),
                                 tern_mul(cl, tern_int(W)));
            ku_store_f32(red, at, W, sum[r]);
        }
    }
    tern_barrier(kb);
    /* one thread per output of the group: the SIMD groups' sums in group order */
    TERN_FOR(kb, o, tid, tern_int(M * CT), tern_int(G)) {
        tern_v r = tern_div(o, tern_int(CT)), c = tern_rem(o, tern_int(CT));
        tern_v j = tern_add(col0, c);
        TERN_IF(kb, tern_lt(j, p.N)) {
            tern_v total = tern_load(red, o); /* SIMD group 0: [0, r, c] is element o */
            for (int g = 1; g < NW; g++) total = tern_add(total, tern_load(red, tern_add(o, tern_int(g * M * CT))));
            finish(kb, &p, r, j, total, ahead_ok ? &ahead : NULL);
        }
    }
}

/* ---- B [n, k] ---- */

/* Words of a row this SIMD group's lanes read per step, all loaded before the products that
 * use them: n[8] (1 .. 4; 0 means 2), chosen on the host (src/gpu_core/gemv.c). */
static int gemv_t_unroll(const gk_spec *s) {
    int u = s->n[8] ? s->n[8] : 2;
    return u > 4 ? 4 : u;
}

/* Where lane vl (of the KS * 32 lanes along k) reads: words vl, vl + VL, ... of each of its
 * R rows (VL = KS * 32), 16 bytes each; brow[i] is where row i starts in B. */
typedef struct gemv_t_lanes {
    tern_v vl, brow[R];
    int VL;
} gemv_t_lanes;

/* As prefetch_b: the words of this lane's R rows from word q0 on, and their bias, into L2
 * before the wait. */
static void prefetch_bt(tern_kb *kb, const gemv_params *p, const gemv_t_lanes *ln, tern_v q0, tern_v j0) {
    TERN_FOR(kb, q, q0, tern_div(p->K, tern_int(p->W)), tern_int(ln->VL)) {
        for (int i = 0; i < R; i++) tern_prefetch(p->b, tern_add(ln->brow[i], tern_mul(q, tern_int(p->W))));
    }
    if (p->has_bias) tern_prefetch(p->bias, tern_min(j0, tern_sub(p->N, tern_int(1))));
}

/* The 16-byte word q of each of the R rows, from column k0 on. */
static void load_words(const gemv_params *p, const gemv_t_lanes *ln, tern_v k0, tern_v q, tern_v b[][8]) {
    for (int i = 0; i < R; i++) ku_load(p->b, tern_add(ln->brow[i], tern_add(k0, tern_mul(q, tern_int(p->W)))), p->W, b[i]);
}

/* acc[i][r] += x[r, q W ..] . B[row i, k0 + q W ..] for one 16-byte word q of R rows. */
static void word_fma(const gemv_params *p, tern_v xs, tern_v q, tern_v b[][8], tern_v acc[][GK_GEMV_MAX_M],
                     const tern_v *valid) {
    for (int r = 0; r < p->M; r++) {
        tern_v x[8];
        load_wide(xs, tern_add(tern_int(r * p->KC), tern_mul(q, tern_int(p->W))), p->W, p->a_size, x);
        for (int i = 0; i < R; i++) {
            tern_v f = acc[i][r];
            for (int w = 0; w < p->W; w++) f = tern_fma(x[w], b[i][w], f);
            tern_assign(acc[i][r], valid ? tern_select(*valid, f, acc[i][r]) : f);
        }
    }
}

/* One k-chunk [k0, k0 + kc) into acc: x staged, then the lane's words U at a time. pre holds
 * words vl + u VL (u < U, clamped into the chunk) of the rows, already loaded. */
static void chunk_t(tern_kb *kb, const gemv_params *p, const gemv_t_lanes *ln, int U, tern_v xs, tern_v tid,
                    tern_v k0, tern_v kc, tern_v pre_q[], tern_v pre[][R][8], tern_v acc[][GK_GEMV_MAX_M]) {
    tern_v words = tern_div(kc, tern_int(p->W)); /* W divides k and KC */
    tern_barrier(kb);                            /* the previous chunk's x is no longer read */
    stage_x(kb, p, xs, k0, kc, tid);
    tern_barrier(kb);
    for (int u = 0; u < U; u++) {
        tern_v valid = tern_lt(tern_add(ln->vl, tern_int(u * ln->VL)), words);
        word_fma(p, xs, pre_q[u], pre[u], acc, &valid);
    }
    /* the rest U words a row at a time (U R loads in flight), then one */
    tern_v q = tern_var(kb, "q", tern_add(ln->vl, tern_int(U * ln->VL)));
    TERN_WHILE(kb, tern_lt(tern_add(q, tern_int((U - 1) * ln->VL)), words)) {
        tern_v b[4][R][8];
        for (int u = 0; u < U; u++) load_words(p, ln, k0, tern_add(q, tern_int(u * ln->VL)), b[u]);
        for (int u = 0; u < U; u++) word_fma(p, xs, tern_add(q, tern_int(u * ln->VL)), b[u], acc, NULL);
        tern_assign(q, tern_add(q, tern_int(U * ln->VL)));
    }
    TERN_WHILE(kb, tern_lt(q, words)) {
        tern_v b[R][8];
        load_words(p, ln, k0, q, b);
        word_fma(p, xs, q, b, acc, NULL);
        tern_assign(q, tern_add(q, tern_int(ln->VL)));
    }
}

void gk_trace_gemv_t(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    gemv_params p = params(kb, s);
    int M = p.M, W = p.W, NW = p.G / 32, U = gemv_t_unroll(s);
    int KS = s->n[5] ? s->n[5] : 1; /* SIMD groups along k sharing rows */
    int RG = NW / KS;               /* groups of R rows in a group */
    bool early = s->n[11] != 0;     /* k in one chunk, B written by nothing in flight */
    tern_max_threads(kb, p.G);
    tern_v xs = tern_shared(kb, "xs", (tern_type)s->t[1], (size_t)M * p.KC);
    /* the SIMD groups' sums when KS > 1: [SIMD group, R, m] */
    tern_v red = KS > 1 ? tern_shared(kb, "red", TERN_T_F32, (size_t)NW * R * M) : tern_int(0);
    tern_v nred = gemv_norm_scratch(kb, &p);

    tern_v tid = tern_local_id(kb, 0), lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    tern_v ks = tern_rem(sg, tern_int(KS)), rg = tern_div(sg, tern_int(KS));
    gemv_t_lanes ln = {.vl = tern_add(tern_mul(ks, tern_int(32)), lane), .VL = KS * 32};
    /* the row group's outputs: R rows j0 .. j0 + R - 1; under a paired epilogue RO = R/2
     * pairs j0 .. of n/2, from rows pair_first(j0 + i) and pair_second(j0 + i) (row i + RO) */
    int RO = p.pair ? R / 2 : R;
    tern_v outs = p.pair ? tern_div(p.N, tern_int(2)) : p.N;
    tern_v j0 = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(RG * RO)), tern_mul(rg, tern_int(RO)));
    for (int i = 0; i < R; i++) { /* past the outputs, the last one's rows (dropped) */
        tern_v q = tern_min(tern_add(j0, tern_int(i % RO)), tern_sub(outs, tern_int(1)));
        tern_v row = !p.pair ? q : i < RO ? pair_first(&p, q) : pair_second(&p, q);
        ln.brow[i] = tern_mul(row, p.ldb);
    }

    /* the first U words of each row, clamped into the chunk: before the wait when early
     * (the one chunk is k0 = 0), the rest prefetched into L2 */
    tern_v pre_q[4], pre[4][R][8];
    tern_v words0 = tern_div(tern_min(tern_int(p.KC), p.K), tern_int(W));
    for (int u = 0; u < U && early; u++) {
        pre_q[u] = tern_min(tern_add(ln.vl, tern_int(u * ln.VL)), tern_sub(words0, tern_int(1)));
        load_words(&p, &ln, tern_int(0), pre_q[u], pre[u]);
    }
    prefetch_bt(kb, &p, &ln, early ? tern_add(ln.vl, tern_int(U * ln.VL)) : ln.vl, j0);
    gemv_norm_prefetch(kb, &p, tid);
    tern_wait_previous(kb);
    if (p.norm) gemv_norm_stats(kb, &p, tid, nred);

    tern_v acc[R][GK_GEMV_MAX_M];
    for (int i = 0; i < R; i++)
        for (int r = 0; r < M; r++) acc[i][r] = tern_var(kb, "acc", tern_f32(0.0f));

    if (early) {
        chunk_t(kb, &p, &ln, U, xs, tid, tern_int(0), p.K, pre_q, pre, acc);
    } else {
        TERN_FOR(kb, k0, tern_int(0), p.K, tern_int(p.KC)) {
            tern_v kc = tern_min(tern_int(p.KC), tern_sub(p.K, k0));
            tern_v last = tern_sub(tern_div(kc, tern_int(W)), tern_int(1));
            for (int u = 0; u < U; u++) {
                pre_q[u] = tern_min(tern_add(ln.vl, tern_int(u * ln.VL)), last);
                load_words(&p, &ln, k0, pre_q[u], pre[u]);
            }
            chunk_t(kb, &p, &ln, U, xs, tid, k0, kc, pre_q, pre, acc);
        }
    }

    /* each row's sum over the lanes; with KS = 1 output (i, r) is finished by lane i M + r
     * (paired: from rows i and i + RO), else the KS SIMD groups' sums meet in
     * threadgroup memory and are added in order */
    tern_v total[R][GK_GEMV_MAX_M];
    for (int i = 0; i < R; i++)
        for (int r = 0; r < M; r++) {
            total[i][r] = tern_simd_sum(acc[i][r]);
            if (KS == 1) continue;
            TERN_IF(kb, tern_eq(lane, tern_int(i * M + r))) {
                tern_store(red, tern_add(tern_mul(sg, tern_int(R * M)), tern_int(i * M + r)), total[i][r]);
            }
        }
    for (int i = 0; i < RO && KS == 1; i++)
        for (int r = 0; r < M; r++) {
            tern_v j = tern_add(j0, tern_int(i));
            TERN_IF(kb, tern_land(tern_eq(lane, tern_int(i * M + r)), tern_lt(j, outs))) {
                if (p.pair) finish_pair(kb, &p, tern_int(r), j, total[i][r], total[i + RO][r]);
                else finish(kb, &p, tern_int(r), j, total[i][r], NULL);
            }
        }
    if (KS == 1) return;
    tern_barrier(kb);
    TERN_IF(kb, tern_lt(tid, tern_int(RG * RO * M))) {
        tern_v g = tern_div(tid, tern_int(RO * M)), o = tern_rem(tid, tern_int(RO * M));
        tern_v i = tern_div(o, tern_int(M)), r = tern_rem(o, tern_int(M));
        tern_v j = tern_add(tern_add(tern_mul(tern_group_id(kb, 0), tern_int(RG * RO)), tern_mul(g, tern_int(RO))), i);
        TERN_IF(kb, tern_lt(j, outs)) {
            /* [g KS + k, i, r] is row i's sum of SIMD group k of row group g (o = i M + r) */
            tern_v base = tern_add(tern_mul(tern_mul(g, tern_int(KS)), tern_int(R * M)), o);
            tern_v sum = tern_load(red, base), sum_u = tern_int(0);
            for (int k = 1; k < KS; k++) sum = tern_add(sum, tern_load(red, tern_add(base, tern_int(k * R * M))));
            if (p.pair) {
                tern_v up = tern_add(base, tern_int(RO * M)); /* row i + RO */
                sum_u = tern_load(red, up);
                for (int k = 1; k < KS; k++) sum_u = tern_add(sum_u, tern_load(red, tern_add(up, tern_int(k * R * M))));
                finish_pair(kb, &p, r, j, sum, sum_u);
            } else {
                finish(kb, &p, r, j, sum, NULL);
            }
        }
    }
}
