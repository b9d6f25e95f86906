/* The DSL kernels of attention through GEMMs (the cuda handler's attention_gemm.c):
 * the matrix products go to cuBLASLt, these do the rest. They use nothing CUDA-specific,
 * so tests run them on the host interpreter (tests/attention_kernels). */
#include <math.h>
#include <stdio.h>

#include "kernels/attention_gemm.h"

/* Elements per vector access: 16 bytes. */
static int vec_width(tern_type act) { return act == TERN_T_BF16 ? 8 : 4; }

/* Between the token-major layout [B, T, G, NH, hs] (qkv with G = 3, attention output with
 * G = 1) and the head-major [G, B, NH, T, hs] the batched products want. Both layouts keep
 * each head's hs elements contiguous, so with spec->vec each thread moves one run of W
 * elements (16 bytes) with vector accesses, and the index arithmetic is paid once per run;
 * without it (hs or a buffer's start not a multiple of W), one element per thread. The
 * token-major side is read (to_heads) or written (from heads) contiguously. */
static void trace_permute(tern_kb *kb, void *user) {
    const gk_att_gemm_spec *spec = user;
    tern_type t = spec->act;
    int W = spec->vec ? vec_width(t) : 1;
    tern_v src = tern_param_buf(kb, "src", t, TERN_READ);
    tern_v dst = tern_param_buf(kb, "dst", t, TERN_WRITE);
    tern_v B = tern_param_scalar(kb, "B", TERN_T_I32);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v G = tern_param_scalar(kb, "G", TERN_T_I32);
    tern_v NH = tern_param_scalar(kb, "NH", TERN_T_I32);
    tern_v hs = tern_param_scalar(kb, "hs", TERN_T_I32);
    tern_v i = tern_mul(tern_global_id(kb, 0), tern_int(W));
    tern_v total = tern_mul(tern_mul(tern_mul(B, T), tern_mul(G, NH)), hs);
    TERN_IF(kb, tern_lt(i, total)) {
        tern_v e = tern_rem(i, hs);
        tern_v r = tern_div(i, hs);
        tern_v h = tern_rem(r, NH);
        r = tern_div(r, NH);
        tern_v g = tern_rem(r, G);
        r = tern_div(r, G);
        tern_v tok = tern_rem(r, T);
        tern_v b = tern_div(r, T);
        tern_v j = tern_add(tern_mul(tern_add(tern_mul(tern_add(tern_mul(g, B), b), NH), h), T), tok);
        j = tern_add(tern_mul(j, hs), e);
        tern_v from = spec->to_heads ? i : j, to = spec->to_heads ? j : i;
        if (W == 1) {
            tern_store(dst, to, tern_load(src, from));
        } else {
            tern_v v[8];
            tern_load_vec(src, from, W, v);
            tern_store_vec(dst, to, W, v);
        }
    }
}

bool gk_att_gemm_permute_vec_fits(tern_type act, int hs, size_t src_offset, size_t dst_offset) {
    size_t W = (size_t)vec_width(act);
    return hs % (int)W == 0 && src_offset % W == 0 && dst_offset % W == 0;
}

/* The row of the score matrix this SIMD group takes: its index r (clamped to the last row,
 * with `valid` false past the end, so that SIMD operations stay uniform), its query
 * position t = r % T, the offset of its first element, and `end`: the row is read and
 * written over columns [0, end), the end of the causal block holding the diagonal,
 * min(T, (t / block + 1) block). The products around the softmax skip the blocks above
 * the diagonal (attention_gemm.c), so nothing past `end` is ever read. */
typedef struct score_row {
    tern_v lane, valid, r, t, base, end;
} score_row;

