/* The model a command runs, whichever family its folder holds: config.json's model_type
 * picks GPT-2 (tern/gpt2.h) or the Llama family (tern/llama.h), and the commands call these
 * instead of either API. */
#ifndef TERN_CLI_MODEL_H
#define TERN_CLI_MODEL_H

#include "tern/gpt2.h"
#include "tern/llama.h"

typedef struct cli_model {
    tern_gpt2 *gpt2;   /* one of the two */
    tern_llama *llama;
} cli_model;

/* The tern_llama_config_named name that an --init NAME stands for: smollm2-135m,
 * qwen2.5-0.5b, llama-3.2-1b, and "llama-tiny" for the family's "tiny" (GPT-2 has a "tiny"
 * of its own); NULL when NAME is not one of the family's. */
const char *cli_llama_init_name(const char *init);

/* Whether DIR/config.json names a Llama-family model (model_type llama or qwen2). */
tern_error *cli_model_is_llama(const char *dir, bool *out);

tern_error *cli_model_load(const char *backend, const char *dir, tern_precision precision, cli_model *out);
/* A fresh model of either family from its --init NAME (random weights from seed). */
tern_error *cli_model_init(const char *backend, const char *init, uint64_t seed, tern_precision precision,
                           cli_model *out);
void cli_model_free(cli_model *m);

const char *cli_model_family(const cli_model *m); /* "gpt2", "llama" or "qwen2" */
const char *cli_model_backend(const cli_model *m);
const char *cli_model_device_name(const cli_model *m);
int cli_model_vocab_size(const cli_model *m);
int cli_model_context(const cli_model *m);

/* Parameters as the hub counts them (a tied embedding once). */
int64_t cli_model_param_count(const cli_model *m);

/* A training step's pieces, as tern_gpt2_* and tern_llama_* (same meaning). */
tern_error *cli_model_zero_grad(cli_model *m);
tern_error *cli_model_forward_backward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T,
                                       float loss_scale, float *mean_loss);
tern_error *cli_model_update(cli_model *m, const tern_gpt2_adamw *h, float *grad_norm);

tern_error *cli_model_forward(cli_model *m, const int32_t *x, const int32_t *y, int B, int T, float *mean_loss);
/* GPT-2 has no eos of its own in its config: stop_at_eos applies to the Llama family. */
tern_error *cli_model_generate(cli_model *m, const int32_t *prompt, int T0, int n_new,
                               const tern_gpt2_sampling *s, bool stop_at_eos, tern_gpt2_on_token on_token,
                               void *user);

#endif
