/* The products every pass uses: HF Linear (x W^T + b), a residual update; and generation's
 * norm with the MLP's gate | up product and its SwiGLU, and with the q | k | v product and
 * its rotation. */
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

tern_error *LLAMA_FN(norm_linear_swiglu)(tern_dev *d, tern_buf y, tern_buf x, tern_buf nw, float eps, tern_buf w,
                                         tern_buf b, int rows, int in, int I) {
    tern_matmul mm = {.m = rows, .n = 2 * I, .k = in, .trans_b = true, .alpha = 1, .beta = 0, .bias = b,
                      .epilogue = TERN_EPILOGUE_SWIGLU, .prologue = TERN_PROLOGUE_RMSNORM,
                      .norm = {nw, tern_none(), eps}};
    return OP(matmul)(d, y, x, w, &mm);
}

tern_error *LLAMA_FN(norm_linear_rope)(tern_dev *d, tern_buf y, tern_buf x, tern_buf nw, float eps, tern_buf w,
                                       tern_buf b, int rows, int in, int out, tern_buf pos, tern_buf inv_freq,
                                       int heads, int head_dim) {
    tern_matmul mm = {.m = rows, .n = out, .k = in, .trans_b = true, .alpha = 1, .beta = 0, .bias = b,
                      .epilogue = TERN_EPILOGUE_ROPE, .rope = {pos, inv_freq, heads, head_dim},
                      .prologue = TERN_PROLOGUE_RMSNORM, .norm = {nw, tern_none(), eps}};
    return OP(matmul)(d, y, x, w, &mm);
}
