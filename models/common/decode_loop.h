/* Decoding's one-token steps, shared by the models (compiled once per handler, like
 * support.h): each step feeds the tokens sampled last back at the next position. Steps are
 * queued in replayable sections of up to K steps (the handler's replay_steps: 1 on cpu), and
 * the host stays a section behind: the section that makes the next tokens is queued before
 * the host waits for the last ones, so the device never waits for the host between sections.
 *
 * The tokens live in slots of B (model_token_slots): with K = 1 a step reads and samples
 * into slot 0, as one step a section always did; with K > 1 step j of a section reads slot j
 * and samples into slot j + 1, the section ends by copying its last slot to slot 0 (the next
 * section's input), and one download a section brings its slots 1 .. k to the host. */
#ifndef TERN_MODELS_COMMON_DECODE_LOOP_H
#define TERN_MODELS_COMMON_DECODE_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "support.h"

/* Slots of B tokens the loop needs for K steps a section. */
static inline int model_token_slots(int K) { return K > 1 ? K + 1 : 1; }

typedef struct model_decode_loop {
    tern_dev *dev;
    int B;         /* sequences */
    int K;         /* steps a section at most (>= 1) */
    tern_buf token; /* [model_token_slots(K), B] i32; slot 0 holds the prefill's tokens */
    uint64_t key;  /* identifies the step (the sampling and the buffers; not positions) */
    void *model;
    /* uploads the positions of k steps, the first at position p (every sequence at p + j in
     * step j: the device buffer those steps read) */
    tern_error *(*positions)(void *model, int p, int k);
    /* queues step j of a section: tokens [B] from `in` at the positions of step j, and the
     * tokens sampled after them into `out` (which may be `in`) */
    tern_error *(*step)(void *model, int j, tern_buf in, tern_buf out);
    /* one step's tokens [B] for the caller; *stop (false on entry) ends the loop */
    tern_error *(*take)(void *model, const int32_t *tokens, bool *stop);
} model_decode_loop;

/* The n_new tokens of each sequence, the first already in slot 0 (the prefill's), the steps
 * at positions p0, p0 + 1, ... (the last token is sampled, never fed back). Ends with the
 * device idle: a fault of the steps' kernels is returned here. */
tern_error *MODEL_FN(decode_loop)(const model_decode_loop *dl, int p0, int n_new);

#endif
