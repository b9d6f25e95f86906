/* GPT-2's state, shared by the handler-independent front (api.c, weights.c) and the model
 * instances compiled once per handler (forward.c, backward.c, generate.c, state.c). */
#ifndef TERN_GPT2_INTERNAL_H
#define TERN_GPT2_INTERNAL_H

#include "tern/effect.h"
#include "tern/gpt2.h"

#include "../common/flat_state.h"

/* The parameter tensors. Per-layer kinds repeat for each layer. */
typedef enum gpt2_tensor {
    GPT2_WTE,      /* [Vp, C]  token embedding, tied with the output projection */
    GPT2_WPE,      /* [maxT, C] position embedding */
    GPT2_LN1W,     /* [C] */
    GPT2_LN1B,     /* [C] */
    GPT2_QKVW,     /* [C, 3C]  Conv1D: y = x @ W + b */
    GPT2_QKVB,     /* [3C] */
    GPT2_ATTPROJW, /* [C, C] */
    GPT2_ATTPROJB, /* [C] */
    GPT2_LN2W,     /* [C] */
    GPT2_LN2B,     /* [C] */
    GPT2_FCW,      /* [C, 4C] */
    GPT2_FCB,      /* [4C] */
    GPT2_FCPROJW,  /* [4C, C] */
    GPT2_FCPROJB,  /* [C] */
    GPT2_LNFW,     /* [C] */
    GPT2_LNFB,     /* [C] */
    GPT2_TENSOR_KINDS
} gpt2_tensor;

#define GPT2_FIRST_LAYER_KIND GPT2_LN1W
#define GPT2_LAST_LAYER_KIND GPT2_FCPROJB
#define GPT2_LAYER_KINDS (GPT2_LAST_LAYER_KIND - GPT2_FIRST_LAYER_KIND + 1)

static inline int gpt2_is_layer_kind(gpt2_tensor k) {
    return k >= GPT2_FIRST_LAYER_KIND && k <= GPT2_LAST_LAYER_KIND;
}

/* Rows of the embedding table and of logits: V rounded up to a multiple of 64, so GPU
 * matrix products see aligned rows. Padding rows are zero and get zero gradient. */
static inline int gpt2_padded_vocab(int V) { return (V + 63) / 64 * 64; }

/* Shape of a tensor kind (rows, cols; cols 0 for vectors) and its place in the flat buffer. */
void gpt2_tensor_shape(const tern_gpt2_config *cfg, gpt2_tensor kind, size_t *rows, size_t *cols);
size_t gpt2_tensor_len(const tern_gpt2_config *cfg, gpt2_tensor kind);
size_t gpt2_tensor_offset(const tern_gpt2_config *cfg, gpt2_tensor kind, int layer);
size_t gpt2_flat_len(const tern_gpt2_config *cfg);
/* Hugging Face name without prefix, e.g. "h.3.mlp.c_fc.weight". */
void gpt2_tensor_name(gpt2_tensor kind, int layer, char *out, size_t cap);
/* Parses such a name; returns 0 when it is not a GPT-2 parameter. */
int gpt2_tensor_parse(const tern_gpt2_config *cfg, const char *name, gpt2_tensor *kind, int *layer);

/* One tensor of a flat parameter-shaped buffer. */
static inline tern_buf gpt2_tensor_view(const tern_gpt2_config *cfg, tern_buf flat,
                                        gpt2_tensor kind, int layer) {
    return tern_view(flat, gpt2_tensor_offset(cfg, kind, layer), gpt2_tensor_len(cfg, kind));
}

