/* What the models compiled once per handler share (support.h). */
#include "support.h"

#define OP(name) TERN_OP(name)

static size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

tern_buf MODEL_FN(take)(model_pools *p, model_pool_kind kind, size_t len) {
    size_t offset = p->used[kind];
    p->used[kind] += round_up_64(len);
    if (!p->assigning) return tern_none();
    return tern_view(p->base[kind], offset, len);
}

tern_error *MODEL_FN(pools_alloc)(tern_dev *d, model_pools *p) {
    for (int k = 0; k < POOL_COUNT; k++) {
        p->base[k] = tern_none();
        if (!p->used[k]) continue;
        tern_error *err = OP(alloc)(d, p->dtype[k], p->used[k], &p->base[k]);
        if (err) {
            MODEL_FN(pools_free)(d, p->base);
            return err;
        }
    }
    for (int k = 0; k < POOL_COUNT; k++) p->used[k] = 0;
    p->assigning = true;
    return NULL;
}

void MODEL_FN(pools_free)(tern_dev *d, tern_buf *bases) {
    for (int k = 0; k < POOL_COUNT; k++) {
        tern_error_free(OP(free)(d, &bases[k])); /* freeing cannot be retried */
        bases[k] = tern_none();
    }
}

tern_error *MODEL_FN(read_flat)(tern_dev *d, tern_buf flat, size_t offset, size_t count, float *out) {
    tern_buf part = tern_view(flat, offset, count);
    if (part.dtype == TERN_F32) return OP(download)(d, out, part);
    tern_buf tmp = tern_none();
    TERN_TRY(OP(alloc)(d, TERN_F32, count, &tmp));
    tern_error *err = OP(copy)(d, tmp, part);
    if (!err) err = OP(download)(d, out, tmp);
    tern_error_free(OP(free)(d, &tmp));
    return err;
}

tern_error *MODEL_FN(write_flat)(tern_dev *d, tern_buf flat, size_t offset, size_t count, const float *data) {
    tern_buf part = tern_view(flat, offset, count);
    if (part.dtype == TERN_F32) return OP(upload)(d, part, data);
    tern_buf tmp = tern_none();
    TERN_TRY(OP(alloc)(d, TERN_F32, count, &tmp));
    tern_error *err = OP(upload)(d, tmp, data);
    if (!err) err = OP(copy)(d, part, tmp);
    tern_error_free(OP(free)(d, &tmp));
    return err;
}

tern_error *MODEL_FN(section)(tern_dev *d, uint64_t key, tern_error *(*queue)(void *ctx), void *ctx) {
    bool replay = false;
    TERN_TRY(OP(capture_begin)(d, key, &replay));
    tern_error *err = replay ? NULL : queue(ctx);
    if (err) {
        tern_error_free(OP(capture_end)(d, key));
        return err;
    }
    return OP(capture_end)(d, key);
}

tern_error *MODEL_FN(sum_across_ranks)(tern_dev *d, tern_dist *dist, tern_buf *scalar, float *value) {
    if (!scalar->len) TERN_TRY(OP(alloc)(d, TERN_F32, 1, scalar));
    TERN_TRY(OP(upload)(d, *scalar, value));
    TERN_TRY(OP(allreduce)(d, *scalar, dist));
    return OP(download)(d, value, *scalar);
}
