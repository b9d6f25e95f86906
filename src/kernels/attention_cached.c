/* Attention over a KV cache, for decoding: one threadgroup of GK_AC_GROUP threads per
 * (b, h, t) new row. The group stores its row's key and value at position p0 + t of the
 * caches [B, NH, max_T, hs], then attends over positions 0 .. p0 + t in blocks of
 * GK_AC_GROUP positions: one thread per position computes a score, the group keeps an
 * online softmax, and the weighted sum of values is split over (dimension, slice of the
 * block) so each thread's reads of a value row are coalesced with its neighbours'.
 *
 * Positions >= p0 are read from qkv itself rather than from the cache: the group that
 * stores them may not have run yet, so no group ever reads a cache entry this launch
 * writes.
 *
 * Split (flash-decoding), for few rows (decoding one token: B NH groups, 12 for GPT-2, would
 * leave most of a GPU idle): S groups per row, group s attending over its S-th of the
 * positions 0 .. p0 + t; each writes its unnormalised output, running maximum and sum to
 * `partial` [rows, S, hs + 2] (f32) instead of out, and attention_cached_combine merges the
 * S parts of each row in split order (deterministic: no atomics). Only split 0 stores the
 * row's key and value.
 *
 * Spec: t[0] out, t[1] k_cache, t[2] v_cache, t[3] qkv; n[0] = hs, n[1] = W, n[2] = S (0 or 1:
 * no split). Parameters: out (split: partial), k_cache, v_cache, qkv, pos, fault, T, C, NH,
 * max_T, scale. Grid: B NH T S groups. */
#include <math.h>

#include "kernels/kutil.h"

#define LOG2E 1.4426950408889634f
#define AC_SIMD (GK_AC_GROUP / 32)

/* q . row over hs values of buf from `at`, q in threadgroup memory (every thread reads the
 * same q: broadcast reads, and no hs registers per thread, so 1024-thread groups fit). */
static tern_v dot_row(tern_v buf, tern_v at, tern_v qsh, int hs, int W) {
    tern_v acc = tern_f32(0.0f);
    for (int d = 0; d < hs; d += W) {
        tern_v k[8];
        ku_load(buf, tern_add(at, tern_int(d)), W, k);
        for (int e = 0; e < W; e++) {
            tern_v q = tern_load(qsh, tern_int(d + e));
            acc = d + e ? tern_fma(q, k[e], acc) : tern_mul(q, k[0]);
        }
    }
    return acc;
}

