/* Token + position embedding, forward and backward.
 *
 * embed_backward is deterministic without float atomics (dwte may be bf16, which has
 * none): embed_sort orders the rows by (token, row) by rank counting (a row's place is the
 * number of rows with a smaller token plus the earlier rows with the same token; O(BT^2)
 * comparisons of i32 held in shared memory, about 0.3 G for B*T = 16384, a few tens of
 * microseconds on a large GPU), then one SIMD group per distinct token sums that token's
 * rows in row order and adds the sum into dwte once. dwpe: one thread per (t, channels)
 * sums over the batch. */
#include <stdint.h>

#include "kernels/kutil.h"

/* Spec: t[0] out, t[1] wte, t[2] wpe; n[0] = W; n[1] = 1 when pos is present; n[2] = 1 when
 * there is no position table (Llama: out = wte[token]; then no wpe and no pos parameter).
 * Parameters: out, tokens, wte, [wpe], [pos], fault, BT, T, C, V (wte rows), maxT (wpe rows).
 * One thread per W channels of a row. */
void gk_trace_embed(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0];
    bool has_wpe = s->n[2] == 0;
    bool has_pos = has_wpe && s->n[1] != 0;
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v tokens = tern_param_buf(kb, "tokens", TERN_T_I32, TERN_READ);
    tern_v wte = ku_buf(kb, "wte", s->t[1], TERN_READ);
    tern_v wpe = has_wpe ? ku_buf(kb, "wpe", s->t[2], TERN_READ) : tern_int(0);
    tern_v pos = has_pos ? tern_param_buf(kb, "pos", TERN_T_I32, TERN_READ) : tern_int(0);
    tern_v fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    tern_v BT = tern_param_scalar(kb, "BT", TERN_T_I32);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v V = tern_param_scalar(kb, "V", TERN_T_I32);
    tern_v maxT = tern_param_scalar(kb, "maxT", TERN_T_I32);
    tern_wait_previous(kb); /* the tokens come from the previous kernel (sampling) */

    tern_v gid = tern_global_id(kb, 0);
    tern_v cpr = tern_div(C, tern_int(W)); /* chunks per row */
    tern_v row = tern_div(gid, cpr);
    tern_v col = tern_mul(tern_rem(gid, cpr), tern_int(W));
    TERN_IF(kb, tern_lt(row, BT)) {
        tern_v tok = tern_load(tokens, row);
        tern_v p0 = has_pos ? tern_load(pos, tern_int(0)) : tern_i32(0);
        tern_v tok_ok = tern_land(tern_ge(tok, tern_int(0)), tern_lt(tok, V));
        tern_v pos_ok = has_wpe ? tern_land(tern_ge(p0, tern_int(0)), tern_le(p0, tern_sub(maxT, T))) : tern_bool(true);
        TERN_IF(kb, tern_land(tok_ok, pos_ok)) {
            tern_v p = tern_add(p0, tern_rem(row, T));
            tern_v e[8], q[8];
            ku_load(wte, tern_add(tern_mul(tok, C), col), W, e);
            if (has_wpe) {
                ku_load(wpe, tern_add(tern_mul(p, C), col), W, q);
                for (int j = 0; j < W; j++) e[j] = tern_add(e[j], q[j]);
            }
            ku_store(out, tern_add(tern_mul(row, C), col), W, e);
        }
        TERN_IF(kb, tern_land(tern_lnot(tok_ok), tern_eq(col, tern_int(0)))) {
            ku_fault(kb, fault, GK_FAULT_EMBED_TOKEN, row, tok, V);
        }
        if (has_wpe) {
            TERN_IF(kb, tern_land(tern_lnot(pos_ok), tern_eq(gid, tern_int(0)))) {
                ku_fault(kb, fault, GK_FAULT_EMBED_POS, T, p0, maxT);
            }
        }
    }
}

/* The packed sort key of row j: (token << 16) | j as u32, tokens outside [0, V) as 0xffff
 * (past every valid one, which V <= 0xffff keeps apart); rows j >= n as 0xffffffff, which no
 * key is above. */
static tern_v sort_key(tern_v tokens, tern_v j, tern_v n, tern_v V) {
    tern_v tok = tern_load(tokens, tern_min(j, tern_sub(n, tern_int(1))));
    tern_v ok = tern_land(tern_ge(tok, tern_int(0)), tern_lt(tok, V));
    tern_v t16 = tern_cast(tern_select(ok, tok, tern_int(0xffff)), TERN_T_U32);
    tern_v key = tern_or(tern_shl(t16, tern_u32(16)), tern_cast(j, TERN_T_U32));
    return tern_select(tern_lt(j, n), key, tern_u32(0xffffffffu));
}

/* The packed form's count (spec n[0] = 1; V <= 0xffff, n <= 0x10000): rows j of the part
 * with key(j) < key(i), one unsigned comparison a pair and four keys a shared load, where
 * the general form compares tokens and rows apart (on the H200: 228 us for GPT-2's 16,384
 * rows, run 25). */
