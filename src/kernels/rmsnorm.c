/* RMS normalisation (Llama's RMSNorm), forward and backward: one SIMD group per row,
 * GK_LN_ROWS rows per threadgroup, statistics in f32 with SIMD reductions, as layernorm.c.
 *
 *   forward   rrms = 1 / sqrt(mean(x^2) + eps);  out = (x rrms) w
 *   backward  xhat = x rrms;  dx += rrms (w dout - xhat mean(w dout xhat));
 *             partial[s, :] = sum over SIMD group s's rows of dout xhat (dw's partial sums)
 *
 * Spec (both): n[0] = W, the vector width; n[1] = C when the row is register-resident
 * (C % (32 W) == 0 and C / 32 <= GK_LN_MAX_PER_LANE: loops unroll, x is read once), 0 for
 * the generic path (C a runtime value, x re-read per pass). Forward: t[0] out, t[1] x, t[2] w;
 * n[2] = 1 to store rrms; n[3] = S >= 1 for few rows (decoding), S SIMD groups a row (see
 * the forward), 0 otherwise. Backward: t[0] dx, t[1] dout, t[2] x, t[3] w.
 *
 * SIMD reductions need the whole threadgroup, so a SIMD group past the last row computes
 * on the last row and stores nothing. */
#include "kernels/kutil.h"

/* Column of chunk k for lane `lane` of the L lanes that share a row (32, or 32 S when S SIMD
 * groups do): (32 S k + lane) W, as gk_ln_row_col for L = 32. */
static tern_v rms_col(tern_v lane, int k, int L, int W) {
    return tern_mul(tern_add(tern_int(k * L), lane), tern_int(W));
}

/* Forward. Parameters: out, x, w, [rrms], rows, C, eps. With n[3] = S >= 1 (few rows, the
 * register path) w is loaded with x, its latency under x's rather than after the sums (a
 * decoding step's one row is that latency and little else), and prefetched before the wait;
 * with S > 1 a group of S SIMD groups takes one row, each lane holding C / (32 S) of its
 * values, and the S sums meet in threadgroup memory. */
void gk_trace_rmsnorm(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0], Cc = s->n[1], S = s->n[3] > 1 ? s->n[3] : 1;
    bool with_rrms = s->n[2] & 1, few = s->n[3] >= 1 && Cc, split = few && S > 1;
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[1], TERN_READ);
    tern_v w = ku_buf(kb, "w", s->t[2], TERN_READ);
    tern_v rrms = with_rrms ? tern_param_buf(kb, "rrms", TERN_T_F32, TERN_WRITE) : tern_int(0);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v Cv = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v eps = tern_param_scalar(kb, "eps", TERN_T_F32);

    tern_v lane = tern_simd_lane(kb), sg = tern_simd_group(kb);
    tern_v row = split ? tern_group_id(kb, 0) : tern_add(tern_mul(tern_group_id(kb, 0), tern_int(GK_LN_ROWS)), sg);
    /* this lane among the row's L lanes, and whether it finishes the row (rrms) */
    int L = split ? 32 * S : 32;
    tern_v rl = split ? tern_add(tern_mul(sg, tern_int(32)), lane) : lane;
    tern_v valid = tern_lt(row, rows);
    tern_v rowc = tern_min(row, tern_sub(rows, tern_int(1)));
    tern_v C = Cc ? tern_i32(Cc) : Cv;
    tern_v base = tern_mul(rowc, C);
    tern_v Cf = tern_cast(C, TERN_T_F32);
    int chunks = Cc ? Cc / L / W : 0, per = chunks * W;
    /* few: w into L2 while the kernel that writes x finishes (CUDA launches this early) */
    for (int k = 0; few && k < chunks; k++) tern_prefetch(w, rms_col(rl, k, L, W));
    tern_wait_previous(kb);
    tern_v r;
    if (Cc) {
        tern_v xv[GK_LN_MAX_PER_LANE], wv[GK_LN_MAX_PER_LANE];
        for (int k = 0; k < chunks; k++) {
            ku_load(x, tern_add(base, rms_col(rl, k, L, W)), W, xv + k * W);
            if (few) ku_load(w, rms_col(rl, k, L, W), W, wv + k * W);
        }
        tern_v ss = tern_f32(0.0f);
        for (int j = 0; j < per; j++) ss = j ? tern_fma(xv[j], xv[j], ss) : tern_mul(xv[0], xv[0]);
        ss = tern_simd_sum(ss);
        if (split) { /* the S SIMD groups' sums, added in order */
            tern_v red = tern_shared(kb, "red", TERN_T_F32, (size_t)S);
            TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(red, sg, ss); }
            tern_barrier(kb);
            ss = tern_load(red, tern_int(0));
            for (int p = 1; p < S; p++) ss = tern_add(ss, tern_load(red, tern_int(p)));
        }
        r = tern_div(tern_f32(1.0f), tern_sqrt(tern_add(tern_div(ss, Cf), eps)));
        TERN_IF(kb, valid) {
            for (int k = 0; k < chunks; k++) {
                tern_v col = rms_col(rl, k, L, W), o[8];
                if (!few) ku_load(w, col, W, wv + k * W);
                for (int j = 0; j < W; j++) o[j] = tern_mul(tern_mul(xv[k * W + j], r), wv[k * W + j]);
                ku_store(out, tern_add(base, col), W, o);
            }
        }
    } else {
        tern_v ss = tern_var(kb, "ss", tern_f32(0.0f));
        TERN_FOR(kb, j, lane, C, tern_int(32)) {
            tern_v xj = tern_load(x, tern_add(base, j));
            tern_assign(ss, tern_fma(xj, xj, ss));
        }
        r = tern_div(tern_f32(1.0f), tern_sqrt(tern_add(tern_div(tern_simd_sum(ss), Cf), eps)));
        TERN_IF(kb, valid) {
            TERN_FOR(kb, j, lane, C, tern_int(32)) {
                tern_v at = tern_add(base, j);
                tern_store(out, at, tern_mul(tern_mul(tern_load(x, at), r), tern_load(w, j)));
            }
        }
    }
    if (with_rrms) {
        TERN_IF(kb, tern_land(valid, tern_eq(rl, tern_int(0)))) { tern_store(rrms, row, r); }
    }
}

