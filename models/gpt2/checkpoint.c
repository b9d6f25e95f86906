/* Writing a model as a Hugging Face directory: config.json and model.safetensors in
 * save_pretrained's layout ("transformer." prefix, tied lm_head not stored). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_internal.h"
#include "tern/file.h"
#include "tern/safetensors.h"

tern_error *tern_gpt2_save(tern_gpt2 *m, const char *dir) {
    const tern_gpt2_config *cfg = &m->cfg;
    size_t n_tensors = 4 + (size_t)GPT2_LAYER_KINDS * cfg->n_layer;
    float *flat = malloc(m->n_flat * sizeof *flat);
    tern_tensor_out *tensors = calloc(n_tensors, sizeof *tensors);
    char (*names)[112] = calloc(n_tensors, sizeof *names);
    char *path = malloc(strlen(dir) + 32);
    tern_error *err = NULL;
    if (!flat || !tensors || !names || !path) {
        err = tern_errorf("out of memory saving %s", dir);
        goto done;
    }
    if ((err = tern_make_dirs(dir))) goto done;
    if ((err = m->impl->read_flat(m, m->master, 0, m->n_flat, flat))) goto done;

    size_t t = 0;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++, t++) {
            char name[96];
            gpt2_tensor_name((gpt2_tensor)k, l, name, sizeof name);
            snprintf(names[t], sizeof names[t], "transformer.%s", name);
            size_t rows, cols;
            gpt2_tensor_shape(cfg, (gpt2_tensor)k, &rows, &cols);
            if (k == GPT2_WTE) rows = (size_t)cfg->vocab_size; /* drop the padding rows */
            tensors[t] = (tern_tensor_out){
                .name = names[t], .dtype = TERN_F32, .ndim = cols ? 2 : 1,
                .shape = {(int64_t)rows, (int64_t)cols},
                .data = flat + gpt2_tensor_offset(cfg, (gpt2_tensor)k, l),
            };
        }
    }
    sprintf(path, "%s/model.safetensors", dir);
    if ((err = tern_safetensors_write(path, tensors, t, NULL))) goto done;
    sprintf(path, "%s/config.json", dir);
    err = tern_gpt2_config_write(path, cfg);
done:
    free(flat);
    free(tensors);
    free(names);
    free(path);
    return err;
}
