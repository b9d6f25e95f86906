/* GPT-2, written once against the Tensor effect and compiled once per handler.
 *
 * A program opens a model on one handler ("cpu", "cuda", "opencl") and from then on every
 * call runs that handler's instance of the model, which calls the handler's operations
 * directly. Token ids cross between host and device; tensors stay on the device. */
#ifndef TERN_GPT2_H
#define TERN_GPT2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/dist.h"
#include "tern/effect.h"
#include "tern/error.h"
#include "tern/gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_gpt2 tern_gpt2;

typedef enum tern_precision {
    TERN_PRECISION_FP32, /* f32 weights and activations */
    TERN_PRECISION_BF16, /* bf16 weights and activations, f32 accumulation; training keeps
                            f32 master weights (the bf16 weights plus their 16 low bits,
                            exactly) and optimizer state */
} tern_precision;

tern_error *tern_precision_parse(const char *text, tern_precision *out);
const char *tern_precision_name(tern_precision p);

/* Opens a Hugging Face GPT-2 directory (config.json, model.safetensors in either key layout)
 * on the handler `backend`: its name, optionally followed by ':' and the handler's options
 * ("cuda:device=1,gemv=0": the keys docs/effects.md lists). */
tern_error *tern_gpt2_load(const char *backend, const char *dir, tern_precision precision,
                           tern_gpt2 **out);

/* A fresh model: GPT-2's initialisation (normal weights with std 0.02, residual projections
 * scaled by 1/sqrt(2 n_layer), zero biases, unit layer-norm gains), from `seed`. */
tern_error *tern_gpt2_init(const char *backend, const tern_gpt2_config *cfg, uint64_t seed,
                           tern_precision precision, tern_gpt2 **out);

void tern_gpt2_free(tern_gpt2 *m);

const tern_gpt2_config *tern_gpt2_get_config(const tern_gpt2 *m);
const char *tern_gpt2_backend(const tern_gpt2 *m);
const char *tern_gpt2_device_name(const tern_gpt2 *m);
size_t tern_gpt2_num_params(const tern_gpt2_config *cfg); /* as Hugging Face counts them */

/* ---- evaluation and training ---- */

/* Forward pass over tokens x [B, T] (host i32). With targets y [B, T] (or NULL), *mean_loss
 * receives the mean cross-entropy. Logits and per-position losses stay readable until the
 * next call. */
tern_error *tern_gpt2_forward(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                              float *mean_loss);

/* Forward and backward: adds d(loss * loss_scale)/d(param) to the gradients, where loss is
 * the mean over the batch (loss_scale 1/accumulation_steps for gradient accumulation).
 * *mean_loss receives the mean loss of this batch. */
tern_error *tern_gpt2_forward_backward(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B,
                                       int T, float loss_scale, float *mean_loss);

tern_error *tern_gpt2_zero_grad(tern_gpt2 *m);

/* How training passes trade memory for time; the next pass lays its buffers out anew.
 * logit_rows: rows of logits [rows, Vp] a training pass holds at once (the loss and its
 * gradient through the output projection run over chunks of rows), 0: chosen (at most
 * 2^28 logits, and no more than the backward's own buffers where those are large).
 * recompute_gelu: one GELU output [B T, 4 C] for all layers, recomputed from its
 * input in the backward pass (4 C values a token a layer less memory, one more pass over
 * them). The layer norms' backward reads, by default, their outputs (kept for the products
 * after them anyway; xhat = (y - b) / w, for weights away from zero: a model whose weights
 * at load or init have some |w| < 1/64 or |b| > 8 |w| keeps the inputs as below whatever
 * recompute_layernorm says), so their inputs, the residual stream, take two buffers for all
 * layers; recompute_layernorm: it reads their inputs instead, kept for every layer (exact
 * for any weights), and one layer-norm output [B T, C] serves all layers, written again by
 * each layer norm's backward pass (the same memory; 2 C values a token a layer more
 * written; the same values bit for bit). Passes without a backward share all those buffers
 * in any case. */
typedef struct tern_gpt2_memory {
    int logit_rows;
    bool recompute_gelu;
    bool recompute_layernorm;
} tern_gpt2_memory;
tern_error *tern_gpt2_set_memory(tern_gpt2 *m, const tern_gpt2_memory *memory);

/* Data-parallel training: attaches a communicator (NULL detaches; the model does not own
 * it). Every rank holds the same parameters and runs the same calls on its own share of the
 * global batch (docs/distributed.md). Then forward_backward adds d(loss * loss_scale /
 * world)/d(param) to this rank's gradients, *mean_loss is the mean over every rank's batch,
 * and update first sums the gradients across the ranks (the Tensor effect's allreduce), so
 * each rank takes the step one process would take on the global batch. */
tern_error *tern_gpt2_set_dist(tern_gpt2 *m, tern_dist *comm);

/* ZeRO-1: each of the communicator's N ranks keeps AdamW's m and v, and in bf16 the f32
 * master weights' low halves, for 1/N of the parameters only (the flat parameters padded to split
 * evenly). update still sums the whole gradient and clips by its global norm, then each rank
 * steps its part and the ranks gather the updated weights (the Tensor effect's allgather), so
 * the steps are those without it. Call after tern_gpt2_set_dist and before the first
 * forward_backward or load_optimizer; the communicator cannot change afterwards. A single
 * rank: nothing to do. Checkpoints stay whole (see save_optimizer), so a run resumes on any
 * number of ranks, with or without it. */
tern_error *tern_gpt2_shard_optimizer(tern_gpt2 *m);

