/* AdamW, one pass over param, grad, m and v (and the shadow copy), elementwise. */
#include "kernels/kutil.h"

/* ---- adamw: t[0] grad, t[1] shadow (n[1] = 1 when present), t[2] u16 for the split
 * form (0: param f32, the spec, name and hash of the f32 form unchanged); m, v f32 ----
 * The split form's param holds the low halves (u16) and its shadow the high halves (bound
 * as u16, t[1]) of the f32 parameter (tern_f32_split in tern/half.h). The split form
 * moves both halves as bits, and its shadow is the high half (rounded to nearest, ties away
 * from zero) where the f32 form's bf16 shadow is the store's round to nearest even.
 * Scalars: n, lr, beta1, beta2, eps, weight_decay, grad_scale, 1 / (1 - beta1^step),
 * 1 / (1 - beta2^step) (the bias corrections are computed on the host in double). */

typedef struct adamw_ctx {
    tern_v param, grad, m, v, shadow;
    tern_v lr, b1, b2, eps, wd, gs, ibc1, ibc2;
    bool has_shadow, split;
} adamw_ctx;

/* The f32 of a split parameter from its halves (u32 values): (hi << 16) + lo - 0x8000. */
static tern_v adamw_join(tern_v hi, tern_v lo) {
    tern_v bits = tern_sub(tern_add(tern_shl(hi, tern_u32(16)), lo), tern_u32(0x8000u));
    return tern_bitcast(bits, TERN_T_F32);
}

/* The split parameter's halves, both still in the biased u32 b = bits + 0x8000: a u16
 * store keeps b's low 16 bits (*lo), *hi is b >> 16. */
static void adamw_split(tern_v p, tern_v *hi, tern_v *lo) {
    tern_v b = tern_add(tern_bitcast(p, TERN_T_U32), tern_u32(0x8000u));
    *hi = tern_shr(b, tern_u32(16));
    *lo = b;
}

static void adamw_body(void *p, tern_v i, int width) {
    adamw_ctx *c = p;
    tern_v pw[8], g[8], m[8], v[8], hi[8];
    ku_load(c->param, i, width, pw);
    if (c->split) {
        ku_load(c->shadow, i, width, hi);
        for (int j = 0; j < width; j++) pw[j] = adamw_join(hi[j], pw[j]);
    }
    ku_load(c->grad, i, width, g);
    ku_load(c->m, i, width, m);
    ku_load(c->v, i, width, v);
    tern_v one = tern_f32(1.0f);
    for (int j = 0; j < width; j++) {
        tern_v gi = tern_mul(g[j], c->gs);
        m[j] = tern_fma(c->b1, m[j], tern_mul(tern_sub(one, c->b1), gi));
        v[j] = tern_fma(c->b2, v[j], tern_mul(tern_mul(tern_sub(one, c->b2), gi), gi));
        tern_v step = tern_div(tern_mul(m[j], c->ibc1),
                               tern_add(tern_sqrt(tern_mul(v[j], c->ibc2)), c->eps));
        pw[j] = tern_sub(pw[j], tern_mul(c->lr, tern_fma(c->wd, pw[j], step)));
    }
    ku_store(c->m, i, width, m);
    ku_store(c->v, i, width, v);
    if (c->split) {
        for (int j = 0; j < width; j++) adamw_split(pw[j], &hi[j], &pw[j]);
        ku_store(c->param, i, width, pw);
        ku_store(c->shadow, i, width, hi);
        return;
    }
    ku_store(c->param, i, width, pw);
    if (c->has_shadow) ku_store(c->shadow, i, width, pw);
}

void gk_trace_adamw(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    adamw_ctx c;
    c.has_shadow = s->n[1] != 0;
    c.split = s->t[2] == TERN_T_U16;
    c.param = tern_param_buf(kb, "param", c.split ? TERN_T_U16 : TERN_T_F32, TERN_READ_WRITE);
    c.grad = ku_buf(kb, "grad", s->t[0], TERN_READ);
    c.m = tern_param_buf(kb, "m", TERN_T_F32, TERN_READ_WRITE);
    c.v = tern_param_buf(kb, "v", TERN_T_F32, TERN_READ_WRITE);
    if (c.has_shadow) c.shadow = ku_buf(kb, "shadow", s->t[1], c.split ? TERN_READ_WRITE : TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    c.lr = tern_param_scalar(kb, "lr", TERN_T_F32);
    c.b1 = tern_param_scalar(kb, "beta1", TERN_T_F32);
    c.b2 = tern_param_scalar(kb, "beta2", TERN_T_F32);
    c.eps = tern_param_scalar(kb, "eps", TERN_T_F32);
    c.wd = tern_param_scalar(kb, "weight_decay", TERN_T_F32);
    c.gs = tern_param_scalar(kb, "grad_scale", TERN_T_F32);
    c.ibc1 = tern_param_scalar(kb, "inv_bc1", TERN_T_F32);
    c.ibc2 = tern_param_scalar(kb, "inv_bc2", TERN_T_F32);
    ku_chunk(kb, s->n[0], n, adamw_body, &c);
}
