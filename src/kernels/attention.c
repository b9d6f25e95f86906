/* Causal multi-head attention, forward and backward, in the style of FlashAttention:
 * tiles of K and V (or Q and dO) in threadgroup memory, an online softmax, f32
 * accumulation, tiles above the diagonal skipped. The score matrix is never stored: the
 * forward pass saves one number per (b, h, t), the (natural) logsumexp of that row's scaled
 * scores, from which the backward pass recomputes the probabilities. The cuda handler's own
 * attention paths save the same record, so any path's backward can read any path's forward.
 *
 * Layout: qkv [B, T, (NH + 2 KV) hs]: query head h in channels h hs, key/value head g's key
 * in C + g hs and value in C + KV hs + g hs (C = NH hs, the width of out); query head h
 * reads key/value head h / group, group = NH / KV. out and dout [B, T, C]; saved and delta
 * f32 [B, NH, T]. group = 1 (KV = NH) is GPT-2's [B, T, 3C]: its kernels are traced exactly
 * as before grouped heads existed (the group is a spec constant, n[3]).
 *
 * Without matrix instructions in the DSL each row (a query row in the forward and dq
 * kernels, a key row in the dk/dv kernel) belongs to SP neighbouring threads, each holding
 * hs / SP of its dimensions in registers (gk_att_split); their partial dot products meet in
 * SIMD shuffles. The inner loops are f32 FMAs whose other operand is a read of threadgroup
 * memory shared by the threads of a part (contiguous, so 16-byte accesses). Scores use
 * base-2 exponentials: s' = (q . k) * scale * log2(e).
 *
 * Spec for all four: t[0], t[1] the float buffers as listed; n[0] = hs (loops over the head
 * dimension unroll), n[1] = W, the vector width of global accesses (hs % W == 0); n[3] =
 * group = NH / KV (0 or 1: KV = NH; DELTA ignores it: out is per query head). */
#include <math.h>

#include "kernels/kutil.h"

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* Key tile rows of the forward and dq kernels (two tiles of tile * hs floats in shared). */
static int key_tile(int hs) { return hs <= 128 ? 32 : 16; }
/* Query tile rows of the dk/dv kernel (two tiles of tile * hs floats in shared). */
static int query_tile(int hs) { return hs <= 128 ? 32 : 16; }

/* hs values of one head's row from a buffer, starting at element `at` (W at a time). */
static void load_row(tern_v buf, tern_v at, int hs, int W, tern_v *out) {
    for (int d = 0; d < hs; d += W) ku_load(buf, tern_add(at, tern_int(d)), W, out + d);
}

/* A tile's layout in threadgroup memory: rows `ld` floats apart, each row's hs values in
 * parts of dh (one per thread sharing a row), parts dh + pad apart. The pad (4 floats when
 * a row is split) puts the parts' 16-byte reads in different banks: two parts 32 floats
 * apart would hit the same ones. */
typedef struct tile_layout {
    int ld, dh, pad;
} tile_layout;

static tile_layout layout(int hs, int sp) {
    int pad = sp > 1 ? 4 : 0;
    tile_layout t = {sp * (hs / sp + pad), hs / sp, pad};
    return t;
}

/* Where element d of a tile row starts its part, relative to the row: part * (dh + pad). */
static tern_v part_base(tile_layout t, tern_v part) { return tern_mul(part, tern_int(t.dh + t.pad)); }

/* Copies `rows` rows of one head (hs values each, from qkv rows row0 .. clamped to T - 1 at
 * channel offset `chan`) into the shared array dst laid out as lt, as f32. `threads`
 * threads share the work, thread `tid`. */
static void load_tile(tern_kb *kb, tern_v dst, tile_layout lt, tern_v src, tern_v row_base, tern_v row0,
                      tern_v last_row, tern_v row_stride, tern_v chan, int rows, int hs, int W,
                      tern_v tid, int threads) {
    int chunks = rows * hs / W, per_row = hs / W;
    int iters = (chunks + threads - 1) / threads;
    for (int it = 0; it < iters; it++) {
        tern_v e = tern_add(tid, tern_int(it * threads));
        tern_v r = tern_div(e, tern_int(per_row));
        tern_v d = tern_mul(tern_rem(e, tern_int(per_row)), tern_int(W));
        tern_v row = tern_min(tern_add(row0, r), last_row);
        tern_v at = tern_add(tern_add(tern_mul(tern_add(row_base, row), row_stride), chan), d);
        bool guard = (it + 1) * threads > chunks;
        if (guard) tern_if(kb, tern_lt(e, tern_int(chunks)));
        tern_v x[8];
        ku_load(src, at, W, x);
        tern_v to = tern_add(tern_mul(r, tern_int(lt.ld)), d);
        if (lt.pad) to = tern_add(to, tern_mul(tern_div(d, tern_int(lt.dh)), tern_int(lt.pad)));
        for (int j = 0; j < W; j++) tern_store(dst, tern_add(to, tern_int(j)), x[j]);
        if (guard) tern_end(kb);
    }
}

