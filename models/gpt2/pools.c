/* Carving many activation buffers out of three allocations (activation dtype, f32, i32). */
#include "instance.h"

/* Views start at multiples of 64 elements (aligned for vector loads on every handler). */
static size_t round_up_64(size_t n) { return (n + 63) / 64 * 64; }

tern_buf GPT2_FN(take)(gpt2_pools *p, gpt2_pool_kind kind, size_t len) {
    size_t offset = p->used[kind];
    p->used[kind] += round_up_64(len);
    if (!p->assigning) return tern_none();
    return tern_view(p->base[kind], offset, len);
}

tern_error *GPT2_FN(pools_alloc)(tern_gpt2 *m, gpt2_pools *p) {
    for (int k = 0; k < POOL_COUNT; k++) {
        p->base[k] = tern_none();
        if (!p->used[k]) continue;
        tern_error *err = OP(alloc)(m->dev, p->dtype[k], p->used[k], &p->base[k]);
        if (err) {
            GPT2_FN(pools_free)(m, p->base);
            return err;
        }
    }
    for (int k = 0; k < POOL_COUNT; k++) p->used[k] = 0;
    p->assigning = true;
    return NULL;
}

void GPT2_FN(pools_free)(tern_gpt2 *m, tern_buf *bases) {
    for (int k = 0; k < POOL_COUNT; k++) {
        tern_error *err = OP(free)(m->dev, &bases[k]);
        tern_error_free(err); /* freeing cannot be retried; nothing more to do */
        bases[k] = tern_none();
    }
}

tern_error *GPT2_FN(linear)(tern_dev *d, tern_buf y, tern_buf x, tern_buf w, tern_buf b,
                            int rows, int in, int out, tern_epilogue epilogue, tern_buf aux) {
    tern_matmul mm = {
        .m = rows, .n = out, .k = in, .alpha = 1.0f, .beta = 0.0f,
        .bias = b, .epilogue = epilogue, .aux = aux,
    };
    return OP(matmul)(d, y, x, w, &mm);
}

tern_error *GPT2_FN(residual_linear)(tern_dev *d, tern_buf y, tern_buf res, tern_buf x, tern_buf w, tern_buf b,
                                     int rows, int in, int out) {
    tern_matmul mm = {
        .m = rows, .n = out, .k = in, .alpha = 1.0f, .beta = 1.0f, .bias = b, .addend = res,
    };
    return OP(matmul)(d, y, x, w, &mm);
}
