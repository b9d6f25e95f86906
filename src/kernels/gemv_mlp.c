/* A transformer layer's feed-forward pair as one kernel, for decoding (few rows):
 *
 *   h[m, H] = gelu(norm(x)[m, C] W1[C, H] + b1)        (W1 [k, n], GPT-2's fc)
 *   y[m, C] = alpha (h W2[H, C]) + beta y + b2        (W2 [k, n], GPT-2's projection)
 *
 * Group g owns CT = TC W1w hidden units j0 = g CT .. j0 + CT - 1. It computes them as
 * GK_GEMV does its CT columns (gemv_kn_sums: the norm prologue, the product, the sums in a
 * fixed order), finishes them into threadgroup memory (rounded to x's dtype, as a composed
 * product would store h), then multiplies them by its CT rows of W2, which are contiguous:
 * thread t takes W2-vector v = t mod NV (NV = C / W2w) of rows rl, rl + RL, ... (rl = t /
 * NV, RL row lanes), and the RL lanes' sums meet in threadgroup memory in lane order. So h
 * never leaves the group, and the second product needs no kernel boundary: only the groups'
 * partial outputs [NG, m, C] (f32) are summed across groups, deterministically:
 *
 *   1. each group stores its partial, fences (device scope) and counts itself in on its
 *      set's counter (sets of S1 consecutive groups);
 *   2. the set's last group fences, adds the set's partials in group order into the set's
 *      sum, fences, and counts itself in on the sets' counter;
 *   3. the last set's last group adds the NS sets' sums in set order and finishes y (alpha,
 *      beta's residual, b2) as GK_GEMV's finish does; each last group sets its counter back
 *      to zero for the next launch (and the next replay of a captured graph).
 *
 * No float atomics: the same inputs give the same bits on every run and runtime. Every
 * weight (W1's rows, W2's rows, b1) is loaded before tern_wait_previous when nothing in
 * flight writes it (n[11]): decoding's weights stream in while the kernel before still
 * runs. y may be x itself (the residual update in place): every group reads x before it
 * counts itself in, and only the very last group writes y.
 *
 * Spec (GK_GEMV's, src/kernels/gemv.c, where it applies): t[0] y, t[1] x, t[2] W1, t[3]
 * b1 (0: none), t[4] W2, t[5] norm_w, t[6] norm_b, t[7] b2 (0: none); n[0] m, n[1] W1's
 * vector width, n[2] = 1 (GELU), n[3] has b1, n[5] TC, n[6] KC (>= C: one chunk), n[7] G,
 * n[8] C, n[11] early, n[12] the prologue; n[13] W2's vector width W2w (dividing C and
 * ldw2), n[14] RL, n[15] S1, n[16] NG = H / CT (H a multiple of CT).
 * Parameters: y, x, w1, [b1], [norm_w, [norm_b]], h_count (H), c (C), lda, ldb (W1's row
 * stride), ldc, alpha, beta, [eps], then w2, [b2], part (f32 [(NG + NS) m C]: the groups'
 * partials, then the sets'), count (i32 [1 + NS], zero before and after a launch), ldw2.
 * Grid: NG groups of G threads. */
#include "kernels/gemv.h"

typedef struct mlp_params {
    tern_v w2, b2, part, count, ldw2;
    bool has_b2, early;
    int C, CT, W2w, NV, RL, NR, S1, NG, NS;
    tern_v j0;    /* the group's first hidden unit */
    tern_v v, rl; /* this thread's W2 vector and row lane, clamped into range */
    tern_v active; /* whether the thread has a vector and lane (v < NV, rl < RL) */
    tern_v row_valid[8], w2v[8][8]; /* rows rl + i RL (< CT) of the group's, W2w values each */
} mlp_params;

/* This thread's rows of W2: the group's rows j0 + rl + i RL, vector v (clamped: a row past
 * CT reads the group's last row, and its products are dropped). */
static void load_w2(tern_kb *kb, mlp_params *q) {
    for (int i = 0; i < q->NR; i++) {
        tern_v row = tern_add(q->rl, tern_int(i * q->RL));
        q->row_valid[i] = tern_var(kb, "w2_valid", tern_lt(row, tern_int(q->CT)));
        tern_v at = tern_add(tern_mul(tern_add(q->j0, tern_min(row, tern_int(q->CT - 1))), q->ldw2),
                             tern_mul(q->v, tern_int(q->W2w)));
        ku_load(q->w2, at, q->W2w, q->w2v[i]);
    }
}

