/* AdamW's state in a checkpoint, for every model: optimizer-<step>.safetensors holds the
 * first and second moments of each parameter tensor ("m.NAME", "v.NAME", f32) and the step
 * in its metadata ("step"), beside any metadata the trainer adds. A model describes its
 * tensors as places in its flat parameter layout; reading the moments off the device and
 * writing them back (whole, or a rank's part) stays the model's. */
#ifndef TERN_CORE_OPTIMIZER_FILE_H
#define TERN_CORE_OPTIMIZER_FILE_H

#include <stddef.h>

#include "tern/error.h"

/* One parameter tensor: its name and its elements [offset, offset + count) of the flat
 * layout. */
typedef struct optimizer_tensor {
    const char *name;
    size_t offset, count;
} optimizer_tensor;

/* Writes path from the moments on the host, m then v, each [n_flat]: every tensor's
 * elements (refused when any is not finite); metadata_kv: extra key/value pairs ending in
 * NULL (may be NULL). */
tern_error *optimizer_file_write(const char *path, const optimizer_tensor *tensors, size_t n,
                                 size_t n_flat, const float *moments, int step,
                                 const char *const *metadata_kv);

/* Hands each moment of each tensor in path to `restore` (which 0: m, 1: v; data [count]),
 * checked first: present, of the tensor's size, finite, and v not negative; *step gets the
 * file's step. */
typedef tern_error *(*optimizer_restore)(void *user, int which, size_t offset, size_t count,
                                         const float *data);
tern_error *optimizer_file_read(const char *path, const optimizer_tensor *tensors, size_t n,
                                optimizer_restore restore, void *user, int *step);

/* A step number as checkpoints write it ("tern_step", "step"): non-negative, at most 2^30. */
tern_error *optimizer_parse_step(const char *text, const char *path, int *step);

/* The step DIR/model.safetensors records ("tern_step"; 0 when absent). */
tern_error *checkpoint_saved_step(const char *dir, int *step);

#endif
