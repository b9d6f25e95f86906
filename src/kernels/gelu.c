/* GELU (tanh form, as GPT-2) and its gradient, elementwise (see ku_chunk, ku_gelu). */
#include "kernels/kutil.h"

/* ---- gelu: t[0] out, t[1] x (out may be x) ---- */

typedef struct gelu_ctx {
    tern_v out, x, dout;
} gelu_ctx;

static void gelu_body(void *p, tern_v i, int width) {
    gelu_ctx *c = p;
    tern_v x[8];
    ku_load(c->x, i, width, x);
    for (int j = 0; j < width; j++) x[j] = ku_gelu(x[j]);
    ku_store(c->out, i, width, x);
}

void gk_trace_gelu(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    gelu_ctx c;
    c.out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    c.x = ku_buf(kb, "x", s->t[1], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    ku_chunk(kb, s->n[0], n, gelu_body, &c);
}

/* ---- gelu_backward: t[0] dx, t[1] dout, t[2] x (dx may be dout) ---- */

static void gelu_backward_body(void *p, tern_v i, int width) {
    gelu_ctx *c = p;
    tern_v x[8], g[8];
    ku_load(c->x, i, width, x);
    ku_load(c->dout, i, width, g);
    for (int j = 0; j < width; j++) x[j] = tern_mul(g[j], ku_gelu_grad(x[j]));
    ku_store(c->out, i, width, x);
}

void gk_trace_gelu_backward(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    gelu_ctx c;
    c.out = ku_buf(kb, "dx", s->t[0], TERN_WRITE);
    c.dout = ku_buf(kb, "dout", s->t[1], TERN_READ);
    c.x = ku_buf(kb, "x", s->t[2], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    ku_chunk(kb, s->n[0], n, gelu_backward_body, &c);
}
