/* The Llama family (Llama 3.x, Qwen2/Qwen2.5, SmolLM2), written once against the Tensor
 * effect and compiled once per handler, as GPT-2 is (tern/gpt2.h): a program opens a model
 * on one handler and every call then runs that handler's instance of the model.
 *
 * The maths, per layer l of the residual stream x [B*T, C]:
 *   h   = rmsnorm(x) w_in                     q, k, v = h Wq^T (+bq), h Wk^T, h Wv^T
 *   q, k = rope(q, k) at each row's position   x = x + attention(q, k, v) Wo^T (+bo)
 *   h   = rmsnorm(x) w_post                   x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
 * then logits = rmsnorm(x) w_norm lm_head^T (lm_head is embed_tokens when tied). HF Linear
 * weights are [out, in]. */
#ifndef TERN_LLAMA_H
#define TERN_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"
#include "tern/gpt2.h" /* tern_precision, the AdamW and sampling settings, shared */
#include "tern/llama_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_llama tern_llama;

/* Opens a Hugging Face folder: config.json (model_type llama or qwen2, tern/llama_config.h)
 * and model.safetensors or shards with model.safetensors.index.json (tern/weights.h), F32,
 * F16 or BF16. Every tensor the config implies must be there with its shape and finite
 * values; a tensor the config does not imply is an error (weights of another shape of
 * model), except the rotary inv_freq buffers older checkpoints store, and lm_head when tied.
 * backend as tern_gpt2_load's. */
tern_error *tern_llama_load(const char *backend, const char *dir, tern_precision precision,
                            tern_llama **out);

/* A fresh model of `cfg`: transformers' initialisation (normal weights of std 0.02, unit
 * norm gains, zero biases), from `seed`. */
tern_error *tern_llama_init(const char *backend, const tern_llama_config *cfg, uint64_t seed,
                            tern_precision precision, tern_llama **out);

void tern_llama_free(tern_llama *m);

const tern_llama_config *tern_llama_get_config(const tern_llama *m);
const char *tern_llama_backend(const tern_llama *m);
const char *tern_llama_device_name(const tern_llama *m);

/* Forward over tokens x [B, T] (host i32); with targets y [B, T] (or NULL) *mean_loss gets
 * the mean cross-entropy. Logits and losses stay readable until the next call. */
tern_error *tern_llama_forward(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                               float *mean_loss);

/* Forward and backward: adds d(mean loss * loss_scale)/d(param) to the gradients. */
tern_error *tern_llama_forward_backward(tern_llama *m, const int32_t *x, const int32_t *y,
                                        int B, int T, float loss_scale, float *mean_loss);

tern_error *tern_llama_zero_grad(tern_llama *m);

/* One AdamW step over every parameter (decay_all false: matrices and embeddings decayed,
 * norm gains and biases not); *grad_norm (may be NULL) gets the norm before clipping. */
tern_error *tern_llama_update(tern_llama *m, const tern_gpt2_adamw *h, float *grad_norm);
int tern_llama_step(const tern_llama *m);

/* Tensors by their Hugging Face names ("model.layers.0.self_attn.q_proj.weight", ...);
 * count must match. With ZeRO-1 in bf16, read_param gathers the master weights' low halves
 * from the ranks: every rank must call it. */
tern_error *tern_llama_read_param(tern_llama *m, const char *name, float *out, size_t count);
tern_error *tern_llama_read_grad(tern_llama *m, const char *name, float *out, size_t count);
/* Logits [rows, V] from row `row` (of B*T) of the last forward; its losses [B*T]. */
tern_error *tern_llama_read_logits(tern_llama *m, int row, int rows, float *out);
tern_error *tern_llama_read_losses(tern_llama *m, float *out);

/* Writes DIR/config.json, then DIR/model.safetensors, in save_pretrained's layout (f32; tied
 * lm_head not stored), each atomically; the step in the metadata ("tern_step"). With
 * ranks, rank 0 writes. */
