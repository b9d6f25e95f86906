/* The generic operations: get, length, from_list, and the replayable sections, which the
 * cpu handler answers by always running the operations directly. */
#include "cpu.h"

tern_error *TERN_OP(get)(tern_dev *d, tern_buf a, size_t index, double *out) {
    CPU_CHECK_DEV(d, "get");
    TERN_TRY(tern_validate_get(a, index, out));
    *out = cpu_get_element(a, index);
    return NULL;
}

tern_error *TERN_OP(length)(tern_dev *d, tern_buf a, size_t *out) {
    CPU_CHECK_DEV(d, "length");
    TERN_TRY(tern_validate_length(a, out));
    *out = a.len;
    return NULL;
}

tern_error *TERN_OP(from_list)(tern_dev *d, tern_dtype dtype, const double *values, size_t count,
                               tern_buf *out) {
    CPU_CHECK_DEV(d, "from_list");
    TERN_TRY(tern_validate_from_list(dtype, values, count, out));
    tern_buf b;
    TERN_TRY(tern_error_wrap(TERN_OP(alloc)(d, dtype, count, &b), "from_list"));
    for (size_t i = 0; i < count; i++) cpu_set_element(b, i, values[i]);
    *out = b;
    return NULL;
}

tern_error *TERN_OP(capture_begin)(tern_dev *d, uint64_t key, bool *replay) {
    (void)key;
    CPU_CHECK_DEV(d, "capture_begin");
    if (!replay) return tern_errorf("capture_begin: replay is NULL");
    *replay = false; /* no graphs on cpu: the caller runs the section */
    return NULL;
}

tern_error *TERN_OP(capture_end)(tern_dev *d, uint64_t key) {
    (void)key;
    CPU_CHECK_DEV(d, "capture_end");
    return NULL;
}
