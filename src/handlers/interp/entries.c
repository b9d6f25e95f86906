/* The interp handler's entry points, tern_interp_<op>: generated around the GPU core's bodies. */
#include "gpu_core/gpu_core.h"

#define TERN_SEAM_BODY(name) gpu_##name
#include "handlers/seam.h"
