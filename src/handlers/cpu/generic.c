/* The generic operations: get, length, from_list, and the replayable sections, which the
 * cpu handler answers by always running the operations directly. */
#include "cpu.h"

tern_error *cpu_get(tern_dev *d, tern_buf a, size_t index, double *out) {
    (void)d;
    *out = cpu_get_element(a, index);
    return NULL;
}

tern_error *cpu_length(tern_dev *d, tern_buf a, size_t *out) {
    (void)d;
    *out = a.len;
    return NULL;
}

tern_error *cpu_from_list(tern_dev *d, tern_dtype dtype, const double *values, size_t count,
                               tern_buf *out) {
    tern_buf b;
    TERN_TRY(tern_error_wrap(cpu_alloc(d, dtype, count, &b), "from_list"));
    for (size_t i = 0; i < count; i++) cpu_set_element(b, i, values[i]);
    *out = b;
    return NULL;
}

tern_error *cpu_capture_begin(tern_dev *d, uint64_t key, bool *replay) {
    (void)d, (void)key;
    *replay = false; /* no graphs on cpu: the caller runs the section */
    return NULL;
}

tern_error *cpu_capture_end(tern_dev *d, uint64_t key) {
    (void)d, (void)key;
    return NULL;
}

tern_error *cpu_fence(tern_dev *d) {
    (void)d; /* every operation has finished when it returns */
    return NULL;
}

tern_error *cpu_replay_steps(tern_dev *d, int *out) {
    *out = d->tune.replay_steps; /* 1 unless a test asks for more: nothing is replayed */
    return NULL;
}
