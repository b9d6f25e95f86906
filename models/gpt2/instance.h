/* Included by the model sources that are compiled once per handler (TERN_HANDLER=<h>):
 * OP(name) is the handler's operation tern_<h>_<name>, called directly. */
#ifndef TERN_GPT2_INSTANCE_H
#define TERN_GPT2_INSTANCE_H

#include "gpt2_internal.h"
#include "handlers/handler.h"
#include "../common/support.h"

#define OP(name) TERN_OP(name)

/* Functions shared between this handler's model sources: gpt2_<h>_<name>. */
#define GPT2_FN(name) TERN_CAT3(gpt2_, TERN_HANDLER, _##name)

/* y[rows, out] = x[rows, in] @ w[in, out] + b, then the epilogue (aux: pre-activation). */
tern_error *GPT2_FN(linear)(tern_dev *d, tern_buf y, tern_buf x, tern_buf w, tern_buf b,
                            int rows, int in, int out, tern_epilogue epilogue, tern_buf aux);
/* y[rows, out] = res[rows, out] + x[rows, in] @ w[in, out] + b: a residual update as one
 * product (res is the matmul's addend, read by beta = 1), so the projection needs neither
 * an output of its own nor an add pass. */
tern_error *GPT2_FN(residual_linear)(tern_dev *d, tern_buf y, tern_buf res, tern_buf x, tern_buf w, tern_buf b,
                                     int rows, int in, int out);

tern_error *GPT2_FN(forward)(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                             float loss_scale, bool backward, float *mean_loss);
tern_error *GPT2_FN(generate)(tern_gpt2 *m, const int32_t *prompt, int B, int T0, int n_new,
                              const tern_gpt2_sampling *s, tern_gpt2_on_token on_token,
                              void *user, float *prefill_logits);
void GPT2_FN(free_acts)(tern_gpt2 *m);
void GPT2_FN(free_decode)(tern_gpt2 *m);

#endif
