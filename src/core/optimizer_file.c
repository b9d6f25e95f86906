/* AdamW's state in a checkpoint (optimizer_file.h). */
#include "core/optimizer_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/safetensors.h"

tern_error *optimizer_parse_step(const char *text, const char *path, int *step) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < 0 || v > 1L << 30)
        return tern_errorf("%s: step '%s' is not a valid step number", path, text);
    *step = (int)v;
    return NULL;
}

tern_error *checkpoint_saved_step(const char *dir, int *step) {
    size_t cap = strlen(dir) + 32;
    char *path = malloc(cap);
    if (!path) return tern_errorf("out of memory");
    snprintf(path, cap, "%s/model.safetensors", dir);
    tern_safetensors *f = NULL;
    tern_error *err = tern_safetensors_open(path, &f);
    *step = 0;
    if (!err) {
        const char *text = tern_safetensors_metadata(f, "tern_step");
        if (text) err = optimizer_parse_step(text, path, step);
        tern_safetensors_close(f);
    }
    free(path);
    return err;
}

tern_error *optimizer_file_write(const char *path, const optimizer_tensor *tensors, size_t n,
                                 size_t n_flat, const float *moments, int step,
                                 const char *const *metadata_kv) {
    size_t n_meta = 0;
    while (metadata_kv && metadata_kv[n_meta]) n_meta++;
    tern_tensor_out *out = calloc(2 * n, sizeof *out);
    char (*names)[128] = calloc(2 * n, sizeof *names);
    const char **metadata = calloc(n_meta + 3, sizeof *metadata);
    tern_error *err = NULL;
    if (!out || !names || !metadata) {
        err = tern_errorf("out of memory saving the optimizer state");
        goto done;
    }
    for (size_t t = 0; t < n && !err; t++) {
        for (int which = 0; which < 2; which++) {
            const float *data = moments + (size_t)which * n_flat + tensors[t].offset;
            for (size_t i = 0; i < tensors[t].count; i++)
                if (!isfinite(data[i])) {
                    err = tern_errorf("not saving %s: AdamW's moments at step %d are not finite", path, step);
                    goto done;
                }
            size_t k = 2 * t + (size_t)which;
            snprintf(names[k], sizeof names[k], "%c.%s", which ? 'v' : 'm', tensors[t].name);
            out[k] = (tern_tensor_out){.name = names[k], .dtype = TERN_F32, .ndim = 1,
                                       .shape = {(int64_t)tensors[t].count}, .data = data};
        }
    }
    char step_text[32];
    snprintf(step_text, sizeof step_text, "%d", step);
    metadata[0] = "step";
    metadata[1] = step_text;
    for (size_t i = 0; i < n_meta; i++) metadata[2 + i] = metadata_kv[i];
    err = tern_safetensors_write(path, out, 2 * n, metadata);
done:
    free(out);
    free(names);
    free(metadata);
    return err;
}

tern_error *optimizer_file_read(const char *path, const optimizer_tensor *tensors, size_t n,
                                optimizer_restore restore, void *user, int *step) {
    tern_safetensors *f = NULL;
    TERN_TRY(tern_safetensors_open(path, &f));
    size_t largest = 0;
    for (size_t t = 0; t < n; t++)
        if (tensors[t].count > largest) largest = tensors[t].count;
    float *scratch = malloc((largest ? largest : 1) * sizeof *scratch);
    const char *step_text = tern_safetensors_metadata(f, "step");
    tern_error *err = !scratch      ? tern_errorf("out of memory loading %s", path)
                      : !step_text ? tern_errorf("%s: no step in its metadata", path)
                                   : optimizer_parse_step(step_text, path, step);
    for (size_t t = 0; t < n && !err; t++) {
        for (int which = 0; which < 2 && !err; which++) {
            char key[128];
            snprintf(key, sizeof key, "%c.%s", which ? 'v' : 'm', tensors[t].name);
            const tern_tensor_info *info = tern_safetensors_find(f, key);
            size_t count = tensors[t].count;
            if (!info) {
                err = tern_errorf("%s: tensor %s is missing", path, key);
                break;
            }
            if (info->count != count) {
                err = tern_errorf("%s: %s has %zu elements; this model's has %zu", path, key, info->count, count);
                break;
            }
            if ((err = tern_tensor_convert(info, TERN_F32, scratch))) break;
            for (size_t i = 0; i < count && !err; i++)
                if (!isfinite(scratch[i]) || (which && scratch[i] < 0))
                    err = tern_errorf("%s: %s[%zu] is %g: %s", path, key, i, scratch[i],
                                      which ? "a second moment must be finite and not negative"
                                            : "a moment must be finite");
            if (!err) err = restore(user, which, tensors[t].offset, count, scratch);
        }
    }
    free(scratch);
    tern_safetensors_close(f);
    return err;
}
