/* Layer normalisation, forward and backward: one SIMD group per row, GK_LN_ROWS rows per
 * threadgroup, statistics in f32 with SIMD reductions.
 *
 * Spec: t[0] out (dx), t[1] x (dout), t[2] w (x), t[3] b (w) as listed below; n[0] = W, the
 * vector width; n[1] = C when the row is register-resident (C % (32 W) == 0 and
 * C / 32 <= GK_LN_MAX_PER_LANE: loops unroll and x is read once), 0 for the generic path
 * (C a runtime value, x re-read per pass); n[2] = forward: bit 0 store mean, bit 1 rstd,
 * bit 2 few rows (GK_LN_EARLY_ROWS: w and b loaded early, and prefetched before the wait).
 *
 * SIMD reductions need the whole threadgroup, so a SIMD group past the last row computes
 * on the last row and stores nothing. The forward may be launched with fewer SIMD groups
 * than GK_LN_ROWS (one per row when there are fewer rows: decoding's single row is one SIMD
 * group); nothing in it depends on the group's size. */
#include "kernels/kutil.h"

void gk_ln_row_stats(tern_kb *kb, gk_ln_row *r, tern_v x, tern_v base, tern_v w, tern_v b, int C, int W,
                     tern_v eps, bool early) {
    r->W = W, r->chunks = C / 32 / W;
    r->early = early && r->chunks * W <= GK_LN_EARLY_PER_LANE;
    r->lane = tern_simd_lane(kb);
    /* w and b are loaded with x, before the statistics, when they fit in registers too:
     * their latency then overlaps x's instead of following the reductions (a one-row
     * layernorm, as in decoding, is that latency and little else) */
    for (int k = 0; k < r->chunks; k++) {
        tern_v col = gk_ln_row_col(r, k);
        ku_load(x, tern_add(base, col), W, r->x + k * W);
        if (r->early) {
            ku_load(w, col, W, r->w + k * W);
            ku_load(b, col, W, r->b + k * W);
        }
    }
    tern_v Cf = tern_cast(tern_i32(C), TERN_T_F32);
    /* pairwise within the lane, then across lanes */
    tern_v sum = tern_f32(0.0f);
    for (int j = 0; j < r->chunks * W; j++) sum = j ? tern_add(sum, r->x[j]) : r->x[0];
    r->mu = tern_div(tern_simd_sum(sum), Cf);
    tern_v ss = tern_f32(0.0f);
    for (int j = 0; j < r->chunks * W; j++) {
        tern_v d = tern_sub(r->x[j], r->mu);
        ss = j ? tern_fma(d, d, ss) : tern_mul(d, d);
    }
    tern_v var = tern_div(tern_simd_sum(ss), Cf);
    r->rs = tern_div(tern_f32(1.0f), tern_sqrt(tern_add(var, eps)));
}

tern_v gk_ln_row_col(const gk_ln_row *r, int k) {
    return tern_mul(tern_add(tern_int(k * 32), r->lane), tern_int(r->W));
}

void gk_ln_row_out(gk_ln_row *r, tern_v w, tern_v b, int k, tern_v out[8]) {
    int W = r->W;
    if (!r->early) {
        tern_v col = gk_ln_row_col(r, k);
        ku_load(w, col, W, r->w + k * W);
        ku_load(b, col, W, r->b + k * W);
    }
    for (int j = 0; j < W; j++)
        out[j] = tern_fma(tern_mul(tern_sub(r->x[k * W + j], r->mu), r->rs), r->w[k * W + j], r->b[k * W + j]);
}

