/* Rotary position embedding in Hugging Face's rotate-half layout, forward and backward.
 *
 * x holds rows (b, t) of `heads` heads of hd channels each, a row every `stride` elements
 * (a slice of a wider row: q and k of a fused qkv). Channel j < hd/2 of a head pairs with
 * channel j + hd/2; with angle a = float(pos[row]) * inv_freq[j] (one f32 product, as
 * transformers computes it):
 *   forward   out[j] = x[j] cos a - x[j + hd/2] sin a,  out[j + hd/2] = x[j + hd/2] cos a + x[j] sin a
 *   backward  the same rotation by -a (the transpose of the forward's: dx from dout)
 * out may be x (each thread reads its elements before writing them).
 *
 * Spec: t[0] out, t[1] x; n[0] = hd (even); n[1] = W, pairs per thread (dividing hd / 2,
 * stride, and the views' offsets); n[2] = 1 for the backward. Parameters: out, x, pos (i32
 * [rows]), inv_freq (f32 [hd / 2]), pairs (rows * heads * hd / 2), heads, stride. One thread
 * per W pairs, groups of GK_EW_GROUP. */
#include "kernels/kutil.h"

void gk_trace_rope(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int hd = s->n[0], W = s->n[1], half = hd / 2;
    bool backward = s->n[2] != 0;
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[1], TERN_READ);
    tern_v pos = tern_param_buf(kb, "pos", TERN_T_I32, TERN_READ);
    tern_v inv_freq = tern_param_buf(kb, "inv_freq", TERN_T_F32, TERN_READ);
    tern_v pairs = tern_param_scalar(kb, "pairs", TERN_T_I32);
    tern_v heads = tern_param_scalar(kb, "heads", TERN_T_I32);
    tern_v stride = tern_param_scalar(kb, "stride", TERN_T_I32);
    tern_v p = tern_name(tern_mul(tern_global_id(kb, 0), tern_int(W)), "p");
    tern_wait_previous(kb);
    TERN_IF(kb, tern_lt(p, pairs)) {
        tern_v rh = tern_div(p, tern_int(half)), j = tern_sub(p, tern_mul(rh, tern_int(half)));
        tern_v row = tern_div(rh, heads), h = tern_sub(rh, tern_mul(row, heads));
        tern_v lo = tern_name(tern_add(tern_add(tern_mul(row, stride), tern_mul(h, tern_int(hd))), j), "lo");
        tern_v hi = tern_add(lo, tern_int(half));
        tern_v at = tern_cast(tern_load(pos, row), TERN_T_F32);
        tern_v x1[8], x2[8], f[8], o1[8], o2[8];
        ku_load(x, lo, W, x1);
        ku_load(x, hi, W, x2);
        ku_load(inv_freq, j, W, f);
        for (int k = 0; k < W; k++) {
            ku_rope_turn(x1[k], x2[k], tern_mul(at, f[k]), backward, &o1[k], &o2[k]);
        }
        ku_store(out, lo, W, o1);
        ku_store(out, hi, W, o2);
    }
}
