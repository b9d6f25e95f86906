/* Reductions, deterministic (fixed order, no float atomics), in two passes where one
 * column or one total would leave the GPU mostly idle:
 *   sum_rows: partial sums over chunks of rows, then partial_add per column;
 *   norm2: per-group float-float sums of squares (the host adds them in double);
 *   partial_add: acc[c] += the sum of per-SIMD-group partial rows (layernorm's dw, db). */
#include "kernels/kutil.h"

/* t[0] x; n[0] W, the columns a thread takes (cols a multiple of W; 0 is 1). Parameters:
 * partial, x, rows, cols, per. partial[chunk, c] = sum over rows [chunk * per, (chunk + 1) *
 * per) of x[r, c], in row order; grid (ceil(cols / W / GK_SR_GROUP), chunks). The rows go
 * four at a time, their loads issued together (with one W-wide load a row, one row in flight
 * a thread streamed a bias gradient's 100 MB at under 3 TB/s on the H200). */
void gk_trace_sum_rows_partial(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int W = s->n[0] > 1 ? s->n[0] : 1;
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[0], TERN_READ);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v cols = tern_param_scalar(kb, "cols", TERN_T_I32);
    tern_v per = tern_param_scalar(kb, "per", TERN_T_I32);
    tern_v c = tern_mul(tern_global_id(kb, 0), tern_int(W));
    tern_v chunk = tern_group_id(kb, 1);
    TERN_IF(kb, tern_lt(c, cols)) {
        tern_v r0 = tern_mul(chunk, per);
        tern_v r1 = tern_min(rows, tern_add(r0, per));
        tern_v r4 = tern_add(r0, tern_mul(tern_div(tern_sub(r1, r0), tern_int(4)), tern_int(4)));
        tern_v acc[8];
        for (int j = 0; j < W; j++) acc[j] = tern_var(kb, "acc", tern_f32(0.0f));
        TERN_FOR(kb, r, r0, r4, tern_int(4)) {
            tern_v v[4][8];
            for (int u = 0; u < 4; u++) ku_load(x, tern_add(tern_mul(tern_add(r, tern_int(u)), cols), c), W, v[u]);
            for (int j = 0; j < W; j++) {
                tern_v a = acc[j];
                for (int u = 0; u < 4; u++) a = tern_add(a, v[u][j]);
                tern_assign(acc[j], a);
            }
        }
        TERN_FOR(kb, r, r4, r1, tern_int(1)) {
            tern_v v[8];
            ku_load(x, tern_add(tern_mul(r, cols), c), W, v);
            for (int j = 0; j < W; j++) tern_assign(acc[j], tern_add(acc[j], v[j]));
        }
        ku_store_f32(partial, tern_add(tern_mul(chunk, cols), c), W, acc);
    }
}

/* (hi, lo) += (a, b) in float-float arithmetic: hi + lo carries about 48 bits. TwoSum gives
 * the exact rounding error of hi + a whatever the operands' order. */
static void ff_add(tern_kb *kb, tern_v hi, tern_v lo, tern_v a, tern_v b) {
    (void)kb;
    tern_v s = tern_add(hi, a);
    tern_v bb = tern_sub(s, hi);
    tern_v e = tern_add(tern_sub(hi, tern_sub(s, bb)), tern_sub(a, bb));
    tern_assign(lo, tern_add(tern_add(lo, b), e));
    tern_assign(hi, s);
}

/* t[0] x; n[0] W, the elements a load (n and span multiples of W; 0 is 1). Parameters:
 * partial (f32 [2 groups]: hi, then lo), x, n, span. Group g sums x[i]^2 over its span
 * [g span, (g + 1) span) of [0, n) in float-float (each square exact as x*x plus fma(x, x,
 * -x*x)): norm2's contract asks for double accumulation, which the DSL has not; float-float
 * is as good. Lanes combine in a butterfly (every lane gets the same sum), SIMD groups in
 * order; the host adds the groups' hi + lo in double. Groups of GK_SS_GROUP. W-wide loads
 * keep enough bytes in flight to stream the buffer (one bf16 a load did not: 3 TB/s for
 * GPT-2's gradients on the H200). */
void gk_trace_sum_squares(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[0], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v span = tern_param_scalar(kb, "span", TERN_T_I32);
    tern_v sh = tern_shared(kb, "sh", TERN_T_F32, GK_SS_GROUP / 32);
    tern_v sl = tern_shared(kb, "sl", TERN_T_F32, GK_SS_GROUP / 32);
    tern_v g = tern_group_id(kb, 0);
    tern_v start = tern_mul(g, span);
    tern_v end = tern_min(n, tern_add(start, span));
    tern_v hi = tern_var(kb, "hi", tern_f32(0.0f));
    tern_v lo = tern_var(kb, "lo", tern_f32(0.0f));
    int W = s->n[0] > 1 ? s->n[0] : 1;
    TERN_FOR(kb, i, tern_add(start, tern_mul(tern_local_id(kb, 0), tern_int(W))), end, tern_int(GK_SS_GROUP * W)) {
        tern_v v[8];
        ku_load(x, i, W, v);
        for (int j = 0; j < W; j++) {
            tern_v p = tern_mul(v[j], v[j]);
            ff_add(kb, hi, lo, p, tern_fma(v[j], v[j], tern_neg(p)));
        }
    }
    for (int off = 16; off >= 1; off /= 2) {
        tern_v oh = tern_simd_shuffle_xor(hi, tern_int(off));
        tern_v ol = tern_simd_shuffle_xor(lo, tern_int(off));
        ff_add(kb, hi, lo, oh, ol);
    }
    TERN_IF(kb, tern_eq(tern_simd_lane(kb), tern_int(0))) {
        tern_store(sh, tern_simd_group(kb), hi);
        tern_store(sl, tern_simd_group(kb), lo);
    }
    tern_barrier(kb);
    TERN_IF(kb, tern_eq(tern_local_id(kb, 0), tern_int(0))) {
        tern_v th = tern_var(kb, "th", tern_load(sh, tern_int(0)));
        tern_v tl = tern_var(kb, "tl", tern_load(sl, tern_int(0)));
        for (int q = 1; q < GK_SS_GROUP / 32; q++) ff_add(kb, th, tl, tern_load(sh, tern_int(q)), tern_load(sl, tern_int(q)));
        tern_store(partial, g, th);
        tern_store(partial, tern_add(g, tern_group_count(kb, 0)), tl);
    }
}

