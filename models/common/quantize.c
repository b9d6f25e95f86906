/* Weights quantized to q8_0 for decoding (include/tern/effect.h), for every model. The
 * effect's q8_0 matrices are stored [n, k] (rows of the output, whole blocks along the
 * reduction k), as llama.cpp's are; a Hugging Face Conv1D weight is [k, n], so it is
 * transposed here, once, on the host, then quantized by the effect's copy on the device. */
#include <stdlib.h>

#include "handlers/handler.h"
#include "support.h"

#define OP(name) TERN_OP(name)

tern_error *MODEL_FN(quantize_q8)(tern_dev *d, tern_buf src, size_t rows, size_t cols,
                                  bool transpose, tern_buf dst) {
    size_t n = rows * cols;
    if ((transpose ? rows : cols) % TERN_Q8_BLOCK)
        return tern_errorf("q8_0 weights: a matrix's reduction dimension (%zu) is not a multiple of %d",
                           transpose ? rows : cols, TERN_Q8_BLOCK);
    float *host = malloc(n * sizeof(float)), *t = transpose ? malloc(n * sizeof(float)) : NULL;
    tern_buf f32 = tern_none();
    tern_error *err = !host || (transpose && !t) ? tern_errorf("q8_0 weights: out of memory") : NULL;
    if (!err) err = MODEL_FN(read_flat)(d, src, 0, n, host);
    if (!err && transpose) /* src [rows = k, cols = n] into t [n, k] */
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++) t[j * rows + i] = host[i * cols + j];
    if (!err) err = OP(alloc)(d, TERN_F32, n, &f32);
    if (!err) err = OP(upload)(d, f32, transpose ? t : host);
    if (!err) err = OP(copy)(d, dst, f32);
    tern_error_free(OP(free)(d, &f32));
    free(host);
    free(t);
    return err;
}
