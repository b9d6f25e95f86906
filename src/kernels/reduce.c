/* Reductions, deterministic (fixed order, no float atomics), in two passes where one
 * column or one total would leave the GPU mostly idle:
 *   sum_rows: partial sums over chunks of GK_SR_ROWS rows, then a finishing pass per column;
 *   norm2: per-group sums of squares (the host adds the groups' partials in double);
 *   partial_add: acc[c] += the sum of per-SIMD-group partial rows (layernorm's dw, db). */
#include "kernels/kutil.h"

/* t[0] x. Parameters: partial, x, rows, cols, per. partial[chunk, c] = sum over rows
 * [chunk * per, (chunk + 1) * per) of x[r, c]; grid (ceil(cols / GK_SR_GROUP), chunks). */
void gk_trace_sum_rows_partial(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[0], TERN_READ);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v cols = tern_param_scalar(kb, "cols", TERN_T_I32);
    tern_v per = tern_param_scalar(kb, "per", TERN_T_I32);
    tern_v c = tern_global_id(kb, 0);
    tern_v chunk = tern_group_id(kb, 1);
    TERN_IF(kb, tern_lt(c, cols)) {
        tern_v r0 = tern_mul(chunk, per);
        tern_v r1 = tern_min(rows, tern_add(r0, per));
        tern_v acc = tern_var(kb, "acc", tern_f32(0.0f));
        TERN_FOR(kb, r, r0, r1, tern_int(1)) {
            tern_assign(acc, tern_add(acc, tern_load(x, tern_add(tern_mul(r, cols), c))));
        }
        tern_store(partial, tern_add(tern_mul(chunk, cols), c), acc);
    }
}

/* t[0] out. out[c] = sum over chunks of partial[chunk, c] (+ beta out[c] when beta != 0:
 * out is not read otherwise, so it may hold NaN). One thread per column. */
void gk_trace_sum_rows_finish(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    tern_v out = ku_buf(kb, "out", s->t[0], TERN_READ_WRITE);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_READ);
    tern_v cols = tern_param_scalar(kb, "cols", TERN_T_I32);
    tern_v chunks = tern_param_scalar(kb, "chunks", TERN_T_I32);
    tern_v beta = tern_param_scalar(kb, "beta", TERN_T_F32);
    tern_v c = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(c, cols)) {
        tern_v acc = tern_var(kb, "acc", tern_f32(0.0f));
        TERN_FOR(kb, k, tern_int(0), chunks, tern_int(1)) {
            tern_assign(acc, tern_add(acc, tern_load(partial, tern_add(tern_mul(k, cols), c))));
        }
        TERN_IF(kb, tern_ne(beta, tern_f32(0.0f))) {
            tern_assign(acc, tern_fma(beta, tern_load(out, c), acc));
        }
        tern_store(out, c, acc);
    }
}

/* t[0] x. partial[g] = sum of x[i]^2 over group g's span [g * span, (g + 1) * span) of
 * [0, n), each thread's share summed with Kahan compensation, then the group's threads
 * in the fixed SIMD/group order. Groups of GK_SS_GROUP. */
void gk_trace_sum_squares(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_WRITE);
    tern_v x = ku_buf(kb, "x", s->t[0], TERN_READ);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v span = tern_param_scalar(kb, "span", TERN_T_I32);
    tern_v scratch = tern_shared(kb, "scratch", TERN_T_F32, GK_SS_GROUP / 32);
    tern_v g = tern_group_id(kb, 0);
    tern_v start = tern_mul(g, span);
    tern_v end = tern_min(n, tern_add(start, span));
    tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
    tern_v comp = tern_var(kb, "comp", tern_f32(0.0f));
    TERN_FOR(kb, i, tern_add(start, tern_local_id(kb, 0)), end, tern_int(GK_SS_GROUP)) {
        tern_v v = tern_load(x, i);
        tern_v y = tern_sub(tern_mul(v, v), comp);
        tern_v t = tern_add(sum, y);
        tern_assign(comp, tern_sub(tern_sub(t, sum), y));
        tern_assign(sum, t);
    }
    tern_v total = ku_group_reduce(kb, KU_SUM, sum, scratch, GK_SS_GROUP / 32);
    TERN_IF(kb, tern_eq(tern_local_id(kb, 0), tern_int(0))) { tern_store(partial, g, total); }
}

/* t[0] acc. acc[c] += sum over p < count of partial[p * stride + offset + c], c < C.
 * One thread per column. */
void gk_trace_partial_add(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    tern_v acc = ku_buf(kb, "acc", s->t[0], TERN_READ_WRITE);
    tern_v partial = tern_param_buf(kb, "partial", TERN_T_F32, TERN_READ);
    tern_v count = tern_param_scalar(kb, "count", TERN_T_I32);
    tern_v C = tern_param_scalar(kb, "C", TERN_T_I32);
    tern_v stride = tern_param_scalar(kb, "stride", TERN_T_I32);
    tern_v offset = tern_param_scalar(kb, "offset", TERN_T_I32);
    tern_v c = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(c, C)) {
        tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
        tern_v base = tern_add(offset, c);
        TERN_FOR(kb, p, tern_int(0), count, tern_int(1)) {
            tern_assign(sum, tern_add(sum, tern_load(partial, tern_add(tern_mul(p, stride), base))));
        }
        tern_store(acc, c, tern_add(tern_load(acc, c), sum));
    }
}