static score_row row_of(tern_kb *kb, tern_v T, tern_v rows, tern_v block) {
    score_row sr;
    sr.lane = tern_simd_lane(kb);
    tern_v row = tern_add(tern_mul(tern_group_id(kb, 0), tern_int(GK_ATT_GEMM_ROWS)), tern_simd_group(kb));
    sr.valid = tern_lt(row, rows);
    sr.r = tern_min(row, tern_sub(rows, tern_int(1)));
    sr.t = tern_rem(sr.r, T);
    sr.base = tern_mul(tern_cast(sr.r, TERN_T_I64), tern_cast(T, TERN_T_I64));
    sr.end = tern_min(T, tern_mul(tern_add(tern_div(sr.t, block), tern_int(1)), block));
    return sr;
}

/* The register-resident form (spec->resident > 0, T <= resident, T a multiple of the
 * vector width): lane l holds columns (c 32 + l) W + w for chunks c < NC and w < W, read
 * once with 16-byte accesses, so each row costs one read and one write of its elements
 * where the looping form reads them three times, two bytes at a time. */
typedef struct resident_row {
    int W, NC;
    tern_v x[GK_ATT_GEMM_MAX_RESIDENT / 32]; /* scale S, or -inf where masked */
    tern_v g[GK_ATT_GEMM_MAX_RESIDENT / 32]; /* dP (backward) */
} resident_row;

static tern_v chunk_start(const resident_row *rr, tern_v lane, int c) {
    return tern_mul(tern_add(tern_int(c * 32), lane), tern_int(rr->W));
}

/* Loads the row's causal part (columns <= t) of S, scaled, into rr->x (and of dP into
 * rr->g when dP is not NULL); -inf (0 for dP) elsewhere. */
static void resident_load(tern_kb *kb, resident_row *rr, const gk_att_gemm_spec *spec, const score_row *sr,
                          tern_v S, const tern_v *dP, tern_v scale) {
    rr->W = vec_width(spec->act);
    rr->NC = spec->resident / (32 * rr->W);
    tern_v neg_inf = tern_f32(-INFINITY);
    char name[16];
    for (int i = 0; i < rr->NC * rr->W; i++) {
        snprintf(name, sizeof name, "x%d", i);
        rr->x[i] = tern_var(kb, name, neg_inf);
        if (dP) {
            snprintf(name, sizeof name, "g%d", i);
            rr->g[i] = tern_var(kb, name, tern_f32(0.0f));
        }
    }
    for (int c = 0; c < rr->NC; c++) {
        tern_v j0 = chunk_start(rr, sr->lane, c);
        TERN_IF(kb, tern_lt(j0, sr->end)) {
            tern_v at = tern_add(sr->base, tern_cast(j0, TERN_T_I64));
            tern_v v[8], d[8];
            tern_load_vec(S, at, rr->W, v);
            if (dP) tern_load_vec(*dP, at, rr->W, d);
            for (int w = 0; w < rr->W; w++) {
                tern_v causal = tern_le(tern_add(j0, tern_int(w)), sr->t);
                tern_assign(rr->x[c * rr->W + w], tern_select(causal, tern_mul(v[w], scale), tern_f32(-INFINITY)));
                if (dP)
                    tern_assign(rr->g[c * rr->W + w], tern_select(causal, d[w], tern_f32(0.0f)));
            }
        }
    }
}

/* Stores values[c W + w] to buf over the row's columns [0, end). */
static void resident_store(tern_kb *kb, const resident_row *rr, const score_row *sr, tern_v buf,
                           const tern_v *values) {
    for (int c = 0; c < rr->NC; c++) {
        tern_v j0 = chunk_start(rr, sr->lane, c);
        TERN_IF(kb, tern_lt(j0, sr->end)) {
            tern_store_vec(buf, tern_add(sr->base, tern_cast(j0, TERN_T_I64)), rr->W, values + c * rr->W);
        }
    }
}

/* One SIMD group per row of the scores [rows, T] (row r is query position r % T): the
 * causal softmax of scale * S, written over S up to the row's block end (zero past the
 * diagonal, as the next product needs), and the row's logsumexp. Rows past the end
 * compute on the last row and store nothing, so that SIMD operations stay uniform. */
