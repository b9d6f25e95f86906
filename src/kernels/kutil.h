/* Small DSL helpers shared by the kernel families (private to src/kernels/). */
#ifndef TERN_KERNELS_KUTIL_H
#define TERN_KERNELS_KUTIL_H

#include "kernels/kernels.h"

/* W consecutive elements of buf from index i (W = 1: a plain load), as value-type values. */
static inline void ku_load(tern_v buf, tern_v i, int w, tern_v *out) {
    if (w == 1)
        out[0] = tern_load(buf, i);
    else
        tern_load_vec(buf, i, w, out);
}

static inline void ku_store(tern_v buf, tern_v i, int w, const tern_v *values) {
    if (w == 1)
        tern_store(buf, i, values[0]);
    else
        tern_store_vec(buf, i, w, values);
}

typedef void (*ku_body)(void *ctx, tern_v i, int width);

/* Runs body(ctx, i, width) over this thread's W elements of [0, n): one thread per W
 * consecutive elements; a single 8- or 16-byte access when all W are in range, element by
 * element at the tail. */
static inline void ku_chunk(tern_kb *kb, int w, tern_v n, ku_body body, void *ctx) {
    tern_v i0 = tern_mul(tern_global_id(kb, 0), tern_int(w));
    if (w == 1) {
        TERN_IF(kb, tern_lt(i0, n)) body(ctx, i0, 1);
        return;
    }
    TERN_IF(kb, tern_le(tern_add(i0, tern_int(w)), n)) body(ctx, i0, w);
    TERN_ELSE(kb) {
        for (int j = 0; j < w; j++) {
            tern_v i = tern_add(i0, tern_int(j));
            TERN_IF(kb, tern_lt(i, n)) body(ctx, i, 1);
        }
    }
}

/* Stores W values to an f32 buffer in accesses of at most 4 (16 bytes). */
static inline void ku_store_f32(tern_v buf, tern_v i, int w, const tern_v *values) {
    int step = w > 4 ? 4 : w;
    for (int j = 0; j < w; j += step) ku_store(buf, tern_add(i, tern_int(j)), step, values + j);
}

/* A float buffer parameter of spec type t (f32, bf16 or f16). */
static inline tern_v ku_buf(tern_kb *kb, const char *name, int t, tern_intent intent) {
    return tern_param_buf(kb, name, (tern_type)t, intent);
}

typedef enum ku_reduce { KU_SUM, KU_MAX, KU_MIN } ku_reduce;

static inline tern_v ku_combine(ku_reduce op, tern_v a, tern_v b) {
    return op == KU_SUM ? tern_add(a, b) : op == KU_MAX ? tern_max(a, b) : tern_min(a, b);
}

static inline tern_v ku_simd(ku_reduce op, tern_v x) {
    return op == KU_SUM ? tern_simd_sum(x) : op == KU_MAX ? tern_simd_max(x) : tern_simd_min(x);
}

/* Reduces x over the threadgroup of `groups` SIMD groups; every thread gets the result.
 * `scratch` is a threadgroup array of at least `groups` elements of x's type. Lanes combine
 * in the SIMD butterfly, then the group partials in order 0, 1, ...: deterministic. Must
 * be reached by the whole threadgroup (it has barriers). */
static inline tern_v ku_group_reduce(tern_kb *kb, ku_reduce op, tern_v x, tern_v scratch,
                                     int groups) {
    tern_v s = ku_simd(op, x);
    if (groups == 1) return s;
    TERN_IF(kb, tern_eq(tern_simd_lane(kb), tern_int(0))) {
        tern_store(scratch, tern_simd_group(kb), s);
    }
    tern_barrier(kb);
    tern_v acc = tern_load(scratch, tern_int(0));
    for (int g = 1; g < groups; g++) acc = ku_combine(op, acc, tern_load(scratch, tern_int(g)));
    tern_barrier(kb); /* scratch may be reused right after */
    return acc;
}

