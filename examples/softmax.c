/* Row softmax, one threadgroup per row: the row's maximum and sum are reduced first within
 * each SIMD group (tern_simd_max / tern_simd_sum), then across the groups through
 * threadgroup memory. Checked against plain C. */
#include <math.h>
#include <stdlib.h>

#include "example_util.h"

#define THREADS 256
#define GROUPS (THREADS / TERN_SIMD_WIDTH)

/* Reduces v over the whole threadgroup with simd (tern_simd_max or tern_simd_sum, as
 * `is_max`) through `partial`, a threadgroup array of one slot per SIMD group. Every
 * thread gets the result. */
static tern_v group_reduce(tern_kb *kb, tern_v partial, tern_v v, bool is_max) {
    tern_v lane = tern_simd_lane(kb), group = tern_simd_group(kb);
    tern_v identity = is_max ? tern_f32(-INFINITY) : tern_f32(0.0f);
    v = is_max ? tern_simd_max(v) : tern_simd_sum(v);
    TERN_IF(kb, tern_eq(lane, tern_int(0))) { tern_store(partial, group, v); }
    tern_barrier(kb);
    /* every SIMD group reads the partials, so the reduction stays threadgroup-uniform */
    tern_v p = tern_load(partial, tern_min(lane, tern_int(GROUPS - 1)));
    p = tern_select(tern_lt(lane, tern_int(GROUPS)), p, identity);
    tern_v r = is_max ? tern_simd_max(p) : tern_simd_sum(p);
    tern_barrier(kb); /* partial is reused by the next reduction */
    return r;
}

static void softmax(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v cols = tern_param_scalar(kb, "cols", TERN_T_I32);
    tern_v partial = tern_shared(kb, "partial", TERN_T_F32, GROUPS);
    tern_v row = tern_group_id(kb, 0), tid = tern_local_index(kb);
    tern_v base = tern_name(tern_mul(row, cols), "base");

    tern_v m = tern_var(kb, "m", tern_f32(-INFINITY));
    TERN_FOR(kb, i, tid, cols, tern_int(THREADS)) { tern_assign(m, tern_max(m, tern_load(x, tern_add(base, i)))); }
    tern_v row_max = tern_name(group_reduce(kb, partial, m, true), "row_max");

    tern_v s = tern_var(kb, "s", tern_f32(0.0f));
    TERN_FOR(kb, i, tid, cols, tern_int(THREADS)) {
        tern_assign(s, tern_add(s, tern_exp(tern_sub(tern_load(x, tern_add(base, i)), row_max))));
    }
    tern_v inv = tern_name(tern_div(tern_f32(1.0f), group_reduce(kb, partial, s, false)), "inv");

    TERN_FOR(kb, i, tid, cols, tern_int(THREADS)) {
        tern_v at = tern_add(base, i);
        tern_store(out, at, tern_mul(tern_exp(tern_sub(tern_load(x, at), row_max)), inv));
    }
}

int main(void) {
    const int rows = 64, cols = 1000;
    float *x = malloc(sizeof(float) * rows * cols), *out = malloc(sizeof(float) * rows * cols);
    if (!x || !out) return 1;
    uint64_t seed = 7;
    for (int i = 0; i < rows * cols; i++) {
        x[i] = example_uniform(&seed, -8, 8);
        out[i] = NAN;
    }
    tern_rt *rt = NULL;
    tern_kernel *k = NULL;
    tern_error *err = tern_rt_open(NULL, &rt);
    if (!err) err = tern_kernel_build("softmax", softmax, NULL, &k);
    if (!err) {
        tern_arg args[] = {tern_arg_host_in(TERN_T_F32, x, (size_t)rows * cols),
                           tern_arg_host(TERN_T_F32, out, (size_t)rows * cols), tern_arg_i32(cols)};
        err = tern_launch(rt, k, tern_dims1(rows), tern_dims1(THREADS), args, 3);
    }
    int status = 0;
    if (err) {
        status = example_fail("softmax", err);
    } else {
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            const float *xr = x + r * cols;
            double mx = -INFINITY, sum = 0;
            for (int c = 0; c < cols; c++) mx = fmax(mx, xr[c]);
            for (int c = 0; c < cols; c++) sum += exp(xr[c] - mx);
            for (int c = 0; c < cols; c++) {
                double want = exp(xr[c] - mx) / sum, got = out[r * cols + c];
                double e = isnan(got) ? INFINITY : fabs(got - want) / want;
                if (e > worst) worst = e;
            }
        }
        /* f32 exp and a 1000-term f32 sum against double: a few 1e-7 relative; 1e-5 is ample */
        printf("%s: softmax of %d rows of %d: worst relative error %.2g\n", tern_rt_name(rt), rows, cols, worst);
        status = worst > 1e-5;
    }
    tern_kernel_free(k);
    tern_rt_close(rt);
    free(x), free(out);
    return status;
}
