/* The flat parameter layout: which tensors a config has, their shapes, names and places. */
#include <stdio.h>
#include <string.h>

#include "llama_internal.h"

/* Hugging Face's names, without "model.layers.N." for the per-layer kinds. */
static const char *const names[LLAMA_TENSOR_KINDS] = {
    [LLAMA_EMBED] = "model.embed_tokens.weight",
    [LLAMA_NORM] = "model.norm.weight",
    [LLAMA_HEAD] = "lm_head.weight",
    [LLAMA_LN1] = "input_layernorm.weight",
    [LLAMA_Q] = "self_attn.q_proj.weight",
    [LLAMA_K] = "self_attn.k_proj.weight",
    [LLAMA_V] = "self_attn.v_proj.weight",
    [LLAMA_QB] = "self_attn.q_proj.bias",
    [LLAMA_KB] = "self_attn.k_proj.bias",
    [LLAMA_VB] = "self_attn.v_proj.bias",
    [LLAMA_O] = "self_attn.o_proj.weight",
    [LLAMA_OB] = "self_attn.o_proj.bias",
    [LLAMA_LN2] = "post_attention_layernorm.weight",
    [LLAMA_GATE] = "mlp.gate_proj.weight",
    [LLAMA_UP] = "mlp.up_proj.weight",
    [LLAMA_GATEB] = "mlp.gate_proj.bias",
    [LLAMA_UPB] = "mlp.up_proj.bias",
    [LLAMA_DOWN] = "mlp.down_proj.weight",
    [LLAMA_DOWNB] = "mlp.down_proj.bias",
};

bool llama_has_tensor(const tern_llama_config *cfg, llama_tensor k) {
    switch (k) {
    case LLAMA_HEAD: return !cfg->tie_word_embeddings;
    case LLAMA_QB: case LLAMA_KB: case LLAMA_VB: return cfg->qkv_bias;
    case LLAMA_OB: return cfg->o_bias;
    case LLAMA_GATEB: case LLAMA_UPB: case LLAMA_DOWNB: return cfg->mlp_bias;
    default: return k >= 0 && k < LLAMA_TENSOR_KINDS;
    }
}

bool llama_is_matrix(llama_tensor k) {
    return k == LLAMA_EMBED || k == LLAMA_HEAD || k == LLAMA_Q || k == LLAMA_K || k == LLAMA_V ||
           k == LLAMA_O || k == LLAMA_GATE || k == LLAMA_UP || k == LLAMA_DOWN;
}

void llama_tensor_shape(const tern_llama_config *cfg, llama_tensor k, size_t *rows, size_t *cols) {
    size_t C = (size_t)cfg->hidden, I = (size_t)cfg->intermediate, hs = (size_t)cfg->head_dim;
    size_t q = (size_t)cfg->n_head * hs, kv = (size_t)cfg->n_kv_head * hs;
    *cols = 0;
    switch (k) {
    case LLAMA_EMBED: case LLAMA_HEAD: *rows = (size_t)cfg->vocab_size, *cols = C; break;
    case LLAMA_Q: *rows = q, *cols = C; break;
    case LLAMA_K: case LLAMA_V: *rows = kv, *cols = C; break;
    case LLAMA_QB: *rows = q; break;
    case LLAMA_KB: case LLAMA_VB: *rows = kv; break;
    case LLAMA_O: *rows = C, *cols = q; break;
    case LLAMA_GATE: case LLAMA_UP: *rows = I, *cols = C; break;
    case LLAMA_GATEB: case LLAMA_UPB: *rows = I; break;
    case LLAMA_DOWN: *rows = C, *cols = I; break;
    default: *rows = C; break; /* the norms' gains, o_proj's and down_proj's biases */
    }
}

size_t llama_tensor_len(const tern_llama_config *cfg, llama_tensor k) {
    if (!llama_has_tensor(cfg, k)) return 0;
    size_t rows, cols;
    llama_tensor_shape(cfg, k, &rows, &cols);
    if (k == LLAMA_EMBED || k == LLAMA_HEAD) rows = (size_t)llama_padded_vocab(cfg->vocab_size);
    return cols ? rows * cols : rows;
}

/* Kinds that continue the fused product of the kind before them. */
static bool continues(llama_tensor k) {
    return k == LLAMA_K || k == LLAMA_V || k == LLAMA_KB || k == LLAMA_VB || k == LLAMA_UP ||
           k == LLAMA_UPB;
}

static size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

/* Elements of one layer, and the offset of kind k within it (from a 64-aligned start). */
static size_t layer_span(const tern_llama_config *cfg, llama_tensor upto) {
    size_t at = 0;
    for (int k = LLAMA_FIRST_LAYER_KIND; k < (int)upto; k++) {
        if (!continues((llama_tensor)(k + 1))) at = round_up_64(at + llama_tensor_len(cfg, (llama_tensor)k));
        else at += llama_tensor_len(cfg, (llama_tensor)k);
    }
    return at;
}

static size_t globals_len(const tern_llama_config *cfg) {
    return round_up_64(llama_tensor_len(cfg, LLAMA_EMBED)) + round_up_64(llama_tensor_len(cfg, LLAMA_NORM)) +
           round_up_64(llama_tensor_len(cfg, LLAMA_HEAD));
}

size_t llama_tensor_offset(const tern_llama_config *cfg, llama_tensor k, int layer) {
    switch (k) {
    case LLAMA_EMBED: return 0;
    case LLAMA_NORM: return round_up_64(llama_tensor_len(cfg, LLAMA_EMBED));
    case LLAMA_HEAD:
        return round_up_64(llama_tensor_len(cfg, LLAMA_EMBED)) + round_up_64(llama_tensor_len(cfg, LLAMA_NORM));
    default:
        return globals_len(cfg) + (size_t)layer * layer_span(cfg, LLAMA_TENSOR_KINDS) + layer_span(cfg, k);
    }
}

size_t llama_flat_len(const tern_llama_config *cfg) {
    return globals_len(cfg) + (size_t)cfg->n_layer * layer_span(cfg, LLAMA_TENSOR_KINDS);
}

void llama_tensor_name(llama_tensor k, int layer, char *out, size_t cap) {
    if (llama_is_layer_kind(k)) snprintf(out, cap, "model.layers.%d.%s", layer, names[k]);
    else snprintf(out, cap, "%s", names[k]);
}

bool llama_tensor_parse(const tern_llama_config *cfg, const char *name, llama_tensor *k, int *layer) {
    *layer = 0;
    const char *rest = name;
    if (!strncmp(name, "model.layers.", 13)) {
        const char *p = name + 13;
        long l = 0;
        if (*p < '0' || *p > '9') return false;
        for (; *p >= '0' && *p <= '9' && l <= TERN_LLAMA_MAX_LAYER; p++) l = l * 10 + (*p - '0');
        if (*p != '.' || l >= cfg->n_layer || (p - (name + 13) > 1 && name[13] == '0')) return false;
        *layer = (int)l;
        rest = p + 1;
    }
    for (int i = 0; i < LLAMA_TENSOR_KINDS; i++) {
        if (llama_is_layer_kind((llama_tensor)i) != (rest != name)) continue;
        if (!strcmp(rest, names[i]) && llama_has_tensor(cfg, (llama_tensor)i)) {
            *k = (llama_tensor)i;
            return true;
        }
    }
    return false;
}
