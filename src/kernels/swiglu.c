/* SwiGLU, Llama's MLP activation, forward and backward, elementwise over [rows, I].
 *
 * gate and up are views with rows every `ld` elements (ld >= I): two buffers (ld = I) or
 * the halves of one fused product [rows, 2 I] (gate at 0, up at I, ld = 2 I).
 *   forward   out[r, c] = silu(g) u,  silu(g) = g s,  s = 1 / (1 + exp(-g)),  g = gate[r ld + c],
 *             u = up[r ld + c]
 *   backward  dgate = dout u silu'(g),  dup = dout silu(g),  silu'(g) = s (1 + g (1 - s));
 *             dgate and dup in gate's and up's layout (they may be
 *             gate and up: each thread reads its elements before writing them)
 * out and dout are dense [rows, I].
 *
 * Spec: forward t[0] out, t[1] gate, t[2] up; backward t[0] dgate, t[1] dup, t[2] dout,
 * t[3] gate, t[4] up; n[0] = W (dividing I and ld). Parameters: forward out, gate, up, n
 * (rows * I), I, ld; backward dgate, dup, dout, gate, up, n, I, ld. One thread per W
 * elements of a row, groups of GK_EW_GROUP. */
#include "kernels/kutil.h"

typedef struct swiglu_ctx {
    tern_v out, gate, up, dgate, dup, dout, I, ld;
    bool backward;
} swiglu_ctx;

static void swiglu_body(void *p, tern_v i, int width) {
    swiglu_ctx *c = p;
    /* i and its width elements lie in one row: width divides I */
    tern_v r = tern_div(i, c->I), col = tern_sub(i, tern_mul(r, c->I));
    tern_v src = tern_add(tern_mul(r, c->ld), col);
    tern_v g[8], u[8], a[8], b[8];
    ku_load(c->gate, src, width, g);
    ku_load(c->up, src, width, u);
    if (!c->backward) {
        for (int j = 0; j < width; j++) a[j] = ku_swiglu(g[j], u[j]);
        ku_store(c->out, i, width, a);
        return;
    }
    tern_v d[8];
    ku_load(c->dout, i, width, d);
    for (int j = 0; j < width; j++) {
        tern_v s = ku_sigmoid(g[j]);
        tern_v silu = tern_mul(g[j], s);
        tern_v grad = tern_mul(s, tern_fma(g[j], tern_sub(tern_f32(1.0f), s), tern_f32(1.0f)));
        a[j] = tern_mul(tern_mul(d[j], u[j]), grad);
        b[j] = tern_mul(d[j], silu);
    }
    ku_store(c->dgate, src, width, a);
    ku_store(c->dup, src, width, b);
}

void gk_trace_swiglu(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    swiglu_ctx c = {0};
    c.out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    c.gate = ku_buf(kb, "gate", s->t[1], TERN_READ);
    c.up = ku_buf(kb, "up", s->t[2], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    c.I = tern_param_scalar(kb, "I", TERN_T_I32);
    c.ld = tern_param_scalar(kb, "ld", TERN_T_I32);
    tern_wait_previous(kb);
    ku_chunk(kb, s->n[0], n, swiglu_body, &c);
}

void gk_trace_swiglu_backward(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    swiglu_ctx c = {0};
    c.backward = true;
    c.dgate = ku_buf(kb, "dgate", s->t[0], TERN_WRITE);
    c.dup = ku_buf(kb, "dup", s->t[1], TERN_WRITE);
    c.dout = ku_buf(kb, "dout", s->t[2], TERN_READ);
    c.gate = ku_buf(kb, "gate", s->t[3], TERN_READ);
    c.up = ku_buf(kb, "up", s->t[4], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    c.I = tern_param_scalar(kb, "I", TERN_T_I32);
    c.ld = tern_param_scalar(kb, "ld", TERN_T_I32);
    tern_wait_previous(kb);
    ku_chunk(kb, s->n[0], n, swiglu_body, &c);
}