static void trace_softmax_forward(tern_kb *kb, void *user) {
    const gk_att_gemm_spec *spec = user;
    tern_v S = tern_param_buf(kb, "S", spec->act, TERN_READ_WRITE);
    tern_v lse = tern_param_buf(kb, "lse", TERN_T_F32, TERN_WRITE);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_v block = tern_param_scalar(kb, "block", TERN_T_I32);
    score_row sr = row_of(kb, T, rows, block);
    tern_v lane = sr.lane, valid = sr.valid, r = sr.r, t = sr.t, base = sr.base;
    tern_v neg_inf = tern_f32(-INFINITY);

    if (spec->resident) {
        resident_row rr = {0};
        resident_load(kb, &rr, spec, &sr, S, NULL, scale);
        int n = rr.NC * rr.W;
        tern_v m = rr.x[0];
        for (int i = 1; i < n; i++) m = tern_max(m, rr.x[i]);
        tern_v M = tern_name(tern_simd_max(m), "row_max");
        tern_v p[GK_ATT_GEMM_MAX_RESIDENT / 32];
        tern_v sum = tern_f32(0.0f);
        for (int i = 0; i < n; i++) {
            p[i] = tern_exp(tern_sub(rr.x[i], M));
            sum = tern_add(sum, p[i]);
        }
        tern_v total = tern_name(tern_simd_sum(sum), "row_sum");
        tern_v inv = tern_div(tern_f32(1.0f), total);
        for (int i = 0; i < n; i++) p[i] = tern_mul(p[i], inv);
        TERN_IF(kb, valid) {
            resident_store(kb, &rr, &sr, S, p);
            TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(lse, r, tern_add(M, tern_log(total))); }
        }
        return;
    }
    tern_v m = tern_var(kb, "m", neg_inf);
    TERN_FOR(kb, s, lane, tern_add(t, tern_int(1)), tern_int(32)) {
        tern_assign(m, tern_max(m, tern_mul(tern_load(S, tern_add(base, tern_cast(s, TERN_T_I64))), scale)));
    }
    tern_v M = tern_name(tern_simd_max(m), "row_max");
    tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
    TERN_FOR(kb, s, lane, tern_add(t, tern_int(1)), tern_int(32)) {
        tern_v x = tern_mul(tern_load(S, tern_add(base, tern_cast(s, TERN_T_I64))), scale);
        tern_assign(sum, tern_add(sum, tern_exp(tern_sub(x, M))));
    }
    tern_v total = tern_name(tern_simd_sum(sum), "row_sum");
    tern_v inv = tern_div(tern_f32(1.0f), total);
    TERN_IF(kb, valid) {
        TERN_FOR(kb, s, lane, sr.end, tern_int(32)) {
            tern_v at = tern_add(base, tern_cast(s, TERN_T_I64));
            tern_v p = tern_mul(tern_exp(tern_sub(tern_mul(tern_load(S, at), scale), M)), inv);
            tern_store(S, at, tern_select(tern_le(s, t), p, tern_f32(0.0f)));
        }
        TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(lse, r, tern_add(M, tern_log(total))); }
    }
}

/* The backward of the softmax, with the probabilities recomputed from the scores S and the
 * saved logsumexp: P = exp(scale S - lse) below the diagonal, D = sum P dP, then S <- P and
 * dP <- P (dP - D) scale, the gradient of the unscaled scores (up to the block end). */