/* The widest access <= w dividing n. */
static int width_for(int w, int n) {
    while (w > 1 && n % w) w /= 2;
    return w;
}

/* Sums x over the sp threads of a row (neighbouring lanes): every one gets the total. */
static tern_v row_sum(tern_v x, int sp) {
    for (int off = sp / 2; off >= 1; off /= 2) x = tern_add(x, tern_simd_shuffle_xor(x, tern_int(off)));
    return x;
}

/* The group of query heads sharing a key/value head (spec n[3]; 0 means 1). */
static int group_of(const gk_spec *s) { return s->n[3] > 1 ? s->n[3] : 1; }

/* qkv's row stride: 3C, or C + 2 KV hs with KV = NH / group. */
static tern_v qkv_stride(tern_v C, tern_v NH, int group, int hs) {
    if (group == 1) return tern_mul(C, tern_int(3));
    return tern_add(C, tern_mul(tern_div(NH, tern_int(group)), tern_int(2 * hs)));
}

/* The offset of key/value head kvh (h / group) in the key and in the value block: kvh hs. */
static tern_v kv_offset(tern_v kvh, int hs) { return tern_mul(kvh, tern_int(hs)); }

/* The channels of a key/value head at offset kvoff: its key (C + kvoff) and value (2C + kvoff,
 * or C + KV hs + kvoff). */
static tern_v key_chan(tern_v C, tern_v kvoff) { return tern_add(C, kvoff); }
static tern_v value_chan(tern_v C, tern_v NH, tern_v kvoff, int group, int hs) {
    if (group == 1) return tern_add(tern_mul(C, tern_int(2)), kvoff);
    return tern_add(tern_add(C, tern_mul(tern_div(NH, tern_int(group)), tern_int(hs))), kvoff);
}

/* Forward. Spec t[0] out, t[1] qkv. Parameters: out, saved, qkv, T, C, NH, scale. */
/* Where a thread of the query-row kernels (forward, dq) works: its part of the row (SP parts
 * of DH channels), its query tile qt (the longest rows, with the most key tiles, first), its
 * head bh = b * NH + h, its row i (ic: clamped to the last row), and the offsets of that head in qkv. */
typedef struct query_place {
    tern_v tid, part, pk, sk, qt, bh, last, i, ic, C3, row_base, hoff, kvoff;
} query_place;

static query_place query_place_of(tern_kb *kb, tile_layout lt, int SP, int DH, int hs, int group, tern_v T,
                                  tern_v C, tern_v NH) {
    query_place p;
    p.tid = tern_local_id(kb, 0);
    p.part = tern_rem(p.tid, tern_int(SP));
    p.pk = tern_mul(p.part, tern_int(DH));
    p.sk = part_base(lt, p.part); /* this part's place in a shared row */
    p.qt = tern_sub(tern_sub(tern_group_count(kb, 0), tern_int(1)), tern_group_id(kb, 0));
    p.bh = tern_group_id(kb, 1);
    p.last = tern_sub(T, tern_int(1));
    p.i = tern_add(tern_mul(p.qt, tern_int(GK_ATT_BR)), tern_div(p.tid, tern_int(SP)));
    p.ic = tern_min(p.i, p.last);
    p.C3 = qkv_stride(C, NH, group, hs);
    p.row_base = tern_mul(tern_div(p.bh, NH), T);
    tern_v h = tern_rem(p.bh, NH);
    p.hoff = tern_mul(h, tern_int(hs));
    p.kvoff = group == 1 ? p.hoff : kv_offset(tern_div(h, tern_int(group)), hs);
    return p;
}

