/* Argument validation of the Llama family's operations (rmsnorm, rope, swiglu and their
 * backward passes), shared by every handler like validate.h's. These ops are not yet in the
 * op list (tern/effect.h); once they are, the seam's generated entry points call these
 * before the bodies. Arguments are those of the proposed ops, less the device. */
#ifndef TERN_HANDLERS_VALIDATE_LLAMA_H
#define TERN_HANDLERS_VALIDATE_LLAMA_H

#include "handlers/validate.h"

/* rmsnorm: out, x [rows, C]; w [C]; rrms f32 [rows] or absent. out disjoint from the rest. */
tern_error *tern_validate_rmsnorm(tern_buf out, tern_buf rrms, tern_buf x, tern_buf w, int rows,
                                  int C, float eps);

/* rmsnorm_backward: dx, dout, x [rows, C]; dw, w [C]; rrms f32 [rows]; grad_beta finite.
 * dx and dw disjoint from the inputs and each other. */
tern_error *tern_validate_rmsnorm_backward(tern_buf dx, tern_buf dw, tern_buf dout, tern_buf x,
                                           tern_buf w, tern_buf rrms, int rows, int C,
                                           float grad_beta);

/* rope (and rope_backward: dx, dout in place of out, x): x and out hold rows of `heads` heads of head_dim
 * (even) channels, a row every `stride` (>= heads * head_dim) elements: each view at least
 * (rows - 1) stride + heads head_dim long, under 2^31; out is x's view or disjoint from it.
 * pos i32 [rows]; inv_freq f32 [head_dim / 2]. */
tern_error *tern_validate_rope(tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq,
                               int rows, int heads, int head_dim, int stride);
tern_error *tern_validate_rope_backward(tern_buf dx, tern_buf dout, tern_buf pos,
                                        tern_buf inv_freq, int rows, int heads, int head_dim,
                                        int stride);

/* swiglu: gate and up hold rows of I elements every ld (>= I) elements (views at least
 * (rows - 1) ld + I long, under 2^31); out dense [rows, I], disjoint from both. */
tern_error *tern_validate_swiglu(tern_buf out, tern_buf gate, tern_buf up, int rows, int I,
                                 int ld);

/* swiglu_backward: dgate, dup in gate's layout; dout dense [rows, I]. dgate is gate's view
 * (in place) or shares none of the elements of gate, up and dout; dup likewise with up;
 * dgate and dup share no element (the halves of one fused gradient may interleave). */
tern_error *tern_validate_swiglu_backward(tern_buf dgate, tern_buf dup, tern_buf dout,
                                          tern_buf gate, tern_buf up, int rows, int I, int ld);

/* Grouped-query attention (the cpu bodies cpu_gqa_attention*): B, T, NH, KV, hs positive,
 * KV dividing NH; qkv [B, T, (NH + 2 KV) hs]; out, dout [B, T, NH hs]; saved f32 of
 * saved_len elements (the handler's attention_saved_len); caches [B, KV, max_T, hs]; pos
 * i32 [>= 1], T <= max_T; outputs disjoint from inputs. */
tern_error *tern_validate_gqa_attention(tern_buf out, tern_buf saved, tern_buf qkv, int B, int T,
                                        int NH, int KV, int hs, size_t saved_len);
tern_error *tern_validate_gqa_attention_backward(tern_buf dqkv, tern_buf dout, tern_buf qkv,
                                                 tern_buf out, tern_buf saved, int B, int T,
                                                 int NH, int KV, int hs, size_t saved_len);
tern_error *tern_validate_gqa_attention_cached(tern_buf out, tern_buf k_cache, tern_buf v_cache,
                                               tern_buf qkv, tern_buf pos, int B, int T, int NH,
                                               int KV, int hs, int max_T);

#endif
