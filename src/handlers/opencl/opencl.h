/* The opencl handler's device: an OpenCL context and in-order queue, the DSL runtime
 * wrapped around them, the GPU core that answers every operation but matmul, and the
 * state of matmul (CLBlast). Only sources in src/handlers/opencl/ include this. */
#ifndef TERN_HANDLERS_OPENCL_H
#define TERN_HANDLERS_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "gpu_core/gpu_core.h"
#include "handlers/handler.h"

struct tern_dev {
    cl_context context;
    cl_device_id device;
    cl_command_queue queue; /* in order: kernels and CLBlast calls run in issue order */
    tern_rt *rt;            /* the DSL runtime over context and queue */
    gpu_core core;
    char name[256];
};

/* Returns an error from operation `op` when the device pointer is NULL. */
#define CL_CHECK_DEV(d, op)                                                    \
    do {                                                                       \
        if (!(d)) return tern_errorf("%s: the device is NULL", (op));          \
    } while (0)

#endif