void gk_trace_attention(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hs = s->n[0], SP = gk_att_split(hs, 0), DH = hs / SP, W = width_for(s->n[1], DH), group = group_of(s);
    int BC = key_tile(hs), G = GK_ATT_BR * SP;
    tile_layout lt = layout(hs, SP);
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v saved = tern_param_buf(kb, "saved", TERN_T_F32, TERN_WRITE);
    tern_v qkv = ku_buf(kb, "qkv", s->t[1], TERN_READ);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_v ks = tern_shared(kb, "ks", TERN_T_F32, (size_t)BC * lt.ld);
    tern_v vs = tern_shared(kb, "vs", TERN_T_F32, (size_t)BC * lt.ld);

    query_place qp = query_place_of(kb, lt, SP, DH, hs, group, T, C, NH);
    tern_v tid = qp.tid, part = qp.part, pk = qp.pk, sk = qp.sk, qt = qp.qt, bh = qp.bh, last = qp.last;
    tern_v i = qp.i, ic = qp.ic, C3 = qp.C3, row_base = qp.row_base, hoff = qp.hoff;

    tern_v c = tern_mul(scale, tern_f32(LOG2E));
    tern_v q[GK_ATT_MAX_HS], o[GK_ATT_MAX_HS];
    load_row(qkv, tern_add(tern_add(tern_mul(tern_add(row_base, ic), C3), hoff), pk), DH, W, q);
    for (int d = 0; d < DH; d++) {
        q[d] = tern_mul(q[d], c);
        o[d] = tern_var(kb, "o", tern_f32(0.0f));
    }
    tern_v m = tern_var(kb, "m", tern_f32(-INFINITY));
    tern_v l = tern_var(kb, "l", tern_f32(0.0f));

    /* key tiles 0 .. the one holding this group's last row */
    tern_v group_last = tern_min(tern_add(tern_mul(qt, tern_int(GK_ATT_BR)), tern_int(GK_ATT_BR - 1)), last);
    tern_v tiles = tern_add(tern_div(group_last, tern_int(BC)), tern_int(1));
    TERN_FOR(kb, kt, tern_int(0), tiles, tern_int(1)) {
        tern_v j0 = tern_mul(kt, tern_int(BC));
        load_tile(kb, ks, lt, qkv, row_base, j0, last, C3, key_chan(C, qp.kvoff), BC, hs, W, tid, G);
        load_tile(kb, vs, lt, qkv, row_base, j0, last, C3, value_chan(C, NH, qp.kvoff, group, hs), BC, hs, W, tid, G);
        tern_barrier(kb);
        tern_v sc[32];
        tern_v mt = tern_f32(-INFINITY);
        for (int r = 0; r < BC; r++) {
            tern_v kr = tern_add(sk, tern_int(r * lt.ld));
            tern_v acc = tern_mul(q[0], tern_load(ks, kr));
            for (int d = 1; d < DH; d++) acc = tern_fma(q[d], tern_load(ks, tern_add(kr, tern_int(d))), acc);
            acc = row_sum(acc, SP);
            sc[r] = tern_select(tern_le(tern_add(j0, tern_int(r)), ic), acc, tern_f32(-INFINITY));
            mt = r ? tern_max(mt, sc[r]) : sc[0];
        }
        tern_v m_new = tern_max(m, mt);
        tern_v corr = tern_exp2(tern_sub(m, m_new));
        tern_v psum = tern_f32(0.0f);
        for (int r = 0; r < BC; r++) {
            sc[r] = tern_exp2(tern_sub(sc[r], m_new));
            psum = r ? tern_add(psum, sc[r]) : sc[0];
        }
        tern_assign(l, tern_fma(l, corr, psum));
        /* o = o corr + P V: key by key, so each key's value row is read contiguously */
        tern_v acc[GK_ATT_MAX_HS];
        for (int d = 0; d < DH; d++) acc[d] = tern_mul(o[d], corr);
        for (int r = 0; r < BC; r++) {
            tern_v vr = tern_add(sk, tern_int(r * lt.ld));
            for (int d = 0; d < DH; d++) acc[d] = tern_fma(sc[r], tern_load(vs, tern_add(vr, tern_int(d))), acc[d]);
        }
        for (int d = 0; d < DH; d++) tern_assign(o[d], acc[d]);
        tern_assign(m, m_new);
        tern_barrier(kb);
    }
    TERN_IF(kb, tern_lt(i, T)) {
        tern_v inv = tern_div(tern_f32(1.0f), l);
        tern_v at = tern_add(tern_add(tern_mul(tern_add(row_base, i), C), hoff), pk);
        for (int d = 0; d < DH; d += W) {
            tern_v v[8];
            for (int j = 0; j < W; j++) v[j] = tern_mul(o[d + j], inv);
            ku_store(out, tern_add(at, tern_int(d)), W, v);
        }
        TERN_IF(kb, tern_eq(part, tern_int(0))) {
            /* m and log2 l are in base 2 */
            tern_store(saved, tern_add(tern_mul(bh, T), i), tern_mul(tern_add(m, tern_log2(l)), tern_f32(LN2)));
        }
    }
}

