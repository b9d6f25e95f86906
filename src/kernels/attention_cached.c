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
 * `partial` [rows, S, hs + 2] (f32), counts itself in on the row's counter (an atomic add
 * after a device fence), and the split that counts last merges the S parts into out in
 * split order (deterministic: no float atomics) and sets the counter back to zero. Only
 * split 0 stores the row's key and value. A split has at most 256 positions
 * when decoding GPT-2 (max_T 1024, 4 splits; 128 a pass), so its time is a chain of dependent
 * steps, not bandwidth; its kernel (trace_split) is built to keep that chain short: two round
 * trips to memory and one barrier a pass when decoding.
 *
 * Grouped key/value heads (spec n[6] = group = NH / KV > 1): qkv rows of (NH + 2 KV) hs
 * (attention.c's layout), caches [B, KV, max_T, hs]; query head h reads key/value head
 * h / group, and only the group's first head (h % group == 0) stores the new keys and values
 * (the others read the same rows from qkv). n[6] 0 or 1 is GPT-2's kernel, traced as before.
 *
 * Spec: t[0] out, t[1] k_cache, t[2] v_cache, t[3] qkv; n[0] = hs, n[1] = W, n[2] = S (0 or 1:
 * no split); split: n[3] threads per group, n[4] threads per position (kernels.h), n[5] = 1
 * when T = 1 (decoding); n[6] = group; n[7] = 1: the first pass loaded before the wait;
 * n[8] = 1: no merge, the parts left to the GEMV (kernels.h).
 * Parameters: out (split: partial), k_cache, v_cache, qkv, pos, fault, T, C, NH, max_T,
 * scale; split: then out and count (i32 [rows], zero before the launch and after it).
 * Grid: B NH T groups; split: (T S, NH, B). */
#include <math.h>

#include "kernels/qkv_join.h"

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

/* The kernel's parameters, in launch order. */
typedef struct cached_args {
    tern_v out, kc, vc, qkv, pos, fault, T, C, NH, max_T, scale;
    tern_v final, count; /* split: the output and the rows' counters of splits done */
    int group; /* query heads per key/value head (1: GPT-2) */
    /* grouped (set by heads_of): from a query head's channels in a row to its key/value
     * head's key and value, and the cache's head b KV + h / group */
    tern_v kshift, vshift, cache_head, stores;
} cached_args;

/* qkv's row stride: 3C, or C + 2 KV hs. */
static tern_v row_stride(const cached_args *a, int hs) {
    if (a->group == 1) return tern_mul(a->C, tern_int(3));
    return tern_add(a->C, tern_mul(tern_div(a->NH, tern_int(a->group)), tern_int(2 * hs)));
}

/* Query head h of sequence b (bh = b NH + h): the shifts from its query channels to its
 * key/value head's key and value in the same row, the cache head, and whether it stores. */
static void heads_of(cached_args *a, tern_v b, tern_v h, int hs) {
    if (a->group == 1) return;
    tern_v KV = tern_div(a->NH, tern_int(a->group)), g = tern_div(h, tern_int(a->group));
    tern_v back = tern_mul(tern_sub(g, h), tern_int(hs)); /* (g - h) hs, <= 0 */
    a->kshift = tern_add(a->C, back);
    a->vshift = tern_add(tern_add(a->C, tern_mul(KV, tern_int(hs))), back);
    a->cache_head = tern_add(tern_mul(b, KV), g);
    a->stores = tern_eq(tern_rem(h, tern_int(a->group)), tern_int(0));
}

/* The shift to the key (C) and to the value (2C) from a query row's channels. */
static tern_v key_shift(const cached_args *a) { return a->group == 1 ? a->C : a->kshift; }
static tern_v value_shift(const cached_args *a) {
    return a->group == 1 ? tern_mul(a->C, tern_int(2)) : a->vshift;
}

static cached_args cached_params(tern_kb *kb, const gk_spec *s, bool split) {
    cached_args a;
    a.out = split ? tern_param_buf(kb, "partial", TERN_T_F32, TERN_READ_WRITE) : ku_buf(kb, "out", s->t[0], TERN_WRITE);
    a.kc = ku_buf(kb, "k_cache", s->t[1], TERN_READ_WRITE);
    a.vc = ku_buf(kb, "v_cache", s->t[2], TERN_READ_WRITE);
    a.qkv = ku_buf(kb, "qkv", s->t[3], split && s->n[9] > 0 ? TERN_READ_WRITE : TERN_READ); /* joined: written */
    a.pos = tern_param_buf(kb, "pos", TERN_T_I32, TERN_READ);
    a.fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    a.T = tern_param_scalar(kb, "T", TERN_T_I32);
    a.C = tern_param_scalar(kb, "C", TERN_T_I32);
    a.NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    a.max_T = tern_param_scalar(kb, "max_T", TERN_T_I32);
    a.scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    a.group = s->n[6] > 1 ? s->n[6] : 1;
    a.final = split ? ku_buf(kb, "out", s->t[0], TERN_WRITE) : tern_int(0);
    a.count = split ? tern_param_buf(kb, "count", TERN_T_I32, TERN_READ_WRITE) : tern_int(0);
    return a;
}

/* Whether p0 .. p0 + T - 1 lie in the cache. */
static tern_v positions_in_cache(const cached_args *a, tern_v p0) {
    return tern_land(tern_ge(p0, tern_int(0)), tern_le(p0, tern_sub(a->max_T, a->T)));
}

/* p0 .. p0 + T - 1 must lie in the cache; the first group's first thread records the fault. */
static tern_v positions_ok(tern_kb *kb, const cached_args *a, tern_v p0) {
    tern_v ok = positions_in_cache(a, p0);
    tern_v first = tern_eq(tern_local_id(kb, 0), tern_int(0));
    for (int d = 0; d < 3; d++) first = tern_land(first, tern_eq(tern_group_id(kb, d), tern_int(0)));
    TERN_IF(kb, tern_land(tern_lnot(ok), first)) { ku_fault(kb, a->fault, GK_FAULT_CACHED_POS, a->T, p0, a->max_T); }
    return ok;
}

/* Not split: one group per row, GK_AC_GROUP threads. */
static void trace_rows(tern_kb *kb, const gk_spec *s) {
    int hs = s->n[0], W = s->n[1];
    int slices = GK_AC_GROUP / hs; /* hs <= GK_AC_GROUP */
    cached_args a = cached_params(kb, s, false);
    tern_v out = a.out, kc = a.kc, vc = a.vc, qkv = a.qkv, T = a.T, C = a.C;
    tern_v scratch = tern_shared(kb, "scratch", TERN_T_F32, AC_SIMD);
    tern_v ps = tern_shared(kb, "ps", TERN_T_F32, GK_AC_GROUP);
    tern_v qsh = tern_shared(kb, "q", TERN_T_F32, (size_t)hs);
    tern_wait_previous(kb); /* launched early (CUDA); everything it reads comes after */

    tern_v tid = tern_local_id(kb, 0);
    tern_v row = tern_group_id(kb, 0); /* the new row (b, h, t) */
    tern_v t = tern_rem(row, T), bh = tern_div(row, T);
    tern_v b = tern_div(bh, a.NH), h = tern_rem(bh, a.NH);
    tern_v p0 = tern_load(a.pos, tern_int(0));
    TERN_IF(kb, positions_ok(kb, &a, p0)) {
        heads_of(&a, b, h, hs);
        tern_v C3 = row_stride(&a, hs);
        tern_v hoff = tern_mul(h, tern_int(hs));
        tern_v qrow = tern_add(tern_mul(tern_add(tern_mul(b, T), t), C3), hoff);
        tern_v chead = a.group == 1 ? bh : a.cache_head;
        tern_v cache0 = tern_mul(tern_mul(chead, a.max_T), tern_int(hs)); /* [b, h, 0, 0] */
        /* keys and values of p0 .. p0 + T - 1 come from qkv rows b T .. */
        tern_v new0 = tern_add(tern_mul(tern_mul(b, T), C3), hoff);

        /* store this row's key and value (grouped: the group's first head) */
        int chunks = hs / W;
        if (a.group > 1) tern_if(kb, a.stores);
        for (int it = 0; it * GK_AC_GROUP < chunks; it++) {
            tern_v e = tern_add(tid, tern_int(it * GK_AC_GROUP));
            TERN_IF(kb, tern_lt(e, tern_int(chunks))) {
                tern_v d = tern_mul(e, tern_int(W));
                tern_v to = tern_add(tern_add(cache0, tern_mul(tern_add(p0, t), tern_int(hs))), d);
                tern_v x[8];
                ku_load(qkv, tern_add(tern_add(qrow, key_shift(&a)), d), W, x);
                ku_store(kc, to, W, x);
                ku_load(qkv, tern_add(tern_add(qrow, value_shift(&a)), d), W, x);
                ku_store(vc, to, W, x);
            }
        }
        if (a.group > 1) tern_end(kb);

        tern_v c = tern_mul(a.scale, tern_f32(LOG2E));
        TERN_IF(kb, tern_lt(tid, tern_int(chunks))) {
            tern_v d = tern_mul(tid, tern_int(W));
            tern_v x[8];
            ku_load(qkv, tern_add(qrow, d), W, x);
            for (int e = 0; e < W; e++) tern_store(qsh, tern_add(d, tern_int(e)), tern_mul(x[e], c));
        }
        tern_barrier(kb);

        /* positions [0, hi) */
        tern_v hi = tern_add(tern_add(p0, t), tern_int(1));
        tern_v m = tern_var(kb, "m", tern_f32(-INFINITY));
        tern_v l = tern_var(kb, "l", tern_f32(0.0f));
        tern_v od = tern_rem(tid, tern_int(hs)), slice = tern_div(tid, tern_int(hs));
        tern_v active = tern_lt(slice, tern_int(slices));
        tern_v o = tern_var(kb, "o", tern_f32(0.0f));
        TERN_FOR(kb, j0, tern_int(0), hi, tern_int(GK_AC_GROUP)) {
            tern_v j = tern_add(j0, tid);
            tern_v jc = tern_min(j, tern_sub(hi, tern_int(1)));
            tern_v sc = tern_var(kb, "score", tern_f32(0.0f));
            TERN_IF(kb, tern_lt(jc, p0)) {
                tern_assign(sc, dot_row(kc, tern_add(cache0, tern_mul(jc, tern_int(hs))), qsh, hs, W));
            }
            TERN_ELSE(kb) {
                tern_v at = tern_add(new0, tern_mul(tern_sub(jc, p0), C3));
                tern_assign(sc, dot_row(qkv, tern_add(at, key_shift(&a)), qsh, hs, W));
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
                tern_v qbase = tern_add(tern_add(new0, tern_mul(tern_sub(j0, p0), C3)), tern_add(value_shift(&a), od));
                tern_v first_new = tern_add(split, tern_rem(tern_sub(tern_add(slice, tern_int(slices)), tern_rem(split, tern_int(slices))), tern_int(slices)));
                TERN_FOR(kb, r, first_new, n, tern_int(slices)) {
                    tern_v vx = tern_load(qkv, tern_add(qbase, tern_mul(r, C3)));
                    tern_assign(acc, tern_fma(tern_load(ps, r), vx, acc));
                }
                tern_assign(o, acc);
            }
            tern_barrier(kb);
        }
        /* sum the slices */
        tern_store(ps, tid, o);
        tern_barrier(kb);
        TERN_IF(kb, tern_lt(tid, tern_int(hs))) {
            tern_v acc = tern_load(ps, tid);
            for (int sl = 1; sl < slices; sl++) acc = tern_add(acc, tern_load(ps, tern_add(tid, tern_int(sl * hs))));
            tern_v at = tern_add(tern_mul(tern_add(tern_mul(b, T), t), C), tern_add(hoff, tid));
            tern_store(out, at, tern_div(acc, l));
        }
    }
}

/* A part of q . k over n dimensions in four independent FMA chains: one chain would be the
 * split kernel's longest dependent step. */
static tern_v dot_part(const tern_v *q, const tern_v *k, int n) {
    tern_v acc[4] = {tern_f32(0.0f), tern_f32(0.0f), tern_f32(0.0f), tern_f32(0.0f)};
    for (int d = 0; d < n; d++) acc[d % 4] = d < 4 ? tern_mul(q[d], k[d]) : tern_fma(q[d], k[d], acc[d % 4]);
    if (n >= 4) return tern_add(tern_add(acc[0], acc[1]), tern_add(acc[2], acc[3]));
    tern_v sum = acc[0];
    for (int c = 1; c < n; c++) sum = tern_add(sum, acc[c]);
    return sum;
}

/* The split kernel's shape (kernels.h): G threads, TP per position, each holding DP = hs /
 * TP dimensions of q and of the position's key, P = G / TP positions per pass; a row's values
 * are dealt to CV lanes of WV dimensions, so a value thread takes K = CV / TP positions (its
 * slice) of a pass. */
typedef struct split_plan {
    int hs, W, S, G, TP, CV, WV, P, DP, K, NW;
    bool decode; /* T = 1 (spec n[5]): the only new position is the group's own row */
    int J;       /* joined q|k|v product (spec n[9]): the new position's groups a head; 0: none */
} split_plan;

/* A thread of the split kernel: its places, its raw part of q, its SIMD group's running
 * softmax (m, l, base 2) with the value sums of its lane o [WV], and a pass's loads. */
typedef struct split_thread {
    split_plan pl;
    const cached_args *a; /* the key and value shifts */
    tern_v kc, vc, qkv, C, C3, p0, c, cache0, new0;
    tern_v slot, qpart, vslice, vlane, lane;
    tern_v q[GK_AC_PART_MAX];
    tern_v m, l, o[GK_AC_PART_MAX];
    tern_v kx[GK_AC_PART_MAX], vx[GK_AC_PART_MAX]; /* a pass's key part [DP] and values [K, WV] */
} split_thread;

/* n values of position `pos`'s key (value: its value), from element `at` of its row: from
 * the cache, or (fresh) from qkv, the position being p0 or later. */
static void load_row(const split_thread *st, bool fresh, bool value, tern_v pos, tern_v at, int n, tern_v *out) {
    tern_v buf, from;
    if (fresh) {
        buf = st->qkv;
        tern_v chan = value ? value_shift(st->a) : key_shift(st->a);
        from = tern_add(tern_add(st->new0, tern_mul(tern_sub(pos, st->p0), st->C3)), tern_add(chan, at));
    } else {
        buf = value ? st->vc : st->kc;
        from = tern_add(tern_add(st->cache0, tern_mul(pos, tern_int(st->pl.hs))), at);
    }
    for (int d = 0; d < n; d += st->pl.W) ku_load(buf, tern_add(from, tern_int(d)), st->pl.W, out + d);
}

/* Sums x over the TP threads of a position (neighbouring lanes): every one gets the total. */
static tern_v position_sum(tern_v x, int TP) {
    for (int off = TP / 2; off >= 1; off /= 2) x = tern_add(x, tern_simd_shuffle_xor(x, tern_int(off)));
    return x;
}

/* 2: the loads of the pass at j0 (positions past `last` take the last one's: finite, weight
 * 0) into the variables kx [DP] (this thread's part of its position's key) and vx [K, WV]
 * (its slice's values): every load, then every assignment. */
static void pass_loads(split_thread *st, tern_v j0, tern_v last, bool fresh) {
    const split_plan *pl = &st->pl;
    int DP = pl->DP, WV = pl->WV, K = pl->K;
    tern_v kv[GK_AC_PART_MAX], vv[GK_AC_PART_MAX];
    tern_v j = tern_min(tern_add(j0, st->slot), last);
    load_row(st, fresh, false, j, tern_mul(st->qpart, tern_int(DP)), DP, kv);
    tern_v vj = tern_add(j0, tern_mul(st->vslice, tern_int(K)));
    tern_v vat = tern_mul(st->vlane, tern_int(WV));
    for (int i = 0; i < K; i++)
        load_row(st, fresh, true, tern_min(tern_add(vj, tern_int(i)), last), vat, WV, vv + i * WV);
    for (int d = 0; d < DP; d++) tern_assign(st->kx[d], kv[d]);
    for (int d = 0; d < K * WV; d++) tern_assign(st->vx[d], vv[d]);
}

/* 3: the pass at j0 of positions before `end`, its loads in kx and vx: the scores (base 2),
 * and the SIMD group's online softmax, no barrier. */
static void pass_update(split_thread *st, tern_v j0, tern_v end) {
    const split_plan *pl = &st->pl;
    int WV = pl->WV, K = pl->K;
    tern_v j = tern_add(j0, st->slot);
    tern_v sc = tern_mul(position_sum(dot_part(st->q, st->kx, pl->DP), pl->TP), st->c);
    tern_v live = tern_lt(j, end);
    tern_v score = tern_select(live, sc, tern_f32(-INFINITY));
    tern_v m_new = tern_max(st->m, tern_simd_max(score));
    /* no live position in this SIMD group yet: nothing to rescale (and -inf - -inf would be
     * NaN) */
    tern_v none = tern_eq(m_new, tern_f32(-INFINITY));
    tern_v corr = tern_select(none, tern_f32(1.0f), tern_exp2(tern_sub(st->m, m_new)));
    tern_v p = tern_select(live, tern_exp2(tern_sub(score, m_new)), tern_f32(0.0f));
    tern_v once = tern_select(tern_eq(st->qpart, tern_int(0)), p, tern_f32(0.0f)); /* each position once */
    tern_assign(st->l, tern_fma(st->l, corr, tern_simd_sum(once)));
    tern_assign(st->m, m_new);
    /* the slice's weights: position vj + i is scored by lanes (lane - vlane) + i TP .. */
    tern_v pv[32];
    tern_v lane0 = tern_sub(st->lane, st->vlane);
    for (int i = 0; i < K; i++) pv[i] = tern_simd_shuffle(p, tern_add(lane0, tern_int(i * pl->TP)));
    for (int d = 0; d < WV; d++) {
        tern_v acc = tern_mul(st->o[d], corr);
        for (int i = 0; i < K; i++) acc = tern_fma(pv[i], st->vx[i * WV + d], acc);
        tern_assign(st->o[d], acc);
    }
}

/* Positions [start, end) in passes of P, every one from the cache (rows < p0) or every one
 * (fresh) from qkv (rows >= p0): one source, so a pass's loads need no branch per row (the
 * per-row branches' loads, joined in registers, were issued one branch after another). The
 * loads have blocks of their own, the first pass's before the loop and the next one's at the
 * end of each pass: in the pass's body (also with both sources loaded and selected per row)
 * ptxas interleaved them with the arithmetic to save registers, issuing them in waves, a
 * round trip each. The passes run inside the first loads' branch, so that the variables'
 * initial values are never used (and cost nothing). `loaded`: the first pass's loads were
 * issued before the kernel's wait (trace_split, spec n[7]). */
static void split_pass(tern_kb *kb, split_thread *st, tern_v start, tern_v end, bool fresh, bool loaded) {
    tern_v last = tern_sub(end, tern_int(1));
    TERN_IF(kb, tern_lt(start, end)) {
        if (!loaded) pass_loads(st, start, last, fresh); /* 2 */
        TERN_FOR(kb, j0, start, end, tern_int(st->pl.P)) {
            pass_update(st, j0, end);
            tern_v next = tern_add(j0, tern_int(st->pl.P));
            TERN_IF(kb, tern_lt(next, end)) { pass_loads(st, next, last, fresh); }
        }
    }
}

/* Step 5: out[out_row + d] for d < hs from the S parts of a row at `base` of partial
 * ([S, hs + 2]), merged in split order (ku_attention_merge; deterministic: no float
 * atomics). */
static void merge_parts(tern_kb *kb, tern_v partial, tern_v base, tern_v out, tern_v out_row, tern_v tid, int hs,
                        int S, int G) {
    TERN_FOR(kb, d, tid, tern_int(hs), tern_int(G)) {
        tern_store(out, tern_add(out_row, d), ku_attention_merge(partial, base, d, hs, S));
    }
}

/* The running softmax (m, l, o) and a pass's loads (kx, vx), as variables. */
static void split_vars(tern_kb *kb, split_thread *st) {
    const split_plan *pl = &st->pl;
    st->m = tern_var(kb, "m", tern_f32(-INFINITY));
    st->l = tern_var(kb, "l", tern_f32(0.0f));
    for (int d = 0; d < pl->WV; d++) st->o[d] = tern_var(kb, "o", tern_f32(0.0f));
    for (int d = 0; d < pl->DP; d++) st->kx[d] = tern_var(kb, "k", tern_f32(0.0f));
    for (int d = 0; d < pl->K * pl->WV; d++) st->vx[d] = tern_var(kb, "v", tern_f32(0.0f));
}

/* Where row (b, bh, t)'s keys and values are (the cache's head, and qkv's rows for positions
 * p0 ..), and split `part`'s positions [lo, hi): its share of 0 .. p0 + t (empty for late
 * splits of short rows: then m = -inf, l = 0, o = 0, weight 0 in the combine). */
static void split_share(split_thread *st, const cached_args *a, tern_v b, tern_v bh, tern_v t, tern_v part,
                        tern_v hoff, tern_v *lo, tern_v *hi) {
    int hs = st->pl.hs, S = st->pl.S;
    st->cache0 = tern_mul(tern_mul(a->group == 1 ? bh : a->cache_head, a->max_T), tern_int(hs)); /* [b, h, 0, 0] */
    /* keys and values of p0 .. p0 + T - 1 come from qkv rows b T .. */
    st->new0 = tern_add(tern_mul(tern_mul(b, a->T), st->C3), hoff);
    /* joined: the cached positions only (the new one is a part of its own) */
    tern_v len = st->pl.J ? st->p0 : tern_add(tern_add(st->p0, t), tern_int(1));
    tern_v share = tern_div(tern_add(len, tern_int(S - 1)), tern_int(S));
    *lo = tern_mul(part, share);
    *hi = tern_min(len, tern_add(*lo, share));
}

/* Step 5: the split that finishes its row last merges the row's S parts into out at out_row:
 * each thread's partial stores, then its fence, then (after the barrier) the group (row,
 * part) g counts itself in; the last one fences again and reads every part. */
static void merge_last(tern_kb *kb, const cached_args *a, tern_v g, tern_v out_row, tern_v tid, tern_v last,
                       const split_plan *pl) {
    int S = pl->S, hs = pl->hs;
    tern_fence_device(kb);
    tern_barrier(kb);
    tern_v row = tern_div(g, tern_int(S));
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        tern_v done = tern_atomic_add(a->count, row, tern_int(1));
        tern_store(last, tern_int(0), tern_select(tern_eq(done, tern_int(S - 1)), tern_int(1), tern_int(0)));
    }
    tern_barrier(kb);
    TERN_IF(kb, tern_eq(tern_load(last, tern_int(0)), tern_int(1))) {
        tern_fence_device(kb);
        merge_parts(kb, a->out, tern_mul(row, tern_int(S * (hs + 2))), a->final, out_row, tid, hs, S, pl->G);
        TERN_IF(kb, tern_eq(tid, tern_int(0))) { tern_store(a->count, row, tern_int(0)); } /* for the next launch */
    }
}