/* Backward. Parameters: dx, partial, dout, x, w, rrms, rows, C, S (row teams in the grid),
 * iters = ceil(rows / S). n[4] = R: on the register path a team of R SIMD groups shares each
 * row (gk_lnb_team, as layernorm_backward: 1, or 2 or 4 for wide rows; 0 reads as 1). Team s
 * takes rows s, s + S, ... and writes its dw partial sums to partial[s, :] (f32 [S, C]),
 * which partial_add then adds into dw in a fixed order. */
void gk_trace_rmsnorm_backward(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0], Cc = s->n[1], R = s->n[4] > 1 ? s->n[4] : 1;
    tern_v dx = ku_buf(kb, "dx", s->t[0], TERN_READ_WRITE);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, Cc ? TERN_WRITE : TERN_READ_WRITE);
    tern_v dout = ku_buf(kb, "dout", s->t[1], TERN_READ);
    tern_v x = ku_buf(kb, "x", s->t[2], TERN_READ);
    tern_v w = ku_buf(kb, "w", s->t[3], TERN_READ);
    tern_v rrms = tern_param_buf(kb, "rrms", TERN_T_F32, TERN_READ);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v Cv = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v S = tern_param_scalar(kb, "S", TERN_T_I32);
    tern_v iters = tern_param_scalar(kb, "iters", TERN_T_I32);

    tern_v lane = tern_simd_lane(kb), warp = tern_simd_group(kb);
    /* the row team: R SIMD groups of one group; part q holds every R-th stretch of 32 W
     * columns (R a power of two) */
    int log_r = R == 4 ? 2 : R == 2 ? 1 : 0;
    tern_v q = tern_and(warp, tern_int(R - 1));
    tern_v sg = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(GK_LN_ROWS / R)), tern_shr(warp, tern_int(log_r)));
    tern_v C = Cc ? tern_i32(Cc) : Cv;
    tern_v Cf = tern_cast(C, TERN_T_F32);
    tern_v pbase = tern_mul(sg, C);
    tern_v last = tern_sub(rows, tern_int(1));
    tern_wait_previous(kb);

    if (Cc) {
        int L = 32 * R, chunks = Cc / L / W, per = chunks * W;
        tern_v rl = tern_add(tern_mul(q, tern_int(32)), lane); /* this lane among the row's L */
        tern_v wv[GK_LN_MAX_PER_LANE], dw[GK_LN_MAX_PER_LANE];
        for (int k = 0; k < chunks; k++) ku_load(w, rms_col(rl, k, L, W), W, wv + k * W);
        for (int j = 0; j < per; j++) dw[j] = tern_var(kb, "dw", tern_f32(0.0f));
        /* a team's row sums meet here: [iteration parity][SIMD group], as layernorm_backward */
        tern_v xch = R > 1 ? tern_shared(kb, "xch", TERN_T_F32, 2 * GK_LN_ROWS) : tern_int(0);
        TERN_FOR(kb, it, tern_int(0), iters, tern_int(1)) {
            tern_v row = tern_add(sg, tern_mul(it, S));
            tern_v valid = tern_lt(row, rows);
            tern_v rowc = tern_min(row, last);
            tern_v base = tern_mul(rowc, C);
            tern_v r = tern_load(rrms, rowc);
            /* every load of the row before any store (see layernorm_backward) */
            tern_v g[GK_LN_MAX_PER_LANE], xh[GK_LN_MAX_PER_LANE], o[GK_LN_MAX_PER_LANE];
            for (int k = 0; k < chunks; k++) {
                tern_v at = tern_add(base, rms_col(rl, k, L, W));
                ku_load(dout, at, W, g + k * W);
                ku_load(x, at, W, xh + k * W);
                ku_load(dx, at, W, o + k * W);
            }
            tern_v s_norm = tern_f32(0.0f);
            for (int j = 0; j < per; j++) {
                xh[j] = tern_mul(xh[j], r);
                g[j] = tern_select(valid, g[j], tern_f32(0.0f)); /* rows past the end add nothing */
                tern_v dn = tern_mul(wv[j], g[j]);
                s_norm = j ? tern_fma(dn, xh[j], s_norm) : tern_mul(dn, xh[j]);
                tern_assign(dw[j], tern_fma(g[j], xh[j], dw[j]));
            }
            s_norm = tern_simd_sum(s_norm);
            if (R > 1) {
                tern_v half = tern_mul(tern_and(it, tern_int(1)), tern_int(GK_LN_ROWS));
                TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(xch, tern_add(half, warp), s_norm); }
                tern_barrier(kb);
                /* the parts added in team order: every part gets the same sum */
                tern_v first = tern_add(half, tern_sub(warp, q));
                s_norm = tern_load(xch, first);
                for (int p = 1; p < R; p++) s_norm = tern_add(s_norm, tern_load(xch, tern_add(first, tern_int(p))));
            }
            tern_v m = tern_div(s_norm, Cf);
            TERN_IF(kb, valid) {
                for (int k = 0; k < chunks; k++) {
                    for (int j = 0; j < W; j++) {
                        int i = k * W + j;
                        o[i] = tern_fma(tern_sub(tern_mul(wv[i], g[i]), tern_mul(xh[i], m)), r, o[i]);
                    }
                    ku_store(dx, tern_add(base, rms_col(rl, k, L, W)), W, o + k * W);
                }
            }
        }
        for (int k = 0; k < chunks; k++) ku_store_f32(partial, tern_add(pbase, rms_col(rl, k, L, W)), W, dw + k * W);
    } else {
        TERN_FOR(kb, j, lane, C, tern_int(32)) { tern_store(partial, tern_add(pbase, j), tern_f32(0.0f)); }
        TERN_FOR(kb, it, tern_int(0), iters, tern_int(1)) {
            tern_v row = tern_add(sg, tern_mul(it, S));
            tern_v valid = tern_lt(row, rows);
            tern_v rowc = tern_min(row, last);
            tern_v base = tern_mul(rowc, C);
            tern_v r = tern_load(rrms, rowc);
            tern_v s_norm = tern_var(kb, "s_norm", tern_f32(0.0f));
            TERN_FOR(kb, j, lane, C, tern_int(32)) {
                tern_v at = tern_add(base, j);
                tern_v xhat = tern_mul(tern_load(x, at), r);
                tern_assign(s_norm, tern_fma(tern_mul(tern_load(w, j), tern_load(dout, at)), xhat, s_norm));
            }
            tern_v m = tern_div(tern_simd_sum(s_norm), Cf);
            TERN_IF(kb, valid) {
                TERN_FOR(kb, j, lane, C, tern_int(32)) {
                    tern_v at = tern_add(base, j);
                    tern_v xhat = tern_mul(tern_load(x, at), r);
                    tern_v gj = tern_load(dout, at);
                    tern_v d = tern_sub(tern_mul(tern_load(w, j), gj), tern_mul(xhat, m));
                    tern_store(dx, at, tern_fma(d, r, tern_load(dx, at)));
                    tern_v pw = tern_add(pbase, j);
                    tern_store(partial, pw, tern_fma(gj, xhat, tern_load(partial, pw)));
                }
            }
        }
    }
}
