/* The interpreter's per-kernel precomputation (interp_prepare.c), private to interp_*.c. */
#ifndef TERN_KERNEL_INTERP_PROG_H
#define TERN_KERNEL_INTERP_PROG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct interp_prog {
    int32_t *consts, nconsts;   /* CONST instructions */
    int32_t *threads, nthreads; /* THREAD instructions */
    int32_t *params, nparams;   /* PARAM instructions */
    int32_t max_depth;          /* deepest nesting of blocks */
    bool has_jumps;             /* break, continue or exit appear */
} interp_prog;

#endif