/* Bytes of optimizer state this rank holds (or will hold at the first update): m and v (f32),
 * and in bf16 the master weights' low halves (u16: the bf16 compute weights are their high
 * halves). About 1/N of one process's with ZeRO-1 on N ranks. */
size_t tern_gpt2_optimizer_bytes(const tern_gpt2 *m);

typedef struct tern_gpt2_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    float clip; /* global gradient-norm clip; <= 0: none */
    bool decay_all; /* weight decay on every tensor (PyTorch's default); false: 2-D only */
} tern_gpt2_adamw;

/* One AdamW step over every parameter; *grad_norm (may be NULL) receives the global gradient
 * norm before clipping. */
tern_error *tern_gpt2_update(tern_gpt2 *m, const tern_gpt2_adamw *h, float *grad_norm);
int tern_gpt2_step(const tern_gpt2 *m); /* optimizer steps taken */
/* *value summed over the ranks of the model's communicator (through the handler's allreduce,
 * NCCL or MPI), in place; a no-op with one rank. Every rank must call it. */
tern_error *tern_gpt2_sum_across_ranks(tern_gpt2 *m, float *value);

/* Reading tensors back (tests, checkpoints). Names are Hugging Face's without a prefix
 * ("wte.weight", "h.0.attn.c_attn.weight", ...); wte is [V, C]. count must match. With ZeRO-1
 * in bf16, read_param gathers the master weights' low halves from the ranks: every rank must call
 * it. */
tern_error *tern_gpt2_read_param(tern_gpt2 *m, const char *name, float *out, size_t count);
tern_error *tern_gpt2_read_grad(tern_gpt2 *m, const char *name, float *out, size_t count);
/* Logits [rows, V] starting at row `row` (of B*T) of the last forward. */
tern_error *tern_gpt2_read_logits(tern_gpt2 *m, int row, int rows, float *out);
/* Per-position losses [B*T] of the last forward with targets. */
tern_error *tern_gpt2_read_losses(tern_gpt2 *m, float *out);

/* Writes DIR/config.json and DIR/model.safetensors (save_pretrained's layout, loadable by
 * Hugging Face transformers), each atomically. The weights file's metadata records the
 * optimizer step ("tern_step"). With a communicator of several ranks only rank 0 writes;
 * with ZeRO-1 in bf16 every rank must call it (the master weights' low halves are gathered). */
tern_error *tern_gpt2_save(tern_gpt2 *m, const char *dir);
/* The same with the weights stored as `dtype` (f32, bf16 or f16): a half-precision
 * checkpoint is half the size; resuming from it continues from the rounded weights. */
tern_error *tern_gpt2_save_as(tern_gpt2 *m, const char *dir, tern_dtype dtype);

/* The step recorded in DIR/model.safetensors by tern_gpt2_save (0 when absent). */
tern_error *tern_gpt2_saved_step(const char *dir, int *step);

/* The optimizer's state: AdamW's moments as f32 tensors "m.<name>" and "v.<name>", and the
 * step, in a safetensors file written atomically; metadata_kv (key, value, ..., NULL) adds
 * the caller's pairs (data position, seed). Loading restores moments and step exactly.
 * The file always holds every parameter's moments: with a communicator of several ranks only
 * rank 0 writes it, and with ZeRO-1 every rank must call save (the moments are gathered from
 * the ranks); a sharded model loads its part of the file. */
tern_error *tern_gpt2_save_optimizer(tern_gpt2 *m, const char *path, const char *const *metadata_kv);
tern_error *tern_gpt2_load_optimizer(tern_gpt2 *m, const char *path);

/* ---- generation ---- */

typedef struct tern_gpt2_sampling {
    float temperature; /* <= 0: greedy */
    int top_k;         /* <= 0: the whole vocabulary */
    uint64_t seed;
} tern_gpt2_sampling;

/* Called after each generated step with the new token of each of the B sequences. Returning
 * an error stops generation with it. */
typedef tern_error *(*tern_gpt2_on_token)(void *user, const int32_t *tokens, int B);

/* Continues B prompts of T0 tokens each (prompt [B, T0], host) by n_new tokens, with a KV
 * cache: one prefill pass, then one-token steps. T0 + n_new must fit the context. */
tern_error *tern_gpt2_generate(tern_gpt2 *m, const int32_t *prompt, int B, int T0, int n_new,
                               const tern_gpt2_sampling *sampling, tern_gpt2_on_token on_token,
                               void *user);

/* Decoding (tern_gpt2_generate, tern_gpt2_prefill_logits) with the matrices quantized to
 * q8_0 (include/tern/effect.h: blocks of 32 int8 and an f16 scale), from the current compute
 * weights; with lm_head, the tied lm head too (the embedding lookup keeps the float table).
 * Embeddings, norms and biases stay as they are; tern_gpt2_forward keeps the float weights.
 * Afterwards training (forward_backward, update) is refused; the copy is taken once, so a
 * later change of the float weights is not seen by decoding. Handlers without q8_0 (the GPU
 * ones, today) give their error; n_embd must be a multiple of 32. */
tern_error *tern_gpt2_quantize_q8(tern_gpt2 *m, bool lm_head);

/* Logits [B, V] of the last position of each prompt after a generation's prefill, computed
 * by the same cached path (tests compare it with a full forward). */
tern_error *tern_gpt2_prefill_logits(tern_gpt2 *m, const int32_t *prompt, int B, int T0,
                                     float *out);

#ifdef __cplusplus
}
#endif
#endif
