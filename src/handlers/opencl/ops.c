/* Every operation but the device's and matmul: the GPU core's (src/gpu_core/). */
#include "opencl.h"

#define CORE(d, op)                                                                        \
    do {                                                                                   \
        if (!(d)) return tern_errorf("%s: the device is NULL", op);                        \
    } while (0)

tern_error *TERN_OP(alloc)(tern_dev *d, tern_dtype dtype, size_t len, tern_buf *out) {
    CORE(d, "alloc");
    return gpu_alloc(&d->core, dtype, len, out);
}
tern_error *TERN_OP(free)(tern_dev *d, tern_buf *buf) {
    CORE(d, "free");
    return gpu_free(&d->core, buf);
}
tern_error *TERN_OP(upload)(tern_dev *d, tern_buf dst, const void *src) {
    CORE(d, "upload");
    return gpu_upload(&d->core, dst, src);
}
tern_error *TERN_OP(download)(tern_dev *d, void *dst, tern_buf src) {
    CORE(d, "download");
    return gpu_download(&d->core, dst, src);
}
tern_error *TERN_OP(copy)(tern_dev *d, tern_buf dst, tern_buf src) {
    CORE(d, "copy");
    return gpu_copy(&d->core, dst, src);
}
tern_error *TERN_OP(fill)(tern_dev *d, tern_buf dst, double value) {
    CORE(d, "fill");
    return gpu_fill(&d->core, dst, value);
}
tern_error *TERN_OP(get)(tern_dev *d, tern_buf a, size_t index, double *out) {
    CORE(d, "get");
    return gpu_get(&d->core, a, index, out);
}
tern_error *TERN_OP(length)(tern_dev *d, tern_buf a, size_t *out) {
    CORE(d, "length");
    return gpu_length(&d->core, a, out);
}
tern_error *TERN_OP(from_list)(tern_dev *d, tern_dtype dtype, const double *values, size_t count, tern_buf *out) {
    CORE(d, "from_list");
    return gpu_from_list(&d->core, dtype, values, count, out);
}
tern_error *TERN_OP(load)(tern_dev *d, const char *path, const char *name, tern_dtype dtype, tern_buf *out) {
    CORE(d, "load");
    return gpu_load(&d->core, path, name, dtype, out);
}
tern_error *TERN_OP(sum_rows)(tern_dev *d, tern_buf out, tern_buf x, int rows, int cols, float beta) {
    CORE(d, "sum_rows");
    return gpu_sum_rows(&d->core, out, x, rows, cols, beta);
}
tern_error *TERN_OP(add)(tern_dev *d, tern_buf out, tern_buf a, tern_buf b) {
    CORE(d, "add");
    return gpu_add(&d->core, out, a, b);
}
tern_error *TERN_OP(norm2)(tern_dev *d, tern_buf x, double *out) {
    CORE(d, "norm2");
    return gpu_norm2(&d->core, x, out);
}
tern_error *TERN_OP(embed)(tern_dev *d, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe, tern_buf pos,
                           int B, int T, int C) {
    CORE(d, "embed");
    return gpu_embed(&d->core, out, tokens, wte, wpe, pos, B, T, C);
}
tern_error *TERN_OP(embed_backward)(tern_dev *d, tern_buf dwte, tern_buf dwpe, tern_buf dout, tern_buf tokens,
                                    int B, int T, int C) {
    CORE(d, "embed_backward");
    return gpu_embed_backward(&d->core, dwte, dwpe, dout, tokens, B, T, C);
}
tern_error *TERN_OP(layernorm)(tern_dev *d, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x, tern_buf w,
                               tern_buf b, int rows, int C, float eps) {
    CORE(d, "layernorm");
    return gpu_layernorm(&d->core, out, mean, rstd, x, w, b, rows, C, eps);
}
tern_error *TERN_OP(layernorm_backward)(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum,
                                        tern_buf dout, tern_buf x, tern_buf w, tern_buf mean, tern_buf rstd,
                                        int rows, int C, float grad_beta) {
    CORE(d, "layernorm_backward");
    return gpu_layernorm_backward(&d->core, dx, dw, db, dsum, dout, x, w, mean, rstd, rows, C, grad_beta);
}
tern_error *TERN_OP(gelu)(tern_dev *d, tern_buf out, tern_buf x) {
    CORE(d, "gelu");
    return gpu_gelu(&d->core, out, x);
}
tern_error *TERN_OP(gelu_backward)(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf x) {
    CORE(d, "gelu_backward");
    return gpu_gelu_backward(&d->core, dx, dout, x);
}
tern_error *TERN_OP(attention_saved_len)(tern_dev *d, int B, int T, int NH, size_t *out) {
    CORE(d, "attention_saved_len");
    return gpu_attention_saved_len(&d->core, B, T, NH, out);
}
tern_error *TERN_OP(attention)(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                               int NH) {
    CORE(d, "attention");
    return gpu_attention(&d->core, out, saved, qkv, B, T, C, NH);
}
tern_error *TERN_OP(attention_backward)(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                        tern_buf saved, int B, int T, int C, int NH) {
    CORE(d, "attention_backward");
    return gpu_attention_backward(&d->core, dqkv, dout, qkv, out, saved, B, T, C, NH);
}
tern_error *TERN_OP(attention_cached)(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                      tern_buf pos, int B, int T, int C, int NH, int max_T) {
    CORE(d, "attention_cached");
    return gpu_attention_cached(&d->core, out, k_cache, v_cache, qkv, pos, B, T, C, NH, max_T);
}
tern_error *TERN_OP(cross_entropy)(tern_dev *d, tern_buf losses, tern_buf logits, tern_buf targets, int rows,
                                   int V, int Vp, float grad_scale) {
    CORE(d, "cross_entropy");
    return gpu_cross_entropy(&d->core, losses, logits, targets, rows, V, Vp, grad_scale);
}
tern_error *TERN_OP(sample)(tern_dev *d, tern_buf out, tern_buf logits, int rows, int V, int Vp,
                            float temperature, int top_k, uint64_t seed, tern_buf counter) {
    CORE(d, "sample");
    return gpu_sample(&d->core, out, logits, rows, V, Vp, temperature, top_k, seed, counter);
}
tern_error *TERN_OP(adamw)(tern_dev *d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m, tern_buf v,
                           const tern_adamw *h) {
    CORE(d, "adamw");
    return gpu_adamw(&d->core, param, shadow, grad, m, v, h);
}
