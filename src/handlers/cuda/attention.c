/* The cuda handler's attention: which implementation answers each call.
 *   mma    flash attention on the tensor cores, written in the DSL (attention_flash.c):
 *          bf16 where it fits (head size a multiple of 16 up to 128, views 16-byte aligned)
 *   gemm   cuBLASLt's batched products on causal blocks with DSL softmax kernels
 *          (attention_gemm.c): f32, and bf16 where mma does not fit
 *   core   the GPU core's flash-style f32 kernels (src/gpu_core/attention.c): any call
 *          whose buffers mix dtypes, which the other two do not take.
 * Each is the fastest for what it takes (bench/h200/NOTES.md): bf16 mma 34.3 ms a step
 * against gemm's 41.8 (run 15); f32 gemm 62 ms against the core's 244.
 * All three save the same record (each query row's natural logsumexp of its scaled scores,
 * f32 [B, NH, T]), so a backward pass may take another path than its forward did: a
 * forward with qkv and out alike runs on the tensor cores even when the backward's
 * gradients then come in another dtype and go to the GPU core. */
#include "cuda_handler.h"
#include "flash_kernels.h"
#include "handlers/validate.h"

typedef enum att_kind { ATT_MMA, ATT_GEMM, ATT_CORE } att_kind;

static att_kind attention_kind(tern_dtype act, int hs, const size_t *offsets, int count) {
    if (act == TERN_BF16 && cuda_flash_fits(hs, offsets, count)) return ATT_MMA;
    return ATT_GEMM;
}

/* The contract's checks (mixed dtypes never get here: they go to the GPU core). */
static tern_error *validate_forward(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                    int NH) {
    size_t saved_len = 0;
    tern_error *err = gpu_attention_saved_len(&d->core, B, T, NH, &saved_len);
    if (err) { /* a bad shape: reported under this operation's name */
        tern_error *named = tern_validate_attention(out, saved, qkv, B, T, C, NH, 0);
        if (!named) return err;
        tern_error_free(err);
        return named;
    }
    return tern_validate_attention(out, saved, qkv, B, T, C, NH, saved_len);
}

static tern_error *validate_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                     tern_buf saved, int B, int T, int C, int NH) {
    size_t saved_len = 0;
    tern_error *err = gpu_attention_saved_len(&d->core, B, T, NH, &saved_len);
    if (err) {
        tern_error *named = tern_validate_attention_backward(dqkv, dout, qkv, out, saved, B, T, C, NH, 0);
        if (!named) return err;
        tern_error_free(err);
        return named;
    }
    return tern_validate_attention_backward(dqkv, dout, qkv, out, saved, B, T, C, NH, saved_len);
}

tern_error *tern_cuda_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B,
                                int T, int C, int NH) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    size_t offsets[] = {out.offset, qkv.offset};
    att_kind kind = NH > 0 && C % NH == 0 ? attention_kind(qkv.dtype, C / NH, offsets, 2) : ATT_GEMM;
    if (qkv.dtype != out.dtype) kind = ATT_CORE;
    tern_error *err = NULL;
    if (kind == ATT_CORE) err = gpu_attention(&d->core, out, saved, qkv, B, T, C, NH);
    else if (!(err = validate_forward(d, out, saved, qkv, B, T, C, NH)))
        err = kind == ATT_GEMM ? cuda_attention_gemm(d, out, saved, qkv, B, T, C, NH)
                               : cuda_attention_flash(d, out, saved, qkv, B, T, C, NH);
    cuda_profile_end(d, "attention", t0);
    return err;
}

tern_error *tern_cuda_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv,
                                         tern_buf out, tern_buf saved, int B, int T, int C, int NH) {
    TERN_TRY(cuda_make_current(d));
    double t0 = cuda_profile_begin(d);
    size_t offsets[] = {dqkv.offset, dout.offset, qkv.offset, out.offset};
    att_kind kind = NH > 0 && C % NH == 0 ? attention_kind(qkv.dtype, C / NH, offsets, 4) : ATT_GEMM;
    if (qkv.dtype != out.dtype || qkv.dtype != dout.dtype || qkv.dtype != dqkv.dtype) kind = ATT_CORE;
    tern_error *err = NULL;
    if (kind == ATT_CORE) err = gpu_attention_backward(&d->core, dqkv, dout, qkv, out, saved, B, T, C, NH);
    else if (!(err = validate_backward(d, dqkv, dout, qkv, out, saved, B, T, C, NH)))
        err = kind == ATT_GEMM ? cuda_attention_backward_gemm(d, dqkv, dout, qkv, out, saved, B, T, C, NH)
                               : cuda_attention_backward_flash(d, dqkv, dout, qkv, out, saved, B, T, C, NH);
    cuda_profile_end(d, "attention_backward", t0);
    return err;
}
