/* The host interpreter: runs any kernel on the CPU, the semantic reference.
 *
 * Each threadgroup runs as one unit, its threads in lockstep over the instruction list
 * with an active-lane list (SIMT with masks): a statement is applied to every active
 * thread before the next, if/else and loops narrow the list, break/continue/exit take
 * threads out. A barrier or SIMD-group operation must see every thread of the group
 * active (threadgroup-uniform control flow), else it is an error. Loads and stores are
 * bounds-checked; integer division by zero is an error. Threadgroups run in parallel
 * (OpenMP); atomics are real atomics. */
#ifndef TERN_KERNEL_INTERP_H
#define TERN_KERNEL_INTERP_H

#include "dsl/eval.h"
#include "dsl/ir.h"

/* Builds k->prog (called by tern_kernel_build). */
tern_error *interp_prepare(tern_kernel *k);
void interp_prog_free(struct interp_prog *p);

/* One argument per kernel parameter: a buffer (base: the element at the view's start,
 * len elements, offset: the view's start in its allocation, for the alignment rule of
 * vector accesses), or a scalar in `scalar`. */
typedef struct interp_arg {
    unsigned char *base;
    size_t len;
    size_t offset;
    ev scalar;
} interp_arg;

/* Runs k. step_limit > 0 stops a launch (with an error) after that many statements per
 * threadgroup, for fuzzing; 0 means no limit. Launch shapes are checked by the caller. */
tern_error *interp_run(const tern_kernel *k, tern_dims grid, tern_dims group,
                       const interp_arg *args, uint64_t step_limit);

#endif
