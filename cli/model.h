/* The model a command runs, whichever family its folder holds: config.json's model_type
 * picks GPT-2 (tern/gpt2.h) or the Llama family (tern/llama.h), and the commands call these
 * instead of either API. */
#ifndef TERN_CLI_MODEL_H
#define TERN_CLI_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/dist.h"
#include "tern/gpt2.h"
#include "tern/llama.h"

typedef struct cli_model {
    tern_gpt2 *gpt2;   /* one of the two */
    tern_llama *llama;
} cli_model;

/* Whether DIR/config.json names a Llama-family model (model_type llama or qwen2). */
tern_error *cli_model_is_llama(const char *dir, bool *out);

tern_error *cli_model_load(const char *backend, const char *dir, tern_precision precision, cli_model *out);
void cli_model_free(cli_model *m);
/* Decoding with q8_0 matrices (tern_gpt2_quantize_q8), the tied lm head too when lm_head:
 * GPT-2 only, the Llama family refuses with one line. */
tern_error *cli_model_quantize_q8(cli_model *m, bool lm_head);

const char *cli_model_family(const cli_model *m); /* "gpt2", "llama" or "qwen2" */
const char *cli_model_backend(const cli_model *m);
const char *cli_model_device_name(const cli_model *m);
int cli_model_vocab_size(const cli_model *m);
int cli_model_context(const cli_model *m);

tern_error *cli_model_forward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T, float *mean_loss);
/* GPT-2 has no eos of its own in its config: stop_at_eos applies to the Llama family. */
tern_error *cli_model_generate(cli_model *m, const int32_t *prompt, int T0, int n_new,
                               const tern_gpt2_sampling *s, bool stop_at_eos, tern_gpt2_on_token on_token,
                               void *user);

/* ---- tern bench (model.c) ---- */
/* Parameters as the hub counts them (a tied embedding once). */
int64_t cli_model_param_count(const cli_model *m);

/* ---- training (model_train.c): what tern train calls, for either family ---- */

/* Whether the run's model is of the Llama family: --init names one of its shapes
 * ("llama-tiny" is its tiny one), or the config.json of --model or --resume says so. */
bool cli_init_is_llama(const char *init);
tern_error *cli_model_dir_is_llama(const char *dir, bool *out);

/* A fresh model of the shape `init` names (either family's names). */
tern_error *cli_model_init(const char *backend, const char *init, uint64_t seed, tern_precision precision,
                           cli_model *out);
/* One line: "12 layers, 12 heads, 768 channels, context 1024, 124439808 parameters". */
void cli_model_describe(const cli_model *m, char *buf, size_t cap);

/* The job's ranks, memory settings and ZeRO-1 (the memory settings are GPT-2's: the Llama
 * family refuses --recompute with one line). */
tern_error *cli_model_attach(cli_model *m, tern_dist *dist, const tern_gpt2_memory *memory, bool zero1);

tern_error *cli_model_forward_backward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T,
                                       float loss_scale, float *mean_loss);
tern_error *cli_model_zero_grad(cli_model *m);
tern_error *cli_model_update(cli_model *m, const tern_gpt2_adamw *h, float *grad_norm);
int cli_model_step(const cli_model *m);
tern_error *cli_model_sum_across_ranks(cli_model *m, float *value);
size_t cli_model_optimizer_bytes(const cli_model *m);

tern_error *cli_model_save_as(cli_model *m, const char *dir, tern_dtype dtype);
tern_error *cli_model_save_optimizer(cli_model *m, const char *path, const char *const *metadata_kv);
tern_error *cli_model_load_optimizer(cli_model *m, const char *path);
/* The step DIR/model.safetensors records (0 when absent). */
tern_error *cli_model_saved_step(const char *dir, int *step);

#endif
