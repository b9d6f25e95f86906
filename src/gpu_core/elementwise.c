/* Elementwise operations: add, gelu, gelu_backward and adamw. One thread per W elements,
 * W the widest 16-byte access every buffer's offset allows. */
#include <math.h>

#include "gpu_core/gpu_internal.h"

static tern_dims ew_grid(size_t n, int w) {
    return tern_dims1(gpu_groups((n + (size_t)w - 1) / (size_t)w, GK_EW_GROUP));
}

tern_error *gpu_add(tern_dev *d, tern_buf out, tern_buf a, tern_buf b) {
    gpu_core *g = gpu_core_of(d);
    size_t n = out.len;
    TERN_TRY(gpu_check_index("add", "out", n));
    tern_buf all[3] = {out, a, b};
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(a);
    s.t[2] = gpu_t(b);
    s.n[0] = gpu_width(all, 3, 0);
    tern_arg args[] = {tern_arg_buf(out), tern_arg_buf(a), tern_arg_buf(b), tern_arg_i32((int32_t)n)};
    return gpu_run(g, "add", GK_ADD, &s, ew_grid(n, s.n[0]), tern_dims1(GK_EW_GROUP), args, 4);
}

tern_error *gpu_gelu(tern_dev *d, tern_buf out, tern_buf x) {
    gpu_core *g = gpu_core_of(d);
    size_t n = out.len;
    TERN_TRY(gpu_check_index("gelu", "out", n));
    tern_buf all[2] = {out, x};
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(x);
    s.n[0] = gpu_width(all, 2, 0);
    tern_arg args[] = {tern_arg_buf(out), tern_arg_buf(x), tern_arg_i32((int32_t)n)};
    return gpu_run(g, "gelu", GK_GELU, &s, ew_grid(n, s.n[0]), tern_dims1(GK_EW_GROUP), args, 3);
}

tern_error *gpu_gelu_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf x) {
    gpu_core *g = gpu_core_of(d);
    size_t n = dx.len;
    TERN_TRY(gpu_check_index("gelu_backward", "dx", n));
    tern_buf all[3] = {dx, dout, x};
    gk_spec s = {0};
    s.t[0] = gpu_t(dx);
    s.t[1] = gpu_t(dout);
    s.t[2] = gpu_t(x);
    s.n[0] = gpu_width(all, 3, 0);
    tern_arg args[] = {tern_arg_buf(dx), tern_arg_buf(dout), tern_arg_buf(x), tern_arg_i32((int32_t)n)};
    return gpu_run(g, "gelu_backward", GK_GELU_BACKWARD, &s, ew_grid(n, s.n[0]), tern_dims1(GK_EW_GROUP),
                   args, 4);
}

tern_error *gpu_adamw(tern_dev *d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m,
                      tern_buf v, const tern_adamw *h) {
    gpu_core *g = gpu_core_of(d);
    size_t n = param.len;
    TERN_TRY(gpu_check_index("adamw", "param", n));
    bool has_shadow = tern_present(shadow), split = param.dtype == TERN_U16;
    /* The split form (param the low halves, shadow the high halves of the f32 parameter):
     * the kernel moves the shadow's bf16 as bits, so it binds it as u16. */
    if (split) shadow.dtype = TERN_U16;
    tern_buf all[5] = {param, grad, m, v, shadow};
    gk_spec s = {0};
    s.t[0] = gpu_t(grad);
    s.t[1] = has_shadow ? gpu_t(shadow) : 0;
    s.t[2] = split ? TERN_T_U16 : 0; /* 0: param f32 */
    s.n[0] = gpu_width(all, has_shadow ? 5 : 4, 0);
    s.n[1] = has_shadow;
    /* bias corrections in double, as the cpu handler */
    float bc1 = (float)(1.0 - pow((double)h->beta1, (double)h->step));
    float bc2 = (float)(1.0 - pow((double)h->beta2, (double)h->step));
    tern_arg args[14];
    size_t c = 0;
    args[c++] = tern_arg_buf(param);
    args[c++] = tern_arg_buf(grad);
    args[c++] = tern_arg_buf(m);
    args[c++] = tern_arg_buf(v);
    if (has_shadow) args[c++] = tern_arg_buf(shadow);
    args[c++] = tern_arg_i32((int32_t)n);
    args[c++] = tern_arg_f32(h->lr);
    args[c++] = tern_arg_f32(h->beta1);
    args[c++] = tern_arg_f32(h->beta2);
    args[c++] = tern_arg_f32(h->eps);
    args[c++] = tern_arg_f32(h->weight_decay);
    args[c++] = tern_arg_f32(h->grad_scale);
    args[c++] = tern_arg_f32(1.0f / bc1);
    args[c++] = tern_arg_f32(1.0f / bc2);
    return gpu_run(g, "adamw", GK_ADAMW, &s, ew_grid(n, s.n[0]), tern_dims1(GK_EW_GROUP), args, c);
}
