/* swiglu and swiglu_backward (see src/kernels/swiglu.c): one thread per W elements of a
 * row, W the widest (at most 4) dividing I and ld that every view's offset allows. */
#include "gpu_core/gpu_internal.h"

static int swiglu_width(const tern_buf *bufs, int count, int I, int ld) {
    int W = gpu_width(bufs, count, (size_t)I);
    if (W > 4) W = 4;
    while (W > 1 && ld % W != 0) W /= 2;
    return W;
}

tern_error *gpu_swiglu(tern_dev *d, tern_buf out, tern_buf gate, tern_buf up, int rows, int I, int ld) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("swiglu", "gate", gate.len));
    TERN_TRY(gpu_check_index("swiglu", "up", up.len));
    tern_buf all[3] = {out, gate, up};
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(gate);
    s.t[2] = gpu_t(up);
    s.n[0] = swiglu_width(all, 3, I, ld);
    size_t n = (size_t)rows * (size_t)I;
    tern_arg args[] = {tern_arg_buf(out), tern_arg_buf(gate), tern_arg_buf(up), tern_arg_i32((int32_t)n),
                       tern_arg_i32(I), tern_arg_i32(ld)};
    return gpu_run(g, "swiglu", GK_SWIGLU, &s, tern_dims1(gpu_groups(n / (size_t)s.n[0], GK_EW_GROUP)),
                   tern_dims1(GK_EW_GROUP), args, 6);
}

tern_error *gpu_swiglu_backward(tern_dev *d, tern_buf dgate, tern_buf dup, tern_buf dout, tern_buf gate,
                                tern_buf up, int rows, int I, int ld) {
    gpu_core *g = gpu_core_of(d);
    const char *op = "swiglu_backward";
    TERN_TRY(gpu_check_index(op, "gate", gate.len));
    TERN_TRY(gpu_check_index(op, "up", up.len));
    tern_buf all[5] = {dgate, dup, dout, gate, up};
    gk_spec s = {0};
    s.t[0] = gpu_t(dgate);
    s.t[1] = gpu_t(dup);
    s.t[2] = gpu_t(dout);
    s.t[3] = gpu_t(gate);
    s.t[4] = gpu_t(up);
    s.n[0] = swiglu_width(all, 5, I, ld);
    size_t n = (size_t)rows * (size_t)I;
    tern_arg args[] = {tern_arg_buf(dgate), tern_arg_buf(dup), tern_arg_buf(dout), tern_arg_buf(gate),
                       tern_arg_buf(up), tern_arg_i32((int32_t)n), tern_arg_i32(I), tern_arg_i32(ld)};
    return gpu_run(g, op, GK_SWIGLU_BACKWARD, &s, tern_dims1(gpu_groups(n / (size_t)s.n[0], GK_EW_GROUP)),
                   tern_dims1(GK_EW_GROUP), args, 8);
}
