/* The opencl handler's entry points, tern_opencl_<op>: generated around the GPU core's
 * bodies gpu_<op> (src/gpu_core), which call this handler's hooks (matmul.c). */
#include "opencl.h"

#define TERN_SEAM_BODY(name) gpu_##name
#include "handlers/seam.h"
