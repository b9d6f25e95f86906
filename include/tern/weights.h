/* A model's weights as Hugging Face saves them in a folder: one model.safetensors, or
 * shards listed by model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor
 * name: shard file name}}, the shards model-0000K-of-0000N.safetensors by convention). Every
 * file is read through the validating safetensors reader (tern/safetensors.h), memory-mapped.
 *
 * Opening checks, each failure one line naming the file and the tensor or field:
 *  - model.safetensors is taken when it exists (transformers' order), else the index;
 *    neither is an error naming both;
 *  - the index: at most TERN_WEIGHTS_MAX_INDEX bytes of strict JSON, an object whose
 *    weight_map is a non-empty object of strings; metadata, when present, an object (its
 *    total_size is informational and not checked); other keys ignored;
 *  - a shard's name is a plain file name in the folder: no '/' or '\\', not starting with
 *    '.', at most 255 bytes, no control characters; it must be a regular file;
 *  - a tensor name given twice in weight_map is an error; every mapped tensor exists in its
 *    shard; a shard's tensor that weight_map does not map to that shard is an error (a
 *    stale or mixed-up shard);
 *  - tensors of any dtype open (as tern_safetensors_open); tern_weights_get refuses those
 *    other than F32, F16 and BF16. */
#ifndef TERN_WEIGHTS_H
#define TERN_WEIGHTS_H

#include <stddef.h>

#include "tern/error.h"
#include "tern/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_WEIGHTS_MAX_INDEX (64u << 20) /* bytes of model.safetensors.index.json */

typedef struct tern_weights tern_weights;

/* Opens the weights in folder `dir` (see above). */
tern_error *tern_weights_open(const char *dir, tern_weights **out);
void tern_weights_close(tern_weights *w); /* NULL is a no-op */

/* Tensors over every shard, sorted by name; i < count. */
size_t tern_weights_count(const tern_weights *w);
const tern_tensor_info *tern_weights_at(const tern_weights *w, size_t i);
/* The number of files read: 1 for model.safetensors, else the index's distinct shards. */
size_t tern_weights_shard_count(const tern_weights *w);

/* The tensor called `name`, or NULL. */
const tern_tensor_info *tern_weights_find(const tern_weights *w, const char *name);

/* The tensor called `name` as a float tensor: an error when absent ("model.layers.0.x: not
 * in DIR") or not F32, F16 or BF16. */
tern_error *tern_weights_get(const tern_weights *w, const char *name, const tern_tensor_info **out);

#ifdef __cplusplus
}
#endif
#endif
