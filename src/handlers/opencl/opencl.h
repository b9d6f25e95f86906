/* The opencl handler's device: an OpenCL context and in-order queue, the DSL runtime
 * wrapped around them, and the GPU core whose bodies answer every operation (matmul by
 * CLBlast through the core's hook, where CLBlast is built in). Only sources in
 * src/handlers/opencl/ include this. */
#ifndef TERN_HANDLERS_OPENCL_H
#define TERN_HANDLERS_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
_Static_assert(offsetof(struct tern_dev, core) == 0, "the GPU core comes first in the device");

#endif
#include <CL/cl.h>

#include <stddef.h>

#include "gpu_core/gpu_core.h"
#include "handlers/options.h"
#include "handlers/handler.h"

struct tern_dev {
    gpu_core core; /* first: the core reaches the device through it (gpu_core_of) */
    cl_context context;
    cl_device_id device;
    cl_command_queue queue; /* in order: kernels and CLBlast calls run in issue order */
    tern_rt *rt;            /* the DSL runtime over context and queue */
    char name[256];
};

/* CLBlast's matmul, the core's matmul hook (matmul.c); NULL without CLBlast. */
extern const gpu_hooks opencl_hooks;

_Static_assert(offsetof(struct tern_dev, core) == 0, "the GPU core comes first in the device");

#endif
