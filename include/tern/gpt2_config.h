/* GPT-2's hyper-parameters, as Hugging Face's config.json gives them. */
#ifndef TERN_GPT2_CONFIG_H
#define TERN_GPT2_CONFIG_H

#include <stddef.h>

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

/* Limits past which a configuration is taken for nonsense. Products such as vocab_size *
 * n_embd can exceed INT_MAX within them: size arithmetic on them must use size_t. */
#define TERN_GPT2_MAX_VOCAB 1000000
#define TERN_GPT2_MAX_SEQ (1 << 20)
#define TERN_GPT2_MAX_LAYER 1024
#define TERN_GPT2_MAX_EMBD 65536

/* Reads and validates the config.json at `path`. Accepted (anything else is a one-line error
 * naming the file and the field):
 *  - n_layer, n_head, n_embd, vocab_size: integers in [1, the limits above], n_head
 *    dividing n_embd; n_positions (or, when absent, n_ctx) in [1, TERN_GPT2_MAX_SEQ];
 *  - layer_norm_epsilon: a number in (0, 1], default 1e-5;
 *  - activation_function: "gelu_new" or "gelu_pytorch_tanh" (both the tanh form), default
 *    gelu_new;
 *  - n_inner: absent, null or 4 * n_embd;  tie_word_embeddings: absent or true;
 *  - model_type: absent or "gpt2";  scale_attn_weights: absent or true;
 *    scale_attn_by_inverse_layer_idx and add_cross_attention: absent or false (tern's
 *    model implements only GPT-2's own attention);
 *  - a key given twice is an error (JSON readers disagree on which copy wins);
 *  - every other key is ignored. */
tern_error *tern_gpt2_config_read(const char *path, tern_gpt2_config *out);

/* The same over len bytes of JSON text; `source` names it in error messages. */
tern_error *tern_gpt2_config_parse(const char *json, size_t len, const char *source,
                                   tern_gpt2_config *out);

/* Checks the limits above (for configurations built in code). */
tern_error *tern_gpt2_config_validate(const tern_gpt2_config *cfg);

/* The config.json text for cfg (validated first) in a new NUL-terminated string *json of
 * *len bytes, freed with free(). It is what tern_gpt2_config_write writes: Hugging Face
 * transformers loads it as GPT2LMHeadModel (architectures, model_type gpt2, gelu_new, tied
 * embeddings, scaled attention, GPT-2's dropout and initializer_range defaults, bos/eos
 * 50256, or vocab_size - 1 for a smaller vocabulary). */
tern_error *tern_gpt2_config_format(const tern_gpt2_config *cfg, char **json, size_t *len);

/* Writes a config.json that Hugging Face transformers loads as GPT2LMHeadModel, atomically. */
tern_error *tern_gpt2_config_write(const char *path, const tern_gpt2_config *cfg);

/* Named configurations for `tern train --init` (layers, heads, channels, context; all with
 * GPT-2's vocabulary of 50257 and epsilon 1e-5):
 *   "gpt2"         12, 12,  768, 1024   (124M parameters)
 *   "gpt2-medium"  24, 16, 1024, 1024   (350M)
 *   "gpt2-large"   36, 20, 1280, 1024   (774M)
 *   "gpt2-xl"      48, 25, 1600, 1024   (1558M)
 *   "small"         6,  6,  384,  256   (30M: a quick model to train on a GPU)
 *   "mini"          6,  8,  256,  256   (17.7M: the default model, 35 MB in bf16)
 *   "tiny"          2,  4,   64,  128   (the shape of the test fixture gpt2-tiny-a)
 * An unknown name is an error that lists these. */
tern_error *tern_gpt2_config_named(const char *name, tern_gpt2_config *out);

#ifdef __cplusplus
}
#endif
#endif
