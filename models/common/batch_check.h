/* The token ids a model is handed (prompts, data files) checked once, before any handler
 * sees them: the same rules and messages for every model. */
#ifndef TERN_MODELS_COMMON_BATCH_CHECK_H
#define TERN_MODELS_COMMON_BATCH_CHECK_H

#include <stdint.h>

#include "tern/error.h"

/* x [B, T] token ids and y [B, T] targets (absent: NULL), each in [0, vocab); B and T
 * positive, T within the context max_seq, B T at most 2^30. */
tern_error *model_check_batch(int max_seq, int vocab, const int32_t *x, const int32_t *y, int B, int T);

#endif
