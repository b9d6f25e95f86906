/* Fused softmax + cross-entropy, one threadgroup per row of logits [rows, Vp].
 *
 * Pass 1 keeps an online (max, sum of exp) per thread over 16-byte chunks of the row and
 * combines them across the group; the loss is logsumexp - logits[target]. When grad_scale
 * != 0, pass 2 reads the row again (it is still in cache) and overwrites it with
 * softmax * grad_scale, and 0 in the padding columns [V, Vp); then thread 0 writes the
 * target's element, softmax - 1 times grad_scale, from the logit it read before pass 2.
 *
 * Exponentials are taken in base 2, exp2((x - m) log2(e)): one hardware instruction where
 * exp is several (x - m first, so the maximum itself gives exactly 1). Both passes walk the
 * chunks wholly before V without a mask, the few after it (the padding) apart.
 *
 * On CUDA the groups are of 1,024 threads (gpu_core's ce_group): two rows per multiprocessor
 * at a time, 26 MB of rows across the H200, which stay in its 50 MB L2 between the passes;
 * with 512 threads (four rows at a time) they did not, and pass 2 read the logits from memory again (1.14 against
 * 0.90 ms for 16 x 1024 rows of 50,304: bench/h200/NOTES.md, run 42).
 *
 * Spec: t[0] logits; n[0] = W (Vp % W == 0 and rows aligned when W > 1); n[1] = the group
 * size (a multiple of 32; 0: GK_CE_GROUP).
 * Parameters: losses (f32), logits, targets (i32), fault, V, Vp, grad_scale. */
#include <math.h>

#include "kernels/kutil.h"

/* What both passes read: the row and its geometry. */
typedef struct ce_ctx {
    tern_v logits, base, V;
    int W;
    bool masked;   /* the chunks that reach past V (their columns there are padding) */
    tern_v m, sum;   /* pass 1: the running maximum and sum */
    tern_v M, scale; /* pass 2: the row's maximum and grad_scale / sum */
} ce_ctx;

/* Loads chunk k into x [W]; masked: columns past V become -inf. */
static void ce_load(const ce_ctx *c, tern_v k, tern_v *x) {
    tern_v col0 = tern_mul(k, tern_int(c->W));
    ku_load(c->logits, tern_add(c->base, col0), c->W, x);
    if (c->masked)
        for (int j = 0; j < c->W; j++)
            x[j] = tern_select(tern_lt(tern_add(col0, tern_int(j)), c->V), x[j], tern_f32(-INFINITY));
}

/* Pass 1 on chunk k: the running maximum m and sum of exp2((x - m) l2e) (a -inf column
 * adds exp2(-inf) = 0). */
static void ce_pass1(const ce_ctx *c, tern_v k) {
    tern_v l2e = tern_f32(1.44269504088896341f); /* log2(e) */
    tern_v x[8];
    ce_load(c, k, x);
    int n = c->W;
    tern_v cm = x[0];
    for (int j = 1; j < n; j++) cm = tern_max(cm, x[j]);
    tern_v m_new = tern_max(c->m, cm);
    /* equal maxima rescale by exactly 1 (and two infinities give no NaN) */
    tern_v rescale = tern_select(tern_eq(c->m, m_new), tern_f32(1.0f), tern_exp2(tern_mul(tern_sub(c->m, m_new), l2e)));
    tern_v acc = tern_mul(c->sum, rescale);
    for (int j = 0; j < n; j++) acc = tern_add(acc, tern_exp2(tern_mul(tern_sub(x[j], m_new), l2e)));
    tern_assign(c->sum, acc);
    tern_assign(c->m, m_new);
}

/* Pass 2 on chunk k: each element becomes exp2((x - M) l2e) scale (0 for a -inf column:
 * the padding when masked). */
static void ce_pass2(const ce_ctx *c, tern_v k) {
    tern_v l2e = tern_f32(1.44269504088896341f);
    tern_v x[8], g[8];
    ce_load(c, k, x);
    for (int j = 0; j < c->W; j++) g[j] = tern_mul(tern_exp2(tern_mul(tern_sub(x[j], c->M), l2e)), c->scale);
    ku_store(c->logits, tern_add(c->base, tern_mul(k, tern_int(c->W))), c->W, g);
}

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
    tern_v l2e = tern_f32(1.44269504088896341f);
    tern_v whole = tern_div(V, tern_int(W));                               /* chunks before V */
    tern_v chunks_v = tern_div(tern_add(V, tern_int(W - 1)), tern_int(W)); /* chunks holding a column < V */

    /* pass 1: online max and sum per thread */
    tern_v m = tern_var(kb, "m", tern_f32(-INFINITY));
    tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
    ce_ctx c = {.logits = logits, .base = base, .V = V, .W = W, .m = m, .sum = sum};
    TERN_FOR(kb, k, tid, whole, tern_int(G)) { ce_pass1(&c, k); }
    c.masked = true;
    TERN_FOR(kb, k, tern_add(whole, tid), chunks_v, tern_int(G)) { ce_pass1(&c, k); }

    /* the target's logit, read by thread 0 before the reductions' barriers, so before any
     * thread overwrites it in pass 2 */
    tern_v tgt = tern_load(targets, row);
    tern_v tgt_ok = tern_land(tern_ge(tgt, tern_int(0)), tern_lt(tgt, V));
    tern_v x_t = tern_load(logits, tern_add(base, tern_select(tgt_ok, tgt, tern_int(0))));

    tern_v M = ku_group_reduce(kb, KU_MAX, m, scratch, G / 32);
    tern_v mine = tern_select(tern_eq(m, M), sum, tern_mul(sum, tern_exp2(tern_mul(tern_sub(m, M), l2e))));
    tern_v S = ku_group_reduce(kb, KU_SUM, mine, scratch, G / 32);
    tern_v lse = tern_add(tern_log(S), M);

    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        TERN_IF(kb, tern_lnot(tgt_ok)) {
            tern_store(losses, row, tern_f32(NAN));
            ku_fault(kb, fault, GK_FAULT_CE_TARGET, row, tgt, V);
        }
        TERN_IF(kb, tgt_ok) { tern_store(losses, row, tern_sub(lse, x_t)); }
    }

    /* pass 2: the gradient, in place; then the target's element */
    TERN_IF(kb, tern_ne(gs, tern_f32(0.0f))) {
        c.M = M;
        c.scale = tern_div(gs, S);
        c.masked = false;
        TERN_FOR(kb, k, tid, whole, tern_int(G)) { ce_pass2(&c, k); }
        c.masked = true;
        TERN_FOR(kb, k, tern_add(whole, tid), tern_div(Vp, tern_int(W)), tern_int(G)) { ce_pass2(&c, k); }
        tern_barrier(kb); /* the target's element was written in pass 2 by its owner */
        TERN_IF(kb, tern_land(tern_eq(tid, tern_int(0)), tgt_ok)) {
            tern_v p = tern_mul(tern_exp2(tern_mul(tern_sub(x_t, M), l2e)), c.scale);
            tern_store(logits, tern_add(base, tgt), tern_sub(p, gs));
        }
    }
}
