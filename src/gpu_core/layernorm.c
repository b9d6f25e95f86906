/* layernorm and layernorm_backward (see src/kernels/layernorm.c). */
#include <stdlib.h>
#include <string.h>

#include "gpu_core/gpu_internal.h"

int gpu_ln_row_path(const tern_buf *bufs, int count, int C, int lanes, int *w) {
    if (C % lanes != 0 || C / lanes > GK_LN_MAX_PER_LANE) {
        *w = 1;
        return 0;
    }
    int width = gpu_width(bufs, count, (size_t)C);
    while (width > 1 && (C / lanes) % width != 0) width /= 2;
    *w = width;
    return C;
}

tern_error *gpu_layernorm(tern_dev *d, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x,
                          tern_buf w, tern_buf b, int rows, int C, float eps) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("layernorm", "x", x.len));
    tern_buf all[4] = {out, x, w, b};
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(x);
    s.t[2] = gpu_t(w);
    s.t[3] = gpu_t(b);
    s.n[1] = gpu_ln_row_path(all, 4, C, 32, &s.n[0]);
    s.n[2] = (tern_present(mean) ? 1 : 0) | (tern_present(rstd) ? 2 : 0) | (rows <= GK_LN_EARLY_ROWS ? 4 : 0);
    tern_arg args[9];
    size_t c = 0;
    args[c++] = tern_arg_buf(out);
    args[c++] = tern_arg_buf(x);
    args[c++] = tern_arg_buf(w);
    args[c++] = tern_arg_buf(b);
    if (tern_present(mean)) args[c++] = tern_arg_buf(mean);
    if (tern_present(rstd)) args[c++] = tern_arg_buf(rstd);
    args[c++] = tern_arg_i32(rows);
    args[c++] = tern_arg_i32(C);
    args[c++] = tern_arg_f32(eps);
    /* a SIMD group per row, GK_LN_ROWS per group; fewer rows (decoding's one) get a group of
     * just their SIMD groups rather than idle ones computing on a clamped row, unless the
     * tuning keeps one local size (ln_fit_group off: opencl) */
    uint32_t simd_groups = rows < GK_LN_ROWS && g->tune.ln_fit_group ? (uint32_t)rows : GK_LN_ROWS;
    return gpu_run(g, "layernorm", GK_LAYERNORM, &s, tern_dims1(gpu_groups((size_t)rows, GK_LN_ROWS)),
                   tern_dims1(32 * simd_groups), args, c);
}

/* The rows per team of layernorm_backward: the lnb_rows option, 16 by default. With 16
 * rows rather than 8, GPT-2 124M's 16,384 rows take half as many SIMD groups (1,024: still
 * one wave of the H200's 132 multiprocessors at the one group of 8 SIMD groups each that
 * the kernel's registers allow), so half as many partial sums. On the H200
 * (bench/h200/NOTES.md, run 51, partial rows then per SIMD group): the layer norm backward
 * 0.86 -> 0.80 ms a step, its partial sums 0.20 -> 0.14. */