/* Activations of one layer, kept from the forward pass for the backward pass. */
typedef struct gpt2_layer_acts {
    tern_buf ln1;       /* [BT, C] */
    tern_buf ln1_mean;  /* [BT] f32 */
    tern_buf ln1_rstd;  /* [BT] f32 */
    tern_buf qkv;       /* [BT, 3C] */
    tern_buf atty;      /* [BT, C] attention output before its projection */
    tern_buf att_saved; /* handler-defined, f32 */
    tern_buf res2;      /* [BT, C] residual after attention */
    tern_buf ln2;       /* [BT, C] */
    tern_buf ln2_mean;  /* [BT] f32 */
    tern_buf ln2_rstd;  /* [BT] f32 */
    tern_buf fch;       /* [BT, 4C] before GELU */
    tern_buf fch_gelu;  /* [BT, 4C] */
    tern_buf res3;      /* [BT, C] residual after the MLP: the next layer's input */
} gpt2_layer_acts;

/* Everything a forward/backward pass over B x T tokens needs. */
typedef struct gpt2_acts {
    int B, T;
    tern_buf tokens;   /* [BT] i32 */
    tern_buf targets;  /* [BT] i32 */
    tern_buf x0;       /* [BT, C] embeddings */
    gpt2_layer_acts *layers;
    tern_buf lnf;      /* [BT, C] */
    tern_buf lnf_mean; /* [BT] f32 */
    tern_buf lnf_rstd; /* [BT] f32 */
    tern_buf logits;   /* [logit_rows, Vp] (see logits_and_loss in forward.c) */
    int logit_rows;    /* BT, or fewer in a training layout */
    int logits_first, logits_kept; /* the rows whose logits the last pass left in logits */
    bool gelu_shared;  /* one fch_gelu for all layers (forward-only, or recomputed) */
    bool ln_shared;    /* one ln1/ln2 for all layers (forward-only, or recomputed) */
    tern_gpt2_memory memory; /* the model's settings this layout was made with */
    tern_buf losses;   /* [BT] f32 */
    /* backward scratch */
    tern_buf dres;     /* [BT, C] gradient of the residual stream */
    tern_buf dln;      /* [BT, C] */
    tern_buf datty;    /* [BT, C] */
    tern_buf dqkv;     /* [BT, 3C] */
    tern_buf dfch;     /* [BT, 4C] */
    bool has_grad_buffers;
    tern_buf pool[3]; /* the allocations the views above are carved from */
} gpt2_acts;

/* Buffers of generation with a KV cache. */
typedef struct gpt2_decode {
    int B, T, max_T;        /* T: rows of the prefill buffers per sequence */
    int steps;              /* decoding steps a replayable section holds (the replay_steps op) */
    tern_buf *k_cache;      /* per layer [B, NH, max_T, hs] */
    tern_buf *v_cache;
    tern_buf prompt;        /* [B*T] i32 */
    tern_buf token;         /* [slots, B] i32 (model_token_slots): slot 0 the last sampled tokens,
                             * the next step's input */
    tern_buf pos;           /* [steps] i32: position of the first row being computed, one a
                             * step of a section */
    tern_buf x, qkv, atty, fch; /* [B*T, C|3C|C|4C] */
    tern_buf logits;        /* [B, Vp] */
    uint64_t capture_key;
    tern_buf pool[3];
} gpt2_decode;

typedef struct gpt2_impl gpt2_impl;

struct tern_gpt2 {
    const gpt2_impl *impl;
    const char *backend;
    char *options; /* the handler's options (after ':' in the backend given), or NULL */
    tern_dev *dev;
    char *device_name;
    tern_gpt2_config cfg;
    int Vp;
    tern_precision precision;
    /* the parameters, gradients, AdamW's moments, the ranks and ZeRO-1 (models/common) */
    model_flat flat;
    bool grads_fresh;  /* zeroed since the last backward: the next one writes them (beta 0) */
    /* grads_fresh, and zero_grad cleared only what the next backward adds into: the rest
     * still holds old values until that backward writes it, or settle_grads clears it for a
     * reader (state.c's zero_grad says which is which) */
    bool grads_lazy;
    tern_gpt2_memory memory; /* tern_gpt2_set_memory */
    /* the layer norms' backward reads their inputs whatever memory.recompute_layernorm says:
     * the weights the model opened with do not suit the backward from the outputs (api.c's
     * layernorms_suit_outputs) */
    bool ln_inputs_kept;
    /* tern_gpt2_quantize_q8: decoding's matrices in q8_0, transposed to [out, in] (the
     * effect's q8_0 layout), gpt2_q8_offset's layout; with q8_lm the tied lm head [Vp, C]
     * after them. Absent: decoding uses the float weights. */
    tern_buf q8;
    bool q8_lm;
    gpt2_acts acts;
    gpt2_decode dec;
    uint64_t epoch; /* changes whenever buffers a replayable section names move (decode, activations, grads, weights) */
};