static void sort_count_packed(tern_kb *kb, tern_v tokens, tern_v n, tern_v j0, tern_v j1, tern_v i, tern_v place) {
    tern_v V = tern_param_scalar(kb, "V", TERN_T_I32);
    tern_v tile = tern_shared(kb, "tile", TERN_T_U32, GK_SORT_GROUP);
    tern_v local = tern_local_id(kb, 0);
    tern_v mine = sort_key(tokens, i, n, V);
    TERN_FOR(kb, t0, j0, j1, tern_int(GK_SORT_GROUP)) {
        /* rows past the part (or past n) as 0xffffffff: below no key */
        tern_v j = tern_add(t0, local);
        tern_store(tile, local, sort_key(tokens, j, tern_min(n, j1), V));
        tern_barrier(kb);
        TERN_FOR(kb, q, tern_int(0), tern_int(GK_SORT_GROUP), tern_int(4)) {
            tern_v other[4];
            tern_load_vec(tile, q, 4, other);
            tern_v c = tern_i32(0);
            for (int u = 0; u < 4; u++) c = tern_add(c, tern_select(tern_lt(other[u], mine), tern_i32(1), tern_i32(0)));
            tern_assign(place, tern_add(place, c));
        }
        tern_barrier(kb);
    }
}

/* The general form's count: rows j of the part before row i in (token, row) order. */
static void sort_count_general(tern_kb *kb, tern_v tokens, tern_v n, tern_v j0, tern_v j1, tern_v i, tern_v place) {
    tern_v tile = tern_shared(kb, "tile", TERN_T_I32, GK_SORT_GROUP);
    tern_v local = tern_local_id(kb, 0);
    tern_v mine = tern_load(tokens, tern_min(i, tern_sub(n, tern_int(1))));
    tern_v end = tern_min(n, j1);
    TERN_FOR(kb, t0, j0, end, tern_int(GK_SORT_GROUP)) {
        tern_v j = tern_add(t0, local);
        tern_store(tile, local, tern_load(tokens, tern_min(j, tern_sub(n, tern_int(1)))));
        tern_barrier(kb);
        tern_v len = tern_min(tern_int(GK_SORT_GROUP), tern_sub(end, t0));
        TERN_FOR(kb, q, tern_int(0), len, tern_int(1)) {
            tern_v other = tern_load(tile, q);
            tern_v before = tern_lor(tern_lt(other, mine),
                                     tern_land(tern_eq(other, mine), tern_lt(tern_add(t0, q), i)));
            tern_assign(place, tern_add(place, tern_select(before, tern_i32(1), tern_i32(0))));
        }
        tern_barrier(kb);
    }
}

/* Parameters: tokens, partial, n, per[, V]. The rank of row i in (token, row) order,
 * place(i) = #{j : tokens[j] < tokens[i]} + #{j < i : tokens[j] == tokens[i]}, counted in
 * parts: group (x, y) counts over rows j in [y per, (y + 1) per) for its rows i, into
 * partial[y n + i] (EMBED_SORT_SCATTER adds the parts). One thread per row i; tiles of
 * tokens in shared. The parts are what fills the GPU: one part is 64 groups for GPT-2's
 * 16,384 rows, each comparing against all of them. Spec n[0] = 1: the packed form (above),
 * which orders tokens outside [0, V) after the valid ones (still each token's rows together,
 * in row order). */
void gk_trace_embed_sort(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    tern_v tokens = tern_param_buf(kb, "tokens", TERN_T_I32, TERN_READ);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_I32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v per = tern_param_scalar(kb, "per", TERN_T_I32);
    tern_v i = tern_global_id(kb, 0);
    tern_v part = tern_group_id(kb, 1);
    tern_v j0 = tern_mul(part, per), j1 = tern_add(j0, per);
    tern_v place = tern_var(kb, "place", tern_i32(0));
    if (s->n[0]) sort_count_packed(kb, tokens, n, j0, j1, i, place);
    else sort_count_general(kb, tokens, n, j0, j1, i, place);
    TERN_IF(kb, tern_lt(i, n)) { tern_store(partial, tern_add(tern_mul(part, n), i), place); }
}

/* Parameters: partial, perm, n, parts. perm[place(i)] = i, place(i) the sum of row i's
 * parts. One thread per row. */
void gk_trace_embed_sort_scatter(tern_kb *kb, void *spec) {
    (void)spec;
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_I32, TERN_READ);
    tern_v perm = tern_param_buf(kb, "perm", TERN_T_I32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v parts = tern_param_scalar(kb, "parts", TERN_T_I32);
    tern_v i = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(i, n)) {
        tern_v place = tern_var(kb, "place", tern_i32(0));
        TERN_FOR(kb, p, tern_int(0), parts, tern_int(1)) {
            tern_assign(place, tern_add(place, tern_load(partial, tern_add(tern_mul(p, n), i))));
        }
        tern_store(perm, place, i);
    }
}

