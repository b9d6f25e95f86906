/* sum_rows and norm2: deterministic two-pass reductions (see src/kernels/reduce.c). */
#include <math.h>
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"

tern_error *gpu_partial_add(gpu_core *g, const char *op, tern_buf acc, tern_dbuf scratch, size_t count, int C,
                            int stride, int offset, float beta) {
    gk_spec s = {0};
    s.t[0] = gpu_t(acc);
    size_t len = (count - 1) * (size_t)stride + (size_t)offset + (size_t)C;
    tern_arg args[] = {tern_arg_buf(acc), gpu_scratch_arg(scratch, 0, len), tern_arg_i32((int32_t)count),
                       tern_arg_i32(C), tern_arg_i32(stride), tern_arg_i32(offset), tern_arg_f32(beta)};
    return gpu_run(g, op, GK_PARTIAL_ADD, &s, tern_dims1(gpu_groups((size_t)C, 32)), tern_dims1(GK_PA_GROUP), args, 7);
}

tern_error *gpu_partial_add2(gpu_core *g, const char *op, tern_buf acc, tern_buf acc2, tern_dbuf scratch, size_t count,
                             int C, int C2, int stride, int offset, int offset2, float beta) {
    gk_spec s = {0};
    s.t[0] = gpu_t(acc);
    s.t[1] = gpu_t(acc2);
    s.n[0] = 2;
    size_t end1 = (size_t)offset + (size_t)C, end2 = (size_t)offset2 + (size_t)C2;
    size_t len = (count - 1) * (size_t)stride + (end1 > end2 ? end1 : end2);
    tern_arg args[] = {tern_arg_buf(acc),   tern_arg_buf(acc2),     gpu_scratch_arg(scratch, 0, len),
                       tern_arg_i32((int32_t)count), tern_arg_i32(C), tern_arg_i32(C2), tern_arg_i32(stride),
                       tern_arg_i32(offset), tern_arg_i32(offset2), tern_arg_f32(beta)};
    uint32_t groups = gpu_groups((size_t)C, 32) + gpu_groups((size_t)C2, 32);
    return gpu_run(g, op, GK_PARTIAL_ADD, &s, tern_dims1(groups), tern_dims1(GK_PA_GROUP), args, 10);
}

tern_error *gpu_sum_rows(tern_dev *d, tern_buf out, tern_buf x, int rows, int cols, float beta) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("sum_rows", "x", x.len));
    size_t r = (size_t)rows, c = (size_t)cols;
    size_t chunks = (r + GK_SR_ROWS - 1) / GK_SR_ROWS;
    if (chunks > GK_SR_MAX_CHUNKS) chunks = GK_SR_MAX_CHUNKS;
    size_t per = (r + chunks - 1) / chunks;
    chunks = (r + per - 1) / per;
    TERN_TRY(gpu_check_index("sum_rows", "the partial sums", chunks * c));
    tern_dbuf scratch;
    TERN_TRY(tern_error_wrap(gpu_scratch(g, chunks * c, &scratch), "sum_rows"));
    gk_spec s = {0};
    s.t[0] = gpu_t(x);
    s.n[0] = gpu_width(&x, 1, c); /* columns a thread: whole rows stay aligned */
    tern_arg pa[] = {gpu_scratch_arg(scratch, 0, chunks * c), tern_arg_buf(x), tern_arg_i32(rows),
                     tern_arg_i32(cols), tern_arg_i32((int32_t)per)};
    TERN_TRY(gpu_run(g, "sum_rows", GK_SUM_ROWS_PARTIAL, &s,
                     tern_dims2(gpu_groups(c / (size_t)s.n[0], GK_SR_GROUP), (uint32_t)chunks), tern_dims1(GK_SR_GROUP),
                     pa, 5));
    return gpu_partial_add(g, "sum_rows", out, scratch, chunks, cols, cols, 0, beta);
}

tern_error *gpu_norm2(tern_dev *d, tern_buf x, double *out) {
    gpu_core *g = gpu_core_of(d);
    size_t n = x.len;
    TERN_TRY(gpu_check_index("norm2", "x", n));
    size_t groups = (n + GK_SS_GROUP * 8 - 1) / (GK_SS_GROUP * 8);
    if (groups > GK_SS_MAX_GROUPS) groups = GK_SS_MAX_GROUPS;
    if (groups == 0) groups = 1;
    int W = gpu_width(&x, 1, n);
    size_t span = (n + groups - 1) / groups;
    span = (span + (size_t)W - 1) / (size_t)W * (size_t)W; /* whole loads in each group */
    groups = span ? (n + span - 1) / span : 1;
    tern_dbuf scratch;
    TERN_TRY(tern_error_wrap(gpu_scratch(g, 2 * groups, &scratch), "norm2"));
    gk_spec s = {0};
    s.t[0] = gpu_t(x);
    s.n[0] = W;
    tern_arg args[] = {gpu_scratch_arg(scratch, 0, 2 * groups), tern_arg_buf(x), tern_arg_i32((int32_t)n),
                       tern_arg_i32((int32_t)span)};
    TERN_TRY(gpu_run(g, "norm2", GK_SUM_SQUARES, &s, tern_dims1((uint32_t)groups), tern_dims1(GK_SS_GROUP), args, 4));
    float partial[2 * GK_SS_MAX_GROUPS]; /* hi [groups], then lo [groups] */
    tern_dbuf v = scratch;
    v.len = 2 * groups;
    TERN_TRY(tern_error_wrap(tern_rt_download(g->rt, partial, v), "norm2"));
    TERN_TRY(gpu_check_faults(g));
    double total = 0; /* the groups' partials, added in double in a fixed order */
    for (size_t i = 0; i < groups; i++) total += (double)partial[i] + (double)partial[groups + i];
    *out = sqrt(total);
    return NULL;
}
