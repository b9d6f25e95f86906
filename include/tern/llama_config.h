/* The Llama family's hyper-parameters (Llama 3.x, Qwen2/Qwen2.5, SmolLM2 and their
 * fine-tunes), as Hugging Face's config.json gives them, and the rotary frequencies they
 * imply. */
#ifndef TERN_LLAMA_CONFIG_H
#define TERN_LLAMA_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tern_llama_family {
    TERN_LLAMA_FAMILY_LLAMA, /* model_type "llama" (LlamaForCausalLM; SmolLM2 too) */
    TERN_LLAMA_FAMILY_QWEN2, /* model_type "qwen2" (Qwen2ForCausalLM; Qwen2.5 too) */
} tern_llama_family;

/* rope_scaling: none, or Llama 3.1's frequency-dependent rescaling ("llama3"). */
typedef struct tern_llama_rope_scaling {
    bool llama3;                  /* false: no scaling (null or rope_type "default") */
    double factor;                /* > 0 (32 for Llama 3.2, 8 for Llama 3.1) */
    double low_freq_factor;       /* > 0 */
    double high_freq_factor;      /* > low_freq_factor */
    int original_max_position;    /* original_max_position_embeddings, >= 1 */
} tern_llama_rope_scaling;

#define TERN_LLAMA_MAX_EOS 8

typedef struct tern_llama_config {
    tern_llama_family family;
    int vocab_size;        /* V */
    int max_seq;           /* max_position_embeddings */
    int n_layer;           /* num_hidden_layers */
    int hidden;            /* hidden_size, C */
    int intermediate;      /* intermediate_size: the SwiGLU width */
    int n_head;            /* num_attention_heads */
    int n_kv_head;         /* num_key_value_heads, dividing n_head (grouped-query attention) */
    int head_dim;          /* hs: config's head_dim, else hidden / n_head; even */
    float rms_eps;         /* rms_norm_eps */
    double rope_theta;     /* the rotary base */
    tern_llama_rope_scaling rope_scaling;
    bool tie_word_embeddings; /* lm_head is model.embed_tokens (not stored) */
    bool qkv_bias;         /* q_proj, k_proj, v_proj have biases (Qwen2: always) */
    bool o_bias;           /* o_proj has a bias (Llama's attention_bias) */
    bool mlp_bias;         /* gate_proj, up_proj, down_proj have biases (Llama's mlp_bias) */
    int bos_token_id;      /* -1: none */
    int n_eos;             /* 0 .. TERN_LLAMA_MAX_EOS */
    int eos_token_ids[TERN_LLAMA_MAX_EOS];
} tern_llama_config;

/* Limits past which a configuration is taken for nonsense. Products such as vocab_size *
 * hidden exceed INT_MAX within them: size arithmetic on them must use size_t. */
#define TERN_LLAMA_MAX_VOCAB 1048576
#define TERN_LLAMA_MAX_SEQ (1 << 24)
#define TERN_LLAMA_MAX_LAYER 1024
#define TERN_LLAMA_MAX_HIDDEN 65536
#define TERN_LLAMA_MAX_INTERMEDIATE (1 << 20)
#define TERN_LLAMA_MAX_HEAD_DIM 1024