/* One more value into a replayable section's key (see generate.c's and forward.c's keys). */
static inline uint64_t gpt2_key_mix(uint64_t h, uint64_t v) {
    return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

/* The compute weights: the bf16 copy, or the f32 master. */
static inline tern_buf gpt2_weights(const tern_gpt2 *m) { return model_flat_weights(&m->flat); }

static inline tern_buf gpt2_w(const tern_gpt2 *m, gpt2_tensor kind, int layer) {
    return gpt2_tensor_view(&m->cfg, gpt2_weights(m), kind, layer);
}

/* The q8_0 copy's layout: per layer qkv [3C, C], attn proj [C, C], fc [4C, C], fc proj
 * [C, 4C] (each the Conv1D weight transposed), 12 C^2 a layer; then the lm head [Vp, C]. */
static inline size_t gpt2_q8_offset(const tern_gpt2_config *cfg, gpt2_tensor kind, int layer) {
    size_t C = (size_t)cfg->n_embd, at = 12 * C * C * (size_t)layer;
    switch (kind) {
    case GPT2_QKVW: return at;
    case GPT2_ATTPROJW: return at + 3 * C * C;
    case GPT2_FCW: return at + 4 * C * C;
    case GPT2_FCPROJW: return at + 8 * C * C;
    default: return 12 * C * C * (size_t)cfg->n_layer; /* GPT2_WTE: the lm head */
    }
}

/* A matrix as decoding reads it: its q8_0 copy ([out, in]) when there is one, else the
 * compute weight ([in, out]; the lm head: wte [Vp, C]). */
static inline tern_buf gpt2_decode_w(const tern_gpt2 *m, gpt2_tensor kind, int layer) {
    if (!m->q8.len || (kind == GPT2_WTE && !m->q8_lm)) return gpt2_w(m, kind, layer);
    return tern_view(m->q8, gpt2_q8_offset(&m->cfg, kind, layer), gpt2_tensor_len(&m->cfg, kind));
}

/* The model compiled for one handler: tern_gpt2_<h>_impl. */
struct gpt2_impl {
    const char *handler;
    const model_flat_ops *flat;             /* this handler's flat-state operations */
    tern_error *(*open)(tern_gpt2 *m, const float *params); /* device + parameters [n_flat] host */
    tern_error *(*forward)(tern_gpt2 *m, const int32_t *x, const int32_t *y, int B, int T,
                           float loss_scale, bool backward, float *mean_loss);
    tern_error *(*zero_grad)(tern_gpt2 *m);
    /* Before anything reads the gradients: makes those zero_grad left for the next backward
     * to write read as zero (a no-op unless grads_lazy). */
    tern_error *(*settle_grads)(tern_gpt2 *m);
    tern_error *(*update)(tern_gpt2 *m, const tern_gpt2_adamw *h, float *grad_norm);
    tern_error *(*generate)(tern_gpt2 *m, const int32_t *prompt, int B, int T0, int n_new,
                            const tern_gpt2_sampling *s, tern_gpt2_on_token on_token, void *user,
                            float *prefill_logits);
    /* Makes m->q8 from the compute weights (the lm head too when lm_head). */
    tern_error *(*quantize_q8)(tern_gpt2 *m, bool lm_head);
    void (*close)(tern_gpt2 *m);
};

#endif
