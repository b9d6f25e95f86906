/* The q|k|v product inside the cached attention's split kernel (qkv_join.h). */
#include "kernels/qkv_join.h"

void qkv_join_params(tern_kb *kb, const gk_spec *s, int G, qkv_join *j) {
    *j = (qkv_join){0};
    j->G = G;
    j->C = s->n[11];
    j->W = 8; /* 16-byte words of 16-bit weights (the host joins only those) */
    j->rows = j->C / (G / GK_JOIN_WORDS);
    j->U = j->rows < GK_JOIN_U ? j->rows : GK_JOIN_U;
    j->has_bias = (s->n[10] & GK_JOIN_BIAS) != 0;
    j->early = (s->n[10] & GK_JOIN_EARLY) != 0;
    gemv_params *p = &j->ln;
    p->norm = GK_GEMV_LAYERNORM;
    p->M = 1, p->G = G, p->KC = j->C, p->W = j->W;
    p->NE = (j->C + G - 1) / G;
    p->resident = true; /* the host joins only x that a thread holds in GK_GEMV_NORM_PER_THREAD */
    p->weights_early = j->early;
    p->a = ku_buf(kb, "x", s->t[4], TERN_READ);
    j->w = ku_buf(kb, "w", s->t[5], TERN_READ);
    j->bias = j->has_bias ? ku_buf(kb, "qkv_bias", s->t[6], TERN_READ) : tern_int(0);
    p->norm_w = ku_buf(kb, "norm_w", s->t[7], TERN_READ);
    p->norm_b = ku_buf(kb, "norm_b", s->t[7], TERN_READ);
    p->eps = tern_param_scalar(kb, "eps", TERN_T_F32);
    p->K = tern_int(j->C);
    p->lda = tern_int(j->C);
    j->C3 = tern_int(3 * j->C);
    j->xs = tern_shared(kb, "xs", (tern_type)s->t[4], (size_t)j->C);
    j->red = tern_shared(kb, "red", TERN_T_F32, (size_t)(G / 32) * GK_JOIN_WORDS * (size_t)j->W);
}

/* Row r (< C) of w at this thread's word: W values. */
static void load_row(const qkv_join *j, tern_v r, tern_v *out) {
    ku_load(j->w, tern_add(tern_mul(r, j->C3), j->col), j->W, out);
}

void qkv_join_early(tern_kb *kb, qkv_join *j, tern_v tid, tern_v col, tern_v out_col) {
    int TK = j->G / GK_JOIN_WORDS;
    j->kl = tern_div(tid, tern_int(GK_JOIN_WORDS));
    j->col = col;
    j->out_col = out_col;
    /* the bias now where nothing in flight writes it, else after the wait (its own load
     * after the sums was a round trip on every layer's critical path) */
    j->bias_v = tern_f32(0.0f);
    if (j->has_bias && j->early) j->bias_v = tern_load(j->bias, out_col);
    if (j->early)
        for (int u = 0; u < j->U; u++) load_row(j, tern_add(j->kl, tern_int(u * TK)), j->pre[u]);
    /* the rest into L2 (only a hint: the values are read after the wait) */
    for (int i = j->early ? j->U : 0; i < j->rows; i++)
        tern_prefetch(j->w, tern_add(tern_mul(tern_add(j->kl, tern_int(i * TK)), j->C3), j->col));
    gemv_norm_prefetch(kb, &j->ln, tid);
}

/* acc[e] += x[r] w[r, col + e] */
static void row_fma(const qkv_join *j, tern_v r, const tern_v *wv, tern_v *acc) {
    tern_v x = tern_load(j->xs, r);
    for (int e = 0; e < j->W; e++) tern_assign(acc[e], tern_fma(x, wv[e], acc[e]));
}

void qkv_join_sums(tern_kb *kb, qkv_join *j, tern_v tid) {
    int TK = j->G / GK_JOIN_WORDS, W = j->W;
    tern_v nred = gemv_norm_scratch(kb, &j->ln);
    if (j->has_bias && !j->early) j->bias_v = tern_load(j->bias, j->out_col);
    gemv_norm_stats(kb, &j->ln, tid, nred);
    gemv_norm_stage(kb, &j->ln, j->xs, tern_int(0), tern_int(j->C), tid);
    if (!j->early)
        for (int u = 0; u < j->U; u++) load_row(j, tern_add(j->kl, tern_int(u * TK)), j->pre[u]);
    tern_barrier(kb);
    tern_v acc[8];
    for (int e = 0; e < W; e++) acc[e] = tern_var(kb, "jacc", tern_f32(0.0f));
    for (int u = 0; u < j->U; u++) row_fma(j, tern_add(j->kl, tern_int(u * TK)), j->pre[u], acc);
    /* the other rows U at a time, every load of a step first */
    for (int i0 = j->U; i0 < j->rows; i0 += 8) {
        int n = j->rows - i0 < 8 ? j->rows - i0 : 8;
        tern_v wv[GK_JOIN_U][8];
        for (int i = 0; i < n; i++) load_row(j, tern_add(j->kl, tern_int((i0 + i) * TK)), wv[i]);
        for (int i = 0; i < n; i++) row_fma(j, tern_add(j->kl, tern_int((i0 + i) * TK)), wv[i], acc);
    }
    /* a SIMD group's k-lanes (lanes 8 and 16 apart), then lane w < 8 holds word w's sums */
    tern_v lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    tern_v sum[8];
    for (int e = 0; e < W; e++) {
        sum[e] = acc[e];
        for (int off = GK_JOIN_WORDS; off < 32; off *= 2)
            sum[e] = tern_add(sum[e], tern_simd_shuffle_xor(sum[e], tern_int(off)));
    }
    TERN_IF(kb, tern_lt(lane, tern_int(GK_JOIN_WORDS))) {
        tern_v at = tern_add(tern_mul(sg, tern_int(GK_JOIN_WORDS * W)), tern_mul(lane, tern_int(W)));
        for (int e = 0; e < W; e++) tern_store(j->red, tern_add(at, tern_int(e)), sum[e]);
    }
    tern_barrier(kb);
}

tern_v qkv_join_value(const qkv_join *j, tern_v c) {
    int NW = j->G / 32, words = GK_JOIN_WORDS * j->W;
    tern_v v = tern_load(j->red, c);
    for (int g = 1; g < NW; g++) v = tern_add(v, tern_load(j->red, tern_add(c, tern_int(g * words))));
    return j->has_bias ? tern_add(v, j->bias_v) : v;
}