/* Forward. Parameters: out, x, w, b, [mean], [rstd], rows, C, eps. */
void gk_trace_layernorm(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0], Cc = s->n[1];
    bool with_mean = s->n[2] & 1, with_rstd = s->n[2] & 2, few_rows = s->n[2] & 4;
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[1], TERN_READ);
    tern_v w = ku_buf(kb, "w", s->t[2], TERN_READ);
    tern_v b = ku_buf(kb, "b", s->t[3], TERN_READ);
    tern_v mean = with_mean ? tern_param_buf(kb, "mean", TERN_T_F32, TERN_WRITE) : tern_int(0);
    tern_v rstd = with_rstd ? tern_param_buf(kb, "rstd", TERN_T_F32, TERN_WRITE) : tern_int(0);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v Cv = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v eps = tern_param_scalar(kb, "eps", TERN_T_F32);

    tern_v lane = tern_simd_lane(kb);
    tern_v row = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(GK_LN_ROWS)), tern_simd_group(kb));
    tern_v valid = tern_lt(row, rows);
    tern_v rowc = tern_min(row, tern_sub(rows, tern_int(1)));
    tern_v C = Cc ? tern_i32(Cc) : Cv;
    tern_v base = tern_mul(rowc, C);
    tern_v Cf = tern_cast(C, TERN_T_F32);
    tern_v mu, rs;
    /* launched early (CUDA), it fetches the weights w and b into L2 while the kernel that
     * writes x finishes; x only after the wait */
    for (int k = 0; few_rows && Cc && k < Cc / 32 / W; k++) {
        tern_v col = tern_mul(tern_add(tern_int(k * 32), lane), tern_int(W));
        tern_prefetch(w, col);
        tern_prefetch(b, col);
    }
    tern_wait_previous(kb);

    if (Cc) {
        gk_ln_row lr;
        gk_ln_row_stats(kb, &lr, x, base, w, b, Cc, W, eps, few_rows);
        mu = lr.mu, rs = lr.rs;
        TERN_IF(kb, valid) {
            for (int k = 0; k < lr.chunks; k++) {
                tern_v o[8];
                gk_ln_row_out(&lr, w, b, k, o);
                ku_store(out, tern_add(base, gk_ln_row_col(&lr, k)), W, o);
            }
        }
    } else {
        tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
        TERN_FOR(kb, j, lane, C, tern_int(32)) {
            tern_assign(sum, tern_add(sum, tern_load(x, tern_add(base, j))));
        }
        mu = tern_div(tern_simd_sum(sum), Cf);
        tern_v ss = tern_var(kb, "ss", tern_f32(0.0f));
        TERN_FOR(kb, j, lane, C, tern_int(32)) {
            tern_v d = tern_sub(tern_load(x, tern_add(base, j)), mu);
            tern_assign(ss, tern_fma(d, d, ss));
        }
        tern_v var = tern_div(tern_simd_sum(ss), Cf);
        rs = tern_div(tern_f32(1.0f), tern_sqrt(tern_add(var, eps)));
        TERN_IF(kb, valid) {
            TERN_FOR(kb, j, lane, C, tern_int(32)) {
                tern_v xhat = tern_mul(tern_sub(tern_load(x, tern_add(base, j)), mu), rs);
                tern_store(out, tern_add(base, j), tern_fma(xhat, tern_load(w, j), tern_load(b, j)));
            }
        }
    }
    if (with_mean || with_rstd) {
        TERN_IF(kb, tern_land(valid, tern_eq(lane, tern_int(0)))) {
            if (with_mean) tern_store(mean, row, mu);
            if (with_rstd) tern_store(rstd, row, rs);
        }
    }
}

/* 1 / w, w's magnitude at least GK_LN_W_MIN (FROM_OUTPUT's xhat = (y - b) / w) */
static tern_v gk_ln_w_reciprocal(tern_v w) {
    tern_v tiny = tern_f32(GK_LN_W_MIN);
    tern_v safe = tern_select(tern_lt(tern_abs(w), tiny),
                              tern_select(tern_lt(w, tern_f32(0.0f)), tern_neg(tiny), tiny), w);
    return tern_div(tern_f32(1.0f), safe);
}

