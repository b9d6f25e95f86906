/* Fused softmax + cross-entropy, one threadgroup per row of logits [rows, Vp].
 *
 * Pass 1 keeps an online (max, sum of exp) per thread over 16-byte chunks of the row and
 * combines them across the group; the loss is logsumexp - logits[target]. When grad_scale
 * != 0, pass 2 reads the row again (it is still in cache) and overwrites it with
 * (softmax - onehot(target)) * grad_scale, and 0 in the padding columns [V, Vp). The
 * target's logit is read by the thread that overwrites it, before it does.
 *
 * Exponentials are taken in base 2, exp2((x - m) log2(e)): one hardware instruction where
 * exp is several (x - m first, so the maximum itself gives exactly 1).
 *
 * Spec: t[0] logits; n[0] = W (Vp % W == 0 and rows aligned when W > 1); n[1] = the group
 * size (a multiple of 32; 0: GK_CE_GROUP).
 * Parameters: losses (f32), logits, targets (i32), fault, V, Vp, grad_scale. */
#include <math.h>

#include "kernels/kutil.h"

void gk_trace_cross_entropy(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0], G = s->n[1] ? s->n[1] : GK_CE_GROUP;
    tern_v losses = tern_param_buf(kb, "losses", TERN_T_F32, TERN_WRITE);
    tern_v logits = ku_buf(kb, "logits", s->t[0], TERN_READ_WRITE);
    tern_v targets = tern_param_buf(kb, "targets", TERN_T_I32, TERN_READ);
    tern_v fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    tern_v V = tern_param_scalar(kb, "V", TERN_T_I32);
    tern_v Vp = tern_param_scalar(kb, "Vp", TERN_T_I32);
    tern_v gs = tern_param_scalar(kb, "grad_scale", TERN_T_F32);
    tern_v scratch = tern_shared(kb, "scratch", TERN_T_F32, (size_t)G / 32);

    tern_v row = tern_group_id(kb, 0);
    tern_v tid = tern_local_id(kb, 0);
    tern_v base = tern_mul(row, Vp);
    tern_v neg_inf = tern_f32(-INFINITY);
    tern_v l2e = tern_f32(1.44269504088896341f); /* log2(e) */
    tern_v chunks_v = tern_div(tern_add(V, tern_int(W - 1)), tern_int(W));

    /* pass 1: online max and sum per thread */
    tern_v m = tern_var(kb, "m", neg_inf);
    tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
    TERN_FOR(kb, k, tid, chunks_v, tern_int(G)) {
        tern_v col0 = tern_mul(k, tern_int(W));
        tern_v x[8], ok[8];
        ku_load(logits, tern_add(base, col0), W, x);
        tern_v cm = neg_inf;
        for (int j = 0; j < W; j++) {
            ok[j] = W == 1 ? tern_bool(true) : tern_lt(tern_add(col0, tern_int(j)), V);
            if (W > 1) x[j] = tern_select(ok[j], x[j], neg_inf);
            cm = j ? tern_max(cm, x[j]) : x[0];
        }
        tern_v m_new = tern_max(m, cm);
        tern_v rescale = tern_select(tern_eq(m, m_new), tern_f32(1.0f), tern_exp2(tern_mul(tern_sub(m, m_new), l2e)));
        tern_v acc = tern_mul(sum, rescale);
        for (int j = 0; j < W; j++) {
            tern_v e = tern_exp2(tern_mul(tern_sub(x[j], m_new), l2e));
            acc = tern_add(acc, W == 1 ? e : tern_select(ok[j], e, tern_f32(0.0f)));
        }
        tern_assign(sum, acc);
        tern_assign(m, m_new);
    }
    tern_v M = ku_group_reduce(kb, KU_MAX, m, scratch, G / 32);
    tern_v mine = tern_select(tern_eq(m, M), sum, tern_mul(sum, tern_exp2(tern_mul(tern_sub(m, M), l2e))));
    tern_v S = ku_group_reduce(kb, KU_SUM, mine, scratch, G / 32);
    tern_v lse = tern_add(tern_log(S), M);

    tern_v tgt = tern_load(targets, row);
    tern_v tgt_ok = tern_land(tern_ge(tgt, tern_int(0)), tern_lt(tgt, V));
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        TERN_IF(kb, tern_lnot(tgt_ok)) {
            tern_store(losses, row, tern_f32(NAN));
            ku_fault(kb, fault, GK_FAULT_CE_TARGET, row, tgt, V);
        }
        TERN_IF(kb, tern_land(tgt_ok, tern_eq(gs, tern_f32(0.0f)))) {
            tern_store(losses, row, tern_sub(lse, tern_load(logits, tern_add(base, tgt))));
        }
    }

    /* pass 2: the gradient, in place; the target's owner stores the loss first */
    TERN_IF(kb, tern_ne(gs, tern_f32(0.0f))) {
        tern_v scale = tern_div(gs, S);
        tern_v chunks_p = tern_div(Vp, tern_int(W));
        TERN_FOR(kb, k, tid, chunks_p, tern_int(G)) {
            tern_v col0 = tern_mul(k, tern_int(W));
            tern_v x[8], g[8];
            ku_load(logits, tern_add(base, col0), W, x);
            for (int j = 0; j < W; j++) {
                tern_v col = tern_add(col0, tern_int(j));
                tern_v is_t = tern_land(tgt_ok, tern_eq(col, tgt));
                TERN_IF(kb, is_t) { tern_store(losses, row, tern_sub(lse, x[j])); }
                tern_v p = tern_mul(tern_exp2(tern_mul(tern_sub(x[j], M), l2e)), scale);
                p = tern_sub(p, tern_select(is_t, gs, tern_f32(0.0f)));
                g[j] = tern_select(tern_lt(col, V), p, tern_f32(0.0f));
            }
            ku_store(logits, tern_add(base, col0), W, g);
        }
    }
}
