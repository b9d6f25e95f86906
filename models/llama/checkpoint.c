/* Writing a model as a Hugging Face folder: config.json and model.safetensors in
 * save_pretrained's layout (f32; the tied lm_head not stored), each written atomically. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_internal.h"
#include "tern/file.h"
#include "tern/safetensors.h"

tern_error *tern_llama_save(tern_llama *m, const char *dir) {
    const tern_llama_config *cfg = &m->cfg;
    size_t cap = 3 + (size_t)(LLAMA_TENSOR_KINDS - LLAMA_FIRST_LAYER_KIND) * cfg->n_layer;
    float *flat = malloc(m->n_flat * sizeof *flat);
    tern_tensor_out *tensors = calloc(cap, sizeof *tensors);
    char (*names)[128] = calloc(cap, sizeof *names);
    size_t plen = strlen(dir) + 32;
    char *path = malloc(plen);
    tern_error *err = NULL;
    if (!flat || !tensors || !names || !path) {
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
    size_t n = 0;
    for (int k = 0; k < LLAMA_TENSOR_KINDS; k++) {
        if (!llama_has_tensor(cfg, (llama_tensor)k)) continue;
        int layers = llama_is_layer_kind((llama_tensor)k) ? cfg->n_layer : 1;
        size_t rows, cols;
        llama_tensor_shape(cfg, (llama_tensor)k, &rows, &cols); /* V rows: padding dropped */
        for (int l = 0; l < layers; l++, n++) {
            llama_tensor_name((llama_tensor)k, l, names[n], sizeof names[n]);
            tensors[n] = (tern_tensor_out){.name = names[n], .dtype = TERN_F32, .ndim = cols ? 2 : 1,
                                           .shape = {(int64_t)rows, (int64_t)cols},
                                           .data = flat + llama_tensor_offset(cfg, (llama_tensor)k, l)};
        }
    }
    if ((err = tern_make_dirs(dir))) goto done;
    char step[32];
    snprintf(step, sizeof step, "%d", m->step);
    const char *meta[] = {"format", "pt", "tern_step", step, NULL};
    snprintf(path, plen, "%s/model.safetensors", dir);
    if ((err = tern_safetensors_write(path, tensors, n, meta))) goto done;
    snprintf(path, plen, "%s/config.json", dir);
    err = tern_llama_config_write(path, cfg);
done:
    free(flat);
    free(tensors);
    free(names);
    free(path);
    return err;
}
