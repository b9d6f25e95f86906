/* The Llama family's state, shared by the handler-independent front (api.c, layout.c,
 * checkpoint.c) and the instances compiled once per handler (state.c, forward.c,
 * generate.c, linear.c). */
#ifndef TERN_LLAMA_INTERNAL_H
#define TERN_LLAMA_INTERNAL_H

#include "tern/effect.h"
#include "tern/llama.h"

#include "../common/flat_state.h"

/* The parameter tensors, in the order of the flat layout. Per-layer kinds repeat for each
 * layer. Tensors of one product are adjacent, without a gap, so that they are one matrix:
 * Q, K, V are the fused qkv weight [(NH + 2 KV) hs, C] (and their biases one [(NH + 2 KV)
 * hs] vector), GATE and UP the fused [2 I, C] weight whose product is [rows, 2 I], gate in
 * the first I columns (swiglu's ld = 2 I layout). Every other tensor starts at a multiple of
 * 64 elements. */
typedef enum llama_tensor {
    LLAMA_EMBED, /* [Vp, C]  model.embed_tokens; the rows past V are zero */
    LLAMA_NORM,  /* [C]      model.norm */
    LLAMA_HEAD,  /* [Vp, C]  lm_head (untied only); the rows past V are zero */
    LLAMA_LN1,   /* [C]      input_layernorm */
    LLAMA_Q,     /* [NH hs, C] */
    LLAMA_K,     /* [KV hs, C] */
    LLAMA_V,     /* [KV hs, C] */
    LLAMA_QB,    /* [NH hs]  (qkv_bias) */
    LLAMA_KB,    /* [KV hs] */
    LLAMA_VB,    /* [KV hs] */
    LLAMA_O,     /* [C, NH hs] */
    LLAMA_OB,    /* [C]      (o_bias) */
    LLAMA_LN2,   /* [C]      post_attention_layernorm */
    LLAMA_GATE,  /* [I, C] */
    LLAMA_UP,    /* [I, C] */
    LLAMA_GATEB, /* [I]      (mlp_bias) */
    LLAMA_UPB,   /* [I] */
    LLAMA_DOWN,  /* [C, I] */
    LLAMA_DOWNB, /* [C]      (mlp_bias) */
    LLAMA_TENSOR_KINDS
} llama_tensor;

#define LLAMA_FIRST_LAYER_KIND LLAMA_LN1

static inline bool llama_is_layer_kind(llama_tensor k) { return k >= LLAMA_FIRST_LAYER_KIND; }

/* Rows of the embedding, the output layer and the logits: V rounded up to 64. */
static inline int llama_padded_vocab(int V) { return (V + 63) / 64 * 64; }

/* Whether cfg has tensor kind k (biases and the untied head are optional). */
bool llama_has_tensor(const tern_llama_config *cfg, llama_tensor k);
/* Its shape as stored in a checkpoint (rows, cols; cols 0 for vectors; V rows, not Vp). */
void llama_tensor_shape(const tern_llama_config *cfg, llama_tensor k, size_t *rows, size_t *cols);
/* Elements in the flat layout (Vp rows for the embedding and the head); 0 when absent. */
size_t llama_tensor_len(const tern_llama_config *cfg, llama_tensor k);
size_t llama_tensor_offset(const tern_llama_config *cfg, llama_tensor k, int layer);
size_t llama_flat_len(const tern_llama_config *cfg);
/* Hugging Face's name, e.g. "model.layers.3.mlp.up_proj.weight". */
void llama_tensor_name(llama_tensor k, int layer, char *out, size_t cap);
/* Parses such a name of a tensor cfg has; false otherwise. */
bool llama_tensor_parse(const tern_llama_config *cfg, const char *name, llama_tensor *k, int *layer);
/* Matrices and embeddings: the tensors decayed when decay_all is off. */
bool llama_is_matrix(llama_tensor k);

static inline tern_buf llama_tensor_view(const tern_llama_config *cfg, tern_buf flat,
                                         llama_tensor k, int layer) {
    if (!llama_has_tensor(cfg, k)) return tern_none();
    return tern_view(flat, llama_tensor_offset(cfg, k, layer), llama_tensor_len(cfg, k));
}

/* A fused product's tensors as one view: first .. last adjacent kinds of one layer (Q..V,
 * QB..VB, GATE..UP, GATEB..UPB); absent when first is. */
static inline tern_buf llama_fused_view(const tern_llama_config *cfg, tern_buf flat,
                                        llama_tensor first, llama_tensor last, int layer) {
    if (!llama_has_tensor(cfg, first)) return tern_none();
    size_t from = llama_tensor_offset(cfg, first, layer);
    size_t to = llama_tensor_offset(cfg, last, layer) + llama_tensor_len(cfg, last);
    return tern_view(flat, from, to - from);
}

