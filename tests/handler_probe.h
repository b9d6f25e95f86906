/* For tests that loop over the built-in handlers: whether a handler has a device here. A
 * handler built in without one (no GPU, no driver) is reported as skipped, never counted as
 * passing. */
#ifndef TERN_TESTS_HANDLER_PROBE_H
#define TERN_TESTS_HANDLER_PROBE_H

#include <stdbool.h>
#include <stdio.h>

#include "tern/effect.h"

static inline bool handler_has_device(const tern_ops *ops) {
    tern_dev *probe = NULL;
    tern_error *no_device = ops->open(NULL, &probe);
    if (no_device) {
        printf("%s: skipped, no device: %s\n", ops->handler, tern_error_message(no_device));
        tern_error_free(no_device);
        return false;
    }
    tern_error_free(ops->close(probe));
    return true;
}

#endif
