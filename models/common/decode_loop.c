/* Decoding's one-token steps in replayable sections (decode_loop.h). */
#include <stdlib.h>

#include "decode_loop.h"

#define OP(name) TERN_OP(name)

static tern_buf slot(const model_decode_loop *dl, int s) {
    return tern_view(dl->token, (size_t)s * dl->B, (size_t)dl->B);
}

/* A section's k steps. */
typedef struct section_steps {
    const model_decode_loop *dl;
    int k;
} section_steps;

static tern_error *queue_steps(void *ctx) {
    const section_steps *s = ctx;
    const model_decode_loop *dl = s->dl;
    bool in_place = dl->K == 1;
    for (int j = 0; j < s->k; j++) {
        /* K = 1: slot 0 in place; else slot j into slot j + 1, after a fence: step j's
         * attention may then load the cached keys and values step j - 1 wrote before its
         * wait, as the first step of a section does those of the section before it */
        if (j > 0) TERN_TRY(OP(fence)(dl->dev));
        TERN_TRY(dl->step(dl->model, j, slot(dl, in_place ? 0 : j), slot(dl, in_place ? 0 : j + 1)));
    }
    return in_place ? NULL : OP(copy)(dl->dev, slot(dl, 0), slot(dl, s->k));
}

/* Queues a section of k steps at positions p .. p + k - 1 (replayed when the handler holds
 * it: its key names k, everything else inside comes from device buffers). */
static tern_error *queue_section(const model_decode_loop *dl, int p, int k) {
    TERN_TRY(dl->positions(dl->model, p, k));
    uint64_t key = dl->K > 1 ? dl->key ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull) : dl->key;
    section_steps steps = {dl, k};
    return MODEL_FN(section)(dl->dev, key, queue_steps, &steps);
}

tern_error *MODEL_FN(decode_loop)(const model_decode_loop *dl, int p0, int n_new) {
    tern_dev *d = dl->dev;
    int B = dl->B, K = dl->K;
    int32_t *tokens = malloc((size_t)K * B * sizeof *tokens);
    if (!tokens) return tern_errorf("out of memory for %d tokens", K * B);
    /* the prefill's tokens first; then, a section behind, each section's */
    tern_error *err = OP(download_async)(d, tokens, slot(dl, 0));
    int queued = 0, ready = 1; /* steps queued; tokens a step (rows of B) the pending download brings */
    bool stop = false;
    for (int taken = 0; !err && taken < n_new && !stop;) {
        int k = n_new - 1 - queued < K ? n_new - 1 - queued : K;
        if (k > 0 && !(err = queue_section(dl, p0 + queued, k))) queued += k;
        if (err || (err = OP(download_wait)(d))) break;
        for (int i = 0; i < ready && taken < n_new && !stop && !err; i++, taken++)
            err = dl->take(dl->model, tokens + (size_t)i * B, &stop);
        if (err || stop || k <= 0) break;
        /* the section's tokens: slot 0 (K = 1), or slots 1 .. k */
        tern_buf made = K == 1 ? slot(dl, 0) : tern_view(dl->token, (size_t)B, (size_t)k * B);
        err = OP(download_async)(d, tokens, made);
        ready = k;
    }
    tern_error_free(OP(download_wait)(d)); /* tokens is not freed under a pending copy */
    /* a fault of the steps' kernels surfaces here */
    if (!err) err = OP(sync)(d);
    free(tokens);
    return err;
}
