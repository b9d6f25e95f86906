/* The cpu handler's bodies of the Llama family's operations, with the signatures proposed
 * for the op list (see handlers/validate_llama.h for the arguments' rules; bodies assume
 * them checked, as the seam's entry points will). Until the ops join tern/effect.h they are
 * called directly, by tests/llama. Float buffers are f32 or bf16; the math is f32. */
#ifndef TERN_HANDLERS_CPU_LLAMA_OPS_H
#define TERN_HANDLERS_CPU_LLAMA_OPS_H

#include "tern/effect.h"

/* rrms[r] = 1 / sqrt(mean(x[r, :]^2) + eps) (stored when present); out = (x rrms) w.
 * x, out [rows, C]; w [C]. */
tern_error *cpu_rmsnorm(tern_dev *d, tern_buf out, tern_buf rrms, tern_buf x, tern_buf w, int rows,
                        int C, float eps);

/* dx += rrms (w dout - xhat mean(w dout xhat)), xhat = x rrms (accumulates, as
 * layernorm_backward); dw = grad_beta dw + the column sums of dout xhat (grad_beta 0: dw is
 * written, not read). */
tern_error *cpu_rmsnorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf dout, tern_buf x,
                                 tern_buf w, tern_buf rrms, int rows, int C, float grad_beta);

/* The rotate-half rotary embedding of rows of `heads` heads (a row every `stride` elements),
 * angle float(pos[row]) * inv_freq[j] for the pair (j, j + head_dim / 2); out may be x.
 * rope_backward rotates by -angle (dx from dout; dx may be dout). */
tern_error *cpu_rope(tern_dev *d, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq,
                     int rows, int heads, int head_dim, int stride);
tern_error *cpu_rope_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf pos,
                              tern_buf inv_freq, int rows, int heads, int head_dim, int stride);

/* out[r, c] = silu(gate[r ld + c]) up[r ld + c], out dense [rows, I]. */
tern_error *cpu_swiglu(tern_dev *d, tern_buf out, tern_buf gate, tern_buf up, int rows, int I,
                       int ld);

/* dgate = dout up silu'(gate), dup = dout silu(gate), in gate's layout (dgate may be gate,
 * dup may be up). */
tern_error *cpu_swiglu_backward(tern_dev *d, tern_buf dgate, tern_buf dup, tern_buf dout,
                                tern_buf gate, tern_buf up, int rows, int I, int ld);

/* Causal attention with grouped key/value heads (attention_gqa.c): NH query heads, KV
 * key/value heads (KV divides NH), head size hs; qkv [B, T, (NH + 2 KV) hs] (queries, then
 * keys, then values), out and dout [B, T, NH hs], saved f32 of
 * cpu_gqa_attention_saved_len elements (the softmax probabilities), caches
 * [B, KV, max_T, hs]. The backward overwrites dqkv; the cached form stores the T new keys
 * and values at positions p0 = pos[0] .. p0 + T - 1 and attends from each over 0 .. itself.
 * With KV = NH they are GPT-2's attention, attention_backward and attention_cached. */
tern_error *cpu_gqa_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *out);
tern_error *cpu_gqa_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH,
                              int KV, int hs);
tern_error *cpu_gqa_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                       tern_buf saved, int B, int T, int NH, int KV, int hs);
tern_error *cpu_gqa_attention_cached(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                     tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T);

#endif