/* Joined (spec n[9] = J): the q|k|v product's columns a group needs, after the wait (every
 * thread: barriers). A head's S attention groups (gx < S) each compute the head's q [hs]
 * into qsh; its J new-position groups (gx = S + js) the slice js of DS = hs / J dimensions of
 * the head's q, k and v into nsh [3 DS] (q, then k, then v). Both in qkv's dtype, as the
 * product would have stored them. */
static void join_columns(tern_kb *kb, qkv_join *jn, const split_plan *pl, tern_v attends, tern_v qsh, tern_v nsh,
                         tern_v tid) {
    int hs = pl->hs, DS = hs / pl->J;
    qkv_join_sums(kb, jn, tid);
    TERN_IF(kb, attends) {
        TERN_IF(kb, tern_lt(tid, tern_int(hs))) { tern_store(qsh, tid, qkv_join_value(jn, tid)); }
    }
    TERN_ELSE(kb) {
        TERN_IF(kb, tern_lt(tid, tern_int(3 * DS))) { tern_store(nsh, tid, qkv_join_value(jn, tid)); }
    }
    tern_barrier(kb);
}

/* Joined: the column of qkv's row that thread tid finishes (join_columns): q's hoff + tid
 * in an attention group, else column tid of slice js's q, k and v; clamped into range for
 * the threads past them. */
