/* What every model compiled once per handler shares (TERN_HANDLER=<h>): buffers carved out of
 * a few allocations, a flat parameter buffer read and written as f32 from the host, a value
 * summed across ranks. MODEL_FN(name) is this handler's model_<h>_<name>. */
#ifndef TERN_MODELS_COMMON_SUPPORT_H
#define TERN_MODELS_COMMON_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handlers/handler.h"

#define MODEL_FN(name) TERN_CAT3(model_, TERN_HANDLER, _##name)

/* Buffers carved out of one allocation per dtype class (activations, f32, i32). A layout
 * function runs twice: once to count (views absent), then, after pools_alloc, to assign. */
typedef enum { POOL_ACT, POOL_F32, POOL_I32, POOL_COUNT } model_pool_kind;

typedef struct model_pools {
    tern_dtype dtype[POOL_COUNT];
    size_t used[POOL_COUNT];
    tern_buf base[POOL_COUNT]; /* absent while counting */
    bool assigning;
} model_pools;

/* The next view of len elements of pool `kind` (each starts at a multiple of 64 elements,
 * aligned for vector loads on every handler); absent while counting. */
tern_buf MODEL_FN(take)(model_pools *p, model_pool_kind kind, size_t len);
/* Allocates what counting used and switches to assigning (frees all on failure). */
tern_error *MODEL_FN(pools_alloc)(tern_dev *d, model_pools *p);
void MODEL_FN(pools_free)(tern_dev *d, tern_buf *bases);

/* Elements [offset, offset + count) of a flat buffer (f32, bf16 or f16) as f32 on the host,
 * and back from f32 host data. */
tern_error *MODEL_FN(read_flat)(tern_dev *d, tern_buf flat, size_t offset, size_t count, float *out);
tern_error *MODEL_FN(write_flat)(tern_dev *d, tern_buf flat, size_t offset, size_t count, const float *data);

/* dst (q8_0, rows * cols weights) = src (a float view [rows, cols]) quantized by the effect's
 * copy; transposed first when `transpose` (a [k, n] weight into q8_0's [n, k]). quantize.c. */
tern_error *MODEL_FN(quantize_q8)(tern_dev *d, tern_buf src, size_t rows, size_t cols,
                                  bool transpose, tern_buf dst);

/* Runs queue(ctx) as the replayable section `key` (the effect's capture_begin and
 * capture_end): queued and recorded the first time, replayed by the handler without calling
 * queue when it holds the section already. On queue's error the section is ended unrecorded
 * and that error returned. */
tern_error *MODEL_FN(section)(tern_dev *d, uint64_t key, tern_error *(*queue)(void *ctx), void *ctx);

/* *value summed over the ranks of dist through the effect's allreduce, in *scalar (f32 [1],
 * allocated on first use, the caller's to free). */
tern_error *MODEL_FN(sum_across_ranks)(tern_dev *d, tern_dist *dist, tern_buf *scalar, float *value);

#endif
