/* Included by the model sources that are compiled once per handler (TERN_HANDLER=<h>):
 * OP(name) is the handler's operation tern_<h>_<name>, called directly. */
#ifndef TERN_LLAMA_INSTANCE_H
#define TERN_LLAMA_INSTANCE_H

#include "handlers/handler.h"
#include "../common/support.h"
#include "llama_internal.h"

#define OP(name) TERN_OP(name)

/* Functions shared between this handler's model sources: llama_<h>_<name>. */
#define LLAMA_FN(name) TERN_CAT3(llama_, TERN_HANDLER, _##name)

/* y[rows, out] = x[rows, in] @ w[out, in]^T + b (HF Linear). */
tern_error *LLAMA_FN(linear)(tern_dev *d, tern_buf y, tern_buf x, tern_buf w, tern_buf b, int rows,
                             int in, int out);
/* y[rows, out] = res + x[rows, in] @ w[out, in]^T + b: a residual update as one product
 * (res the matmul's addend; res may be y itself). */
tern_error *LLAMA_FN(residual_linear)(tern_dev *d, tern_buf y, tern_buf res, tern_buf x, tern_buf w,
                                      tern_buf b, int rows, int in, int out);
/* y[rows, I] = silu(g) u, [g | u] = rmsnorm(x; nw, eps)[rows, in] @ w[2I, in]^T + b: the MLP's
 * norm and gate | up product with its activation (matmul's RMSNORM prologue and SWIGLU
 * epilogue), for passes that keep neither the norm's output nor gate | up for a backward. */
tern_error *LLAMA_FN(norm_linear_swiglu)(tern_dev *d, tern_buf y, tern_buf x, tern_buf nw, float eps, tern_buf w,
                                         tern_buf b, int rows, int in, int I);
/* y [rows, out] = rmsnorm(x; nw, eps) W^T + b with the first `heads` heads of head_dim columns
 * of each row rotated at positions pos [rows] (matmul's RMSNORM prologue and ROPE epilogue: q
 * and k of a fused q|k|v). */
tern_error *LLAMA_FN(norm_linear_rope)(tern_dev *d, tern_buf y, tern_buf x, tern_buf nw, float eps, tern_buf w,
                                       tern_buf b, int rows, int in, int out, tern_buf pos, tern_buf inv_freq,
                                       int heads, int head_dim);

tern_error *LLAMA_FN(forward)(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                              float loss_scale, bool backward, float *mean_loss);
tern_error *LLAMA_FN(generate)(tern_llama *m, const int32_t *prompt, int B, int T0, int n_new,
                               const tern_gpt2_sampling *s, bool stop_at_eos,
                               tern_gpt2_on_token on_token, void *user, float *prefill_logits);
void LLAMA_FN(free_acts)(tern_llama *m);
void LLAMA_FN(free_decode)(tern_llama *m);

#endif
