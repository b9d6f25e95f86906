/* The cuda handler's attention: which implementation answers each call.
 *   mma    flash attention on the tensor cores, written in the DSL (attention_flash.c):
 *          bf16 where it fits (head size a multiple of 16 up to 128, views 16-byte aligned),
 *          with KV = NH and with grouped key/value heads (KV < NH: the Llama family's
 *          head size 64 fits)
 *   gemm   cuBLASLt's batched products on causal blocks with DSL softmax kernels
 *          (attention_gemm.c): f32, and bf16 where mma does not fit, KV = NH only
 *   core   the GPU core's flash-style f32 kernels (src/gpu_core/attention.c): any call
 *          whose buffers mix dtypes, and grouped key/value heads (KV < NH) that mma does
 *          not take (f32, or a head size it does not fit), which gemm does not take.
 * Each is the fastest for what it takes (bench/h200/NOTES.md): bf16 mma 34.3 ms a step
 * against gemm's 41.8 (run 15); f32 gemm 62 ms against the core's 244; bf16 grouped heads on
 * mma against the core, SmolLM2-135M B=16 T=1024: 44.9 against 180.5 ms a step (run 66).
 * All three save the same record (each query row's natural logsumexp of its scaled scores,
 * f32 [B, NH, T]), so a backward pass may take another path than its forward did: a
 * forward with qkv and out alike runs on the tensor cores even when the backward's
 * gradients then come in another dtype and go to the GPU core. */
#include "cuda_handler.h"
#include "kernels/flash.h"
#include "handlers/validate.h"

typedef enum att_kind { ATT_MMA, ATT_GEMM, ATT_CORE } att_kind;

/* bf16 on the tensor cores where the kernels fit; otherwise cuBLASLt's products for KV = NH
 * (which take no groups) and the GPU core's kernels for grouped heads. */
static att_kind attention_kind(tern_dtype act, int NH, int KV, int hs, const size_t *offsets, int count) {
    if (act == TERN_BF16 && gk_flash_fits(hs, offsets, count)) return ATT_MMA;
    return KV == NH ? ATT_GEMM : ATT_CORE;
}

/* The GPU core's attention hooks (the entry has validated the arguments; saved's length,
 * the core's own record, is checked here as the core's kernels do). */
tern_error *cuda_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH, int KV,
                           int hs) {
    size_t offsets[] = {out.offset, qkv.offset};
    att_kind kind = qkv.dtype != out.dtype ? ATT_CORE : attention_kind(qkv.dtype, NH, KV, hs, offsets, 2);
    if (kind == ATT_CORE) return gpu_attention_dsl(d, out, saved, qkv, B, T, NH, KV, hs);
    size_t saved_len = 0;
    TERN_TRY(gpu_attention_saved_len(d, B, T, NH, &saved_len));
    TERN_TRY(tern_check_saved("attention", saved, saved_len));
    int C = NH * hs;
    return kind == ATT_GEMM ? cuda_attention_gemm(d, out, saved, qkv, B, T, C, NH)
                            : cuda_attention_flash(d, out, saved, qkv, B, T, C, NH, KV);
}

tern_error *cuda_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                    tern_buf saved, int B, int T, int NH, int KV, int hs) {
    size_t offsets[] = {dqkv.offset, dout.offset, qkv.offset, out.offset};
    bool mixed = qkv.dtype != out.dtype || qkv.dtype != dout.dtype || qkv.dtype != dqkv.dtype;
    att_kind kind = mixed ? ATT_CORE : attention_kind(qkv.dtype, NH, KV, hs, offsets, 4);
    if (kind == ATT_CORE) return gpu_attention_backward_dsl(d, dqkv, dout, qkv, out, saved, B, T, NH, KV, hs);
    size_t saved_len = 0;
    TERN_TRY(gpu_attention_saved_len(d, B, T, NH, &saved_len));
    TERN_TRY(tern_check_saved("attention_backward", saved, saved_len));
    int C = NH * hs;
    return kind == ATT_GEMM ? cuda_attention_backward_gemm(d, dqkv, dout, qkv, out, saved, B, T, C, NH)
                            : cuda_attention_backward_flash(d, dqkv, dout, qkv, out, saved, B, T, C, NH, KV);
}
