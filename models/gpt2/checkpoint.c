/* Writing a model as a Hugging Face directory: config.json and model.safetensors in
 * save_pretrained's layout ("transformer." prefix, tied lm_head not stored). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/optimizer_file.h"
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
static bool writes(const tern_gpt2 *m) { return tern_dist_rank(m->dist) == 0; }

/* The f32 parameters [0, n_flat) on the host; gathered from the ranks when the master is
 * sharded (every rank calls it then; out NULL: this rank only gives its part). */
static tern_error *read_master(tern_gpt2 *m, float *out) {
    if (gpt2_master_sharded(m)) return m->impl->read_gathered(m, m->master, 0, m->n_flat, out);
    return out ? m->impl->read_flat(m, m->master, 0, m->n_flat, out) : NULL;
}

tern_error *tern_gpt2_save_as(tern_gpt2 *m, const char *dir, tern_dtype dtype) {
    if (dtype != TERN_F32 && dtype != TERN_BF16 && dtype != TERN_F16)
        return tern_errorf("checkpoints are f32, bf16 or f16, not %s", tern_dtype_name(dtype));
    if (!writes(m)) return read_master(m, NULL);
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
    if ((err = read_master(m, flat))) goto done;
    /* A checkpoint of diverged weights would replace the last good one: refuse it. */
    size_t bad = first_nonfinite(flat, m->n_flat);
    if (bad < m->n_flat) {
        err = tern_errorf("not saving %s: the weights at step %d are not finite (element %zu is "
                          "%g)", dir, m->step, bad, flat[bad]);
        goto done;
    }
    if ((err = tern_make_dirs(dir))) goto done;
    /* A half-precision checkpoint: the values rounded to nearest even, in place (a 16-bit
     * value never needs more room than the f32 it came from). */
    if (dtype == TERN_BF16 || dtype == TERN_F16) {
        uint16_t *half = (uint16_t *)flat;
        for (size_t i = 0; i < m->n_flat; i++)
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
    snprintf(step, sizeof step, "%d", m->step);
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

/* Every parameter tensor as the optimizer file names it: its place in the flat buffers and
 * element count (wte without its padding rows). names: room for each name; *out, *n owned by
 * the caller (free *out). */
static tern_error *optimizer_tensors(const tern_gpt2 *m, char (**names)[96], optimizer_tensor **out, size_t *n) {
    const tern_gpt2_config *cfg = &m->cfg;
    size_t cap = 4 + (size_t)GPT2_LAYER_KINDS * cfg->n_layer;
    *names = calloc(cap, sizeof **names);
    *out = calloc(cap, sizeof **out);
    *n = 0;
    if (!*names || !*out) {
        free(*names);
        free(*out);
        *names = NULL, *out = NULL;
        return tern_errorf("out of memory");
    }
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++, (*n)++) {
            gpt2_tensor_name((gpt2_tensor)k, l, (*names)[*n], sizeof (*names)[*n]);
            size_t count = k == GPT2_WTE ? (size_t)cfg->vocab_size * cfg->n_embd : gpt2_tensor_len(cfg, (gpt2_tensor)k);
            (*out)[*n] = (optimizer_tensor){.name = (*names)[*n],
                                            .offset = gpt2_tensor_offset(cfg, (gpt2_tensor)k, l), .count = count};
        }
    }
    return NULL;
}

/* AdamW's moments [0, n_flat) on the host, m then v: gathered from the ranks with ZeRO-1
 * (every rank calls it then; host NULL: this rank only gives its parts). */
static tern_error *read_moments(tern_gpt2 *m, float *host) {
    TERN_TRY(m->impl->ensure_optimizer(m));
    TERN_TRY(m->impl->read_gathered(m, m->adam_m, 0, m->n_flat, host));
    return m->impl->read_gathered(m, m->adam_v, 0, m->n_flat, host ? host + m->n_flat : NULL);
}

tern_error *tern_gpt2_save_optimizer(tern_gpt2 *m, const char *path, const char *const *metadata_kv) {
    if (!writes(m)) return read_moments(m, NULL);
    char (*names)[96] = NULL;
    optimizer_tensor *tensors = NULL;
    size_t n = 0;
    TERN_TRY(optimizer_tensors(m, &names, &tensors, &n));
    float *host = malloc(2 * m->n_flat * sizeof *host);
    tern_error *err = host ? read_moments(m, host) : tern_errorf("out of memory saving the optimizer state");
    if (!err) err = optimizer_file_write(path, tensors, n, m->n_flat, host, m->step, metadata_kv);
    free(host);
    free(tensors);
    free(names);
    return err;
}

/* Elements [offset, offset + count) of the flat layout from host data into this rank's part
 * of AdamW's moment `which` (ZeRO-1), or the whole buffer: only what lies in the part. */
static tern_error *restore_moment(void *user, int which, size_t offset, size_t count, const float *data) {
    tern_gpt2 *m = user;
    tern_buf part = which ? m->adam_v : m->adam_m;
    size_t end = offset + count, part_end = m->shard_off + m->shard_len;
    size_t lo = offset > m->shard_off ? offset : m->shard_off, hi = end < part_end ? end : part_end;
    if (lo >= hi) return NULL;
    return m->impl->write_flat(m, part, lo - m->shard_off, hi - lo, data + (lo - offset));
}

tern_error *tern_gpt2_load_optimizer(tern_gpt2 *m, const char *path) {
    char (*names)[96] = NULL;
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