static void trace_softmax_backward(tern_kb *kb, void *user) {
    const gk_att_gemm_spec *spec = user;
    tern_v S = tern_param_buf(kb, "S", spec->act, TERN_READ_WRITE);
    tern_v dP = tern_param_buf(kb, "dP", spec->act, TERN_READ_WRITE);
    tern_v lse = tern_param_buf(kb, "lse", TERN_T_F32, TERN_READ);
    tern_v T = tern_param_scalar(kb, "T", TERN_T_I32);
    tern_v rows = tern_param_scalar(kb, "rows", TERN_T_I32);
    tern_v scale = tern_param_scalar(kb, "scale", TERN_T_F32);
    tern_v block = tern_param_scalar(kb, "block", TERN_T_I32);
    score_row sr = row_of(kb, T, rows, block);
    tern_v lane = sr.lane, valid = sr.valid, r = sr.r, t = sr.t, base = sr.base;
    tern_v L = tern_load(lse, r);

    if (spec->resident) {
        resident_row rr = {0};
        resident_load(kb, &rr, spec, &sr, S, &dP, scale);
        int n = rr.NC * rr.W;
        tern_v p[GK_ATT_GEMM_MAX_RESIDENT / 32], g[GK_ATT_GEMM_MAX_RESIDENT / 32];
        tern_v dot = tern_f32(0.0f);
        for (int i = 0; i < n; i++) {
            p[i] = tern_exp(tern_sub(rr.x[i], L)); /* 0 where masked: x = -inf */
            dot = tern_fma(p[i], rr.g[i], dot);
        }
        tern_v D = tern_name(tern_simd_sum(dot), "row_dot");
        for (int i = 0; i < n; i++) g[i] = tern_mul(tern_mul(p[i], tern_sub(rr.g[i], D)), scale);
        TERN_IF(kb, valid) {
            resident_store(kb, &rr, &sr, S, p);
            resident_store(kb, &rr, &sr, dP, g);
        }
        return;
    }
    tern_v dot = tern_var(kb, "dot", tern_f32(0.0f));
    TERN_FOR(kb, s, lane, tern_add(t, tern_int(1)), tern_int(32)) {
        tern_v at = tern_add(base, tern_cast(s, TERN_T_I64));
        tern_v p = tern_exp(tern_sub(tern_mul(tern_load(S, at), scale), L));
        tern_assign(dot, tern_add(dot, tern_mul(p, tern_load(dP, at))));
    }
    tern_v D = tern_name(tern_simd_sum(dot), "row_dot");
    TERN_IF(kb, valid) {
        TERN_FOR(kb, s, lane, sr.end, tern_int(32)) {
            tern_v at = tern_add(base, tern_cast(s, TERN_T_I64));
            tern_v below = tern_le(s, t);
            tern_v p = tern_select(below, tern_exp(tern_sub(tern_mul(tern_load(S, at), scale), L)),
                                   tern_f32(0.0f));
            tern_v g = tern_mul(tern_mul(p, tern_sub(tern_load(dP, at), D)), scale);
            tern_store(S, at, p);
            tern_store(dP, at, tern_select(below, g, tern_f32(0.0f)));
        }
    }
}

bool gk_att_gemm_resident_fits(tern_type act, int T) {
    return T <= GK_ATT_GEMM_MAX_RESIDENT && T % vec_width(act) == 0;
}

tern_error *gk_att_gemm_kernel_build(gk_att_gemm_kernel which, const gk_att_gemm_spec *spec, tern_kernel **out) {
    gk_att_gemm_spec s = *spec;
    if (s.resident < 0 || s.resident > GK_ATT_GEMM_MAX_RESIDENT || s.resident % (32 * vec_width(s.act)))
        return tern_errorf("attention kernels: resident row length %d is not a multiple of %d up to %d",
                           s.resident, 32 * vec_width(s.act), GK_ATT_GEMM_MAX_RESIDENT);
    switch (which) {
    case GK_ATT_GEMM_PERMUTE:
        if (s.vec) return tern_kernel_build(s.to_heads ? "att_to_heads_vec" : "att_from_heads_vec", trace_permute, &s, out);
        return tern_kernel_build(s.to_heads ? "att_to_heads" : "att_from_heads", trace_permute, &s, out);
    case GK_ATT_GEMM_SOFTMAX_FORWARD:
        return tern_kernel_build(s.resident ? "att_softmax_forward_resident" : "att_softmax_forward",
                                 trace_softmax_forward, &s, out);
    case GK_ATT_GEMM_SOFTMAX_BACKWARD:
        return tern_kernel_build(s.resident ? "att_softmax_backward_resident" : "att_softmax_backward",
                                 trace_softmax_backward, &s, out);
    }
    return tern_errorf("unknown attention kernel %d", (int)which);
}
