/* The flat-parameter training state every model shares: the parameters, their gradients and
 * AdamW's moments as flat buffers in the model's flat layout (each tensor at its offset),
 * the f32 master weights (in bf16 split in two: the bf16 compute weights and the low
 * halves); the job's ranks; and ZeRO-1, which cuts the optimizer state into one part per
 * rank. A model describes its tensors once (model_flat_tensors) and keeps everything else
 * (activations, its own gradient clearing).
 *
 * Handler-independent calls are model_flat_<name> (flat_front.c, compiled once); the ones
 * that call operations are this handler's model_flat_ops (flat_state.c, compiled once per
 * handler), reached through f->ops. */
#ifndef TERN_MODELS_COMMON_FLAT_STATE_H
#define TERN_MODELS_COMMON_FLAT_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/dist.h"
#include "tern/effect.h"
#include "tern/gpt2.h" /* tern_gpt2_adamw: AdamW's settings, the same for every model */

/* One parameter tensor in the flat layout. */
typedef struct model_tensor {
    const char *name;  /* as the optimizer file names it */
    size_t offset;     /* first element in the flat layout */
    size_t len;        /* elements in the flat layout (padding rows included) */
    size_t count;      /* elements in a file: the first `count` of `len` (no padding rows) */
    bool decayed;      /* a matrix or an embedding: decayed when decay_all is off */
} model_tensor;

typedef struct model_flat_ops model_flat_ops;

typedef struct model_flat {
    const model_flat_ops *ops; /* the model's handler's */
    tern_dev *dev;             /* the model's device (not owned) */
    tern_dtype wdtype;         /* compute weights: f32 (the master), or bf16 */
    tern_dtype adtype;         /* activations and gradients */
    size_t n_flat;             /* elements of the flat layout (host arrays, checkpoints) */
    /* ZeRO-1 (model_flat_shard_optimizer): the flat layout, padded to n_full elements, is cut
     * into `shards` equal parts, one per rank, and each rank keeps the optimizer state of its
     * part only. Without it shards is 1, n_full is n_flat and this rank's part is all of it. */
    int shards;
    size_t n_full;    /* elements of full flat buffers: n_flat, or a multiple of 64 * shards */
    size_t shard_len; /* elements of this rank's part: n_full / shards */
    size_t shard_off; /* where this rank's part starts: rank * shard_len */
    /* The master weights. fp32: the f32 parameters [n_full], also the compute weights.
     * bf16: the f32 parameters split (tern_f32_split, tern/half.h) into their high halves,
     * `weights`, and their low halves, `master` [n_full] u16, or with ZeRO-1 this rank's
     * part [shard_len] u16; adamw steps the pair as one f32 (effect.h), and the f32 value
     * is rebuilt only on the host (model_flat_read_params). 4 bytes a parameter, not 6. */
    tern_buf master;
    tern_buf weights; /* [n_full] bf16 compute weights, the master's high halves (absent in fp32) */
    tern_buf grads;   /* [n_full] adtype; the gaps and ZeRO-1's padding stay zero */
    tern_buf adam_m;  /* [shard_len] f32 */
    tern_buf adam_v;  /* [shard_len] f32 */
    int step;         /* optimizer steps taken */
    tern_dist *dist;  /* data parallelism across processes, or NULL */
    int world;        /* ranks of dist (1 without) */
    tern_buf dist_scalar; /* [1] f32: a host value summed across ranks */
    model_tensor *tensors; /* [n_tensors], in the flat layout's order (host, owned) */
    size_t n_tensors;
    char (*names)[128];    /* the tensors' names (host, owned) */
} model_flat;

