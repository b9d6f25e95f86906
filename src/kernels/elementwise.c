/* Elementwise kernels: fill, copy (with dtype conversion) and add. One thread per W
 * consecutive elements (n[0] = W); see ku_chunk. */
#include "kernels/kutil.h"

/* ---- fill: t[0] dst; scalar value of dst's value type (f32, i32 or u32) ---- */

typedef struct fill_ctx {
    tern_v dst, value;
} fill_ctx;

static void fill_body(void *p, tern_v i, int width) {
    fill_ctx *c = p;
    tern_v v[8];
    for (int j = 0; j < width; j++) v[j] = c->value;
    ku_store(c->dst, i, width, v);
}

void gk_trace_fill(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    fill_ctx c;
    c.dst = tern_param_buf(kb, "dst", (tern_type)s->t[0], TERN_WRITE);
    c.value = tern_param_scalar(kb, "value", tern_type_value((tern_type)s->t[0]));
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    ku_chunk(kb, s->n[0], n, fill_body, &c);
}

/* ---- copy: t[0] dst, t[1] src, any of the five dtypes ----
 * Floats round to nearest even (the store does it); floats to integers truncate toward
 * zero and saturate, NaN giving 0 (as the cpu handler); integers to u16 saturate. */

typedef struct copy_ctx {
    tern_v dst, src;
    int dst_t; /* value type of dst */
    int src_t;
} copy_ctx;

static tern_v convert_value(const copy_ctx *c, tern_v x) {
    if (c->src_t == c->dst_t) return x;
    if (c->src_t == TERN_T_F32) {
        tern_v z = tern_select(tern_isnan(x), tern_f32(0.0f), x);
        if (c->dst_t == TERN_T_I32) {
            /* [-2^31, 2^31): cast; beyond: the limits */
            tern_v lo = tern_f32(-2147483648.0f), hi = tern_f32(2147483648.0f);
            tern_v cl = tern_min(tern_max(z, lo), tern_f32(2147483520.0f));
            tern_v r = tern_cast(cl, TERN_T_I32);
            return tern_select(tern_ge(z, hi), tern_i32(INT32_MAX), r);
        }
        /* u16 */
        tern_v cl = tern_min(tern_max(z, tern_f32(0.0f)), tern_f32(65535.0f));
        return tern_cast(cl, TERN_T_U32);
    }
    if (c->src_t == TERN_T_I32) {
        if (c->dst_t == TERN_T_F32) return tern_cast(x, TERN_T_F32);
        /* i32 to u16 */
        tern_v cl = tern_min(tern_max(x, tern_i32(0)), tern_i32(65535));
        return tern_cast(cl, TERN_T_U32);
    }
    /* u32 (from u16) */
    if (c->dst_t == TERN_T_F32) return tern_cast(x, TERN_T_F32);
    return tern_cast(x, TERN_T_I32);
}

static void copy_body(void *p, tern_v i, int width) {
    copy_ctx *c = p;
    tern_v v[8];
    ku_load(c->src, i, width, v);
    for (int j = 0; j < width; j++) v[j] = convert_value(c, v[j]);
    ku_store(c->dst, i, width, v);
}

void gk_trace_copy(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    copy_ctx c;
    c.dst = tern_param_buf(kb, "dst", (tern_type)s->t[0], TERN_WRITE);
    c.src = tern_param_buf(kb, "src", (tern_type)s->t[1], TERN_READ);
    c.dst_t = tern_type_value((tern_type)s->t[0]);
    c.src_t = tern_type_value((tern_type)s->t[1]);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    ku_chunk(kb, s->n[0], n, copy_body, &c);
}

/* ---- add: t[0] out, t[1] a, t[2] b (out may be a or b: each element is read before it
 * is written, by the same thread) ---- */

typedef struct add_ctx {
    tern_v out, a, b;
} add_ctx;

static void add_body(void *p, tern_v i, int width) {
    add_ctx *c = p;
    tern_v x[8], y[8];
    ku_load(c->a, i, width, x);
    ku_load(c->b, i, width, y);
    for (int j = 0; j < width; j++) x[j] = tern_add(x[j], y[j]);
    ku_store(c->out, i, width, x);
}

void gk_trace_add(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    add_ctx c;
    c.out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    c.a = ku_buf(kb, "a", s->t[1], TERN_READ);
    c.b = ku_buf(kb, "b", s->t[2], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    ku_chunk(kb, s->n[0], n, add_body, &c);
}