static void before_wait(tern_kb *kb, void *user) {
    mlp_params *q = user;
    if (q->early) load_w2(kb, q);
}

/* y[r, c] from the cross-group total, as GK_GEMV's finish: alpha acc (+ beta y) + b2[c]. */
static void finish_y(tern_kb *kb, const gemv_params *p, const mlp_params *q, tern_v r, tern_v c, tern_v acc) {
    tern_v at = tern_add(tern_mul(r, p->ldc), c);
    tern_v v = tern_var(kb, "out", tern_mul(p->alpha, acc));
    TERN_IF(kb, tern_ne(p->beta, tern_f32(0.0f))) { tern_assign(v, tern_fma(p->alpha, acc, tern_mul(p->beta, tern_load(p->c, at)))); }
    tern_store(p->c, at, q->has_b2 ? tern_add(v, tern_load(q->b2, c)) : v);
}

/* Counts this group in on counter `slot`; true (in every thread) when it came last of
 * `of`. The caller has stored what it publishes; the fence orders those stores first. */
static tern_v count_in(tern_kb *kb, const mlp_params *q, tern_v flag, tern_v tid, tern_v slot, tern_v of) {
    tern_fence_device(kb);
    tern_barrier(kb);
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        tern_v done = tern_atomic_add(q->count, slot, tern_int(1));
        tern_store(flag, tern_int(0), tern_select(tern_eq(done, tern_sub(of, tern_int(1))), tern_int(1), tern_int(0)));
    }
    tern_barrier(kb);
    return tern_eq(tern_load(flag, tern_int(0)), tern_int(1));
}

