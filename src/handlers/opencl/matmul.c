/* matmul on OpenCL: CLBlast's SGEMM, with tern's own passes around it for what it lacks.
 * On PoCL (the CPU OpenCL this project is tested on) CLBlast's GEMM ran about 5x faster
 * than the DSL's tiled kernel (docs/gpu-kernels.md has the numbers), so:
 *  - f32 A, B and C: CLBlast writes C directly (batched: its strided-batched GEMM); the
 *    bias, aux and GELU, when asked for, follow as one elementwise pass over C;
 *  - any bf16 (or f16 B) operand: the operands are converted into f32 scratch, CLBlast
 *    computes an f32 C there (C converted in first when beta != 0), and the epilogue pass
 *    adds the bias, writes aux, applies GELU and rounds into C.
 * Built without CLBlast (libclblast-dev absent), matmul is the GPU core's DSL kernel;
 * bench/opencl/bench_matmul.c compares the two. */
#include "opencl.h"

#include <stdlib.h>
#include <string.h>

#ifdef TERN_HAVE_CLBLAST
#include <clblast_c.h>

static tern_error *blast_error(CLBlastStatusCode st) {
    return tern_errorf("matmul: CLBlast failed with status %d", (int)st);
}

/* Products with a longer k are computed in slices of K_SLICE, each added into C (beta = 1
 * after the first), as BLAS libraries block k: CLBlast sums a whole k in one f32 chain per
 * element, and over GPT-2's k = 50304 (the logits' gradient times wte) that loses about
 * 100 times more to rounding than the cpu handler's OpenBLAS. */
#define K_SLICE 1024

/* C32 = alpha op(A32) op(B32) + beta C32 on f32 buffers (views of the device's memory). */
static tern_error *sgemm(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                         const tern_matmul_dims *dm, size_t ldc, size_t stride_c) {
    CLBlastTranspose ta = dm->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = dm->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t k = (size_t)dm->k, slice = k > 2 * K_SLICE ? K_SLICE : k;
    for (size_t k0 = 0; k0 < k; k0 += slice) {
        size_t kn = k - k0 < slice ? k - k0 : slice;
        /* A[:, k0..] is column k0 of A as stored [m, k], or row k0 of [k, m]; B likewise */
        size_t a_off = a.offset + (dm->trans_a ? k0 * dm->lda : k0);
        size_t b_off = b.offset + (dm->trans_b ? k0 : k0 * dm->ldb);
        float beta = k0 == 0 ? mm->beta : 1.0f;
        CLBlastStatusCode st;
        if (dm->batch == 1) {
            st = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, (size_t)dm->m, (size_t)dm->n, kn, mm->alpha,
                              (cl_mem)a.mem, a_off, dm->lda, (cl_mem)b.mem, b_off, dm->ldb, beta, (cl_mem)c.mem,
                              c.offset, ldc, &d->queue, NULL);
        } else {
            st = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, (size_t)dm->m, (size_t)dm->n, kn,
                                            mm->alpha, (cl_mem)a.mem, a_off, dm->lda, dm->stride_a, (cl_mem)b.mem,
                                            b_off, dm->ldb, dm->stride_b, beta, (cl_mem)c.mem, c.offset, ldc,
                                            stride_c, (size_t)dm->batch, &d->queue, NULL);
        }
        if (st != CLBlastSuccess) return blast_error(st);
    }
    return NULL;
}

/* An f32 view of x: x itself, or x converted into scratch at *cursor. */
static tern_error *as_f32(tern_dev *d, tern_buf x, tern_buf scratch, size_t *cursor, bool convert, tern_buf *out) {
    if (x.dtype == TERN_F32) {
        *out = x;
        return NULL;
    }
    tern_buf v = tern_view(scratch, *cursor, x.len);
    *cursor += (x.len + 15) / 16 * 16; /* keep each piece 64-byte aligned */
    if (convert) TERN_TRY(gpu_copy(d, v, x));
    *out = v;
    return NULL;
}

/* The steps of a composed product (tern_matmul_compose): this handler's own operations. */
static tern_error *blast_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm);
TERN_MATMUL_STEPS(tern_dev, gpu_copy, blast_matmul, gpu_gelu_backward, gpu_sum_rows, gpu_swiglu, gpu_rope, gpu_layernorm, gpu_rmsnorm, gpu_attention_cached, gpu_temp)

/* The GPU core's matmul hook: CLBlast, with the core's passes around it. */
static tern_error *blast_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    tern_matmul_dims dm;
    tern_matmul_resolve(mm, &dm);
    if (tern_matmul_composite(c, mm) || tern_matmul_paired(mm) || mm->prologue != TERN_PROLOGUE_NONE) {
        /* CLBlast's beta reads C itself, and the epilogue pass has no GELU gradient, SwiGLU
         * or rotation (a swiglu or rope pass after the product), nor a norm before it (a
         * layernorm or rmsnorm pass) */
        const tern_matmul_steps steps = matmul_steps(d);
        return tern_matmul_compose(&steps, c, a, b, mm, &dm);
    }
    if (a.dtype == TERN_F32 && b.dtype == TERN_F32 && c.dtype == TERN_F32) {
        TERN_TRY(sgemm(d, c, a, b, mm, &dm, dm.ldc, dm.stride_c));
        return gpu_matmul_epilogue(&d->core, c, tern_none(), 0, 0, mm, &dm);
    }
    size_t need = 0;
    tern_buf parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (parts[i].dtype != TERN_F32) need += (parts[i].len + 15) / 16 * 16;
    tern_buf scratch;
    TERN_TRY(gpu_scratch_buf(&d->core, need, &scratch));
    size_t cursor = 0;
    tern_buf a32, b32, c32;
    TERN_TRY(as_f32(d, a, scratch, &cursor, true, &a32));
    TERN_TRY(as_f32(d, b, scratch, &cursor, true, &b32));
    TERN_TRY(as_f32(d, c, scratch, &cursor, mm->beta != 0, &c32));
    TERN_TRY(sgemm(d, c32, a32, b32, mm, &dm, dm.ldc, dm.stride_c));
    if (c.dtype == TERN_F32) return gpu_matmul_epilogue(&d->core, c, tern_none(), 0, 0, mm, &dm);
    return gpu_matmul_epilogue(&d->core, c, c32, dm.ldc, dm.stride_c, mm, &dm);
}

const gpu_hooks opencl_hooks = {.matmul = blast_matmul};

#else /* no CLBlast: the GPU core's DSL product */

const gpu_hooks opencl_hooks = {0};

#endif
