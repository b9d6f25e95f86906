/* Writing a model as a Hugging Face directory: config.json and model.safetensors in
 * save_pretrained's layout ("transformer." prefix, tied lm_head not stored). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/optimizer_file.h" /* checkpoint_saved_step */
#include "gpt2_internal.h"
#include "tern/file.h"
#include "tern/half.h"
#include "tern/safetensors.h"

tern_error *tern_gpt2_save(tern_gpt2 *m, const char *dir) {
    return tern_gpt2_save_as(m, dir, TERN_F32);
}

/* The index of the first element of x[0, n) that is not finite, or n. */
static size_t first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

/* Whether this process writes checkpoints: rank 0 of the model's communicator. */
static bool writes(const tern_gpt2 *m) { return tern_dist_rank(m->flat.dist) == 0; }

/* The f32 parameters [0, n_flat) on the host, gathered from the ranks with ZeRO-1 in bf16
 * (every rank calls it then; out NULL: this rank only gives its part). */
static tern_error *read_master(tern_gpt2 *m, float *out) {
    return model_flat_read_params(&m->flat, 0, m->flat.n_flat, out);
}

tern_error *tern_gpt2_save_as(tern_gpt2 *m, const char *dir, tern_dtype dtype) {
    if (dtype != TERN_F32 && dtype != TERN_BF16 && dtype != TERN_F16)
        return tern_errorf("checkpoints are f32, bf16 or f16, not %s", tern_dtype_name(dtype));
    if (!writes(m)) return read_master(m, NULL);
    const tern_gpt2_config *cfg = &m->cfg;
    size_t n_tensors = 4 + (size_t)GPT2_LAYER_KINDS * cfg->n_layer;
    float *flat = malloc(m->flat.n_flat * sizeof *flat);
    tern_tensor_out *tensors = calloc(n_tensors, sizeof *tensors);
    char (*names)[112] = calloc(n_tensors, sizeof *names);
    char *path = malloc(strlen(dir) + 32);
    tern_error *err = NULL;
    if (!flat || !tensors || !names || !path) {
        err = tern_errorf("out of memory saving %s", dir);
        goto done;
    }
    if ((err = read_master(m, flat))) goto done;
    /* A checkpoint of diverged weights would replace the last good one: refuse it. */
    size_t bad = first_nonfinite(flat, m->flat.n_flat);
    if (bad < m->flat.n_flat) {
        err = tern_errorf("not saving %s: the weights at step %d are not finite (element %zu is "
                          "%g)", dir, m->flat.step, bad, flat[bad]);
        goto done;
    }
    if ((err = tern_make_dirs(dir))) goto done;
    /* A half-precision checkpoint: the values rounded to nearest even, in place (a 16-bit
     * value never needs more room than the f32 it came from). */
    if (dtype == TERN_BF16 || dtype == TERN_F16) {
        uint16_t *half = (uint16_t *)flat;
        for (size_t i = 0; i < m->flat.n_flat; i++)
            half[i] = dtype == TERN_BF16 ? tern_f32_to_bf16(flat[i]) : tern_f32_to_f16(flat[i]);
    }
    size_t elem = tern_dtype_size(dtype);

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
                .name = names[t], .dtype = dtype, .ndim = cols ? 2 : 1,
                .shape = {(int64_t)rows, (int64_t)cols},
                .data = (const char *)flat + gpt2_tensor_offset(cfg, (gpt2_tensor)k, l) * elem,
            };
        }
    }
    char step[32];
    snprintf(step, sizeof step, "%d", m->flat.step);
    const char *metadata[] = {"tern_step", step, NULL};
    /* The config first: a folder with weights is never without the config they need (a
     * kill between the two leaves a config with the previous weights, which it fits). */
    sprintf(path, "%s/config.json", dir);
    if ((err = tern_gpt2_config_write(path, cfg))) goto done;
    sprintf(path, "%s/model.safetensors", dir);
    err = tern_safetensors_write(path, tensors, t, metadata);
done:
    free(flat);
    free(tensors);
    free(names);
    free(path);
    return err;
}

tern_error *tern_gpt2_saved_step(const char *dir, int *step) { return checkpoint_saved_step(dir, step); }

tern_error *tern_gpt2_save_optimizer(tern_gpt2 *m, const char *path, const char *const *metadata_kv) {
    return model_flat_save_optimizer(&m->flat, path, metadata_kv);
}

tern_error *tern_gpt2_load_optimizer(tern_gpt2 *m, const char *path) {
    return model_flat_load_optimizer(&m->flat, path);
}