void gk_trace_gemv_mlp(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    gemv_params p = gemv_params_of(kb, s);
    p.mlp = true;
    mlp_params q = {0};
    q.has_b2 = s->t[7] != 0;
    q.early = s->n[11] != 0;
    q.C = s->n[8], q.W2w = s->n[13], q.RL = s->n[14], q.S1 = s->n[15], q.NG = s->n[16];
    q.CT = s->n[5] * p.W;
    q.NV = q.C / q.W2w;
    q.NR = (q.CT + q.RL - 1) / q.RL;
    q.NS = (q.NG + q.S1 - 1) / q.S1;
    int M = p.M, G = p.G, MC = M * q.C;
    q.w2 = ku_buf(kb, "w2", s->t[4], TERN_READ);
    q.b2 = q.has_b2 ? ku_buf(kb, "b2", s->t[7], TERN_READ) : tern_int(0);
    q.part = tern_param_buf(kb, "part", TERN_T_F32, TERN_READ_WRITE);
    q.count = tern_param_buf(kb, "count", TERN_T_I32, TERN_READ_WRITE);
    q.ldw2 = tern_param_scalar(kb, "ldw2", TERN_T_I32);
    tern_v hs = tern_shared(kb, "hs", (tern_type)s->t[1], (size_t)M * q.CT);        /* h, x's dtype */
    tern_v red2 = tern_shared(kb, "red2", TERN_T_F32, (size_t)q.RL * (size_t)MC); /* [RL, m, C] */
    tern_v flag = tern_shared(kb, "last", TERN_T_I32, 1);

    tern_v group = tern_group_id(kb, 0);
    q.j0 = tern_mul(group, tern_int(q.CT));
    tern_v t0 = tern_local_id(kb, 0);
    q.v = tern_rem(t0, tern_int(q.NV));
    tern_v rl = tern_div(t0, tern_int(q.NV));
    q.active = tern_lt(rl, tern_int(q.RL));
    q.rl = tern_min(rl, tern_int(q.RL - 1));

    /* the first product, up to its sums (W2's rows loaded just before its wait) */
    gemv_kn kn;
    gemv_kn_sums(kb, &p, s, &kn, before_wait, &q);
    if (!q.early) load_w2(kb, &q);
    tern_v tid = kn.tid;

    /* h = gelu(sum + b1), rounded to x's dtype, into threadgroup memory */
    TERN_FOR(kb, o, tid, tern_int(M * q.CT), tern_int(G)) {
        tern_v c = tern_rem(o, tern_int(q.CT));
        tern_v v = tern_mul(p.alpha, gemv_kn_total(&p, &kn, o));
        if (p.has_bias) v = tern_add(v, kn.ahead_ok ? kn.ahead.bias : tern_load(p.bias, tern_add(q.j0, c)));
        tern_store(hs, o, ku_gelu(v));
    }
    tern_barrier(kb);

    /* the second product over the group's CT rows: each lane's rows in order, then the
     * lanes' sums in lane order */
    tern_v acc[GK_GEMV_MAX_M][8];
    for (int r = 0; r < M; r++)
        for (int w = 0; w < q.W2w; w++) acc[r][w] = tern_var(kb, "acc2", tern_f32(0.0f));
    for (int i = 0; i < q.NR; i++) {
        tern_v row = tern_min(tern_add(q.rl, tern_int(i * q.RL)), tern_int(q.CT - 1));
        for (int r = 0; r < M; r++) {
            tern_v h = tern_load(hs, tern_add(tern_int(r * q.CT), row));
            for (int w = 0; w < q.W2w; w++)
                tern_assign(acc[r][w], tern_select(q.row_valid[i], tern_fma(h, q.w2v[i][w], acc[r][w]), acc[r][w]));
        }
    }
    TERN_IF(kb, q.active) {
        for (int r = 0; r < M; r++)
            ku_store_f32(red2, tern_add(tern_add(tern_mul(q.rl, tern_int(MC)), tern_int(r * q.C)), tern_mul(q.v, tern_int(q.W2w))),
                         q.W2w, acc[r]);
    }
    tern_barrier(kb);
    tern_v mine = tern_mul(group, tern_int(MC)); /* this group's partial in part */
    TERN_FOR(kb, o, tid, tern_int(MC), tern_int(G)) {
        tern_v sum = tern_load(red2, o);
        for (int l = 1; l < q.RL; l++) sum = tern_add(sum, tern_load(red2, tern_add(o, tern_int(l * MC))));
        tern_store(q.part, tern_add(mine, o), sum);
    }

    /* across groups: the set's last adds the set's partials, the last set's last the sets' */
    tern_v set = tern_div(group, tern_int(q.S1));
    tern_v first = tern_mul(set, tern_int(q.S1));
    tern_v in_set = tern_min(tern_int(q.S1), tern_sub(tern_int(q.NG), first));
    TERN_IF(kb, count_in(kb, &q, flag, tid, tern_add(set, tern_int(1)), in_set)) {
        tern_fence_device(kb);
        tern_v sets_at = tern_int((size_t)q.NG * (size_t)MC);
        TERN_FOR(kb, o, tid, tern_int(MC), tern_int(G)) {
            tern_v parts[GK_MLP_SETS_MAX] = {0};
            for (int i = 0; i < q.S1; i++) { /* all loads first; a member past NG reads the set's first */
                tern_v gi = tern_add(first, tern_int(i));
                tern_v from = tern_select(tern_lt(tern_int(i), in_set), gi, first);
                parts[i] = tern_load(q.part, tern_add(tern_mul(from, tern_int(MC)), o));
            }
            tern_v sum = parts[0]; /* S1 >= 1 */
            for (int i = 1; i < q.S1; i++) sum = tern_select(tern_lt(tern_int(i), in_set), tern_add(sum, parts[i]), sum);
            tern_store(q.part, tern_add(tern_add(sets_at, tern_mul(set, tern_int(MC))), o), sum);
        }
        TERN_IF(kb, tern_eq(tid, tern_int(0))) { tern_store(q.count, tern_add(set, tern_int(1)), tern_int(0)); }
        TERN_IF(kb, count_in(kb, &q, flag, tid, tern_int(0), tern_int(q.NS))) {
            tern_fence_device(kb);
            TERN_FOR(kb, o, tid, tern_int(MC), tern_int(G)) {
                tern_v sums[GK_MLP_SETS_MAX] = {0};
                for (int i = 0; i < q.NS; i++) sums[i] = tern_load(q.part, tern_add(tern_int((size_t)(q.NG + i) * (size_t)MC), o));
                tern_v total = sums[0];
                for (int i = 1; i < q.NS; i++) total = tern_add(total, sums[i]);
                finish_y(kb, &p, &q, tern_div(o, tern_int(q.C)), tern_rem(o, tern_int(q.C)), total);
            }
            TERN_IF(kb, tern_eq(tid, tern_int(0))) { tern_store(q.count, tern_int(0), tern_int(0)); }
        }
    }
}
