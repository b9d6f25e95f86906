/* The DSL matmul (src/kernels/matmul.c) behind the full tern_matmul contract; products with
 * few rows of A go to the GEMV kernels (gemv.c). */
#include "gpu_core/gpu_internal.h"

/* The steps of a composed product (tern_matmul_compose): the core's own operations. */
TERN_MATMUL_STEPS(tern_dev, gpu_copy, gpu_matmul_dsl, gpu_gelu_backward, gpu_sum_rows, gpu_swiglu, gpu_rope, gpu_layernorm, gpu_rmsnorm, gpu_attention_cached, gpu_temp)

tern_error *gpu_matmul_dsl(tern_dev *dev, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    gpu_core *g = gpu_core_of(dev);
    tern_matmul_dims d;
    tern_matmul_resolve(mm, &d);
    if (tern_matmul_composite(c, mm) || (tern_matmul_paired(mm) && !gpu_gemv_paired(&d)) ||
        (mm->prologue != TERN_PROLOGUE_NONE && !gpu_gemv_applies(&d))) {
        /* the kernels read beta's term from C and have no GELU gradient epilogue; only the
         * GEMV kernels for B [n, k] have the SwiGLU and rotary ones, and only the GEMV kernels
         * normalise A's rows (as they stage them) */
        const tern_matmul_steps steps = matmul_steps(dev);
        return tern_matmul_compose(&steps, c, a, b, mm, &d);
    }
    TERN_TRY(gpu_check_index("matmul", "a", a.len));
    TERN_TRY(gpu_check_index("matmul", "b", b.len));
    TERN_TRY(gpu_check_index("matmul", "c", c.len));
    if (gpu_gemv_applies(&d)) return gpu_gemv(g, c, a, b, mm, &d); /* few rows of A: gemv.c */
    if (d.batch > 65535) return tern_errorf("matmul: batch = %d exceeds the GPU grid's limit of 65535", d.batch);
    bool has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    gk_spec s = {0};
    s.t[0] = gpu_t(c);
    s.t[1] = gpu_t(a);
    s.t[2] = gpu_t(b);
    s.t[3] = has_bias ? gpu_t(mm->bias) : 0;
    s.t[4] = has_aux ? gpu_t(mm->aux) : 0;
    s.n[0] = d.trans_a;
    s.n[1] = d.trans_b;
    s.n[2] = mm->epilogue == TERN_EPILOGUE_GELU;
    s.n[3] = has_bias;
    s.n[4] = has_aux;
    tern_arg args[16];
    size_t n = gpu_matmul_buffer_args(args, c, a, b, mm);
    args[n++] = tern_arg_i32(d.m);
    args[n++] = tern_arg_i32(d.n);
    args[n++] = tern_arg_i32(d.k);
    args[n++] = tern_arg_i32((int32_t)d.lda);
    args[n++] = tern_arg_i32((int32_t)d.ldb);
    args[n++] = tern_arg_i32((int32_t)d.ldc);
    args[n++] = tern_arg_i32((int32_t)d.stride_a);
    args[n++] = tern_arg_i32((int32_t)d.stride_b);
    args[n++] = tern_arg_i32((int32_t)d.stride_c);
    args[n++] = tern_arg_f32(mm->alpha);
    args[n++] = tern_arg_f32(mm->beta);
    tern_dims grid = tern_dims3(gpu_groups((size_t)d.n, GK_MM_TILE), gpu_groups((size_t)d.m, GK_MM_TILE),
                                (uint32_t)d.batch);
    return gpu_run(g, "matmul", GK_MATMUL, &s, grid, tern_dims1(GK_MM_THREADS), args, n);
}

tern_error *gpu_scratch_buf(gpu_core *g, size_t len, tern_buf *out) {
    tern_dbuf s;
    TERN_TRY(gpu_scratch(g, len, &s));
    *out = (tern_buf){s.mem, 0, len, TERN_F32};
    return NULL;
}

tern_error *gpu_matmul_epilogue(gpu_core *g, tern_buf c, tern_buf src, size_t src_ld, size_t src_stride,
                                const tern_matmul *mm, const tern_matmul_dims *d) {
    bool has_src = tern_present(src), has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    bool gelu = mm->epilogue == TERN_EPILOGUE_GELU;
    if (tern_matmul_composite(c, mm)) /* the pass would write a GELU_BACKWARD's aux */
        return tern_errorf("matmul: the epilogue pass takes a plain product (compose the addend and GELU_BACKWARD first)");
    if (!has_src && !has_bias && !has_aux && !gelu) return NULL;
    if (!has_src && c.dtype != TERN_F32) return tern_errorf("matmul: an in-place epilogue needs an f32 C");
    TERN_TRY(gpu_check_index("matmul", "the epilogue's source", has_src ? src.len : c.len));
    size_t mn = (size_t)d->m * (size_t)d->n;
    TERN_TRY(gpu_check_index("matmul", "m * n", mn));
    gk_spec s = {0};
    s.t[0] = gpu_t(c);
    s.t[2] = has_bias ? gpu_t(mm->bias) : 0;
    s.t[3] = has_aux ? gpu_t(mm->aux) : 0;
    s.n[0] = has_src;
    s.n[1] = gelu;
    s.n[2] = has_bias;
    s.n[3] = has_aux;
    tern_arg args[10];
    size_t n = 0;
    args[n++] = tern_arg_buf(c);
    if (has_src) args[n++] = tern_arg_buf(src);
    if (has_bias) args[n++] = tern_arg_buf(mm->bias);
    if (has_aux) args[n++] = tern_arg_buf(mm->aux);
    args[n++] = tern_arg_i32(d->m);
    args[n++] = tern_arg_i32(d->n);
    args[n++] = tern_arg_i32((int32_t)d->ldc);
    args[n++] = tern_arg_i32((int32_t)d->stride_c);
    args[n++] = tern_arg_i32((int32_t)src_ld);
    args[n++] = tern_arg_i32((int32_t)src_stride);
    return gpu_run(g, "matmul", GK_EPILOGUE, &s, tern_dims2(gpu_groups(mn, GK_EW_GROUP), (uint32_t)d->batch),
                   tern_dims1(GK_EW_GROUP), args, n);
}