static tern_v join_out_column(const split_plan *pl, tern_v attends, tern_v hoff, tern_v js, tern_v tid, tern_v C) {
    int hs = pl->hs, DS = hs / pl->J;
    tern_v q_col = tern_add(hoff, tern_min(tid, tern_int(hs - 1)));
    tern_v t = tern_min(tid, tern_int(3 * DS - 1));
    tern_v seg = tern_div(t, tern_int(DS)), d = tern_rem(t, tern_int(DS));
    tern_v n_col = tern_add(tern_add(tern_mul(seg, C), hoff), tern_add(tern_mul(js, tern_int(DS)), d));
    return tern_select(attends, q_col, n_col);
}

/* Joined: this thread's word of w (qkv_join_early) is word tid % 8 of the head's q (an
 * attention group), or of slice js's q, k and v (DS / W words each; a new-position group);
 * words past those read word 0's columns, their sums unused. */
static tern_v join_column(const qkv_join *jn, const split_plan *pl, tern_v attends, tern_v hoff, tern_v js,
                          tern_v tid, tern_v C) {
    int W = jn->W, DS = pl->hs / pl->J, per = DS / W;
    tern_v w = tern_rem(tid, tern_int(GK_JOIN_WORDS));
    tern_v wq = tern_select(tern_lt(w, tern_int(pl->hs / W)), w, tern_int(0));
    tern_v q_col = tern_add(hoff, tern_mul(wq, tern_int(W)));
    tern_v wn = tern_select(tern_lt(w, tern_int(3 * per)), w, tern_int(0));
    tern_v seg = tern_div(wn, tern_int(per)), within = tern_rem(wn, tern_int(per));
    tern_v n_col = tern_add(tern_add(tern_mul(seg, C), hoff),
                            tern_add(tern_mul(js, tern_int(DS)), tern_mul(within, tern_int(W))));
    return tern_select(attends, q_col, n_col);
}