/* delta[b, h, t] = sum over d of dout[b, t, h hs + d] out[b, t, h hs + d].
 * Spec t[0] dout, t[1] out. Parameters: delta, dout, out, BT, T, C, NH. */
void gk_trace_attention_delta(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hs = s->n[0], W = s->n[1];
    tern_v delta = tern_param_buf(kb, "delta", TERN_T_F32, TERN_WRITE);
    tern_v dout = ku_buf(kb, "dout", s->t[0], TERN_READ);
    tern_v out = ku_buf(kb, "out", s->t[1], TERN_READ);
    tern_v BT = tern_param_scalar(kb, "BT", TERN_T_I32);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v gid = tern_global_id(kb, 0);
    tern_v bt = tern_div(gid, NH), h = tern_rem(gid, NH);
    TERN_IF(kb, tern_lt(bt, BT)) {
        tern_v at = tern_add(tern_mul(bt, C), tern_mul(h, tern_int(hs)));
        tern_v g[GK_ATT_MAX_HS], o[GK_ATT_MAX_HS];
        load_row(dout, at, hs, W, g);
        load_row(out, at, hs, W, o);
        tern_v acc = tern_mul(g[0], o[0]);
        for (int d = 1; d < hs; d++) acc = tern_fma(g[d], o[d], acc);
        tern_v b = tern_div(bt, T), t = tern_rem(bt, T);
        tern_store(delta, tern_add(tern_mul(tern_add(tern_mul(b, NH), h), T), t), acc);
    }
}

/* dk and dv, SP threads per key row (gk_att_split(hs, 1)): each holds its part of k_j and
 * v_j and accumulates that part of dk_j and dv_j in registers; tiles of BQ query rows of Q
 * and dO, with their saved and delta, sit in shared memory.
 * dv_j = sum_i P_ij dO_i; dk_j = scale sum_i dS_ij q_i, dS_ij = P_ij (dO_i . v_j - delta_i);
 * only i >= j contribute. With grouped heads a key row is one (b, key/value head): the sums
 * also run over the group's query heads, one after another into the same registers (no
 * atomics); grid (ceil(T / GK_ATT_BR), B KV). Spec t[0] dqkv, t[1] qkv, t[2] dout.
 * Parameters: dqkv, qkv, dout, saved, delta, T, C, NH, scale. */
typedef struct dkdv_ctx {
    tern_kb *kb;
    int hs, SP, DH, W, BQ, G;
    tile_layout lt;
    tern_v qkv, dout, saved, delta, qs, gs, ls, ds;
    tern_v T, C, C3, tid, part, j, j0, last, row_base, c;
    tern_v *k, *v, *dk, *dv;
} dkdv_ctx;