/* Activations of one layer, kept from the forward pass for the backward pass. */
typedef struct llama_layer_acts {
    tern_buf h1;    /* [BT, C]  rmsnorm(x) w_in */
    tern_buf rrms1; /* [BT]     f32 */
    tern_buf qkv;   /* [BT, QW] q, k (rotated), v; QW = (NH + 2 KV) hs */
    tern_buf att;   /* [BT, NH hs] attention output */
    tern_buf saved; /* handler-defined, f32 */
    tern_buf x_mid; /* [BT, C]  residual after attention */
    tern_buf h2;    /* [BT, C]  rmsnorm(x_mid) w_post */
    tern_buf rrms2; /* [BT]     f32 */
    tern_buf gu;    /* [BT, 2I] gate | up */
    tern_buf a;     /* [BT, I]  silu(gate) up */
    tern_buf x_out; /* [BT, C]  residual after the MLP: the next layer's input */
} llama_layer_acts;

typedef struct llama_acts {
    int B, T;
    tern_buf tokens, targets; /* [BT] i32 */
    tern_buf pos;             /* [BT] i32: t of row b T + t */
    tern_buf x0;              /* [BT, C] embeddings */
    llama_layer_acts *layers;
    tern_buf hf;     /* [BT, C] final rmsnorm */
    tern_buf rrmsf;  /* [BT] f32 */
    tern_buf logits; /* [BT, Vp]; after a backward pass, their gradient */
    tern_buf losses; /* [BT] f32 */
    bool has_grad_buffers;
    tern_buf dres;   /* [BT, C]  gradient of the residual stream */
    tern_buf dh;     /* [BT, C] */
    tern_buf datt;   /* [BT, NH hs] */
    tern_buf dqkv;   /* [BT, QW] */
    tern_buf da;     /* [BT, I] */
    tern_buf dgu;    /* [BT, 2I] */
    tern_buf pool[3];
} llama_acts;

/* Generation with a KV cache. */
typedef struct llama_decode {
    int B, T, max_T;   /* T: rows per sequence of the prefill buffers */
    int steps;         /* decoding steps a replayable section holds (the replay_steps op) */
    tern_buf *k_cache; /* per layer [B, KV, max_T, hs] */
    tern_buf *v_cache;
    tern_buf prompt;   /* [B T] i32 */
    tern_buf token;    /* [slots, B] i32 (model_token_slots): slot 0 the last sampled tokens */
    tern_buf pos;      /* [max(B T, steps B)] i32: each row's position (a step of a section:
                        * its B rows from j B); pos[0] is the first row's */
    tern_buf x;        /* [B T, C] */
    tern_buf qkv;      /* [B T, QW] */
    tern_buf att;      /* [B T, NH hs] */
    tern_buf a;        /* [B T, I] silu(gate) up (norm_linear_swiglu: no [B T, 2I] gate | up buffer) */
    tern_buf logits;   /* [B, Vp] */
    tern_buf pool[3];
} llama_decode;

typedef struct llama_impl llama_impl;

struct tern_llama {
    const llama_impl *impl;
    const char *backend;
    char *options;
    tern_dev *dev;
    char *device_name;
    tern_llama_config cfg;
    int Vp;
    tern_precision precision;
    /* the parameters, gradients, AdamW's moments, the ranks and ZeRO-1 (models/common); the
     * backward passes add into flat.grads, which zero_grad clears whole */
    model_flat flat;
    tern_buf inv_freq; /* f32 [hs / 2] rotary inverse frequencies */
    llama_acts acts;
    llama_decode dec;
    /* tern_llama_quantize_q8: decoding's matrices in q8_0 (llama_q8_offset's layout), the
     * lm head too with q8_head; absent when decoding reads the compute weights */
    tern_buf q8;
    bool q8_head;
    uint64_t epoch;    /* changes whenever buffers a replayable section names move */
};