/* The generic path's xhat at x[at] (column j): (x - mu) rstd, or from the output (y - b) / w */
static tern_v gk_lnb_xhat(tern_v x, tern_v at, tern_v j, tern_v b, tern_v w, tern_v mu, tern_v rs, bool from_out) {
    if (from_out) return tern_mul(tern_sub(tern_load(x, at), tern_load(b, j)), gk_ln_w_reciprocal(tern_load(w, j)));
    return tern_mul(tern_sub(tern_load(x, at), mu), rs);
}

/* Backward. Spec: t[0] dx, t[1] dout, t[2] x, t[3] w, t[4] out, t[5] b; n[0] W, n[1] C or 0
 * (as the forward); n[2] = P, the partial rows per team: 2 (dw, db) or 3 (dw, db,
 * dsum); n[3] the mode (GK_LNB_*): WRITE_OUT, the forward's output is written again (out,
 * from b); FROM_OUTPUT, x is the forward's output and xhat = (x - b) / w, without mean;
 * n[4] = R, the SIMD groups sharing a row on the register path (gk_lnb_team: 1, or 2 or 4
 * for wide rows; 0 reads as 1). Parameters: dx, partial, [out], dout, x, w, [b], [mean],
 * rstd, rows, C, S (row teams of R SIMD groups in the grid), iters = ceil(rows / S). out is
 * the forward's expression on the same values (x, the stored mean and rstd, w, b), so it
 * equals what layernorm wrote.
 * dx += (w dout - mean(w dout) - xhat mean(w dout xhat)) rstd per row; team s sums dout
 * xhat, dout and (P = 3) the updated dx over its rows s, s + S, ... into partial[s, 0, :],
 * partial[s, 1, :] and partial[s, 2, :] (f32 [S, P, C]), which partial_add then adds into dw,
 * db and dsum in a fixed order. The updated dx is summed as computed, in f32, before its
 * store rounds it to dx's dtype. */