tern_error *gpu_layernorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum,
                                   tern_buf out, tern_buf dout, tern_buf x, tern_buf w, tern_buf b,
                                   tern_buf mean, tern_buf rstd, int rows, int C, float grad_beta) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("layernorm_backward", "x", x.len));
    bool with_out = tern_present(out);
    /* mean absent: x is the forward's output (see effect.h) */
    bool from_out = !tern_present(mean), with_b = with_out || from_out;
    /* P partial rows per team: dw's and db's column sums, and dsum's when asked for */
    int P = tern_present(dsum) ? 3 : 2;
    tern_buf all[6] = {dx, dout, x, w, b, out}; /* the first 4 + with_b + with_out are read or written */
    gk_spec s = {0};
    s.t[0] = gpu_t(dx);
    s.t[1] = gpu_t(dout);
    s.t[2] = gpu_t(x);
    s.t[3] = gpu_t(w);
    if (with_out) s.t[4] = gpu_t(out);
    if (with_b) s.t[5] = gpu_t(b);
    /* a team of R SIMD groups a row on the register path (wide rows, gk_lnb_team); the
     * generic path's rows are one SIMD group's each */
    int R = gk_lnb_team(C);
    s.n[1] = gpu_ln_row_path(all, 4 + with_b + with_out, C, 32 * R, &s.n[0]);
    if (!s.n[1]) R = 1;
    s.n[2] = P;
    s.n[3] = with_out ? GK_LNB_WRITE_OUT : from_out ? GK_LNB_FROM_OUTPUT : GK_LNB_FROM_INPUT;
    s.n[4] = R;
    /* teams: about lnb_rows rows each (enough in flight to hide memory latency; the partial
     * rows cost P * C floats each), at most 4096 SIMD groups, a whole number of groups */
    size_t per = (size_t)g->tune.lnb_rows, teams_per_group = (size_t)(GK_LN_ROWS / R);
    size_t S = ((size_t)rows + per - 1) / per;
    if (S > 4096 / (size_t)R) S = 4096 / (size_t)R;
    S = (S + teams_per_group - 1) / teams_per_group * teams_per_group;
    size_t iters = ((size_t)rows + S - 1) / S;
    size_t stride = (size_t)P * (size_t)C, plen = S * stride;
    TERN_TRY(gpu_check_index("layernorm_backward", "the partial sums", plen));
    tern_dbuf scratch;
    TERN_TRY(tern_error_wrap(gpu_scratch(g, plen, &scratch), "layernorm_backward"));
    tern_arg args[13];
    size_t c = 0;
    args[c++] = tern_arg_buf(dx);
    args[c++] = gpu_scratch_arg(scratch, 0, plen);
    if (with_out) args[c++] = tern_arg_buf(out);
    args[c++] = tern_arg_buf(dout);
    args[c++] = tern_arg_buf(x);
    args[c++] = tern_arg_buf(w);
    if (with_b) args[c++] = tern_arg_buf(b);
    if (!from_out) args[c++] = tern_arg_buf(mean);
    args[c++] = tern_arg_buf(rstd);
    args[c++] = tern_arg_i32(rows);
    args[c++] = tern_arg_i32(C);
    args[c++] = tern_arg_i32((int32_t)S);
    args[c++] = tern_arg_i32((int32_t)iters);
    TERN_TRY(gpu_run(g, "layernorm_backward", GK_LAYERNORM_BACKWARD, &s, tern_dims1((uint32_t)(S / teams_per_group)),
                     tern_dims1(32 * GK_LN_ROWS), args, c));
    /* the partial rows: one per group, or one per team */
    size_t count = gk_lnb_group_partials(s.n[1], P, R) ? S / teams_per_group : S;
    /* Partial row p is added into outs[p]. Outputs that follow each other in one buffer (as
     * a model's flat gradients lay out a layer norm's gain and bias) are added by one pass:
     * a run of k adjacent outputs is k C columns of the one allocation. */
    const tern_buf outs[3] = {dw, db, dsum};
    /* dw|db adjacent and a dsum elsewhere (a model's flat gradients): one launch for both
     * runs (ln_merge=0: one each, for measurements) */
    if (P == 3 && g->tune.ln_merge && db.mem == dw.mem && db.dtype == dw.dtype &&
        db.offset == dw.offset + (size_t)C) {
        tern_buf both = dw; /* [dw | db], 2C elements of the one allocation */
        both.len = 2 * (size_t)C;
        return gpu_partial_add2(g, "layernorm_backward", both, dsum, scratch, count, 2 * C, C, (int)stride, 0,
                                2 * C, grad_beta);
    }
    for (int p = 0; p < P;) {
        int k = 1;
        while (p + k < P && outs[p + k].mem == outs[p].mem && outs[p + k].dtype == outs[p].dtype &&
               outs[p + k].offset == outs[p].offset + (size_t)k * (size_t)C)
            k++;
        tern_buf run = outs[p]; /* outs[p .. p + k), k C elements */
        run.len = (size_t)k * (size_t)C;
        TERN_TRY(gpu_partial_add(g, "layernorm_backward", run, scratch, count, k * C, (int)stride, p * C, grad_beta));
        p += k;
    }
    return NULL;
}