/* Joined: a new-position group takes no cached position. It runs the attention's steps all
 * the same, over nothing, so that every group of the kernel reaches the same barriers (none
 * inside a branch on the group's role). */
static void join_share(tern_v attends, tern_v *lo, tern_v *hi) {
    *lo = tern_select(attends, *lo, tern_int(0));
    *hi = tern_select(attends, *hi, tern_int(0));
}

/* Joined, a new-position group (after join_columns): its slice of q, k and v stored in qkv's
 * row, of k and v in the caches at p0; then the new position's part for the merge
 * (GK_AC_NEW_AT): the slice's q . k and its values. */
static void join_new_position(tern_kb *kb, const cached_args *a, const split_plan *pl, tern_v nsh, tern_v bh,
                              tern_v hoff, tern_v js, tern_v p0, tern_v tid) {
    int hs = pl->hs, J = pl->J, DS = hs / J;
    TERN_IF(kb, tern_lt(tid, tern_int(3 * DS))) {
        tern_v seg = tern_div(tid, tern_int(DS)), d = tern_add(tern_mul(js, tern_int(DS)), tern_rem(tid, tern_int(DS)));
        tern_v v = tern_load(nsh, tid);
        tern_store(a->qkv, tern_add(tern_add(tern_mul(seg, a->C), hoff), d), v); /* one row: B = T = 1 */
        tern_v to = tern_add(tern_mul(tern_add(tern_mul(bh, a->max_T), p0), tern_int(hs)), d);
        TERN_IF(kb, tern_eq(seg, tern_int(1))) { tern_store(a->kc, to, v); }
        TERN_IF(kb, tern_eq(seg, tern_int(2))) { tern_store(a->vc, to, v); }
    }
    tern_v at = tern_add(tern_int(GK_AC_NEW_AT(hs)), tern_mul(bh, tern_int(J + hs)));
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        tern_v dot = tern_f32(0.0f);
        for (int d = 0; d < DS; d++) {
            tern_v q = tern_load(nsh, tern_int(d)), k = tern_load(nsh, tern_int(DS + d));
            dot = d ? tern_fma(q, k, dot) : tern_mul(q, k);
        }
        tern_store(a->out, tern_add(at, js), dot);
    }
    TERN_IF(kb, tern_lt(tid, tern_int(DS))) {
        tern_store(a->out, tern_add(tern_add(at, tern_int(J)), tern_add(tern_mul(js, tern_int(DS)), tid)),
                   tern_load(nsh, tern_add(tern_int(2 * DS), tid)));
    }
}

