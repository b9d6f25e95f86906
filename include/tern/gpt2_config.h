/* GPT-2's hyper-parameters, as Hugging Face's config.json gives them. */
#ifndef TERN_GPT2_CONFIG_H
#define TERN_GPT2_CONFIG_H

#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_gpt2_config {
    int vocab_size;  /* V: 50257 for GPT-2 */
    int max_seq;     /* n_positions: the context length */
    int n_layer;
    int n_head;
    int n_embd;      /* C; n_embd % n_head == 0 */
    float ln_eps;    /* layer_norm_epsilon */
} tern_gpt2_config;

/* Reads and validates DIR-independent path to config.json: model_type gpt2, activation
 * gelu_new (or gelu_pytorch_tanh), n_inner absent/null or 4 * n_embd, tied embeddings, and
 * sane sizes (positive, heads dividing channels, within limits). One-line errors. */
tern_error *tern_gpt2_config_read(const char *path, tern_gpt2_config *out);

/* Writes a config.json that Hugging Face transformers loads as GPT2LMHeadModel, atomically. */
tern_error *tern_gpt2_config_write(const char *path, const tern_gpt2_config *cfg);

/* Named configurations for `tern train --init`: "gpt2" (124M) and smaller ones. */
tern_error *tern_gpt2_config_named(const char *name, tern_gpt2_config *out);

#ifdef __cplusplus
}
#endif
#endif
