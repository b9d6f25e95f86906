/* The handler-independent half of the flat-parameter training state (flat_state.h): the
 * ranks, ZeRO-1's bookkeeping and the optimizer file of a rank's part. */
#include <stdlib.h>

#include "core/optimizer_file.h"
#include "flat_state.h"

void model_flat_init(model_flat *f, const model_flat_ops *ops, tern_precision precision, size_t n_flat) {
    *f = (model_flat){.ops = ops, .n_flat = n_flat, .n_full = n_flat, .shard_len = n_flat, .shards = 1,
                      .world = 1};
    f->wdtype = f->adtype = precision == TERN_PRECISION_BF16 ? TERN_BF16 : TERN_F32;
}

tern_error *model_flat_tensors(model_flat *f, size_t n) {
    model_flat_free_tensors(f);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->names = calloc(n ? n : 1, sizeof *f->names);
    if (f->tensors && f->names) return NULL;
    model_flat_free_tensors(f);
    return tern_errorf("out of memory for %zu tensor descriptions", n);
}

void model_flat_free_tensors(model_flat *f) {
    free(f->tensors);
    free(f->names);
    f->tensors = NULL;
    f->names = NULL;
    f->n_tensors = 0;
}

tern_error *model_flat_set_dist(model_flat *f, tern_dist *comm) {
    int world = tern_dist_world(comm);
    if (world < 1) return tern_errorf("a communicator of %d ranks", world);
    if (f->shards > 1 && comm != f->dist)
        return tern_errorf("the communicator cannot change once ZeRO-1 has sharded the optimizer");
    f->dist = comm;
    f->world = world;
    return NULL;
}

tern_error *model_flat_shard_optimizer(model_flat *f, bool *moved) {
    *moved = false;
    if (f->world <= 1 || f->shards > 1) return NULL;
    TERN_TRY(f->ops->shard(f, f->world, tern_dist_rank(f->dist)));
    *moved = true;
    return NULL;
}

size_t model_flat_optimizer_bytes(const model_flat *f) {
    /* fp32: the master is the weights; bf16: its low halves are state of their own */
    size_t master = f->weights.len ? f->master.len * tern_dtype_size(f->master.dtype) : 0;
    return 2 * f->shard_len * sizeof(float) + master;
}

tern_error *model_flat_mean_across_ranks(model_flat *f, float *loss) {
    if (f->world <= 1) return NULL;
    TERN_TRY(tern_error_wrap(f->ops->sum_across_ranks(f, loss), "the mean loss across ranks"));
    *loss /= (float)f->world;
    return NULL;
}

tern_error *model_flat_read_params(model_flat *f, size_t offset, size_t count, float *out) {
    return f->ops->read_params(f, offset, count, out);
}

/* The optimizer file's view of f's tensors: names, places and their counts. */
static optimizer_tensor *file_tensors(const model_flat *f) {
    optimizer_tensor *t = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *t);
    for (size_t i = 0; t && i < f->n_tensors; i++)
        t[i] = (optimizer_tensor){.name = f->tensors[i].name, .offset = f->tensors[i].offset,
                                  .count = f->tensors[i].count};
    return t;
}

/* AdamW's moments [0, n_flat) on the host, m then v: gathered from the ranks with ZeRO-1
 * (every rank calls it then; host NULL: this rank only gives its parts). */
static tern_error *read_moments(model_flat *f, float *host) {
    TERN_TRY(f->ops->ensure_optimizer(f));
    TERN_TRY(f->ops->read_gathered(f, f->adam_m, 0, f->n_flat, host));
    return f->ops->read_gathered(f, f->adam_v, 0, f->n_flat, host ? host + f->n_flat : NULL);
}

tern_error *model_flat_save_optimizer(model_flat *f, const char *path, const char *const *metadata_kv) {
    if (tern_dist_rank(f->dist) != 0) return read_moments(f, NULL); /* rank 0 writes */
    optimizer_tensor *tensors = file_tensors(f);
    float *host = malloc(2 * f->n_flat * sizeof *host);
    tern_error *err = tensors && host ? read_moments(f, host) : tern_errorf("out of memory saving the optimizer state");
    if (!err) err = optimizer_file_write(path, tensors, f->n_tensors, f->n_flat, host, f->step, metadata_kv);
    free(host);
    free(tensors);
    return err;
}

/* Elements [offset, offset + count) of the flat layout from host data into this rank's part
 * of AdamW's moment `which` (ZeRO-1), or the whole buffer: only what lies in the part. */
static tern_error *restore_moment(void *user, int which, size_t offset, size_t count, const float *data) {
    model_flat *f = user;
    tern_buf part = which ? f->adam_v : f->adam_m;
    size_t end = offset + count, part_end = f->shard_off + f->shard_len;
    size_t lo = offset > f->shard_off ? offset : f->shard_off, hi = end < part_end ? end : part_end;
    if (lo >= hi) return NULL;
    return f->ops->write(f, part, lo - f->shard_off, hi - lo, data + (lo - offset));
}

tern_error *model_flat_load_optimizer(model_flat *f, const char *path) {
    optimizer_tensor *tensors = file_tensors(f);
    if (!tensors) return tern_errorf("out of memory loading %s", path);
    int step = 0;
    tern_error *err = f->ops->ensure_optimizer(f);
    if (!err) err = optimizer_file_read(path, tensors, f->n_tensors, restore_moment, f, &step);
    if (!err) f->step = step;
    free(tensors);
    return err;
}