/* Split: group (row, part) of G threads attends over its part's positions in passes of P
 * (one pass when a split's share of max_T fits a group of GK_AC_SPLIT_GROUP: GPT-2 up to max_T
 * = 2048), with a short chain of dependent steps:
 *
 *  1. pos, this thread's parts of the row's q and k and the row's v at the dimensions it
 *     merges in step 4 are loaded together: none of these addresses depends on pos (split
 *     0 stores k and v in the caches at the end; when decoding they are position p0's);
 *  2. a pass's keys and values are loaded together into registers (split_pass): TP threads
 *     per position each hold DP = hs / TP of q and of its key; thread (slice v, lane c)
 *     holds K positions' values, WV dimensions each;
 *  3. the parts' dot products meet in shuffles; each SIMD group keeps its own online softmax
 *     (maximum m, sum l: SIMD reductions, no barrier); a value thread takes its positions'
 *     weights by shuffles (they lie in its own SIMD group: the CV threads of slice v score
 *     exactly the slice's positions);
 *  4. the slices of a SIMD group are summed by shuffles; one barrier publishes each SIMD
 *     group's (m, l, o), and the first hs threads merge them in group order (then the new
 *     position, when decoding).
 *
 * Positions < p0 come from the cache, later ones from qkv: when decoding (T = 1) position p0
 * is the group's own row, loaded in step 1 and merged in step 4; otherwise a second pass
 * loop reads the new rows.
 *
 * Joined (spec n[9] = J, decoding one row, the parts left to the GEMV): the grid's x is S + J;
 * groups gx < S attend over their share of the cached positions 0 .. p0 - 1 with the q they
 * compute (step 1 becomes join_columns), groups S + js compute the new position's slice js
 * (join_new_position), which the merge takes as one more part. */