/* What calls operations, one table per handler (flat_state.c). */
struct model_flat_ops {
    /* The master (and in bf16 the compute weights) from host params [n_flat] f32. */
    tern_error *(*open)(model_flat *f, const float *params);
    /* Elements [offset, offset + count) of a flat buffer as f32 on the host, and back. */
    tern_error *(*read)(model_flat *f, tern_buf flat, size_t offset, size_t count, float *out);
    tern_error *(*write)(model_flat *f, tern_buf flat, size_t offset, size_t count, const float *data);
    /* Elements [offset, offset + count) of the full flat buffer whose part this rank holds in
     * `part` (the whole buffer without ZeRO-1), gathered from the ranks: collective, every
     * rank calls it; out NULL: this rank only gives its part. */
    tern_error *(*read_gathered)(model_flat *f, tern_buf part, size_t offset, size_t count, float *out);
    /* The f32 parameters [offset, offset + count) on the host, from the master (in bf16 both
     * halves joined); with ZeRO-1 in bf16 collective, as read_gathered (out NULL: this
     * rank only gives its part). */
    tern_error *(*read_params)(model_flat *f, size_t offset, size_t count, float *out);
    tern_error *(*ensure_optimizer)(model_flat *f); /* allocates zeroed moments */
    /* ZeRO-1: this rank keeps part `rank` of `shards` (before any gradient or moment exists);
     * the weights may move, so replayable sections must be captured anew. */
    tern_error *(*shard)(model_flat *f, int shards, int rank);
    tern_error *(*alloc_grads)(model_flat *f); /* [n_full], zeroed, gaps and padding included */
    tern_error *(*sum_across_ranks)(model_flat *f, float *value); /* in place, by allreduce */
    /* One AdamW step: the gradients summed across the ranks, clipped by their global norm
     * (*grad_norm, before clipping; may be NULL), this rank's part stepped, and with ZeRO-1
     * the compute weights gathered from the ranks. The gradients must be readable (a model
     * that clears them lazily settles them first). */
    tern_error *(*update)(model_flat *f, const tern_gpt2_adamw *h, float *grad_norm);
    void (*free)(model_flat *f); /* the device buffers */
};

#ifdef TERN_HANDLER
#include "support.h"
extern const model_flat_ops MODEL_FN(flat_ops);
#endif

/* Sets the fields a model opened with n_flat elements starts with (one rank, no ZeRO-1,
 * wdtype and adtype from precision) and the handler's ops; no buffers yet. */
void model_flat_init(model_flat *f, const model_flat_ops *ops, tern_precision precision, size_t n_flat);
/* Room for n tensors' descriptions (f->tensors, f->names); the model fills them in order
 * and sets n_tensors. */
tern_error *model_flat_tensors(model_flat *f, size_t n);
void model_flat_free_tensors(model_flat *f);

static inline bool model_flat_master_sharded(const model_flat *f) {
    return f->shards > 1 && f->weights.len > 0;
}
/* The compute weights: the bf16 high halves, or the f32 master. */
static inline tern_buf model_flat_weights(const model_flat *f) {
    return f->weights.len ? f->weights : f->master;
}

/* The communicator (see tern_gpt2_set_dist); it cannot change once ZeRO-1 sharded. */
tern_error *model_flat_set_dist(model_flat *f, tern_dist *comm);
/* ZeRO-1 over the communicator's ranks; a no-op on one rank or when already sharded.
 * *moved: whether the weights may have moved (replayable sections are captured anew). */
tern_error *model_flat_shard_optimizer(model_flat *f, bool *moved);
/* Bytes of optimizer state this rank holds: m and v (f32), and in bf16 the master's low
 * halves (u16; the high halves are the weights). */
size_t model_flat_optimizer_bytes(const model_flat *f);
/* With ranks, forward_backward scales the loss by 1/world, and the mean loss it reports is
 * the global batch's: *loss summed across the ranks, divided by world. */
static inline float model_flat_rank_loss_scale(const model_flat *f, float loss_scale) {
    return loss_scale / (float)f->world;
}
tern_error *model_flat_mean_across_ranks(model_flat *f, float *loss);

/* The f32 parameters [offset, offset + count) on the host; gathered from the ranks when the
 * master is sharded (every rank calls it then; out NULL: this rank only gives its part). */
tern_error *model_flat_read_params(model_flat *f, size_t offset, size_t count, float *out);

/* The optimizer file (core/optimizer_file.h) of f's tensors: rank 0 writes it, whole, the
 * moments gathered from the ranks with ZeRO-1 (every rank calls it); loading keeps this
 * rank's part and sets f->step. */
tern_error *model_flat_save_optimizer(model_flat *f, const char *path, const char *const *metadata_kv);
tern_error *model_flat_load_optimizer(model_flat *f, const char *path);

#endif