/* Adds query head `hoff / hs`'s terms (its rows' stats from stat0 in saved and delta) to dk, dv. */
static void dkdv_head(const dkdv_ctx *x, tern_v hoff, tern_v stat0) {
    tern_kb *kb = x->kb;
    tile_layout lt = x->lt;
    int BQ = x->BQ, DH = x->DH;
    tern_v T = x->T, tid = x->tid, last = x->last;
    /* query tiles from the one holding j0 to the end */
    tern_v t_first = tern_div(x->j0, tern_int(BQ));
    tern_v t_end = tern_div(tern_add(T, tern_int(BQ - 1)), tern_int(BQ));
    TERN_FOR(kb, qt, t_first, t_end, tern_int(1)) {
        tern_v i0 = tern_mul(qt, tern_int(BQ));
        tern_barrier(kb); /* the previous tile is consumed */
        load_tile(kb, x->qs, lt, x->qkv, x->row_base, i0, last, x->C3, hoff, BQ, x->hs, x->W, tid, x->G);
        load_tile(kb, x->gs, lt, x->dout, x->row_base, i0, last, x->C, hoff, BQ, x->hs, x->W, tid, x->G);
        TERN_IF(kb, tern_lt(tid, tern_int(BQ))) {
            tern_v qi = tern_min(tern_add(i0, tid), last);
            tern_store(x->ls, tid, tern_mul(tern_load(x->saved, tern_add(stat0, qi)), tern_f32(LOG2E)));
            tern_store(x->ds, tid, tern_load(x->delta, tern_add(stat0, qi)));
        }
        tern_barrier(kb);
        TERN_FOR(kb, r, tern_int(0), tern_int(BQ), tern_int(1)) {
            tern_v qrow = tern_add(tern_mul(r, tern_int(lt.ld)), part_base(lt, x->part));
            tern_v qv[GK_ATT_MAX_HS], gv[GK_ATT_MAX_HS];
            tern_v sdot = tern_f32(0.0f), pdot = tern_f32(0.0f);
            for (int d = 0; d < DH; d++) {
                qv[d] = tern_load(x->qs, tern_add(qrow, tern_int(d)));
                gv[d] = tern_load(x->gs, tern_add(qrow, tern_int(d)));
                sdot = d ? tern_fma(qv[d], x->k[d], sdot) : tern_mul(qv[d], x->k[d]);
                pdot = d ? tern_fma(gv[d], x->v[d], pdot) : tern_mul(gv[d], x->v[d]);
            }
            sdot = row_sum(sdot, x->SP);
            pdot = row_sum(pdot, x->SP);
            tern_v i = tern_add(i0, r);
            tern_v live = tern_land(tern_le(x->j, i), tern_lt(i, T));
            tern_v p = tern_exp2(tern_sub(tern_mul(sdot, x->c), tern_load(x->ls, r)));
            p = tern_select(live, p, tern_f32(0.0f));
            tern_v dsv = tern_mul(p, tern_sub(pdot, tern_load(x->ds, r)));
            for (int d = 0; d < DH; d++) {
                tern_assign(x->dv[d], tern_fma(p, gv[d], x->dv[d]));
                tern_assign(x->dk[d], tern_fma(dsv, qv[d], x->dk[d]));
            }
        }
    }
}

