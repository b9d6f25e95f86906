/* Shared by the examples: a tiny random generator and error reporting. */
#ifndef TERN_EXAMPLE_UTIL_H
#define TERN_EXAMPLE_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "tern/kernel.h"

/* Uniform floats in [lo, hi) from a 64-bit xorshift state. */
static inline float example_uniform(uint64_t *s, float lo, float hi) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return lo + (hi - lo) * (float)(*s >> 40) * (1.0f / 16777216.0f);
}

/* Prints "<what> failed: <message>", frees err and returns 1 (the exit status). */
static inline int example_fail(const char *what, tern_error *err) {
    printf("%s failed: %s\n", what, tern_error_message(err));
    tern_error_free(err);
    return 1;
}

#endif
