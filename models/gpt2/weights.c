/* GPT-2's parameter tensors: shapes, names, and their places in one flat buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_internal.h"

/* Each tensor starts at a multiple of this many elements, so that every tensor view is
 * aligned for vector loads on every handler. */
#define GPT2_ALIGN 64

static size_t align_up(size_t n) { return (n + GPT2_ALIGN - 1) / GPT2_ALIGN * GPT2_ALIGN; }

void gpt2_tensor_shape(const tern_gpt2_config *cfg, gpt2_tensor kind, size_t *rows, size_t *cols) {
    size_t C = (size_t)cfg->n_embd;
    *cols = 0;
    switch (kind) {
    case GPT2_WTE: *rows = (size_t)gpt2_padded_vocab(cfg->vocab_size); *cols = C; break;
    case GPT2_WPE: *rows = (size_t)cfg->max_seq; *cols = C; break;
    case GPT2_QKVW: *rows = C; *cols = 3 * C; break;
    case GPT2_QKVB: *rows = 3 * C; break;
    case GPT2_ATTPROJW: *rows = C; *cols = C; break;
    case GPT2_FCW: *rows = C; *cols = 4 * C; break;
    case GPT2_FCB: *rows = 4 * C; break;
    case GPT2_FCPROJW: *rows = 4 * C; *cols = C; break;
    default: *rows = C; break; /* layer-norm gains and biases, projection biases */
    }
}

size_t gpt2_tensor_len(const tern_gpt2_config *cfg, gpt2_tensor kind) {
    size_t rows, cols;
    gpt2_tensor_shape(cfg, kind, &rows, &cols);
    return cols ? rows * cols : rows;
}

static size_t layer_stride(const tern_gpt2_config *cfg) {
    size_t n = 0;
    for (int k = GPT2_FIRST_LAYER_KIND; k <= GPT2_LAST_LAYER_KIND; k++)
        n += align_up(gpt2_tensor_len(cfg, (gpt2_tensor)k));
    return n;
}

size_t gpt2_tensor_offset(const tern_gpt2_config *cfg, gpt2_tensor kind, int layer) {
    size_t layers_start = align_up(gpt2_tensor_len(cfg, GPT2_WTE)) +
                          align_up(gpt2_tensor_len(cfg, GPT2_WPE));
    switch (kind) {
    case GPT2_WTE: return 0;
    case GPT2_WPE: return align_up(gpt2_tensor_len(cfg, GPT2_WTE));
    case GPT2_LNFW: return layers_start + (size_t)cfg->n_layer * layer_stride(cfg);
    case GPT2_LNFB:
        return layers_start + (size_t)cfg->n_layer * layer_stride(cfg) +
               align_up(gpt2_tensor_len(cfg, GPT2_LNFW));
    default: break;
    }
    size_t off = layers_start + (size_t)layer * layer_stride(cfg);
    for (int k = GPT2_FIRST_LAYER_KIND; k < (int)kind; k++)
        off += align_up(gpt2_tensor_len(cfg, (gpt2_tensor)k));
    return off;
}

size_t gpt2_flat_len(const tern_gpt2_config *cfg) {
    return gpt2_tensor_offset(cfg, GPT2_LNFB, 0) + align_up(gpt2_tensor_len(cfg, GPT2_LNFB));
}

/* Hugging Face's names for the per-layer kinds, after "h.<layer>.". */
static const char *const layer_names[GPT2_LAYER_KINDS] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
};

void gpt2_tensor_name(gpt2_tensor kind, int layer, char *out, size_t cap) {
    switch (kind) {
    case GPT2_WTE: snprintf(out, cap, "wte.weight"); return;
    case GPT2_WPE: snprintf(out, cap, "wpe.weight"); return;
    case GPT2_LNFW: snprintf(out, cap, "ln_f.weight"); return;
    case GPT2_LNFB: snprintf(out, cap, "ln_f.bias"); return;
    default: snprintf(out, cap, "h.%d.%s", layer, layer_names[kind - GPT2_FIRST_LAYER_KIND]);
    }
}

int gpt2_tensor_parse(const tern_gpt2_config *cfg, const char *name, gpt2_tensor *kind, int *layer) {
    static const struct { const char *name; gpt2_tensor kind; } globals[] = {
        {"wte.weight", GPT2_WTE}, {"wpe.weight", GPT2_WPE},
        {"ln_f.weight", GPT2_LNFW}, {"ln_f.bias", GPT2_LNFB},
    };
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
        if (!strcmp(name, globals[i].name)) {
            *kind = globals[i].kind;
            *layer = 0;
            return 1;
        }
    }
    if (strncmp(name, "h.", 2) != 0) return 0;
    char *end = NULL;
    long l = strtol(name + 2, &end, 10);
    if (end == name + 2 || *end != '.' || l < 0 || l >= cfg->n_layer) return 0;
    for (int k = 0; k < GPT2_LAYER_KINDS; k++) {
        if (!strcmp(end + 1, layer_names[k])) {
            *kind = (gpt2_tensor)(GPT2_FIRST_LAYER_KIND + k);
            *layer = (int)l;
            return 1;
        }
    }
    return 0;
}
