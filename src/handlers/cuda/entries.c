/* The cuda handler's entry points, tern_cuda_<op>: generated around the GPU core's bodies
 * gpu_<op> (src/gpu_core), which call this handler's hooks (cuda_hooks, device.c); each
 * makes the context current and is profiled (TERN_SEAM_CALL, cuda_handler.h). */
#include "cuda_handler.h"

#define TERN_SEAM_BODY(name) gpu_##name
#include "handlers/seam.h"
