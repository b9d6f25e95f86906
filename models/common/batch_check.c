/* The token ids a model is handed, checked (batch_check.h). */
#include "batch_check.h"

#include <stddef.h>

tern_error *model_check_batch(int max_seq, int vocab, const int32_t *x, const int32_t *y, int B, int T) {
    if (B <= 0 || T <= 0) return tern_errorf("batch %d x %d: both must be positive", B, T);
    if (T > max_seq) return tern_errorf("sequence length %d exceeds the model's context of %d", T, max_seq);
    if ((size_t)B * (size_t)T > (size_t)1 << 30) return tern_errorf("batch %d x %d is too large", B, T);
    size_t n = (size_t)B * T;
    for (size_t i = 0; i < n; i++) {
        if (x[i] < 0 || x[i] >= vocab)
            return tern_errorf("token %zu is %d, outside the vocabulary of %d", i, x[i], vocab);
        if (y && (y[i] < 0 || y[i] >= vocab))
            return tern_errorf("target %zu is %d, outside the vocabulary of %d", i, y[i], vocab);
    }
    return NULL;
}
