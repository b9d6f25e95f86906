/* Carving many buffers out of three allocations (activation dtype, f32, i32), and the
 * products every pass uses. */
#include "instance.h"

/* Views start at multiples of 64 elements (aligned for vector loads on every handler). */
static size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

tern_buf LLAMA_FN(take)(llama_pools *p, llama_pool_kind kind, size_t len) {
    size_t offset = p->used[kind];
    p->used[kind] += round_up_64(len);
    if (!p->assigning) return tern_none();
    return tern_view(p->base[kind], offset, len);
}

tern_error *LLAMA_FN(pools_alloc)(tern_dev *d, llama_pools *p) {
    for (int k = 0; k < POOL_COUNT; k++) {
        p->base[k] = tern_none();
        if (!p->used[k]) continue;
        tern_error *err = OP(alloc)(d, p->dtype[k], p->used[k], &p->base[k]);
        if (err) {
            LLAMA_FN(pools_free)(d, p->base);
            return err;
        }
    }
    for (int k = 0; k < POOL_COUNT; k++) p->used[k] = 0;
    p->assigning = true;
    return NULL;
}

void LLAMA_FN(pools_free)(tern_dev *d, tern_buf *bases) {
    for (int k = 0; k < POOL_COUNT; k++) {
        tern_error_free(OP(free)(d, &bases[k])); /* freeing cannot be retried */
        bases[k] = tern_none();
    }
}

tern_error *LLAMA_FN(linear)(tern_dev *d, tern_buf y, tern_buf x, tern_buf w, tern_buf b, int rows,
                             int in, int out) {
    tern_matmul mm = {.m = rows, .n = out, .k = in, .trans_b = true, .alpha = 1, .beta = 0, .bias = b};
    return OP(matmul)(d, y, x, w, &mm);
}

tern_error *LLAMA_FN(residual_linear)(tern_dev *d, tern_buf y, tern_buf res, tern_buf x, tern_buf w,
                                      tern_buf b, int rows, int in, int out) {
    tern_matmul mm = {.m = rows, .n = out, .k = in, .trans_b = true, .alpha = 1, .beta = 1, .bias = b,
                      .addend = res};
    return OP(matmul)(d, y, x, w, &mm);
}