/* Spec: t[0] dwte, t[1] dout; n[0] = W. Parameters: dwte, dout, tokens, perm, fault, BT,
 * C, V. SIMD group p (GK_LN_ROWS per group) takes sorted row p; grid.y: channel chunks of
 * 32 W. The first row of each token's run sums the run and adds it to dwte. */
void gk_trace_embed_backward_wte(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0];
    tern_v dwte = ku_buf(kb, "dwte", s->t[0], TERN_READ_WRITE);
    tern_v dout = ku_buf(kb, "dout", s->t[1], TERN_READ);
    tern_v tokens = tern_param_buf(kb, "tokens", TERN_T_I32, TERN_READ);
    tern_v perm = tern_param_buf(kb, "perm", TERN_T_I32, TERN_READ);
    tern_v fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    tern_v BT = tern_param_scalar(kb, "BT", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v V = tern_param_scalar(kb, "V", TERN_T_I32);

    tern_v lane = tern_simd_lane(kb);
    tern_v p = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(GK_LN_ROWS)), tern_simd_group(kb));
    tern_v chunk = tern_group_id(kb, 1);
    tern_v col = tern_mul(tern_add(tern_mul(chunk, tern_int(32)), lane), tern_int(W));
    tern_v last = tern_sub(BT, tern_int(1));
    TERN_IF(kb, tern_lt(p, BT)) {
        tern_v v = tern_load(tokens, tern_load(perm, p));
        tern_v prev = tern_load(tokens, tern_load(perm, tern_max(tern_sub(p, tern_int(1)), tern_int(0))));
        tern_v leader = tern_lor(tern_eq(p, tern_int(0)), tern_ne(prev, v));
        tern_v ok = tern_land(tern_ge(v, tern_int(0)), tern_lt(v, V));
        TERN_IF(kb, tern_land(leader, tern_land(ok, tern_lt(col, C)))) {
            tern_v acc[8];
            for (int j = 0; j < W; j++) acc[j] = tern_var(kb, "acc", tern_f32(0.0f));
            tern_v q = tern_var(kb, "q", p);
            TERN_WHILE(kb, tern_land(tern_lt(q, BT),
                                     tern_eq(tern_load(tokens, tern_load(perm, tern_min(q, last))), v))) {
                tern_v g[8];
                ku_load(dout, tern_add(tern_mul(tern_load(perm, q), C), col), W, g);
                for (int j = 0; j < W; j++) tern_assign(acc[j], tern_add(acc[j], g[j]));
                tern_assign(q, tern_add(q, tern_int(1)));
            }
            tern_v at = tern_add(tern_mul(v, C), col);
            tern_v o[8];
            ku_load(dwte, at, W, o);
            for (int j = 0; j < W; j++) o[j] = tern_add(o[j], acc[j]);
            ku_store(dwte, at, W, o);
        }
        TERN_IF(kb, tern_land(tern_land(leader, tern_lnot(ok)),
                              tern_land(tern_eq(col, tern_int(0)), tern_eq(chunk, tern_int(0))))) {
            ku_fault(kb, fault, GK_FAULT_EMBED_BACKWARD_TOKEN, tern_load(perm, p), v, V);
        }
    }
}

/* Spec: t[0] dwpe, t[1] dout; n[0] = W. Parameters: dwpe, dout, B, T, C.
 * dwpe[t, c..] += sum over b of dout[b T + t, c..]; one thread per W channels. */
void gk_trace_embed_backward_wpe(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0];
    tern_v dwpe = ku_buf(kb, "dwpe", s->t[0], TERN_READ_WRITE);
    tern_v dout = ku_buf(kb, "dout", s->t[1], TERN_READ);
    tern_v B = tern_param_scalar(kb, "B", TERN_T_I32);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v gid = tern_global_id(kb, 0);
    tern_v cpr = tern_div(C, tern_int(W));
    tern_v t = tern_div(gid, cpr);
    tern_v col = tern_mul(tern_rem(gid, cpr), tern_int(W));
    TERN_IF(kb, tern_lt(t, T)) {
        tern_v acc[8];
        for (int j = 0; j < W; j++) acc[j] = tern_var(kb, "acc", tern_f32(0.0f));
        tern_v rowC = tern_mul(T, C);
        TERN_FOR(kb, b, tern_int(0), B, tern_int(1)) {
            tern_v g[8];
            ku_load(dout, tern_add(tern_add(tern_mul(b, rowC), tern_mul(t, C)), col), W, g);
            for (int j = 0; j < W; j++) tern_assign(acc[j], tern_add(acc[j], g[j]));
        }
        tern_v at = tern_add(tern_mul(t, C), col);
        tern_v o[8];
        ku_load(dwpe, at, W, o);
        for (int j = 0; j < W; j++) o[j] = tern_add(o[j], acc[j]);
        ku_store(dwpe, at, W, o);
    }
}