tern_error *tern_llama_save(tern_llama *m, const char *dir);

/* The same in dtype (f32, bf16 or f16): half-precision weights rounded to nearest even. */
tern_error *tern_llama_save_as(tern_llama *m, const char *dir, tern_dtype dtype);
/* The step DIR/model.safetensors records (0 when absent). */
tern_error *tern_llama_saved_step(const char *dir, int *step);
/* AdamW's moments as a safetensors file ("m.NAME", "v.NAME", the step and metadata_kv's
 * pairs in its metadata), and back: the file's step becomes the model's. With ranks, rank 0
 * writes; with ZeRO-1 every rank must call save (and save_as), giving rank 0 its part,
 * and load keeps this rank's part. */
tern_error *tern_llama_save_optimizer(tern_llama *m, const char *path, const char *const *metadata_kv);
tern_error *tern_llama_load_optimizer(tern_llama *m, const char *path);

/* Data parallelism: the job's communicator (tern/dist.h). Each rank's forward_backward then
 * adds d(its mean loss / world), update sums the gradients across the ranks, and the mean
 * loss it reports is the global batch's. */
tern_error *tern_llama_set_dist(tern_llama *m, tern_dist *comm);
tern_error *tern_llama_sum_across_ranks(tern_llama *m, float *value);
/* ZeRO-1, as tern_gpt2_shard_optimizer: each of the communicator's N ranks keeps AdamW's
 * moments, and in bf16 the master weights' low halves, for 1/N of the parameters; the steps and the
 * checkpoints (whole, rank 0 writes; every rank calls save) are those without it. Call after
 * tern_llama_set_dist and before the first forward_backward or load_optimizer; the
 * communicator cannot change afterwards. A single rank: nothing to do. */
tern_error *tern_llama_shard_optimizer(tern_llama *m);
/* Bytes of optimizer state this rank holds: both moments (f32), and in bf16 the master
 * weights' low halves (u16; the compute weights are their high halves); about 1/N of them
 * with ZeRO-1. */
size_t tern_llama_optimizer_bytes(const tern_llama *m);

/* Continues B prompts of T0 tokens (prompt [B, T0], host) by up to n_new tokens with a KV
 * cache: one prefill pass, then one-token steps, calling on_token after each step. With
 * stop_at_eos, generation ends after the step at which every sequence has produced one of
 * the config's eos tokens (a sequence that ended earlier keeps receiving tokens until then:
 * the caller drops them). */
tern_error *tern_llama_generate(tern_llama *m, const int32_t *prompt, int B, int T0, int n_new,
                                const tern_gpt2_sampling *sampling, bool stop_at_eos,
                                tern_gpt2_on_token on_token, void *user);

/* Decoding (tern_llama_generate, tern_llama_prefill_logits) with the layers' matrices in
 * q8_0 (include/tern/effect.h), from the current compute weights: q|k|v, o, gate|up and down
 * where their rows (the reduction) are whole blocks of 32, the rest staying as they are;
 * with lm_head, the lm head (or the tied embedding as the head) too. Embeddings, norms and
 * biases stay as they are; tern_llama_forward keeps the float weights. Afterwards training
 * (forward_backward, update) is refused; the copy is taken once. Handlers without q8_0 (the
 * GPU ones, today) give their error. */
tern_error *tern_llama_quantize_q8(tern_llama *m, bool lm_head);

/* Logits [B, V] of each prompt's last position through the cached path (tests). */
tern_error *tern_llama_prefill_logits(tern_llama *m, const int32_t *prompt, int B, int T0,
                                      float *out);

/* Whether DIR/config.json names a model of this family (model_type llama or qwen2): reads
 * only model_type. Errors only when the file cannot be read or is not JSON. */
tern_error *tern_llama_is_family(const char *dir, bool *out);

#ifdef __cplusplus
}
#endif
#endif