void gk_trace_attention_cached(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hs = s->n[0], W = s->n[1], S = s->n[2] > 1 ? s->n[2] : 1;
    int slices = GK_AC_GROUP / hs; /* hs <= GK_AC_GROUP */
    tern_v out = S > 1 ? tern_param_buf(kb, "partial", TERN_T_F32, TERN_WRITE) : ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v kc = ku_buf(kb, "k_cache", s->t[1], TERN_READ_WRITE);
    tern_v vc = ku_buf(kb, "v_cache", s->t[2], TERN_READ_WRITE);
    tern_v qkv = ku_buf(kb, "qkv", s->t[3], TERN_READ);
    tern_v pos = tern_param_buf(kb, "pos", TERN_T_I32, TERN_READ);
    tern_v fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v max_T = tern_param_scalar(kb, "max_T", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_v scratch = tern_shared(kb, "scratch", TERN_T_F32, AC_SIMD);
    tern_v ps = tern_shared(kb, "ps", TERN_T_F32, GK_AC_GROUP);
    tern_v qsh = tern_shared(kb, "q", TERN_T_F32, (size_t)hs);
    tern_wait_previous(kb); /* launched early (CUDA); everything it reads comes after */

    tern_v tid = tern_local_id(kb, 0);
    tern_v g = tern_group_id(kb, 0);
    tern_v row = S > 1 ? tern_div(g, tern_int(S)) : g; /* the new row (b, h, t) */
    tern_v part = S > 1 ? tern_rem(g, tern_int(S)) : tern_i32(0);
    tern_v t = tern_rem(row, T), bh = tern_div(row, T);
    tern_v b = tern_div(bh, NH), h = tern_rem(bh, NH);
    tern_v p0 = tern_load(pos, tern_int(0));
    tern_v ok = tern_land(tern_ge(p0, tern_int(0)), tern_le(p0, tern_sub(max_T, T)));
    TERN_IF(kb, tern_land(tern_lnot(ok), tern_land(tern_eq(g, tern_int(0)), tern_eq(tid, tern_int(0))))) {
        ku_fault(kb, fault, GK_FAULT_CACHED_POS, T, p0, max_T);
    }
    TERN_IF(kb, ok) {
        tern_v C3 = tern_mul(C, tern_int(3));
        tern_v hoff = tern_mul(h, tern_int(hs));
        tern_v qrow = tern_add(tern_mul(tern_add(tern_mul(b, T), t), C3), hoff);
        tern_v cache0 = tern_mul(tern_mul(bh, max_T), tern_int(hs)); /* [b, h, 0, 0] */
        /* keys and values of p0 .. p0 + T - 1 come from qkv rows b T .. */
        tern_v new0 = tern_add(tern_mul(tern_mul(b, T), C3), hoff);

        /* store this row's key and value (split 0's group) */
        int chunks = hs / W;
        for (int it = 0; it * GK_AC_GROUP < chunks; it++) {
            tern_v e = tern_add(tid, tern_int(it * GK_AC_GROUP));
            TERN_IF(kb, tern_land(tern_lt(e, tern_int(chunks)), tern_eq(part, tern_int(0)))) {
                tern_v d = tern_mul(e, tern_int(W));
                tern_v to = tern_add(tern_add(cache0, tern_mul(tern_add(p0, t), tern_int(hs))), d);
                tern_v x[8];
                ku_load(qkv, tern_add(tern_add(qrow, C), d), W, x);
                ku_store(kc, to, W, x);
                ku_load(qkv, tern_add(tern_add(qrow, tern_mul(C, tern_int(2))), d), W, x);
                ku_store(vc, to, W, x);
            }
        }

        tern_v c = tern_mul(scale, tern_f32(LOG2E));
        TERN_IF(kb, tern_lt(tid, tern_int(chunks))) {
            tern_v d = tern_mul(tid, tern_int(W));
            tern_v x[8];
            ku_load(qkv, tern_add(qrow, d), W, x);
            for (int e = 0; e < W; e++) tern_store(qsh, tern_add(d, tern_int(e)), tern_mul(x[e], c));
        }
        tern_barrier(kb);

        /* positions [lo, hi): all of 0 .. p0 + t, or this split's share of them */
        tern_v len = tern_add(tern_add(p0, t), tern_int(1));
        tern_v share = tern_div(tern_add(len, tern_int(S - 1)), tern_int(S));
        tern_v lo = tern_mul(part, share), hi = tern_min(len, tern_add(lo, share));
        tern_v m = tern_var(kb, "m", tern_f32(-INFINITY));
        tern_v l = tern_var(kb, "l", tern_f32(0.0f));
        tern_v od = tern_rem(tid, tern_int(hs)), slice = tern_div(tid, tern_int(hs));
        tern_v active = tern_lt(slice, tern_int(slices));
        tern_v o = tern_var(kb, "o", tern_f32(0.0f));
        TERN_FOR(kb, j0, lo, hi, tern_int(GK_AC_GROUP)) {
            tern_v j = tern_add(j0, tid);
            tern_v jc = tern_min(j, tern_sub(hi, tern_int(1)));
            tern_v sc = tern_var(kb, "score", tern_f32(0.0f));
            TERN_IF(kb, tern_lt(jc, p0)) {
                tern_assign(sc, dot_row(kc, tern_add(cache0, tern_mul(jc, tern_int(hs))), qsh, hs, W));
            }
            TERN_ELSE(kb) {
                tern_v at = tern_add(new0, tern_mul(tern_sub(jc, p0), C3));
                tern_assign(sc, dot_row(qkv, tern_add(at, C), qsh, hs, W));
            }
            tern_v live = tern_lt(j, hi);
            tern_v score = tern_select(live, sc, tern_f32(-INFINITY));
            tern_v bm = ku_group_reduce(kb, KU_MAX, score, scratch, AC_SIMD);
            tern_v m_new = tern_max(m, bm);
            tern_v corr = tern_exp2(tern_sub(m, m_new));
            tern_v p = tern_exp2(tern_sub(score, m_new));
            tern_v bs = ku_group_reduce(kb, KU_SUM, p, scratch, AC_SIMD);
            tern_assign(l, tern_fma(l, corr, bs));
            tern_assign(m, m_new);
            tern_store(ps, tid, p);
            tern_barrier(kb);
            TERN_IF(kb, active) {
                tern_v acc = tern_var(kb, "acc", tern_mul(o, corr));
                tern_v n = tern_min(tern_int(GK_AC_GROUP), tern_sub(hi, j0));
                /* block positions below `split` come from the cache, the rest from qkv: two
                 * loops without a branch inside, so the loads can run ahead */
                tern_v split = tern_max(tern_min(tern_sub(p0, j0), n), tern_int(0));
                tern_v vbase = tern_add(tern_add(cache0, tern_mul(j0, tern_int(hs))), od);
                TERN_FOR(kb, r, slice, split, tern_int(slices)) {
                    tern_v vx = tern_load(vc, tern_add(vbase, tern_mul(r, tern_int(hs))));
                    tern_assign(acc, tern_fma(tern_load(ps, r), vx, acc));
                }
                tern_v qbase = tern_add(tern_add(new0, tern_mul(tern_sub(j0, p0), C3)), tern_add(tern_mul(C, tern_int(2)), od));
                tern_v first_new = tern_add(split, tern_rem(tern_sub(tern_add(slice, tern_int(slices)), tern_rem(split, tern_int(slices))), tern_int(slices)));
                TERN_FOR(kb, r, first_new, n, tern_int(slices)) {
                    tern_v vx = tern_load(qkv, tern_add(qbase, tern_mul(r, C3)));
                    tern_assign(acc, tern_fma(tern_load(ps, r), vx, acc));
                }
                tern_assign(o, acc);
            }
            tern_barrier(kb);
        }
        /* a split's part of the output, partial [row, part, :]: the hs sums (below), then m
         * and l, stored here, before the barrier (PoCL 6 stored other work-groups' m and l
         * when these stores came after it, inside the tid < hs block). An empty split leaves
         * m = -inf, l = 0 and o = 0: weight 0 in the combine. */
        tern_v at_part = S > 1 ? tern_mul(tern_add(tern_mul(row, tern_int(S)), part), tern_int(hs + 2)) : tern_i32(0);
        if (S > 1) {
            TERN_IF(kb, tern_eq(tid, tern_int(0))) {
                tern_store(out, tern_add(at_part, tern_int(hs)), m);
                tern_store(out, tern_add(at_part, tern_int(hs + 1)), l);
            }
        }
        /* sum the slices */
        tern_store(ps, tid, o);
        tern_barrier(kb);
        TERN_IF(kb, tern_lt(tid, tern_int(hs))) {
            tern_v acc = tern_load(ps, tid);
            for (int sl = 1; sl < slices; sl++) acc = tern_add(acc, tern_load(ps, tern_add(tid, tern_int(sl * hs))));
            if (S > 1) {
                tern_store(out, tern_add(at_part, tid), acc);
            } else {
                tern_v at = tern_add(tern_mul(tern_add(tern_mul(b, T), t), C), tern_add(hoff, tid));
                tern_store(out, at, tern_div(acc, l));
            }
        }
    }
}

/* The split attention's second step: out[b, t, h hs + d] from the S parts of each row, in
 * split order: M = max m_s, out = (sum o_s[d] 2^(m_s - M)) / (sum l_s 2^(m_s - M)) (the
 * scores are in base-2 units). Split 0 always holds position 0, so M is finite.
 *
 * Spec: t[0] out; n[0] = hs, n[1] = S. Parameters: out, partial, pos, T, C, NH, max_T, rows
 * (B NH T). One thread per output element, groups of GK_EW_GROUP; nothing is written when
 * the positions are out of range (the first kernel recorded the fault). */
void gk_trace_attention_combine(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hs = s->n[0], S = s->n[1];
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_READ);
    tern_v pos = tern_param_buf(kb, "pos", TERN_T_I32, TERN_READ);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v max_T = tern_param_scalar(kb, "max_T", TERN_T_I32);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_wait_previous(kb);
    tern_v gid = tern_global_id(kb, 0);
    tern_v row = tern_div(gid, tern_int(hs)), d = tern_rem(gid, tern_int(hs));
    tern_v p0 = tern_load(pos, tern_int(0));
    tern_v ok = tern_land(tern_ge(p0, tern_int(0)), tern_le(p0, tern_sub(max_T, T)));
    TERN_IF(kb, tern_land(ok, tern_lt(row, rows))) {
        tern_v base = tern_mul(row, tern_int(S * (hs + 2)));
        tern_v ms[GK_AC_MAX_SPLITS];
        tern_v M = tern_f32(0.0f);
        for (int p = 0; p < S; p++) {
            ms[p] = tern_load(partial, tern_add(base, tern_int(p * (hs + 2) + hs)));
            M = p ? tern_max(M, ms[p]) : ms[0];
        }
        tern_v L = tern_f32(0.0f), O = tern_f32(0.0f);
        for (int p = 0; p < S; p++) {
            tern_v w = tern_exp2(tern_sub(ms[p], M));
            tern_v lp = tern_load(partial, tern_add(base, tern_int(p * (hs + 2) + hs + 1)));
            tern_v op = tern_load(partial, tern_add(base, tern_add(d, tern_int(p * (hs + 2)))));
            L = p ? tern_fma(lp, w, L) : tern_mul(lp, w);
            O = p ? tern_fma(op, w, O) : tern_mul(op, w);
        }
        tern_v t = tern_rem(row, T), bh = tern_div(row, T);
        tern_v b = tern_div(bh, NH), h = tern_rem(bh, NH);
        tern_v at = tern_add(tern_mul(tern_add(tern_mul(b, T), t), C), tern_add(tern_mul(h, tern_int(hs)), d));
        tern_store(out, at, tern_div(O, L));
    }
}