void gk_trace_layernorm_backward(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0], Cc = s->n[1], P = s->n[2], R = s->n[4] > 1 ? s->n[4] : 1;
    bool with_dsum = P == 3, with_out = s->n[3] == GK_LNB_WRITE_OUT, from_out = s->n[3] == GK_LNB_FROM_OUTPUT;
    tern_v dx = ku_buf(kb, "dx", s->t[0], TERN_READ_WRITE);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, Cc ? TERN_WRITE : TERN_READ_WRITE);
    tern_v out = with_out ? ku_buf(kb, "out", s->t[4], TERN_WRITE) : tern_int(0);
    tern_v dout = ku_buf(kb, "dout", s->t[1], TERN_READ);
    tern_v x = ku_buf(kb, "x", s->t[2], TERN_READ);
    tern_v w = ku_buf(kb, "w", s->t[3], TERN_READ);
    tern_v b = with_out || from_out ? ku_buf(kb, "b", s->t[5], TERN_READ) : tern_int(0);
    tern_v mean = from_out ? tern_int(0) : tern_param_buf(kb, "mean", TERN_T_F32, TERN_READ);
    tern_v rstd = tern_param_buf(kb, "rstd", TERN_T_F32, TERN_READ);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v Cv = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v S = tern_param_scalar(kb, "S", TERN_T_I32);
    tern_v iters = tern_param_scalar(kb, "iters", TERN_T_I32);

    tern_v lane = tern_simd_lane(kb), warp = tern_simd_group(kb);
    /* the row team: R SIMD groups of one group, part q of the team holding every R-th
     * stretch of 32 W columns (R a power of two) */
    int teams = GK_LN_ROWS / R, log_r = R == 4 ? 2 : R == 2 ? 1 : 0;
    tern_v tw = tern_shr(warp, tern_int(log_r)), q = tern_and(warp, tern_int(R - 1));
    tern_v sg = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(teams)), tw);
    tern_v C = Cc ? tern_i32(Cc) : Cv;
    tern_v Cf = tern_cast(C, TERN_T_F32);
    tern_v pbase = tern_mul(sg, tern_mul(C, tern_int(P)));
    tern_v last = tern_sub(rows, tern_int(1));

    if (Cc) {
        int chunks = Cc / 32 / R / W, per = chunks * W;
        /* the first column of chunk k held by this lane */
        tern_v lc = tern_add(tern_mul(q, tern_int(32)), lane);
        tern_v cols[GK_LN_MAX_PER_LANE];
        for (int k = 0; k < chunks; k++) cols[k] = tern_mul(tern_add(tern_int(k * 32 * R), lc), tern_int(W));
        tern_v wv[GK_LN_MAX_PER_LANE], bv[GK_LN_MAX_PER_LANE];
        tern_v dw[GK_LN_MAX_PER_LANE], db[GK_LN_MAX_PER_LANE], ds[GK_LN_MAX_PER_LANE];
        for (int k = 0; k < chunks; k++) {
            ku_load(w, cols[k], W, wv + k * W);
            if (with_out || from_out) ku_load(b, cols[k], W, bv + k * W);
        }
        /* from_out: 1 / w in threadgroup memory, made once by the group's first team (ptxas
         * sm_90a, bf16 with dsum: 248 registers at 768 and 1,600 columns; in registers beside
         * w and b it took all 255 at 1,600, without spills; the two not yet timed apart) */
        tern_v rw = from_out ? tern_shared(kb, "rw", TERN_T_F32, (size_t)Cc) : tern_int(0);
        if (from_out) {
            TERN_IF(kb, tern_eq(tw, tern_int(0))) {
                for (int k = 0; k < chunks; k++)
                    for (int j = 0; j < W; j++)
                        tern_store(rw, tern_add(cols[k], tern_int(j)), gk_ln_w_reciprocal(wv[k * W + j]));
            }
            tern_barrier(kb);
        }
        for (int j = 0; j < per; j++) {
            dw[j] = tern_var(kb, "dw", tern_f32(0.0f));
            db[j] = tern_var(kb, "db", tern_f32(0.0f));
            if (with_dsum) ds[j] = tern_var(kb, "ds", tern_f32(0.0f));
        }
        /* a team's two row sums meet here: [iteration parity][SIMD group][2], two halves so
         * that one barrier an iteration suffices (a half is written again only after the next
         * iteration's barrier, which every reader of it has passed) */
        tern_v xch = R > 1 ? tern_shared(kb, "xch", TERN_T_F32, 2 * GK_LN_ROWS * 2) : tern_int(0);
        TERN_FOR(kb, it, tern_int(0), iters, tern_int(1)) {
            tern_v row = tern_add(sg, tern_mul(it, S));
            tern_v valid = tern_lt(row, rows);
            tern_v rowc = tern_min(row, last);
            tern_v base = tern_mul(rowc, C);
            tern_v mu = from_out ? tern_f32(0.0f) : tern_load(mean, rowc), rs = tern_load(rstd, rowc);
            /* every load of the row before any store: the compiler cannot tell dx and out
             * from the buffers read, so a load after a store waits for it, and chunk by
             * chunk that was a memory round trip each (with out: 446 us a call at 1.5B
             * against 101 without, bench/h200/NOTES.md run 113) */
            tern_v g[GK_LN_MAX_PER_LANE], xh[GK_LN_MAX_PER_LANE], o[GK_LN_MAX_PER_LANE];
            for (int k = 0; k < chunks; k++) {
                tern_v at = tern_add(base, cols[k]);
                ku_load(dout, at, W, g + k * W);
                ku_load(x, at, W, xh + k * W);
                ku_load(dx, at, W, o + k * W);
            }
            tern_v s_mean = tern_f32(0.0f), s_norm = tern_f32(0.0f);
            for (int j = 0; j < per; j++) {
                if (from_out) {
                    tern_v col = tern_add(cols[j / W], tern_int(j % W));
                    xh[j] = tern_mul(tern_sub(xh[j], bv[j]), tern_load(rw, col));
                } else {
                    xh[j] = tern_mul(tern_sub(xh[j], mu), rs);
                }
                /* rows past the end contribute nothing */
                g[j] = tern_select(valid, g[j], tern_f32(0.0f));
                tern_v dn = tern_mul(wv[j], g[j]);
                s_mean = j ? tern_add(s_mean, dn) : dn;
                s_norm = j ? tern_fma(dn, xh[j], s_norm) : tern_mul(dn, xh[j]);
                tern_assign(dw[j], tern_fma(g[j], xh[j], dw[j]));
                tern_assign(db[j], tern_add(db[j], g[j]));
            }
            s_mean = tern_simd_sum(s_mean), s_norm = tern_simd_sum(s_norm);
            if (R > 1) {
                tern_v half = tern_mul(tern_and(it, tern_int(1)), tern_int(GK_LN_ROWS * 2));
                TERN_IF(kb, tern_eq(lane, tern_int(0))) {
                    tern_v at = tern_add(half, tern_mul(warp, tern_int(2)));
                    tern_store(xch, at, s_mean);
                    tern_store(xch, tern_add(at, tern_int(1)), s_norm);
                }
                tern_barrier(kb);
                /* the parts added in team order: every part gets the same sums */
                tern_v first = tern_add(half, tern_mul(tern_sub(warp, q), tern_int(2)));
                s_mean = tern_load(xch, first), s_norm = tern_load(xch, tern_add(first, tern_int(1)));
                for (int r = 1; r < R; r++) {
                    s_mean = tern_add(s_mean, tern_load(xch, tern_add(first, tern_int(2 * r))));
                    s_norm = tern_add(s_norm, tern_load(xch, tern_add(first, tern_int(2 * r + 1))));
                }
            }
            tern_v m1 = tern_div(s_mean, Cf);
            tern_v m2 = tern_div(s_norm, Cf);
            TERN_IF(kb, valid) {
                for (int k = 0; k < chunks; k++) {
                    tern_v at = tern_add(base, cols[k]);
                    for (int j = 0; j < W; j++) {
                        int i = k * W + j;
                        tern_v d = tern_sub(tern_sub(tern_mul(wv[i], g[i]), m1), tern_mul(xh[i], m2));
                        o[i] = tern_fma(d, rs, o[i]);
                        /* valid rows only (inside the if): dsum is the sum over real rows */
                        if (with_dsum) tern_assign(ds[i], tern_add(ds[i], o[i]));
                    }
                    ku_store(dx, at, W, o + k * W);
                    if (with_out) { /* the forward's output: gk_ln_row_out's expression */
                        tern_v y[8];
                        for (int j = 0; j < W; j++) y[j] = tern_fma(xh[k * W + j], wv[k * W + j], bv[k * W + j]);
                        ku_store(out, at, W, y);
                    }
                }
            }
        }
        tern_v *sums[3] = {dw, db, ds};
        if (gk_lnb_group_partials(Cc, P, R)) {
            /* the teams' sums added in a fixed tree: in each round teams [h, 2h) put theirs in
             * slots 0 .. h - 1 and teams [0, h) add them; team 0 writes the group's partial
             * row. GK_LN_ROWS / R times fewer partial rows to write and to add. */
            tern_v red = tern_shared(kb, "red", TERN_T_F32, (size_t)(teams / 2) * P * Cc);
            for (int h = teams / 2; h >= 1; h /= 2) {
                TERN_IF(kb, tern_land(tern_ge(tw, tern_int(h)), tern_lt(tw, tern_int(2 * h)))) {
                    tern_v slot = tern_mul(tern_sub(tw, tern_int(h)), tern_int(P * Cc));
                    for (int p = 0; p < P; p++)
                        for (int k = 0; k < chunks; k++)
                            ku_store_f32(red, tern_add(slot, tern_add(cols[k], tern_int(p * Cc))), W, sums[p] + k * W);
                }
                tern_barrier(kb);
                TERN_IF(kb, tern_lt(tw, tern_int(h))) {
                    tern_v slot = tern_mul(tw, tern_int(P * Cc));
                    for (int p = 0; p < P; p++)
                        for (int k = 0; k < chunks; k++)
                            for (int j = 0; j < W; j++) {
                                tern_v v = tern_load(red, tern_add(slot, tern_add(cols[k], tern_int(p * Cc + j))));
                                tern_assign(sums[p][k * W + j], tern_add(sums[p][k * W + j], v));
                            }
                }
                if (h > 1) tern_barrier(kb); /* the slots are free for the next round */
            }
            pbase = tern_mul(tern_group_id(kb, 0), tern_mul(C, tern_int(P)));
            tern_if(kb, tern_eq(tw, tern_int(0)));
        }
        for (int k = 0; k < chunks; k++) {
            tern_v at = tern_add(pbase, cols[k]);
            ku_store_f32(partial, at, W, dw + k * W);
            ku_store_f32(partial, tern_add(at, C), W, db + k * W);
            if (with_dsum) ku_store_f32(partial, tern_add(at, tern_mul(C, tern_int(2))), W, ds + k * W);
        }
        if (gk_lnb_group_partials(Cc, P, R)) tern_end(kb);
    } else {
        TERN_FOR(kb, j, lane, C, tern_int(32)) {
            for (int p = 0; p < P; p++)
                tern_store(partial, tern_add(tern_add(pbase, tern_mul(C, tern_int(p))), j), tern_f32(0.0f));
        }
        TERN_FOR(kb, it, tern_int(0), iters, tern_int(1)) {
            tern_v row = tern_add(sg, tern_mul(it, S));
            tern_v valid = tern_lt(row, rows);
            tern_v rowc = tern_min(row, last);
            tern_v base = tern_mul(rowc, C);
            tern_v mu = from_out ? tern_f32(0.0f) : tern_load(mean, rowc), rs = tern_load(rstd, rowc);
            tern_v s_mean = tern_var(kb, "s_mean", tern_f32(0.0f));
            tern_v s_norm = tern_var(kb, "s_norm", tern_f32(0.0f));
            TERN_FOR(kb, j, lane, C, tern_int(32)) {
                tern_v xhat = gk_lnb_xhat(x, tern_add(base, j), j, b, w, mu, rs, from_out);
                tern_v dn = tern_mul(tern_load(w, j), tern_load(dout, tern_add(base, j)));
                tern_assign(s_mean, tern_add(s_mean, dn));
                tern_assign(s_norm, tern_fma(dn, xhat, s_norm));
            }
            tern_v m1 = tern_div(tern_simd_sum(s_mean), Cf);
            tern_v m2 = tern_div(tern_simd_sum(s_norm), Cf);
            TERN_IF(kb, valid) {
                TERN_FOR(kb, j, lane, C, tern_int(32)) {
                    tern_v at = tern_add(base, j);
                    tern_v xhat = gk_lnb_xhat(x, at, j, b, w, mu, rs, from_out);
                    tern_v gj = tern_load(dout, at);
                    tern_v d = tern_sub(tern_sub(tern_mul(tern_load(w, j), gj), m1), tern_mul(xhat, m2));
                    tern_v o = tern_fma(d, rs, tern_load(dx, at));
                    tern_store(dx, at, o);
                    /* the forward's output, as the forward's generic path computes it */
                    if (with_out) tern_store(out, at, tern_fma(xhat, tern_load(w, j), tern_load(b, j)));
                    tern_v pw = tern_add(pbase, j), pb = tern_add(pw, C);
                    tern_store(partial, pw, tern_fma(gj, xhat, tern_load(partial, pw)));
                    tern_store(partial, pb, tern_add(tern_load(partial, pb), gj));
                    if (with_dsum) {
                        tern_v pd = tern_add(pb, C);
                        tern_store(partial, pd, tern_add(tern_load(partial, pd), o));
                    }
                }
            }
        }
    }
}