static void trace_split(tern_kb *kb, const gk_spec *s) {
    split_plan pl;
    pl.hs = s->n[0], pl.W = s->n[1], pl.S = s->n[2], pl.G = s->n[3], pl.TP = s->n[4], pl.decode = s->n[5] != 0;
    pl.J = s->n[9];
    bool early = pl.decode && s->n[7] != 0, join = pl.J > 0;
    bool fresh_new = pl.decode && !join; /* the new position is the group's own row */
    pl.CV = gk_ac_lanes(pl.hs, pl.W), pl.WV = pl.hs / pl.CV;
    pl.P = pl.G / pl.TP, pl.DP = pl.hs / pl.TP, pl.K = pl.CV / pl.TP, pl.NW = pl.G / 32;
    int hs = pl.hs, W = pl.W, S = pl.S, G = pl.G, DP = pl.DP, NW = pl.NW;
    int merges = (hs + G - 1) / G; /* output dimensions per thread in step 4 */
    tern_max_threads(kb, G);
    cached_args a = cached_params(kb, s, true);
    tern_v partial = a.out, qkv = a.qkv, T = a.T, C = a.C;
    qkv_join jn;
    if (join) qkv_join_params(kb, s, G, &jn);
    tern_v ow = tern_shared(kb, "ow", TERN_T_F32, (size_t)(NW * hs)); /* [NW, hs] each SIMD group's sums */
    tern_v mw = tern_shared(kb, "mw", TERN_T_F32, (size_t)NW);        /* [NW] its maximum */
    tern_v lw = tern_shared(kb, "lw", TERN_T_F32, (size_t)NW);        /* [NW] its sum of weights */
    tern_v last = tern_shared(kb, "last", TERN_T_I32, 1);             /* 1: this split merges the row */
    /* joined: the head's q [hs]; the new position's slices of q, k and v [3 DS] */
    tern_v qsh = join ? tern_shared(kb, "qsh", (tern_type)s->t[3], (size_t)hs) : tern_int(0);
    tern_v nsh = join ? tern_shared(kb, "nsh", (tern_type)s->t[3], (size_t)(3 * hs / pl.J)) : tern_int(0);
    /* launched early (CUDA): everything it reads comes after the wait, except, when early,
     * pos and the first pass of cached positions (below) */
    if (!early) tern_wait_previous(kb);

    split_thread st;
    st.pl = pl;
    st.kc = a.kc, st.vc = a.vc, st.qkv = qkv, st.C = C;
    /* 1: pos first (everything after it waits for it); then this thread's parts of the
     * row's q and k [DP] (q raw, scaled in the scores: nothing waits for it here) and the
     * row's v at the dimensions this thread merges [merges]: split 0 stores k and v at the
     * end, and when decoding they are position p0's */
    st.p0 = tern_load(a.pos, tern_int(0));
    tern_v tid = tern_local_id(kb, 0);
    st.lane = tern_simd_lane(kb);
    /* grid (T S, NH, B): no division by a runtime value before the first loads (joined: (S +
     * J, NH, 1), T = 1) */
    tern_v gx = tern_group_id(kb, 0), h = tern_group_id(kb, 1), b = tern_group_id(kb, 2);
    tern_v t = join ? tern_int(0) : tern_div(gx, tern_int(S));
    tern_v part = join ? tern_min(gx, tern_int(S - 1)) : tern_rem(gx, tern_int(S));
    tern_v attends = join ? tern_lt(gx, tern_int(S)) : tern_bool(true);
    tern_v js = join ? tern_sub(gx, tern_int(S)) : tern_int(0); /* a new-position group's slice */
    tern_v bh = tern_add(tern_mul(b, a.NH), h);
    tern_v g = tern_add(tern_mul(tern_add(tern_mul(bh, T), t), tern_int(S)), part); /* (row (b, h, t), part) */
    heads_of(&a, b, h, hs);
    st.a = &a;
    st.C3 = row_stride(&a, hs);
    tern_v hoff = tern_mul(h, tern_int(hs));
    tern_v qrow = tern_add(tern_mul(tern_add(tern_mul(b, T), t), st.C3), hoff);
    st.qpart = tern_rem(tid, tern_int(pl.TP)), st.slot = tern_div(tid, tern_int(pl.TP));
    st.vlane = tern_rem(tid, tern_int(pl.CV)), st.vslice = tern_div(tid, tern_int(pl.CV));
    if (join)
        qkv_join_early(kb, &jn, tid, join_column(&jn, &pl, attends, hoff, js, tid, C),
                       join_out_column(&pl, attends, hoff, js, tid, C));

    tern_v lo = tern_int(0), hi = tern_int(0); /* positions [lo, hi): this split's share (below) */
    if (early) {
        split_vars(kb, &st);
        split_share(&st, &a, b, bh, t, part, hoff, &lo, &hi);
        if (join) join_share(attends, &lo, &hi);
        /* pos is an upload's and positions < p0 were written by earlier launches: the first
         * pass of the cache loads with pos, while the kernel before this one still runs
         * (a position outside the cache loads nothing: the fault is recorded after the wait) */
        tern_v end = tern_min(hi, st.p0);
        TERN_IF(kb, tern_land(tern_land(positions_in_cache(&a, st.p0), tern_lt(lo, end)), attends)) {
            pass_loads(&st, lo, tern_sub(end, tern_int(1)), false);
        }
        tern_wait_previous(kb);
    }
    tern_v knew[GK_AC_PART_MAX], vnew[GK_ATT_MAX_HS / 32];
    if (join) {
        join_columns(kb, &jn, &pl, attends, qsh, nsh, tid);
        tern_v qat = tern_mul(st.qpart, tern_int(DP));
        for (int d = 0; d < DP; d++) st.q[d] = tern_load(qsh, tern_add(qat, tern_int(d)));
    } else {
        tern_v qat = tern_add(qrow, tern_mul(st.qpart, tern_int(DP)));
        for (int d = 0; d < DP; d += W) ku_load(qkv, tern_add(qat, tern_int(d)), W, st.q + d);
        for (int d = 0; d < DP; d += W) ku_load(qkv, tern_add(tern_add(qat, key_shift(&a)), tern_int(d)), W, knew + d);
        for (int it = 0; it < merges; it++) {
            tern_v d = tern_min(tern_add(tid, tern_int(it * G)), tern_int(hs - 1));
            vnew[it] = tern_load(qkv, tern_add(tern_add(qrow, value_shift(&a)), d));
        }
    }
    st.c = tern_mul(a.scale, tern_f32(LOG2E)); /* scores in base 2 */
    /* the running softmax and a pass's loads, set up while the loads above are in flight */
    if (!early) split_vars(kb, &st);

    TERN_IF(kb, positions_ok(kb, &a, st.p0)) {
        tern_v p0 = st.p0;
        if (!early) {
            split_share(&st, &a, b, bh, t, part, hoff, &lo, &hi);
            if (join) join_share(attends, &lo, &hi);
        }
        split_pass(kb, &st, lo, tern_min(hi, p0), false, early);
        if (!pl.decode) split_pass(kb, &st, tern_max(lo, p0), hi, true, false);

        /* 4: the SIMD group's slices (lanes vlane + k CV) summed; the new position's score
         * (decoding), independent work for the same wait */
        tern_v sum[GK_AC_PART_MAX];
        for (int d = 0; d < pl.WV; d++) {
            sum[d] = st.o[d];
            for (int off = pl.CV; off < 32; off *= 2)
                sum[d] = tern_add(sum[d], tern_simd_shuffle_xor(sum[d], tern_int(off)));
        }
        tern_v s_new = fresh_new ? tern_mul(position_sum(dot_part(st.q, knew, DP), pl.TP), st.c) : tern_f32(0.0f);
        tern_v wg = tern_simd_group(kb);
        TERN_IF(kb, tern_lt(st.lane, tern_int(pl.CV))) {
            tern_v at = tern_add(tern_mul(wg, tern_int(hs)), tern_mul(st.vlane, tern_int(pl.WV)));
            for (int d = 0; d < pl.WV; d++) tern_store(ow, tern_add(at, tern_int(d)), sum[d]);
        }
        TERN_IF(kb, tern_eq(st.lane, tern_int(0))) {
            tern_store(mw, wg, st.m);
            tern_store(lw, wg, st.l);
        }
        tern_barrier(kb);
        /* partial [row, part, :]: the hs sums, then m and l; each SIMD group weighted by
         * 2^(m_w - M) (0 for one that saw no position), then the new position's weight
         * 2^(s_new - M) when it is this split's */
        tern_v has_new = fresh_new ? tern_land(tern_le(lo, p0), tern_lt(p0, hi)) : tern_bool(false);
        tern_v at_part = tern_mul(g, tern_int(hs + 2));
        if (join) tern_if(kb, attends);
        for (int it = 0; it < merges; it++) {
            tern_v d = tern_add(tid, tern_int(it * G));
            bool guard = (it + 1) * G > hs;
            if (guard) tern_if(kb, tern_lt(d, tern_int(hs)));
            tern_v mws[GK_AC_SPLIT_GROUP / 32], M = tern_f32(0.0f);
            for (int w = 0; w < NW; w++) {
                mws[w] = tern_load(mw, tern_int(w));
                M = w ? tern_max(M, mws[w]) : mws[0];
            }
            if (fresh_new) M = tern_select(has_new, tern_max(M, s_new), M);
            tern_v O = tern_f32(0.0f), L = tern_f32(0.0f);
            for (int w = 0; w < NW; w++) {
                tern_v seen = tern_ne(mws[w], tern_f32(-INFINITY));
                tern_v f = tern_select(seen, tern_exp2(tern_sub(mws[w], M)), tern_f32(0.0f));
                tern_v ov = tern_load(ow, tern_add(tern_int(w * hs), d));
                O = w ? tern_fma(ov, f, O) : tern_mul(ov, f);
                if (it == 0) {
                    tern_v lv = tern_load(lw, tern_int(w));
                    L = w ? tern_fma(lv, f, L) : tern_mul(lv, f);
                }
            }
            if (fresh_new) {
                tern_v f = tern_select(has_new, tern_exp2(tern_sub(s_new, M)), tern_f32(0.0f));
                O = tern_fma(vnew[it], f, O);
                if (it == 0) L = tern_add(L, f);
            }
            tern_store(partial, tern_add(at_part, d), O);
            if (it == 0) {
                TERN_IF(kb, tern_eq(tid, tern_int(0))) {
                    tern_store(partial, tern_add(at_part, tern_int(hs)), M);
                    tern_store(partial, tern_add(at_part, tern_int(hs + 1)), L);
                }
            }
            if (guard) tern_end(kb);
        }
        if (join) {
            tern_end(kb);
            TERN_IF(kb, tern_lnot(attends)) { join_new_position(kb, &a, &pl, nsh, bh, hoff, js, p0, tid); }
        } else {
            /* split 0 stores the row's key (the TP threads of slot 0) and value at p0 + t,
             * last: the stores wait for their values, which nothing else has waited for
             * before here (nor does any group of this launch read them: see the top of the
             * file) */
            TERN_IF(kb, a.group == 1 ? tern_eq(part, tern_int(0)) : tern_land(tern_eq(part, tern_int(0)), a.stores)) {
                tern_v to = tern_add(st.cache0, tern_mul(tern_add(p0, t), tern_int(hs)));
                TERN_IF(kb, tern_lt(tid, tern_int(pl.TP))) {
                    tern_v kat = tern_add(to, tern_mul(tid, tern_int(DP)));
                    for (int d = 0; d < DP; d += W) ku_store(a.kc, tern_add(kat, tern_int(d)), W, knew + d);
                }
                for (int it = 0; it < merges; it++) {
                    tern_v d = tern_add(tid, tern_int(it * G));
                    TERN_IF(kb, tern_lt(d, tern_int(hs))) { tern_store(a.vc, tern_add(to, d), vnew[it]); }
                }
            }
        }
        /* 5 (not when the caller merges the parts: spec n[8], the GEMV after it as it stages A) */
        if (!s->n[8]) merge_last(kb, &a, g, tern_add(tern_mul(tern_add(tern_mul(b, T), t), C), hoff), tid, last, &pl);
    }
}

void gk_trace_attention_cached(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    if (s->n[2] > 1)
        trace_split(kb, s);
    else
        trace_rows(kb, s);
}
