/* The cuda handler's operations answered by the GPU core (src/gpu_core/): the same
 * DSL kernels as every GPU handler, launched on this device's stream. Each makes the
 * device's context current first (a program may switch threads between calls) and is
 * timed when TERN_CUDA_PROFILE is set (profile.c). */
#include "cuda_handler.h"

tern_error *tern_cuda_alloc(tern_dev *d, tern_dtype dtype, size_t len, tern_buf *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_alloc(&d->core, dtype, len, out);
    cuda_profile_end(d, "alloc", t0);
    return err;
}

tern_error *tern_cuda_free(tern_dev *d, tern_buf *buf) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_free(&d->core, buf);
    cuda_profile_end(d, "free", t0);
    return err;
}

tern_error *tern_cuda_upload(tern_dev *d, tern_buf dst, const void *src) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_upload(&d->core, dst, src);
    cuda_profile_end(d, "upload", t0);
    return err;
}

tern_error *tern_cuda_download(tern_dev *d, void *dst, tern_buf src) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_download(&d->core, dst, src);
    cuda_profile_end(d, "download", t0);
    return err;
}

tern_error *tern_cuda_copy(tern_dev *d, tern_buf dst, tern_buf src) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_copy(&d->core, dst, src);
    cuda_profile_end(d, "copy", t0);
    return err;
}

tern_error *tern_cuda_fill(tern_dev *d, tern_buf dst, double value) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_fill(&d->core, dst, value);
    cuda_profile_end(d, "fill", t0);
    return err;
}

tern_error *tern_cuda_get(tern_dev *d, tern_buf a, size_t index, double *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_get(&d->core, a, index, out);
    cuda_profile_end(d, "get", t0);
    return err;
}

tern_error *tern_cuda_length(tern_dev *d, tern_buf a, size_t *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_length(&d->core, a, out);
    cuda_profile_end(d, "length", t0);
    return err;
}

tern_error *tern_cuda_from_list(tern_dev *d, tern_dtype dtype, const double *values, size_t count, tern_buf *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_from_list(&d->core, dtype, values, count, out);
    cuda_profile_end(d, "from_list", t0);
    return err;
}

tern_error *tern_cuda_load(tern_dev *d, const char *path, const char *name, tern_dtype dtype, tern_buf *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_load(&d->core, path, name, dtype, out);
    cuda_profile_end(d, "load", t0);
    return err;
}

tern_error *tern_cuda_sum_rows(tern_dev *d, tern_buf out, tern_buf x, int rows, int cols, float beta) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_sum_rows(&d->core, out, x, rows, cols, beta);
    cuda_profile_end(d, "sum_rows", t0);
    return err;
}

tern_error *tern_cuda_add(tern_dev *d, tern_buf out, tern_buf a, tern_buf b) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_add(&d->core, out, a, b);
    cuda_profile_end(d, "add", t0);
    return err;
}

tern_error *tern_cuda_norm2(tern_dev *d, tern_buf x, double *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_norm2(&d->core, x, out);
    cuda_profile_end(d, "norm2", t0);
    return err;
}

tern_error *tern_cuda_embed(tern_dev *d, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe, tern_buf pos, int B, int T, int C) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_embed(&d->core, out, tokens, wte, wpe, pos, B, T, C);
    cuda_profile_end(d, "embed", t0);
    return err;
}

tern_error *tern_cuda_embed_backward(tern_dev *d, tern_buf dwte, tern_buf dwpe, tern_buf dout, tern_buf tokens, int B, int T, int C) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_embed_backward(&d->core, dwte, dwpe, dout, tokens, B, T, C);
    cuda_profile_end(d, "embed_backward", t0);
    return err;
}

tern_error *tern_cuda_layernorm(tern_dev *d, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x, tern_buf w, tern_buf b, int rows, int C, float eps) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_layernorm(&d->core, out, mean, rstd, x, w, b, rows, C, eps);
    cuda_profile_end(d, "layernorm", t0);
    return err;
}

tern_error *tern_cuda_layernorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum, tern_buf dout, tern_buf x, tern_buf w, tern_buf mean, tern_buf rstd, int rows, int C, float grad_beta) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_layernorm_backward(&d->core, dx, dw, db, dsum, dout, x, w, mean, rstd, rows, C, grad_beta);
    cuda_profile_end(d, "layernorm_backward", t0);
    return err;
}

tern_error *tern_cuda_gelu(tern_dev *d, tern_buf out, tern_buf x) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_gelu(&d->core, out, x);
    cuda_profile_end(d, "gelu", t0);
    return err;
}

tern_error *tern_cuda_gelu_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf x) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_gelu_backward(&d->core, dx, dout, x);
    cuda_profile_end(d, "gelu_backward", t0);
    return err;
}

tern_error *tern_cuda_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *out) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_attention_saved_len(&d->core, B, T, NH, out);
    cuda_profile_end(d, "attention_saved_len", t0);
    return err;
}

tern_error *tern_cuda_attention_cached(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv, tern_buf pos, int B, int T, int C, int NH, int max_T) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_attention_cached(&d->core, out, k_cache, v_cache, qkv, pos, B, T, C, NH, max_T);
    cuda_profile_end(d, "attention_cached", t0);
    return err;
}

tern_error *tern_cuda_cross_entropy(tern_dev *d, tern_buf losses, tern_buf logits, tern_buf targets, int rows, int V, int Vp, float grad_scale) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_cross_entropy(&d->core, losses, logits, targets, rows, V, Vp, grad_scale);
    cuda_profile_end(d, "cross_entropy", t0);
    return err;
}

tern_error *tern_cuda_sample(tern_dev *d, tern_buf out, tern_buf logits, int rows, int V, int Vp, float temperature, int top_k, uint64_t seed, tern_buf counter) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_sample(&d->core, out, logits, rows, V, Vp, temperature, top_k, seed, counter);
    cuda_profile_end(d, "sample", t0);
    return err;
}

tern_error *tern_cuda_adamw(tern_dev *d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m, tern_buf v, const tern_adamw *h) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_adamw(&d->core, param, shadow, grad, m, v, h);
    cuda_profile_end(d, "adamw", t0);
    return err;
}