void gk_trace_attention_dkdv(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hs = s->n[0], SP = gk_att_split(hs, 1), DH = hs / SP, W = width_for(s->n[1], DH), group = group_of(s);
    int BQ = query_tile(hs), G = GK_ATT_BR * SP;
    tile_layout lt = layout(hs, SP);
    tern_v dqkv = ku_buf(kb, "dqkv", s->t[0], TERN_WRITE);
    tern_v qkv = ku_buf(kb, "qkv", s->t[1], TERN_READ);
    tern_v dout = ku_buf(kb, "dout", s->t[2], TERN_READ);
    tern_v saved = tern_param_buf(kb, "saved", TERN_T_F32, TERN_READ);
    tern_v delta = tern_param_buf(kb, "delta", TERN_T_F32, TERN_READ);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_v qs = tern_shared(kb, "qs", TERN_T_F32, (size_t)BQ * lt.ld);
    tern_v gs = tern_shared(kb, "gs", TERN_T_F32, (size_t)BQ * lt.ld);
    tern_v ls = tern_shared(kb, "ls", TERN_T_F32, (size_t)BQ);
    tern_v ds = tern_shared(kb, "ds", TERN_T_F32, (size_t)BQ);

    tern_v tid = tern_local_id(kb, 0);
    tern_v part = tern_rem(tid, tern_int(SP)), pk = tern_mul(part, tern_int(DH));
    tern_v kt = tern_group_id(kb, 0); /* the longest (earliest) key rows first */
    tern_v bh = tern_group_id(kb, 1); /* (b, h), or (b, key/value head) when grouped */
    tern_v KV = group == 1 ? NH : tern_div(NH, tern_int(group));
    tern_v b = tern_div(bh, KV), h = tern_rem(bh, KV);
    tern_v last = tern_sub(T, tern_int(1));
    tern_v j0 = tern_mul(kt, tern_int(GK_ATT_BR));
    tern_v j = tern_add(j0, tern_div(tid, tern_int(SP)));
    tern_v jc = tern_min(j, last);
    tern_v C3 = qkv_stride(C, NH, group, hs);
    tern_v row_base = tern_mul(b, T);
    tern_v hoff = tern_mul(h, tern_int(hs)); /* grouped: the key/value head's offset */
    tern_v c = tern_mul(scale, tern_f32(LOG2E));

    tern_v k[GK_ATT_MAX_HS], v[GK_ATT_MAX_HS], dk[GK_ATT_MAX_HS], dv[GK_ATT_MAX_HS];
    tern_v own = tern_add(tern_add(tern_mul(tern_add(row_base, jc), C3), hoff), pk);
    /* the value block's start: 2C, or C + KV hs */
    tern_v vchan = group == 1 ? tern_int(0) : tern_add(C, tern_mul(KV, tern_int(hs)));
    load_row(qkv, tern_add(own, C), DH, W, k);
    load_row(qkv, tern_add(own, group == 1 ? tern_mul(C, tern_int(2)) : vchan), DH, W, v);
    for (int d = 0; d < DH; d++) {
        dk[d] = tern_var(kb, "dk", tern_f32(0.0f));
        dv[d] = tern_var(kb, "dv", tern_f32(0.0f));
    }
    dkdv_ctx x = {.kb = kb, .hs = hs, .SP = SP, .DH = DH, .W = W, .BQ = BQ, .G = G, .lt = lt, .qkv = qkv,
                  .dout = dout, .saved = saved, .delta = delta, .qs = qs, .gs = gs, .ls = ls, .ds = ds, .T = T,
                  .C = C, .C3 = C3, .tid = tid, .part = part, .j = j, .j0 = j0, .last = last,
                  .row_base = row_base, .c = c, .k = k, .v = v, .dk = dk, .dv = dv};
    if (group == 1) {
        dkdv_head(&x, hoff, tern_mul(bh, T));
    } else {
        /* query heads h group .. h group + group - 1, one after another */
        TERN_FOR(kb, m, tern_int(0), tern_int(group), tern_int(1)) {
            tern_v qh = tern_add(tern_mul(h, tern_int(group)), m);
            dkdv_head(&x, tern_mul(qh, tern_int(hs)), tern_mul(tern_add(tern_mul(b, NH), qh), T));
        }
    }
    TERN_IF(kb, tern_lt(j, T)) {
        for (int d = 0; d < DH; d += W) {
            tern_v kv[8], vv[8];
            for (int e = 0; e < W; e++) {
                kv[e] = tern_mul(dk[d + e], scale);
                vv[e] = dv[d + e];
            }
            ku_store(dqkv, tern_add(tern_add(own, C), tern_int(d)), W, kv);
            ku_store(dqkv, tern_add(tern_add(own, group == 1 ? tern_mul(C, tern_int(2)) : vchan), tern_int(d)), W, vv);
        }
    }
}

/* dq, SP threads per query row (as the forward). Spec t[0] dqkv, t[1] qkv, t[2] dout; n[2] = 1:
 * compute delta instead (delta_i = sum_j P_ij dO_i . v_j, exactly dO_i . O_i, for when out
 * was rounded to bf16 but the gradient is wanted in f32; dqkv is then not written).
 * Parameters: dqkv, qkv, dout, saved, delta, T, C, NH, scale.
 * dq_i = scale sum_j dS_ij k_j over the key tiles up to the diagonal. */
