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

/* Whether DIR/config.json names a Llama-family model (model_type llama or qwen2). */
tern_error *cli_model_is_llama(const char *dir, bool *out);

tern_error *cli_model_load(const char *backend, const char *dir, tern_precision precision, cli_model *out);
void cli_model_free(cli_model *m);

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

#endif
