/* Target compiler errors as tern errors naming the kernel and the DSL statement. */
#ifndef TERN_KERNEL_COMPILE_ERROR_H
#define TERN_KERNEL_COMPILE_ERROR_H

#include "dsl/ir.h"

/* An error for a failed compile of k for `target`: the first error in the compiler's log,
 * and the statement (with its C source line) that the log's line number came from, using
 * the emitter's line map (lines[l] = instruction of output line l, nlines lines). */
tern_error *compile_error(const tern_kernel *k, const char *target, const char *log,
                          const int32_t *lines, int32_t nlines);

/* The first "<line>: error: <message>" of a log: the line number (0 if none) and the
 * message (copied into msg). Understands clang's "file:12:5: error: ..." and NVRTC's
 * "file(12): error: ...". */
int compile_log_first_error(const char *log, char *msg, size_t size);

#endif
