/* Writing a model as a Hugging Face directory: config.json and model.safetensors in
 * save_pretrained's layout ("transformer." prefix, tied lm_head not stored). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Parses a non-negative int written by this file's savers. */
static tern_error *parse_step(const char *text, const char *path, int *step) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < 0 || v > 1L << 30)
        return tern_errorf("%s: step '%s' is not a valid step number", path, text);
    *step = (int)v;
    return NULL;
}

tern_error *tern_gpt2_saved_step(const char *dir, int *step) {
    char *path = malloc(strlen(dir) + 32);
    if (!path) return tern_errorf("out of memory");
    sprintf(path, "%s/model.safetensors", dir);
    tern_safetensors *f = NULL;
    tern_error *err = tern_safetensors_open(path, &f);
    *step = 0;
    if (!err) {
        const char *text = tern_safetensors_metadata(f, "tern_step");
        if (text) err = parse_step(text, path, step);
        tern_safetensors_close(f);
    }
    free(path);
    return err;
}

/* Visits every parameter tensor: its name, place in the flat buffers and element count
 * (wte without its padding rows). */
typedef tern_error *(*tensor_visit)(tern_gpt2 *m, const char *name, size_t offset, size_t count,
                                    void *user);

static tern_error *each_tensor(tern_gpt2 *m, tensor_visit visit, void *user) {
    const tern_gpt2_config *cfg = &m->cfg;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        int layers = gpt2_is_layer_kind((gpt2_tensor)k) ? cfg->n_layer : 1;
        for (int l = 0; l < layers; l++) {
            char name[96];
            gpt2_tensor_name((gpt2_tensor)k, l, name, sizeof name);
            size_t count = k == GPT2_WTE ? (size_t)cfg->vocab_size * cfg->n_embd
                                         : gpt2_tensor_len(cfg, (gpt2_tensor)k);
            TERN_TRY(visit(m, name, gpt2_tensor_offset(cfg, (gpt2_tensor)k, l), count, user));
        }
    }
    return NULL;
}

typedef struct moments_out {
    float *host;          /* both moments, [2 * n_flat] */
    tern_tensor_out *tensors;
    char (*names)[112];
    size_t n;
} moments_out;

static tern_error *collect_moments(tern_gpt2 *m, const char *name, size_t offset, size_t count,
                                   void *user) {
    moments_out *o = user;
    for (int which = 0; which < 2; which++) {
        float *data = o->host + (size_t)which * m->n_flat + offset;
        snprintf(o->names[o->n], sizeof o->names[o->n], "%c.%s", which ? 'v' : 'm', name);
        o->tensors[o->n] = (tern_tensor_out){.name = o->names[o->n], .dtype = TERN_F32, .ndim = 1,
                                             .shape = {(int64_t)count}, .data = data};
        o->n++;
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
    size_t n_tensors = 2 * (4 + (size_t)GPT2_LAYER_KINDS * m->cfg.n_layer), n_meta = 0;
    while (metadata_kv && metadata_kv[n_meta]) n_meta++;
    moments_out o = {
        .host = malloc(2 * m->n_flat * sizeof *o.host),
        .tensors = calloc(n_tensors, sizeof *o.tensors),
        .names = calloc(n_tensors, sizeof *o.names),
    };
    const char **metadata = calloc(n_meta + 3, sizeof *metadata);
    tern_error *err = NULL;
    if (!o.host || !o.tensors || !o.names || !metadata) {
        err = tern_errorf("out of memory saving the optimizer state");
        goto done;
    }
    if ((err = read_moments(m, o.host)) || (err = each_tensor(m, collect_moments, &o))) goto done;
    size_t bad = first_nonfinite(o.host, 2 * m->n_flat);
    if (bad < 2 * m->n_flat) {
        err = tern_errorf("not saving %s: AdamW's moments at step %d are not finite", path,
                          m->step);
        goto done;
    }
    char step[32];
    snprintf(step, sizeof step, "%d", m->step);
    metadata[0] = "step";
    metadata[1] = step;
    for (size_t i = 0; i < n_meta; i++) metadata[2 + i] = metadata_kv[i];
    err = tern_safetensors_write(path, o.tensors, o.n, metadata);
done:
    free(o.host);
    free(o.tensors);
    free(o.names);
    free(metadata);
    return err;
}

typedef struct moments_in {
    const tern_safetensors *f;
    const char *path;
    float *scratch; /* room for the largest tensor */
} moments_in;

/* Elements [offset, offset + count) of the flat layout from host data into `part`, this
 * rank's part of a flat buffer (ZeRO-1), or the whole buffer: only what lies in the part. */
static tern_error *write_part(tern_gpt2 *m, tern_buf part, size_t offset, size_t count,
                              const float *data) {
    size_t end = offset + count, part_end = m->shard_off + m->shard_len;
    size_t lo = offset > m->shard_off ? offset : m->shard_off, hi = end < part_end ? end : part_end;
    if (lo >= hi) return NULL;
    return m->impl->write_flat(m, part, lo - m->shard_off, hi - lo, data + (lo - offset));
}

static tern_error *restore_moments(tern_gpt2 *m, const char *name, size_t offset, size_t count,
                                   void *user) {
    moments_in *in = user;
    for (int which = 0; which < 2; which++) {
        char key[112];
        snprintf(key, sizeof key, "%c.%s", which ? 'v' : 'm', name);
        const tern_tensor_info *t = tern_safetensors_find(in->f, key);
        if (!t) return tern_errorf("%s: tensor %s is missing", in->path, key);
        if (t->count != count)
            return tern_errorf("%s: %s has %zu elements; this model's has %zu", in->path, key,
                               t->count, count);
        TERN_TRY(tern_tensor_convert(t, TERN_F32, in->scratch));
        for (size_t i = 0; i < count; i++)
            if (!isfinite(in->scratch[i]) || (which && in->scratch[i] < 0))
                return tern_errorf("%s: %s[%zu] is %g: %s", in->path, key, i, in->scratch[i],
                                   which ? "a second moment must be finite and not negative"
                                         : "a moment must be finite");
        TERN_TRY(write_part(m, which ? m->adam_v : m->adam_m, offset, count, in->scratch));
    }
    return NULL;
}

tern_error *tern_gpt2_load_optimizer(tern_gpt2 *m, const char *path) {
    tern_safetensors *f = NULL;
    TERN_TRY(tern_safetensors_open(path, &f));
    size_t largest = 0;
    for (int k = 0; k < GPT2_TENSOR_KINDS; k++) {
        size_t len = gpt2_tensor_len(&m->cfg, (gpt2_tensor)k);
        if (len > largest) largest = len;
    }
    moments_in in = {.f = f, .path = path, .scratch = malloc(largest * sizeof(float))};
    tern_error *err = NULL;
    const char *step = tern_safetensors_metadata(f, "step");
    int parsed = 0;
    if (!in.scratch) err = tern_errorf("out of memory loading %s", path);
    else if (!step) err = tern_errorf("%s: no step in its metadata", path);
    else if (!(err = parse_step(step, path, &parsed)) && !(err = m->impl->ensure_optimizer(m)) &&
             !(err = each_tensor(m, restore_moments, &in)))
        m->step = parsed;
    free(in.scratch);
    tern_safetensors_close(f);
    return err;
}
