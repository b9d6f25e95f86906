/* rmsnorm and rmsnorm_backward (see src/kernels/rmsnorm.c): layernorm's geometry, one SIMD
 * group per row, GK_LN_ROWS rows per group; for few rows, up to 8 SIMD groups a row. */
#include "gpu_core/gpu_internal.h"

/* The row path of layernorm, at most 4 wide (the widths the kernels are tested at). */
static int rms_row_path(const tern_buf *bufs, int count, int C, int lanes, int *w) {
    int cc = gpu_ln_row_path(bufs, count, C, lanes, w);
    if (*w > 4) *w = 4; /* (C / 32) % 8 == 0 implies % 4 == 0 */
    return cc;
}

tern_error *gpu_rmsnorm(tern_dev *d, tern_buf out, tern_buf rrms, tern_buf x, tern_buf w, int rows, int C,
                        float eps) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("rmsnorm", "x", x.len));
    tern_buf all[3] = {out, x, w};
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(x);
    s.t[2] = gpu_t(w);
    s.n[1] = rms_row_path(all, 3, C, 32, &s.n[0]);
    s.n[2] = tern_present(rrms);
    uint32_t groups = gpu_groups((size_t)rows, GK_LN_ROWS), threads = 0;
    /* ln_fit_group off (opencl): none of the few-rows variants, one local size for every
     * row count, so PoCL builds one work-group function (docs/PERFORMANCE.md) */
    if (!g->tune.ln_fit_group) {
        threads = 32 * GK_LN_ROWS;
    } else if (s.n[1] && rows <= GK_RMS_FEW_ROWS) {
        /* few rows (decoding's): w loaded with x, and up to 8 SIMD groups a row while each
         * lane keeps whole chunks of the width (Llama-3.2-1B's 2048: 8 of 8 values a lane) */
        int S = 8;
        while (S > 1 && C % (32 * S * s.n[0]) != 0) S /= 2;
        s.n[3] = S;
        if (S > 1) groups = (uint32_t)rows, threads = 32 * (uint32_t)S;
    }
    /* else a SIMD group a row; fewer rows than a group's get a group of just their SIMD
     * groups */
    if (g->tune.ln_fit_group && s.n[3] <= 1) threads = 32 * (uint32_t)(rows < GK_LN_ROWS ? rows : GK_LN_ROWS);
    tern_arg args[7];
    size_t c = 0;
    args[c++] = tern_arg_buf(out);
    args[c++] = tern_arg_buf(x);
    args[c++] = tern_arg_buf(w);
    if (tern_present(rrms)) args[c++] = tern_arg_buf(rrms);
    args[c++] = tern_arg_i32(rows);
    args[c++] = tern_arg_i32(C);
    args[c++] = tern_arg_f32(eps);
    return gpu_run(g, "rmsnorm", GK_RMSNORM, &s, tern_dims1(groups), tern_dims1(threads), args, c);
}

/* S row teams of about lnb_rows rows each (as layernorm_backward: a team of R SIMD groups a
 * row on the register path, gk_lnb_team), each writing its rows' dw partial sums to a row of
 * f32 [S, C] scratch, then added into dw in a fixed order. */
tern_error *gpu_rmsnorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf dout, tern_buf x, tern_buf w,
                                 tern_buf rrms, int rows, int C, float grad_beta) {
    gpu_core *g = gpu_core_of(d);
    const char *op = "rmsnorm_backward";
    TERN_TRY(gpu_check_index(op, "x", x.len));
    tern_buf all[4] = {dx, dout, x, w};
    gk_spec s = {0};
    s.t[0] = gpu_t(dx);
    s.t[1] = gpu_t(dout);
    s.t[2] = gpu_t(x);
    s.t[3] = gpu_t(w);
    int R = gk_lnb_team(C);
    s.n[1] = rms_row_path(all, 4, C, 32 * R, &s.n[0]);
    if (!s.n[1]) R = 1;
    s.n[4] = R;
    size_t per = (size_t)g->tune.lnb_rows, teams_per_group = (size_t)(GK_LN_ROWS / R);
    size_t S = ((size_t)rows + per - 1) / per;
    if (S > 4096 / (size_t)R) S = 4096 / (size_t)R;
    S = (S + teams_per_group - 1) / teams_per_group * teams_per_group;
    size_t iters = ((size_t)rows + S - 1) / S, plen = S * (size_t)C;
    TERN_TRY(gpu_check_index(op, "the partial sums", plen));
    tern_dbuf scratch;
    TERN_TRY(tern_error_wrap(gpu_scratch(g, plen, &scratch), "%s", op));
    tern_arg args[] = {tern_arg_buf(dx), gpu_scratch_arg(scratch, 0, plen), tern_arg_buf(dout), tern_arg_buf(x),
                       tern_arg_buf(w), tern_arg_buf(rrms), tern_arg_i32(rows), tern_arg_i32(C),
                       tern_arg_i32((int32_t)S), tern_arg_i32((int32_t)iters)};
    TERN_TRY(gpu_run(g, op, GK_RMSNORM_BACKWARD, &s, tern_dims1((uint32_t)(S / teams_per_group)),
                     tern_dims1(32 * GK_LN_ROWS), args, 10));
    return gpu_partial_add(g, op, dw, scratch, S, C, C, 0, grad_beta);
}