/* Records fault `code` (see kernels.h) unless one is recorded already. */
static inline void ku_fault(tern_kb *kb, tern_v fault, int code, tern_v pos, tern_v value,
                            tern_v limit) {
    tern_v old = tern_atomic_cas(fault, tern_int(0), tern_int(0), tern_i32(code));
    TERN_IF(kb, tern_eq(old, tern_int(0))) {
        tern_store(fault, tern_int(1), pos);
        tern_store(fault, tern_int(2), value);
        tern_store(fault, tern_int(3), limit);
    }
}

/* One element of a running argmax (sampling's first pass, argmax.c): best and best_i take x
 * at index j when it is larger, or equal at a lower index (a NaN never); nan_i (still
 * `none`) takes j when x is NaN. Elements where *in is false (in NULL: all count) change
 * nothing. Returns whether x is a counted NaN. */
static inline tern_v ku_argmax_take(tern_v x, tern_v j, const tern_v *in, tern_v best, tern_v best_i, tern_v nan_i,
                                    tern_v none) {
    tern_v isn = tern_isnan(x);
    tern_v better = tern_lor(tern_gt(x, best), tern_land(tern_eq(x, best), tern_lt(j, best_i)));
    if (in) isn = tern_land(*in, isn), better = tern_land(*in, better);
    tern_assign(best_i, tern_select(better, j, best_i));
    tern_assign(best, tern_select(better, x, best));
    tern_assign(nan_i, tern_select(tern_land(isn, tern_eq(nan_i, none)), j, nan_i));
    return isn;
}

/* GPT-2's GELU as the cpu handler computes it: x * sigmoid(2u) = x / (1 + exp(-2u)),
 * u = sqrt(2/pi) (x + 0.044715 x^3): the tanh form without 1 + tanh's cancellation. */
#define KU_GELU_S 0.7978845608028654f
#define KU_GELU_C 0.044715f

static inline tern_v ku_gelu(tern_v x) {
    tern_v u = tern_mul(tern_f32(KU_GELU_S),
                        tern_fma(tern_mul(tern_f32(KU_GELU_C), x), tern_mul(x, x), x));
    tern_v e = tern_exp(tern_mul(tern_f32(-2.0f), u));
    return tern_div(x, tern_add(tern_f32(1.0f), e));
}

/* silu(g) u = g / (1 + exp(-g)) u, Llama's SwiGLU (swiglu.c, and gemv.c's prologue: one
 * formula, so a fused product stages the very values the swiglu pass would write); exp
 * overflowing to infinity gives 0, as it should. */
static inline tern_v ku_sigmoid(tern_v g) {
    return tern_div(tern_f32(1.0f), tern_add(tern_f32(1.0f), tern_exp(tern_neg(g))));
}
static inline tern_v ku_swiglu(tern_v g, tern_v u) { return tern_mul(tern_mul(g, ku_sigmoid(g)), u); }

/* Element d of a cached attention row merged from its S split parts at `base` of partial
 * ([S, hs + 2] f32: each part's hs sums, then its maximum m and sum of weights l, scores in
 * base 2), in split order: M = max m_s, (sum o_s[d] 2^(m_s - M)) / (sum l_s 2^(m_s - M)).
 * Written once for the attention's own merge and the GEMV that merges the parts as it
 * stages A (the same operations: the same bits). Split 0 always holds position 0, so M is
 * finite. */
static inline tern_v ku_attention_merge_new(tern_v partial, tern_v base, tern_v d, int hs, int S, tern_v at_new,
                                            int J, tern_v c);
static inline tern_v ku_attention_merge(tern_v partial, tern_v base, tern_v d, int hs, int S) {
    return ku_attention_merge_new(partial, base, d, hs, S, tern_int(0), 0, tern_f32(0.0f));
}

/* The same with the new position as one more part, last (J > 0: the attention joined the
 * q|k|v product, attention_cached.c): its score c (dot_0 + .. + dot_{J-1}) from the J partial
 * dots at at_new, its value at at_new + J + d. Parts that saw no position (m = -inf) weigh 0
 * (the new part's score is finite, and so is M). */
