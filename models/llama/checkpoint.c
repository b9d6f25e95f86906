/* Writing a model as a Hugging Face folder: config.json and model.safetensors in
 * save_pretrained's layout (the tied lm_head not stored), each written atomically, the
 * config first; and AdamW's state beside it (core/optimizer_file.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/optimizer_file.h" /* checkpoint_saved_step */
#include "llama_internal.h"
#include "tern/file.h"
#include "tern/half.h"
#include "tern/safetensors.h"

/* Every tensor the config has, in the flat layout's order: its kind, layer and Hugging
 * Face name (names [cap][128]); returns the count. */
static size_t each_tensor(const tern_llama_config *cfg, char (*names)[128], llama_tensor *kinds, int *layers) {
    size_t n = 0;
    for (int k = 0; k < LLAMA_TENSOR_KINDS; k++) {
        if (!llama_has_tensor(cfg, (llama_tensor)k)) continue;
        int count = llama_is_layer_kind((llama_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < count; l++, n++) {
            llama_tensor_name((llama_tensor)k, l, names[n], sizeof names[n]);
            kinds[n] = (llama_tensor)k;
            layers[n] = l;
        }
    }
    return n;
}

static size_t tensor_cap(const tern_llama_config *cfg) {
    return 3 + (size_t)(LLAMA_TENSOR_KINDS - LLAMA_FIRST_LAYER_KIND) * cfg->n_layer;
}

tern_error *tern_llama_save(tern_llama *m, const char *dir) { return tern_llama_save_as(m, dir, TERN_F32); }

tern_error *tern_llama_save_as(tern_llama *m, const char *dir, tern_dtype dtype) {
    if (dtype != TERN_F32 && dtype != TERN_BF16 && dtype != TERN_F16)
        return tern_errorf("checkpoints are f32, bf16 or f16, not %s", tern_dtype_name(dtype));
    /* rank 0 writes; with ZeRO-1 in bf16 the others give it their parts of the master */
    if (tern_dist_rank(m->flat.dist) != 0) return model_flat_read_params(&m->flat, 0, m->flat.n_flat, NULL);
    const tern_llama_config *cfg = &m->cfg;
    size_t cap = tensor_cap(cfg);
    float *flat = malloc(m->flat.n_flat * sizeof *flat);
    tern_tensor_out *tensors = calloc(cap, sizeof *tensors);
    char (*names)[128] = calloc(cap, sizeof *names);
    llama_tensor *kinds = calloc(cap, sizeof *kinds);
    int *layers = calloc(cap, sizeof *layers);
    size_t plen = strlen(dir) + 32;
    char *path = malloc(plen);
    tern_error *err = NULL;
    if (!flat || !tensors || !names || !kinds || !layers || !path) {
        err = tern_errorf("out of memory saving %s", dir);
        goto done;
    }
    if ((err = model_flat_read_params(&m->flat, 0, m->flat.n_flat, flat))) goto done;
    /* A checkpoint of diverged weights would replace the last good one: refuse it. */
    for (size_t i = 0; i < m->flat.n_flat; i++)
        if (!isfinite(flat[i])) {
            err = tern_errorf("not saving %s: the weights at step %d are not finite (element %zu is %g)", dir,
                              m->flat.step, i, flat[i]);
            goto done;
        }
    /* Half precision: the values rounded to nearest even, in place (a 16-bit value never
     * needs more room than the f32 it came from). */
    if (dtype != TERN_F32) {
        uint16_t *half = (uint16_t *)flat;
        for (size_t i = 0; i < m->flat.n_flat; i++)
            half[i] = dtype == TERN_BF16 ? tern_f32_to_bf16(flat[i]) : tern_f32_to_f16(flat[i]);
    }
    size_t elem = tern_dtype_size(dtype);
    size_t n = each_tensor(cfg, names, kinds, layers);
    for (size_t t = 0; t < n; t++) {
        size_t rows, cols;
        llama_tensor_shape(cfg, kinds[t], &rows, &cols); /* V rows: padding dropped */
        tensors[t] = (tern_tensor_out){.name = names[t], .dtype = dtype, .ndim = cols ? 2 : 1,
                                       .shape = {(int64_t)rows, (int64_t)cols},
                                       .data = (const char *)flat + llama_tensor_offset(cfg, kinds[t], layers[t]) * elem};
    }
    if ((err = tern_make_dirs(dir))) goto done;
    char step[32];
    snprintf(step, sizeof step, "%d", m->flat.step);
    const char *meta[] = {"format", "pt", "tern_step", step, NULL};
    /* The config first: a folder with weights is never without the config they need (a kill
     * between the two leaves a config with the previous weights, which it fits). */
    snprintf(path, plen, "%s/config.json", dir);
    if ((err = tern_llama_config_write(path, cfg))) goto done;
    snprintf(path, plen, "%s/model.safetensors", dir);
    err = tern_safetensors_write(path, tensors, n, meta);
done:
    free(flat);
    free(tensors);
    free(names);
    free(kinds);
    free(layers);
    free(path);
    return err;
}

tern_error *tern_llama_saved_step(const char *dir, int *step) { return checkpoint_saved_step(dir, step); }

tern_error *tern_llama_save_optimizer(tern_llama *m, const char *path, const char *const *metadata_kv) {
    return model_flat_save_optimizer(&m->flat, path, metadata_kv);
}

tern_error *tern_llama_load_optimizer(tern_llama *m, const char *path) {
    return model_flat_load_optimizer(&m->flat, path);
}
