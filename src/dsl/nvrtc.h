/* NVRTC: emitted CUDA C to a cubin for one architecture. Needs no GPU or driver. */
#ifndef TERN_KERNEL_NVRTC_H
#define TERN_KERNEL_NVRTC_H

#include "dsl/ir.h"

/* Compiles src (k's CUDA source, with its line map for error messages) for `arch`
 * ("sm_90"), capping registers per thread at maxrreg when it is > 0: *image is the cubin
 * (malloc'd), *size its bytes. */
tern_error *nvrtc_compile_source(const tern_kernel *k, const char *src, const int32_t *lines,
                                 int32_t nlines, const char *arch, int maxrreg, void **image,
                                 size_t *size);

/* "nvrtc 13.0", for cache keys and messages. */
const char *nvrtc_version_string(void);

#endif