static inline uint64_t llama_key_mix(uint64_t h, uint64_t v) {
    return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

/* The compute weights: the bf16 copy, or the f32 master. */
static inline tern_buf llama_weights(const tern_llama *m) { return model_flat_weights(&m->flat); }

static inline tern_buf llama_w(const tern_llama *m, llama_tensor k, int layer) {
    return llama_tensor_view(&m->cfg, llama_weights(m), k, layer);
}

/* The q8_0 copy's matrices a layer, each [out, in] as decoding's products read them. */
typedef enum llama_q8_mat { LLAMA_Q8_QKV, LLAMA_Q8_O, LLAMA_Q8_GU, LLAMA_Q8_DOWN, LLAMA_Q8_MATS } llama_q8_mat;

static inline void llama_q8_shape(const tern_llama_config *cfg, llama_q8_mat k, size_t *rows, size_t *cols) {
    size_t C = (size_t)cfg->hidden, I = (size_t)cfg->intermediate, hs = (size_t)cfg->head_dim;
    size_t q = (size_t)cfg->n_head * hs, qkv = q + 2 * (size_t)cfg->n_kv_head * hs;
    static const int in_c[LLAMA_Q8_MATS] = {1, 0, 1, 0};
    *rows = k == LLAMA_Q8_QKV ? qkv : k == LLAMA_Q8_GU ? 2 * I : C;
    *cols = in_c[k] ? C : k == LLAMA_Q8_O ? q : I;
}

/* Whether matrix k is in the copy: its rows (the reduction) whole q8_0 blocks. The others
 * (llama-tiny-a's down projection, 176 wide) stay in the compute dtype. */
static inline bool llama_q8_takes(const tern_llama_config *cfg, llama_q8_mat k) {
    size_t rows, cols;
    llama_q8_shape(cfg, k, &rows, &cols);
    return cols % TERN_Q8_BLOCK == 0;
}

/* Where matrix k of layer l starts in the copy (layers one after another, then the head). */
static inline size_t llama_q8_offset(const tern_llama_config *cfg, llama_q8_mat k, int layer) {
    size_t per_layer = 0, before = 0;
    for (int i = 0; i < LLAMA_Q8_MATS; i++) {
        size_t rows, cols;
        llama_q8_shape(cfg, (llama_q8_mat)i, &rows, &cols);
        if (!llama_q8_takes(cfg, (llama_q8_mat)i)) continue;
        if (i < (int)k) before += rows * cols;
        per_layer += rows * cols;
    }
    return (size_t)layer * per_layer + before;
}

/* The output layer: lm_head, or embed_tokens when tied. */
static inline llama_tensor llama_head_kind(const tern_llama_config *cfg) {
    return cfg->tie_word_embeddings ? LLAMA_EMBED : LLAMA_HEAD;
}

/* A layer's matrix as decoding reads it: its q8_0 copy where there is one, else the compute
 * weights (q|k|v and gate|up as their fused views). */
static inline tern_buf llama_decode_w(const tern_llama *m, llama_q8_mat k, int layer) {
    const tern_llama_config *cfg = &m->cfg;
    if (m->q8.len && llama_q8_takes(cfg, k)) {
        size_t rows, cols;
        llama_q8_shape(cfg, k, &rows, &cols);
        return tern_view(m->q8, llama_q8_offset(cfg, k, layer), rows * cols);
    }
    switch (k) {
    case LLAMA_Q8_QKV: return llama_fused_view(cfg, llama_weights(m), LLAMA_Q, LLAMA_V, layer);
    case LLAMA_Q8_O: return llama_w(m, LLAMA_O, layer);
    case LLAMA_Q8_GU: return llama_fused_view(cfg, llama_weights(m), LLAMA_GATE, LLAMA_UP, layer);
    default: return llama_w(m, LLAMA_DOWN, layer);
    }
}

/* The lm head as decoding reads it ([Vp, C]): in q8_0 after the layers with q8_head. */
static inline tern_buf llama_decode_head(const tern_llama *m) {
    if (!m->q8_head) return llama_w(m, llama_head_kind(&m->cfg), 0);
    return tern_view(m->q8, llama_q8_offset(&m->cfg, LLAMA_Q8_QKV, m->cfg.n_layer), (size_t)m->Vp * m->cfg.hidden);
}

/* The model compiled for one handler: tern_llama_<h>_impl. */
struct llama_impl {
    const char *handler;
    const model_flat_ops *flat; /* this handler's flat-state operations */
    /* The device, the parameters from host flat [n_flat] (f32) and the rotary inverse
     * frequencies inv_freq [hs / 2]. */
    tern_error *(*open)(tern_llama *m, const float *flat, const float *inv_freq);
    tern_error *(*forward)(tern_llama *m, const int32_t *x, const int32_t *y, int B, int T,
                           float loss_scale, bool backward, float *mean_loss);
    tern_error *(*zero_grad)(tern_llama *m);
    tern_error *(*generate)(tern_llama *m, const int32_t *prompt, int B, int T0, int n_new,
                            const tern_gpt2_sampling *s, bool stop_at_eos,
                            tern_gpt2_on_token on_token, void *user, float *prefill_logits);
    /* Makes m->q8 from the compute weights (the lm head too when lm_head). */
    tern_error *(*quantize_q8)(tern_llama *m, bool lm_head);
    void (*close)(tern_llama *m);
};

#endif