/* Reads and validates the config.json at `path`. Accepted (anything else is a one-line
 * error naming the file and the field):
 *  - model_type "llama" or "qwen2" (required); a key given twice is an error;
 *  - hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size,
 *    max_position_embeddings: integers in [1, the limits above] (required);
 *  - num_key_value_heads: dividing num_attention_heads; absent or null: num_attention_heads
 *    (as transformers);
 *  - head_dim: an even integer in [2, TERN_LLAMA_MAX_HEAD_DIM]; absent or null:
 *    hidden_size / num_attention_heads, which must then divide evenly and be even;
 *  - rms_norm_eps: a number in (0, 1], default 1e-6; rope_theta: > 1, default 10000;
 *  - rope_scaling: null, absent, {"rope_type" (or the older "type"): "default"} (no
 *    scaling), or "llama3" with factor, low_freq_factor, high_freq_factor (> low) and
 *    original_max_position_embeddings; any other type is an error. transformers 5's
 *    rope_parameters (rope_theta inside) is read the same way;
 *    partial_rotary_factor: absent or 1;
 *  - hidden_act: absent or "silu";  tie_word_embeddings: default false (as both families);
 *  - biases. llama: attention_bias (default false) gives q, k, v AND o_proj biases;
 *    mlp_bias (default false) gives gate, up and down biases. qwen2: q, k, v always have
 *    biases and o_proj and the MLP never do, whatever attention_bias or mlp_bias say
 *    (transformers' Qwen2Attention and Qwen2MLP hard-code bias=True / bias=False and
 *    never read those keys);
 *  - bos_token_id: an integer or null; eos_token_id: an integer, a list of at most
 *    TERN_LLAMA_MAX_EOS integers, or null; ids in [0, vocab_size);
 *  - refused: use_sliding_window true, layer_types naming anything but "full_attention"
 *    (sliding-window attention); MoE keys (num_experts, num_local_experts,
 *    num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size) with a
 *    value other than null or 0;
 *  - every other key is ignored. */
tern_error *tern_llama_config_read(const char *path, tern_llama_config *out);

/* The same over len bytes of JSON text; `source` names it in error messages. */
tern_error *tern_llama_config_parse(const char *json, size_t len, const char *source,
                                    tern_llama_config *out);

/* Checks the rules above (for configurations built in code). */
tern_error *tern_llama_config_validate(const tern_llama_config *cfg);

/* The config.json text for cfg (validated first) in a new NUL-terminated string *json of
 * *len bytes, freed with free(): what transformers loads as LlamaForCausalLM or
 * Qwen2ForCausalLM with the same shapes, biases and rotary frequencies, and what
 * tern_llama_config_parse reads back as cfg. */
tern_error *tern_llama_config_format(const tern_llama_config *cfg, char **json, size_t *len);

/* Writes that config.json atomically. */
tern_error *tern_llama_config_write(const char *path, const tern_llama_config *cfg);

/* The number of parameters, the tied embedding counted once (as the hub's totals). */
int64_t tern_llama_config_param_count(const tern_llama_config *cfg);

/* The rotary inverse frequencies inv_freq[i], i < head_dim / 2, in float64:
 * theta^(-2i / head_dim), then llama3 scaling when set (transformers'
 * _compute_llama3_parameters): with wavelength w = 2 pi / f, L = original_max_position,
 * f / factor where w > L / low_freq_factor; f where w < L / high_freq_factor; between them
 * (1 - s) f / factor + s f with s = (L / w - low) / (high - low). Position p's angle for the
 * channel pairs (i, i + head_dim / 2) is p inv_freq[i]. transformers computes the same in
 * float32 (so its values differ from these by a few float32 ulp). */
tern_error *tern_llama_rope_inv_freq(const tern_llama_config *cfg, double *inv_freq, size_t n);

/* Named configurations for `tern train --init`, with their parameter counts:
 *   "smollm2-135m"  llama  30 layers, 576 hidden, 9 heads / 3 kv, 1536 MLP, V 49152,
 *                   theta 1e5, tied                                   134,515,008
 *   "qwen2.5-0.5b"  qwen2  24 layers, 896 hidden, 14 heads / 2 kv, 4864 MLP, V 151936,
 *                   theta 1e6, eps 1e-6, q/k/v biases, tied           494,032,768
 *   "llama-3.2-1b"  llama  16 layers, 2048 hidden, 32 heads / 8 kv, 8192 MLP, V 128256,
 *                   theta 5e5, llama3 scaling (32, 1, 4, 8192), tied 1,235,814,400
 *   "tiny"          llama   2 layers, 64 hidden, 4 heads / 2 kv, 176 MLP, V 4096, context
 *                   128, tied: the shape of the fixture llama-tiny-a
 * An unknown name is an error that lists these. */
tern_error *tern_llama_config_named(const char *name, tern_llama_config *out);

/* "llama" or "qwen2". */
const char *tern_llama_family_name(tern_llama_family f);

#ifdef __cplusplus
}
#endif
#endif
