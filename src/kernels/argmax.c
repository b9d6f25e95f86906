/* Greedy sampling of few rows (decoding): each row's argmax over many groups, not one.
 *
 * The sample kernel gives a row one group, which on an H200 walked GPT-2's 50,257 logits on
 * a single multiprocessor in 13 us (bench/h200/NOTES.md, run 38). Here P groups share a row:
 * ARGMAX_PARTIAL's group (p, row) finds, over its part of the row (chunk columns from p
 * chunk), the maximum, the lowest index holding it and the lowest index of a NaN; then
 * ARGMAX_MERGE, one SIMD group per row, combines the P parts: the maximum of the maxima, the
 * lowest index among the parts that hold it, the lowest NaN. The result is the sample
 * kernel's greedy one, its ties (lowest index) and its NaN fault included.
 *
 * ARGMAX_PARTIAL. Spec: t[0] logits; n[0] = G, threads per group. Parameters: part_v (f32
 * [rows, P]), part_i (i32 [rows, P, 2]: argmax, first NaN; INT32_MAX for none), logits, V,
 * Vp, chunk. Grid (P, rows).
 * ARGMAX_MERGE. Parameters: out (i32 [rows]), part_v, part_i, fault, V, P. Grid rows groups of
 * 32. A row with a NaN gets 0 and records GK_FAULT_SAMPLE_NAN (row, column, V). */
#include <math.h>
#include <stdint.h>

#include "kernels/kutil.h"

#define ARGMAX_UNROLL 4 /* elements a thread loads together */

void gk_trace_argmax_partial(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    int G = s->n[0], SG = G / 32;
    tern_v part_v = tern_param_buf(kb, "part_v", TERN_T_F32, TERN_WRITE);
    tern_v part_i = tern_param_buf(kb, "part_i", TERN_T_I32, TERN_WRITE);
    tern_v logits = ku_buf(kb, "logits", s->t[0], TERN_READ);
    tern_v V = tern_param_scalar(kb, "V", TERN_T_I32);
    tern_v Vp = tern_param_scalar(kb, "Vp", TERN_T_I32);
    tern_v chunk = tern_param_scalar(kb, "chunk", TERN_T_I32);
    tern_v red_f = tern_shared(kb, "red_f", TERN_T_F32, (size_t)SG);
    tern_v red_i = tern_shared(kb, "red_i", TERN_T_I32, (size_t)SG);
    tern_max_threads(kb, G);
    tern_wait_previous(kb); /* launched early (CUDA); everything it reads comes after */

    tern_v p = tern_group_id(kb, 0), row = tern_group_id(kb, 1), P = tern_group_count(kb, 0);
    tern_v tid = tern_local_id(kb, 0);
    tern_v base = tern_mul(row, Vp);
    tern_v lo = tern_mul(p, chunk), hi = tern_min(V, tern_add(lo, chunk));
    tern_v none = tern_i32(INT32_MAX);
    tern_v best = tern_var(kb, "best", tern_f32(-INFINITY));
    tern_v best_i = tern_var(kb, "best_i", none);
    tern_v nan_i = tern_var(kb, "nan_i", none);
    tern_v last = tern_sub(V, tern_int(1));
    /* a thread's elements in increasing index order, so its first NaN is its lowest */
    TERN_FOR(kb, j0, tern_add(lo, tid), hi, tern_int(G * ARGMAX_UNROLL)) {
        tern_v xs[ARGMAX_UNROLL], js[ARGMAX_UNROLL];
        for (int u = 0; u < ARGMAX_UNROLL; u++) {
            js[u] = tern_add(j0, tern_int(u * G));
            xs[u] = tern_load(logits, tern_add(base, tern_min(js[u], last)));
        }
        for (int u = 0; u < ARGMAX_UNROLL; u++) {
            tern_v in = tern_lt(js[u], hi);
            ku_argmax_take(xs[u], js[u], &in, best, best_i, nan_i, none);
        }
    }
    tern_v M = ku_group_reduce(kb, KU_MAX, best, red_f, SG);
    tern_v arg = ku_group_reduce(kb, KU_MIN, tern_select(tern_eq(best, M), best_i, none), red_i, SG);
    tern_v first_nan = ku_group_reduce(kb, KU_MIN, nan_i, red_i, SG);
    TERN_IF(kb, tern_eq(tid, tern_int(0))) {
        tern_v at = tern_add(tern_mul(row, P), p);
        tern_store(part_v, at, M);
        tern_store(part_i, tern_mul(at, tern_int(2)), arg);
        tern_store(part_i, tern_add(tern_mul(at, tern_int(2)), tern_int(1)), first_nan);
    }
}

void gk_trace_argmax_merge(tern_kb *kb, void *spec) {
    (void)spec;
    tern_v out = tern_param_buf(kb, "out", TERN_T_I32, TERN_WRITE);
    tern_v part_v = tern_param_buf(kb, "part_v", TERN_T_F32, TERN_READ);
    tern_v part_i = tern_param_buf(kb, "part_i", TERN_T_I32, TERN_READ);
    tern_v fault = tern_param_buf(kb, "fault", TERN_T_I32, TERN_READ_WRITE);
    tern_v V = tern_param_scalar(kb, "V", TERN_T_I32);
    tern_v P = tern_param_scalar(kb, "P", TERN_T_I32);
    tern_max_threads(kb, 32);
    tern_wait_previous(kb);

    tern_v row = tern_group_id(kb, 0), lane = tern_simd_lane(kb);
    tern_v none = tern_i32(INT32_MAX);
    tern_v best = tern_var(kb, "best", tern_f32(-INFINITY));
    tern_v best_i = tern_var(kb, "best_i", none);
    tern_v nan_i = tern_var(kb, "nan_i", none);
    TERN_FOR(kb, q, lane, P, tern_int(32)) {
        tern_v at = tern_add(tern_mul(row, P), q);
        tern_v v = tern_load(part_v, at);
        tern_v i = tern_load(part_i, tern_mul(at, tern_int(2)));
        tern_v n = tern_load(part_i, tern_add(tern_mul(at, tern_int(2)), tern_int(1)));
        /* a part's maximum is never NaN; an empty part has -inf at INT32_MAX, which loses */
        tern_v better = tern_lor(tern_gt(v, best), tern_land(tern_eq(v, best), tern_lt(i, best_i)));
        tern_assign(best_i, tern_select(better, i, best_i));
        tern_assign(best, tern_select(better, v, best));
        tern_assign(nan_i, tern_min(nan_i, n));
    }
    tern_v M = tern_simd_max(best);
    tern_v arg = tern_simd_min(tern_select(tern_eq(best, M), best_i, none));
    tern_v first_nan = tern_simd_min(nan_i);
    TERN_IF(kb, tern_eq(lane, tern_int(0))) {
        TERN_IF(kb, tern_ne(first_nan, none)) {
            tern_store(out, row, tern_i32(0));
            ku_fault(kb, fault, GK_FAULT_SAMPLE_NAN, row, first_nan, V);
        }
        TERN_ELSE(kb) { tern_store(out, row, tern_select(tern_lt(arg, V), arg, tern_i32(0))); }
    }
}