static inline tern_v ku_attention_merge_new(tern_v partial, tern_v base, tern_v d, int hs, int S, tern_v at_new,
                                            int J, tern_v c) {
    tern_v ms[GK_AC_MAX_SPLITS];
    tern_v M = tern_f32(0.0f), s_new = tern_f32(0.0f);
    for (int p = 0; p < S; p++) {
        ms[p] = tern_load(partial, tern_add(base, tern_int(p * (hs + 2) + hs)));
        M = p ? tern_max(M, ms[p]) : ms[0];
    }
    if (J) {
        tern_v dot = tern_load(partial, at_new);
        for (int j = 1; j < J; j++) dot = tern_add(dot, tern_load(partial, tern_add(at_new, tern_int(j))));
        s_new = tern_mul(dot, c);
        M = tern_max(M, s_new);
    }
    tern_v L = tern_f32(0.0f), O = tern_f32(0.0f);
    for (int p = 0; p < S; p++) {
        tern_v w = tern_exp2(tern_sub(ms[p], M));
        tern_v lp = tern_load(partial, tern_add(base, tern_int(p * (hs + 2) + hs + 1)));
        tern_v op = tern_load(partial, tern_add(base, tern_add(d, tern_int(p * (hs + 2)))));
        L = p ? tern_fma(lp, w, L) : tern_mul(lp, w);
        O = p ? tern_fma(op, w, O) : tern_mul(op, w);
    }
    if (J) {
        tern_v w = tern_exp2(tern_sub(s_new, M));
        L = tern_add(L, w);
        O = tern_fma(tern_load(partial, tern_add(at_new, tern_add(tern_int(J), d))), w, O);
    }
    return tern_div(O, L);
}

/* Rotary embedding's turn of the pair (x1, x2) = (x[j], x[j + hd/2]) by angle a (by -a for the
 * backward): o1 = x1 cos a - x2 sin a, o2 = x2 cos a + x1 sin a. Shared by the rope kernel
 * and the GEMV's ROPE epilogue, so both round alike. */
static inline void ku_rope_turn(tern_v x1, tern_v x2, tern_v a, bool backward, tern_v *o1, tern_v *o2) {
    tern_v c = tern_cos(a), sn = tern_sin(a);
    if (backward) sn = tern_neg(sn);
    *o1 = tern_sub(tern_mul(x1, c), tern_mul(x2, sn));
    *o2 = tern_add(tern_mul(x2, c), tern_mul(x1, sn));
}

/* d gelu / dx (see src/handlers/cpu/fastmath.h for the derivation); 0 where exp overflows. */
static inline tern_v ku_gelu_grad(tern_v x) {
    tern_v x2 = tern_mul(x, x);
    tern_v u = tern_mul(tern_f32(KU_GELU_S), tern_fma(tern_mul(tern_f32(KU_GELU_C), x), x2, x));
    tern_v e = tern_exp(tern_mul(tern_f32(-2.0f), u));
    tern_v s = tern_div(tern_f32(1.0f), tern_add(tern_f32(1.0f), e));
    tern_v one_minus_s = tern_mul(e, s);
    tern_v du = tern_mul(tern_f32(KU_GELU_S), tern_fma(tern_f32(3.0f * KU_GELU_C), x2, tern_f32(1.0f)));
    tern_v g = tern_add(s, tern_mul(tern_mul(tern_mul(tern_mul(tern_f32(2.0f), x), s), one_minus_s), du));
    return tern_select(tern_gt(e, tern_f32(3.0e38f)), tern_f32(0.0f), g);
}

/* A u32 whose ascending order is the ascending order of the float x (NaN aside). */
static inline tern_v ku_order_key(tern_v x) {
    tern_v b = tern_bitcast(x, TERN_T_U32);
    tern_v neg = tern_ne(tern_and(b, tern_u32(0x80000000u)), tern_u32(0));
    return tern_select(neg, tern_not(b), tern_or(b, tern_u32(0x80000000u)));
}

/* tern_hash32 of include/tern/rng.h, on u32 values. */
static inline tern_v ku_hash32(tern_v x) {
    x = tern_xor(x, tern_shr(x, tern_u32(16)));
    x = tern_mul(x, tern_u32(0x7feb352du));
    x = tern_xor(x, tern_shr(x, tern_u32(15)));
    x = tern_mul(x, tern_u32(0x846ca68bu));
    x = tern_xor(x, tern_shr(x, tern_u32(16)));
    return x;
}

#endif
