/* Writing a model as a Hugging Face folder: config.json and model.safetensors in
 * save_pretrained's layout (the tied lm_head not stored), each written atomically, the
 * config first; and AdamW's state beside it (core/optimizer_file.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/optimizer_file.h"
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
    if (m->dist && tern_dist_rank(m->dist) != 0) return NULL; /* rank 0 writes */
    const tern_llama_config *cfg = &m->cfg;
    size_t cap = tensor_cap(cfg);
    float *flat = malloc(m->n_flat * sizeof *flat);
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
    if ((err = m->impl->read_flat(m, m->master, 0, m->n_flat, flat))) goto done;
    /* A checkpoint of diverged weights would replace the last good one: refuse it. */
    for (size_t i = 0; i < m->n_flat; i++)
        if (!isfinite(flat[i])) {
            err = tern_errorf("not saving %s: the weights at step %d are not finite (element %zu is %g)", dir,
                              m->step, i, flat[i]);
            goto done;
        }
    /* Half precision: the values rounded to nearest even, in place (a 16-bit value never
     * needs more room than the f32 it came from). */
    if (dtype != TERN_F32) {
        uint16_t *half = (uint16_t *)flat;
        for (size_t i = 0; i < m->n_flat; i++)
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
    snprintf(step, sizeof step, "%d", m->step);
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

/* The optimizer file's tensors: every parameter tensor's place, with V rows (the padding
 * rows' moments stay zero). names [cap][128]; frees nothing. */
static tern_error *optimizer_tensors(const tern_llama *m, char (**names)[128], optimizer_tensor **out, size_t *n) {
    const tern_llama_config *cfg = &m->cfg;
    size_t cap = tensor_cap(cfg);
    *names = calloc(cap, sizeof **names);
    *out = calloc(cap, sizeof **out);
    llama_tensor *kinds = calloc(cap, sizeof *kinds);
    int *layers = calloc(cap, sizeof *layers);
    tern_error *err = NULL;
    if (!*names || !*out || !kinds || !layers) {
        err = tern_errorf("out of memory");
    } else {
        *n = each_tensor(cfg, *names, kinds, layers);
        for (size_t t = 0; t < *n; t++) {
            size_t rows, cols;
            llama_tensor_shape(cfg, kinds[t], &rows, &cols);
            (*out)[t] = (optimizer_tensor){.name = (*names)[t],
                                           .offset = llama_tensor_offset(cfg, kinds[t], layers[t]),
                                           .count = cols ? rows * cols : rows};
        }
    }
    free(kinds);
    free(layers);
    if (err) {
        free(*names);
        free(*out);
        *names = NULL, *out = NULL;
    }
    return err;
}

tern_error *tern_llama_save_optimizer(tern_llama *m, const char *path, const char *const *metadata_kv) {
    if (m->dist && tern_dist_rank(m->dist) != 0) return NULL; /* rank 0 writes */
    char (*names)[128] = NULL;
    optimizer_tensor *tensors = NULL;
    size_t n = 0;
    TERN_TRY(optimizer_tensors(m, &names, &tensors, &n));
    float *host = malloc(2 * m->n_flat * sizeof *host);
    tern_error *err = host ? m->impl->ensure_optimizer(m) : tern_errorf("out of memory saving the optimizer state");
    if (!err) err = m->impl->read_flat(m, m->adam_m, 0, m->n_flat, host);
    if (!err) err = m->impl->read_flat(m, m->adam_v, 0, m->n_flat, host + m->n_flat);
    if (!err) err = optimizer_file_write(path, tensors, n, m->n_flat, host, m->step, metadata_kv);
    free(host);
    free(tensors);
    free(names);
    return err;
}

static tern_error *restore_moment(void *user, int which, size_t offset, size_t count, const float *data) {
    tern_llama *m = user;
    return m->impl->write_flat(m, which ? m->adam_v : m->adam_m, offset, count, data);
}

tern_error *tern_llama_load_optimizer(tern_llama *m, const char *path) {
    char (*names)[128] = NULL;
    optimizer_tensor *tensors = NULL;
    size_t n = 0;
    TERN_TRY(optimizer_tensors(m, &names, &tensors, &n));
    int step = 0;
    tern_error *err = m->impl->ensure_optimizer(m);
    if (!err) err = optimizer_file_read(path, tensors, n, restore_moment, m, &step);
    if (!err) m->step = step;
    free(tensors);
    free(names);
    return err;
}