/* t[0] acc (t[1] acc2); n[0] the destinations, 1 (0) or 2. Parameters: acc, [acc2,] partial,
 * count, C, [C2,] stride, offset, [offset2,] beta.
 * acc[c] = beta acc[c] + sum over p < count of partial[p stride + offset + c], for c < C
 * (beta == 0: acc is not read, it may hold NaN); with two destinations also acc2[c] from
 * partial columns offset2 + c, c < C2, by the groups after acc's: two outputs of one
 * partial buffer (a layer norm's dw|db and dsum) in one launch. A group of GK_PA_GROUP
 * threads takes 32 columns: SIMD group w sums the rows p = w, w + 32, ... in order (lanes
 * are columns, so each row's 32 reads are one coalesced access), then lane c of the first
 * SIMD group adds the 32 partial sums in order: deterministic, and with many rows in
 * flight. */
void gk_trace_partial_add(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    const int W = GK_PA_GROUP / 32;
    bool two = s->n[0] == 2;
    tern_v acc = ku_buf(kb, "acc", s->t[0], TERN_READ_WRITE);
    tern_v acc2 = two ? ku_buf(kb, "acc2", s->t[1], TERN_READ_WRITE) : tern_int(0);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_READ);
    tern_v count = tern_param_scalar(kb, "count", TERN_T_I32);
    tern_v C1 = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v C2 = two ? tern_param_scalar(kb, "C2", TERN_T_I32) : tern_int(0);
    tern_v stride = tern_param_scalar(kb, "stride", TERN_T_I32);
    tern_v offset1 = tern_param_scalar(kb, "offset", TERN_T_I32);
    tern_v offset2 = two ? tern_param_scalar(kb, "offset2", TERN_T_I32) : tern_int(0);
    tern_v beta = tern_param_scalar(kb, "beta", TERN_T_F32);
    tern_v red = tern_shared(kb, "red", TERN_T_F32, (size_t)W * 33);
    tern_v lane = tern_simd_lane(kb), w = tern_simd_group(kb);
    /* which destination the group serves, and its column block there */
    tern_v g = tern_group_id(kb, 0), g1 = tern_div(tern_add(C1, tern_int(31)), tern_int(32));
    tern_v second = two ? tern_ge(g, g1) : tern_bool(false);
    tern_v block = two ? tern_select(second, tern_sub(g, g1), g) : g;
    tern_v C = two ? tern_select(second, C2, C1) : C1;
    tern_v offset = two ? tern_select(second, offset2, offset1) : offset1;
    tern_v c = tern_add(tern_mul(block, tern_int(32)), lane);
    tern_v cc = tern_min(c, tern_sub(C, tern_int(1)));
    tern_v base = tern_add(offset, cc);
    tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
    TERN_FOR(kb, p, w, count, tern_int(W)) {
        tern_assign(sum, tern_add(sum, tern_load(partial, tern_add(tern_mul(p, stride), base))));
    }
    tern_store(red, tern_add(tern_mul(w, tern_int(33)), lane), sum);
    tern_barrier(kb);
    TERN_IF(kb, tern_land(tern_eq(w, tern_int(0)), tern_lt(c, C))) {
        tern_v total = tern_load(red, lane);
        for (int q = 1; q < W; q++) total = tern_add(total, tern_load(red, tern_add(lane, tern_int(q * 33))));
        tern_v old = tern_var(kb, "old", tern_f32(0.0f));
        if (!two) {
            TERN_IF(kb, tern_ne(beta, tern_f32(0.0f))) { tern_assign(old, tern_mul(beta, tern_load(acc, c))); }
            tern_store(acc, c, tern_add(total, old));
        } else {
            TERN_IF(kb, tern_lnot(second)) {
                TERN_IF(kb, tern_ne(beta, tern_f32(0.0f))) { tern_assign(old, tern_mul(beta, tern_load(acc, c))); }
                tern_store(acc, c, tern_add(total, old));
            }
            TERN_ELSE(kb) {
                TERN_IF(kb, tern_ne(beta, tern_f32(0.0f))) { tern_assign(old, tern_mul(beta, tern_load(acc2, c))); }
                tern_store(acc2, c, tern_add(total, old));
            }
        }
    }
}
