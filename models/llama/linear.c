/* The products every pass uses: HF Linear (x W^T + b), a residual update, and the MLP's
 * down projection over swiglu of the gate | up product. */
#include "instance.h"

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

tern_error *LLAMA_FN(swiglu_down)(tern_dev *d, tern_buf y, tern_buf res, tern_buf gu, tern_buf w, tern_buf b,
                                  int rows, int I, int out) {
    tern_matmul mm = {.m = rows, .n = out, .k = I, .trans_b = true, .alpha = 1, .beta = 1, .bias = b,
                      .addend = res, .prologue = TERN_PROLOGUE_SWIGLU};
    return OP(matmul)(d, y, gu, w, &mm);
}
