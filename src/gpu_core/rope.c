/* rope and rope_backward (see src/kernels/rope.c): one thread per W pairs of channels. */
#include "gpu_core/gpu_internal.h"

static tern_error *rope(tern_dev *d, const char *op, bool backward, tern_buf out, tern_buf x, tern_buf pos,
                        tern_buf inv_freq, int rows, int heads, int head_dim, int stride) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index(op, "x", x.len));
    TERN_TRY(gpu_check_index(op, "the pairs", (size_t)rows * (size_t)heads * (size_t)(head_dim / 2)));
    /* W pairs a thread: dividing head_dim / 2 and the stride, with the views' offsets (and
     * the frequencies', read W at a time too) aligned to it; at most 4 */
    tern_buf all[3] = {out, x, inv_freq};
    int W = gpu_width(all, 3, (size_t)stride);
    if (W > 4) W = 4;
    while (W > 1 && (head_dim / 2) % W != 0) W /= 2;
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(x);
    s.n[0] = head_dim;
    s.n[1] = W;
    s.n[2] = backward;
    int32_t pairs = rows * heads * (head_dim / 2);
    tern_arg args[] = {tern_arg_buf(out), tern_arg_buf(x), tern_arg_buf(pos), tern_arg_buf(inv_freq),
                       tern_arg_i32(pairs), tern_arg_i32(heads), tern_arg_i32(stride)};
    return gpu_run(g, op, GK_ROPE, &s, tern_dims1(gpu_groups((size_t)pairs / (size_t)W, GK_EW_GROUP)),
                   tern_dims1(GK_EW_GROUP), args, 7);
}

tern_error *gpu_rope(tern_dev *d, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq, int rows, int heads,
                     int head_dim, int stride) {
    return rope(d, "rope", false, out, x, pos, inv_freq, rows, heads, head_dim, stride);
}

tern_error *gpu_rope_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf pos, tern_buf inv_freq, int rows,
                              int heads, int head_dim, int stride) {
    return rope(d, "rope_backward", true, dx, dout, pos, inv_freq, rows, heads, head_dim, stride);
}