void gk_trace_attention_dq(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hs = s->n[0], SP = gk_att_split(hs, 0), DH = hs / SP, W = width_for(s->n[1], DH), group = group_of(s);
    int BC = key_tile(hs), G = GK_ATT_BR * SP;
    tile_layout lt = layout(hs, SP);
    bool delta_only = s->n[2] != 0;
    tern_v dqkv = ku_buf(kb, "dqkv", s->t[0], TERN_WRITE);
    tern_v qkv = ku_buf(kb, "qkv", s->t[1], TERN_READ);
    tern_v dout = ku_buf(kb, "dout", s->t[2], TERN_READ);
    tern_v saved = tern_param_buf(kb, "saved", TERN_T_F32, TERN_READ);
    tern_v delta = tern_param_buf(kb, "delta", TERN_T_F32, delta_only ? TERN_WRITE : TERN_READ);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_v ks = tern_shared(kb, "ks", TERN_T_F32, (size_t)BC * lt.ld);
    tern_v vs = tern_shared(kb, "vs", TERN_T_F32, (size_t)BC * lt.ld);

    query_place qp = query_place_of(kb, lt, SP, DH, hs, group, T, C, NH);
    tern_v tid = qp.tid, part = qp.part, pk = qp.pk, sk = qp.sk, qt = qp.qt, bh = qp.bh, last = qp.last;
    tern_v i = qp.i, ic = qp.ic, C3 = qp.C3, row_base = qp.row_base, hoff = qp.hoff;
    tern_v c = tern_mul(scale, tern_f32(LOG2E));

    tern_v q[GK_ATT_MAX_HS], g[GK_ATT_MAX_HS], dq[GK_ATT_MAX_HS];
    tern_v qrow = tern_add(tern_add(tern_mul(tern_add(row_base, ic), C3), hoff), pk);
    load_row(qkv, qrow, DH, W, q);
    load_row(dout, tern_add(tern_add(tern_mul(tern_add(row_base, ic), C), hoff), pk), DH, W, g);
    for (int d = 0; d < DH; d++) {
        q[d] = tern_mul(q[d], c);
        dq[d] = tern_var(kb, "dq", tern_f32(0.0f));
    }
    tern_v lse = tern_mul(tern_load(saved, tern_add(tern_mul(bh, T), ic)), tern_f32(LOG2E)); /* base 2 */
    tern_v dlt = delta_only ? tern_f32(0.0f) : tern_load(delta, tern_add(tern_mul(bh, T), ic));
    tern_v dsum = tern_var(kb, "dsum", tern_f32(0.0f));

    tern_v group_last = tern_min(tern_add(tern_mul(qt, tern_int(GK_ATT_BR)), tern_int(GK_ATT_BR - 1)), last);
    tern_v tiles = tern_add(tern_div(group_last, tern_int(BC)), tern_int(1));
    TERN_FOR(kb, kt, tern_int(0), tiles, tern_int(1)) {
        tern_v j0 = tern_mul(kt, tern_int(BC));
        load_tile(kb, ks, lt, qkv, row_base, j0, last, C3, key_chan(C, qp.kvoff), BC, hs, W, tid, G);
        load_tile(kb, vs, lt, qkv, row_base, j0, last, C3, value_chan(C, NH, qp.kvoff, group, hs), BC, hs, W, tid, G);
        tern_barrier(kb);
        tern_v dsv[32];
        for (int r = 0; r < BC; r++) {
            tern_v kr = tern_add(sk, tern_int(r * lt.ld));
            tern_v sdot = tern_mul(q[0], tern_load(ks, kr));
            tern_v pdot = tern_mul(g[0], tern_load(vs, kr));
            for (int d = 1; d < DH; d++) {
                sdot = tern_fma(q[d], tern_load(ks, tern_add(kr, tern_int(d))), sdot);
                pdot = tern_fma(g[d], tern_load(vs, tern_add(kr, tern_int(d))), pdot);
            }
            sdot = row_sum(sdot, SP);
            pdot = row_sum(pdot, SP);
            tern_v p = tern_exp2(tern_sub(sdot, lse));
            p = tern_select(tern_le(tern_add(j0, tern_int(r)), ic), p, tern_f32(0.0f));
            if (delta_only) tern_assign(dsum, tern_fma(p, pdot, dsum));
            else dsv[r] = tern_mul(p, tern_sub(pdot, dlt));
        }
        if (!delta_only) {
            tern_v acc[GK_ATT_MAX_HS];
            for (int d = 0; d < DH; d++) acc[d] = dq[d];
            for (int r = 0; r < BC; r++) {
                tern_v kr = tern_add(sk, tern_int(r * lt.ld));
                for (int d = 0; d < DH; d++) acc[d] = tern_fma(dsv[r], tern_load(ks, tern_add(kr, tern_int(d))), acc[d]);
            }
            for (int d = 0; d < DH; d++) tern_assign(dq[d], acc[d]);
        }
        tern_barrier(kb);
    }
    if (delta_only) {
        TERN_IF(kb, tern_land(tern_lt(i, T), tern_eq(part, tern_int(0)))) {
            tern_store(delta, tern_add(tern_mul(bh, T), i), dsum);
        }
        return;
    }
    TERN_IF(kb, tern_lt(i, T)) {
        for (int d = 0; d < DH; d += W) {
            tern_v v[8];
            for (int e = 0; e < W; e++) v[e] = tern_mul(dq[d + e], scale);
            ku_store(dqkv, tern_add(qrow, tern_int(d)), W, v);
        }
    }
}
