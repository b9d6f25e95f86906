/* The opencl device: picks a device (the device option, from TERN_OPENCL_TUNE or open's
 * options: an index over every platform's devices, or part of a device name; else the first
 * GPU, else the first device), creates a context and an in-order queue, and wraps them in a
 * DSL runtime for the GPU core. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl.h"

#define MAX_DEVICES 64

/* Every device of every platform, in platform order. */
static tern_error *list_devices(cl_device_id *devs, cl_uint *count) {
    cl_uint np = 0;
    cl_int code = clGetPlatformIDs(0, NULL, &np);
    if (code != CL_SUCCESS || np == 0)
        return tern_errorf("open: no OpenCL platform (is an ICD such as PoCL installed?)");
    cl_platform_id plats[16];
    if (np > 16) np = 16;
    if (clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) return tern_errorf("open: cannot list OpenCL platforms");
    cl_uint n = 0;
    for (cl_uint p = 0; p < np && n < MAX_DEVICES; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES - n, devs + n, &nd) == CL_SUCCESS) n += nd;
    }
    if (n == 0) return tern_errorf("open: the OpenCL platforms have no device");
    *count = n;
    return NULL;
}

static void device_name(cl_device_id dev, char *out, size_t cap) {
    out[0] = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_NAME, cap - 1, out, NULL) != CL_SUCCESS) snprintf(out, cap, "OpenCL device");
    out[cap - 1] = 0;
}

static tern_error *pick_device(const char *want, cl_device_id *out) {
    cl_device_id devs[MAX_DEVICES];
    cl_uint n = 0;
    TERN_TRY(list_devices(devs, &n));
    if (*want) {
        char *end;
        long index = strtol(want, &end, 10);
        if (*end == 0) {
            if (index < 0 || index >= (long)n)
                return tern_errorf("open: device=%s: there are %u OpenCL devices (0 .. %u)", want, n, n - 1);
            *out = devs[index];
            return NULL;
        }
        for (cl_uint i = 0; i < n; i++) {
            char name[256];
            device_name(devs[i], name, sizeof name);
            if (strstr(name, want)) {
                *out = devs[i];
                return NULL;
            }
        }
        return tern_errorf("open: device=%s matches no OpenCL device's name", want);
    }
    for (cl_uint i = 0; i < n; i++) {
        cl_device_type type = 0;
        clGetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof type, &type, NULL);
        if (type & CL_DEVICE_TYPE_GPU) {
            *out = devs[i];
            return NULL;
        }
    }
    *out = devs[0];
    return NULL;
}

tern_error *TERN_OP(close)(tern_dev *d) {
    if (!d) return NULL;
    tern_error *err = NULL;
    if (d->queue) {
        cl_int code = clFinish(d->queue);
        if (code != CL_SUCCESS) err = tern_errorf("close: waiting for the queue failed (%d)", (int)code);
    }
    gpu_core_free(&d->core);
    if (d->rt) tern_rt_close(d->rt);
    if (d->queue) clReleaseCommandQueue(d->queue);
    if (d->context) clReleaseContext(d->context);
    free(d);
    return err;
}

/* The opencl handler's own option; the GPU core's (gpu_tune_keys) come with it. */
typedef struct opencl_tune {
    char device[TERN_OPTION_TEXT_MAX]; /* device: an index or part of a name ("": the default) */
} opencl_tune;

static const tern_option tune_keys[] = {
    {"device", TERN_OPTION_TEXT, offsetof(opencl_tune, device), 0, 0},
};

tern_error *TERN_OP(open)(const char *options, tern_dev **out) {
    if (!out) return tern_errorf("open: out is NULL");
    *out = NULL;
    opencl_tune tune = {""};
    gpu_tune core_tune = gpu_tune_defaults();
    /* PoCL builds a work-group function per local size (1-1.3 s each): the row norms keep
     * one, their idle SIMD groups for fewer rows costing little on a CPU (docs/PERFORMANCE.md,
     * make test's time) */
    core_tune.ln_fit_group = false;
    /* no kernel launches early on OpenCL, so the early rows have no neighbour to fit beside,
     * and a GPU's local memory may be 32-64 KiB: they stay in registers */
    core_tune.gemv_smem = false;
    const tern_option_set sets[] = {{tune_keys, 1, &tune}, {gpu_tune_keys, gpu_tune_key_count, &core_tune}};
    TERN_TRY(tern_options_apply("opencl", "TERN_OPENCL_TUNE", options, sets, 2));
    tern_dev *d = calloc(1, sizeof *d);
    if (!d) return tern_errorf("open: out of memory");
    tern_error *err = pick_device(tune.device, &d->device);
    cl_int code = CL_SUCCESS;
    if (!err) {
        device_name(d->device, d->name, sizeof d->name);
        d->context = clCreateContext(NULL, 1, &d->device, NULL, NULL, &code);
        if (code != CL_SUCCESS) err = tern_errorf("open: cannot create an OpenCL context on %s (%d)", d->name, (int)code);
    }
    if (!err) {
        d->queue = clCreateCommandQueue(d->context, d->device, 0, &code);
        if (code != CL_SUCCESS) err = tern_errorf("open: cannot create an OpenCL queue on %s (%d)", d->name, (int)code);
    }
    if (!err) err = tern_rt_wrap_opencl(d->context, d->device, d->queue, &d->rt);
    if (!err) err = gpu_core_init(&d->core, d->rt, &opencl_hooks, d->name, &core_tune);
    if (err) {
        tern_error_free(TERN_OP(close)(d));
        return tern_error_wrap(err, "opencl");
    }
    *out = d;
    return NULL;
}

/* Every OpenCL device found, one "index: name" line each (the index the device option
 * takes), for `tern info`. */
tern_error *tern_opencl_list_devices(char *out, size_t cap) {
    cl_device_id devs[MAX_DEVICES];
    cl_uint n = 0;
    if (cap) out[0] = 0;
    TERN_TRY(list_devices(devs, &n));
    size_t used = 0;
    for (cl_uint i = 0; i < n && used < cap; i++) {
        char name[256];
        device_name(devs[i], name, sizeof name);
        int w = snprintf(out + used, cap - used, "%u: %s\n", i, name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return NULL;
}
