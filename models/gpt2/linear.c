/* The products every pass uses: a layer (x W + b, then an epilogue) and a residual update. */
#include "instance.h"

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
