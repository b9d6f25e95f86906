/* The DSL test zoo: one kernel per feature, each with a runner that launches it on a
 * runtime with fresh random inputs and poisoned outputs and checks the result against
 * plain C. test_kernel_ops runs every case on the runtime TERN_GPU names; the compile
 * tests emit every case for NVRTC and the Metal syntax check. */
#ifndef TERN_TESTS_KERNEL_ZOO_H
#define TERN_TESTS_KERNEL_ZOO_H

#include <stdint.h>

#include "tern/kernel.h"

typedef struct zoo_rng {
    uint64_t s;
} zoo_rng;

typedef struct zoo_case {
    const char *name;
    tern_trace_fn trace;
    void *user;
    /* Launches k on rt and compares with plain C; returns the number of mismatches (and
     * prints the first few), or -1 with a message when a call failed. */
    int (*run)(tern_rt *rt, const tern_kernel *k, zoo_rng *r);
} zoo_case;

extern const zoo_case zoo_cases[];
extern const int zoo_count;

#endif
