/* The opencl runtime (TERN_GPU=opencl): the driver compiles the emitted OpenCL C (PoCL
 * on a CPU, NVIDIA's OpenCL on a GPU). Programs are cached in memory by source; drivers
 * keep their own binary caches on disk (PoCL's kcache, NVIDIA's ComputeCache). */
#include "dsl/runtime.h"

#ifdef TERN_HAVE_OPENCL

#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/compile_error.h"
#include "dsl/emit.h"
#include "dsl/hash.h"

typedef struct cl_entry {
    /* the kernel object last served and its content hash: a launch of the same object skips
     * emitting the source again (the hash guards against address reuse after a free) */
    const tern_kernel *owner;
    uint64_t owner_hash;
    uint64_t key;
    char *source;
    cl_program program;
    cl_kernel kernel;
} cl_entry;

typedef struct cl_rt {
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
    cl_ulong local_mem;
    pthread_mutex_t lock; /* cache and kernel arguments */
    cl_entry *entries;
    int nentries, cap;
} cl_rt;

const char *tern_cl_error_name(cl_int code);

static tern_error *cl_fail(cl_int code, const char *what) {
    return tern_errorf("opencl runtime: %s failed: %s (%d)", what, tern_cl_error_name(code), (int)code);
}

static void cl_close(tern_rt *rt) {
    cl_rt *c = rt->impl;
    if (!c) return;
    for (int i = 0; i < c->nentries; i++) {
        clReleaseKernel(c->entries[i].kernel);
        clReleaseProgram(c->entries[i].program);
        free(c->entries[i].source);
    }
    free(c->entries);
    if (c->queue) clReleaseCommandQueue(c->queue);
    if (c->context) clReleaseContext(c->context);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static tern_error *cl_alloc(tern_rt *rt, size_t bytes, void **mem) {
    cl_rt *c = rt->impl;
    cl_int code;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes, NULL, &code);
    if (!m) return tern_error_wrap(cl_fail(code, "clCreateBuffer"), "alloc of %zu bytes", bytes);
    *mem = m;
    return NULL;
}

static void cl_free(tern_rt *rt, void *mem) {
    (void)rt;
    clReleaseMemObject((cl_mem)mem);
}

static tern_error *cl_upload(tern_rt *rt, void *mem, size_t offset, const void *src, size_t bytes) {
    cl_rt *c = rt->impl;
    cl_int code = clEnqueueWriteBuffer(c->queue, (cl_mem)mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL);
    return code == CL_SUCCESS ? NULL : cl_fail(code, "upload (clEnqueueWriteBuffer)");
}

static tern_error *cl_download(tern_rt *rt, void *dst, void *mem, size_t offset, size_t bytes) {
    cl_rt *c = rt->impl;
    cl_int code = clEnqueueReadBuffer(c->queue, (cl_mem)mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL);
    return code == CL_SUCCESS ? NULL : cl_fail(code, "download (clEnqueueReadBuffer)");
}

static tern_error *cl_sync(tern_rt *rt) {
    cl_rt *c = rt->impl;
    cl_int code = clFinish(c->queue);
    return code == CL_SUCCESS ? NULL : cl_fail(code, "sync (clFinish)");
}

/* The compiled kernel for k, compiling on first use. Called with c->lock held. */
static tern_error *cl_get(cl_rt *c, const tern_kernel *k, cl_kernel *out) {
    for (int i = 0; i < c->nentries; i++) {
        if (c->entries[i].owner == k && c->entries[i].owner_hash == k->hash) {
            *out = c->entries[i].kernel;
            return NULL;
        }
    }
    char *src = NULL;
    int32_t *lines = NULL, nlines = 0;
    TERN_TRY(emit_source(k, &emit_opencl_dialect, &src, &lines, &nlines));
    uint64_t key = hash_finish(hash_str(HASH_SEED, src));
    for (int i = 0; i < c->nentries; i++)
        if (c->entries[i].key == key && !strcmp(c->entries[i].source, src)) {
            c->entries[i].owner = k;
            c->entries[i].owner_hash = k->hash;
            *out = c->entries[i].kernel;
            free(src);
            free(lines);
            return NULL;
        }
    tern_error *err = NULL;
    cl_int code;
    const char *srcs[1] = {src};
    cl_program prog = clCreateProgramWithSource(c->context, 1, srcs, NULL, &code);
    cl_kernel kern = NULL;
    if (!prog) {
        err = cl_fail(code, "clCreateProgramWithSource");
    } else if ((code = clBuildProgram(prog, 1, &c->device, "-cl-std=CL1.2", NULL, NULL)) != CL_SUCCESS) {
        size_t size = 0;
        clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size);
        char *log = malloc(size + 1);
        if (log) {
            log[0] = '\0';
            clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, size, log, NULL);
            log[size] = '\0';
        }
        err = compile_error(k, "opencl", log ? log : "", lines, nlines);
        free(log);
    } else if (!(kern = clCreateKernel(prog, k->name, &code))) {
        err = tern_error_wrap(cl_fail(code, "clCreateKernel"), "kernel '%s'", k->name);
    }
    free(lines);
    if (!err && c->nentries == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        cl_entry *e = realloc(c->entries, (size_t)cap * sizeof *e);
        if (!e) err = tern_errorf("kernel '%s': out of memory", k->name);
        else {
            c->entries = e;
            c->cap = cap;
        }
    }
    if (err) {
        if (kern) clReleaseKernel(kern);
        if (prog) clReleaseProgram(prog);
        free(src);
        return err;
    }
    cl_entry e = {k, k->hash, key, src, prog, kern};
    c->entries[c->nentries++] = e;
    *out = kern;
    return NULL;
}

static tern_error *cl_prepare(tern_rt *rt, const tern_kernel *k) {
    cl_rt *c = rt->impl;
    cl_kernel kern;
    pthread_mutex_lock(&c->lock);
    tern_error *err = cl_get(c, k, &kern);
    pthread_mutex_unlock(&c->lock);
    return err;
}

static tern_error *set_arg(cl_kernel kern, cl_uint index, size_t size, const void *value,
                           const tern_kernel *k, int32_t param) {
    cl_int code = clSetKernelArg(kern, index, size, value);
    if (code == CL_SUCCESS) return NULL;
    return tern_errorf("kernel '%s': setting argument %d ('%s') failed: %s", k->name, (int)param + 1,
                       param >= 0 ? ir_string(k, k->params[param].name) : "tern_simd_scratch",
                       tern_cl_error_name(code));
}

static tern_error *cl_launch(tern_rt *rt, const tern_kernel *k, tern_dims grid, tern_dims group,
                             const tern_arg *args) {
    cl_rt *c = rt->impl;
    size_t threads = (size_t)group.x * group.y * group.z;
    size_t scratch = (k->uses & IR_USES_SIMD) ? threads * 8 : 0;
    if (k->shared_bytes + scratch > c->local_mem)
        return tern_errorf("kernel '%s' needs %zu bytes of threadgroup memory; %s has %llu", k->name,
                           k->shared_bytes + scratch, rt->device, (unsigned long long)c->local_mem);
    pthread_mutex_lock(&c->lock);
    cl_kernel kern;
    tern_error *err = cl_get(c, k, &kern);
    cl_uint index = 0;
    for (int32_t p = 0; p < k->nparams && !err; p++) {
        const tern_arg *a = &args[p];
        if (k->params[p].is_buf) {
            cl_mem m = (cl_mem)a->mem;
            cl_ulong off = a->offset;
            err = set_arg(kern, index++, sizeof m, &m, k, p);
            if (!err) err = set_arg(kern, index++, sizeof off, &off, k, p);
            continue;
        }
        switch (a->type) {
        case TERN_T_I32:
        case TERN_T_U32: {
            cl_uint v = (cl_uint)a->value.u;
            err = set_arg(kern, index++, sizeof v, &v, k, p);
            break;
        }
        case TERN_T_F32: {
            cl_float v = (cl_float)a->value.f;
            err = set_arg(kern, index++, sizeof v, &v, k, p);
            break;
        }
        default: {
            cl_ulong v = a->value.u;
            err = set_arg(kern, index++, sizeof v, &v, k, p);
            break;
        }
        }
    }
    if (!err && scratch) err = set_arg(kern, index++, scratch, NULL, k, -1);
    if (!err) {
        size_t local[3] = {group.x, group.y, group.z};
        size_t global[3] = {(size_t)grid.x * group.x, (size_t)grid.y * group.y, (size_t)grid.z * group.z};
        cl_int code = clEnqueueNDRangeKernel(c->queue, kern, 3, NULL, global, local, 0, NULL, NULL);
        if (code != CL_SUCCESS)
            err = tern_errorf("kernel '%s': launch of (%u,%u,%u) x (%u,%u,%u) failed: %s", k->name,
                              grid.x, grid.y, grid.z, group.x, group.y, group.z, tern_cl_error_name(code));
    }
    pthread_mutex_unlock(&c->lock);
    return err;
}

static const rt_ops cl_ops = {
    .name = "opencl",
    .host_memory = false,
    .close = cl_close,
    .alloc = cl_alloc,
    .free = cl_free,
    .upload = cl_upload,
    .download = cl_download,
    .sync = cl_sync,
    .prepare = cl_prepare,
    .launch = cl_launch,
    .set_stream = NULL,
};

/* Fills the device facts and wraps c in a tern_rt. */
static tern_error *cl_finish(cl_rt *c, tern_rt **out) {
    clGetDeviceInfo(c->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof c->local_mem, &c->local_mem, NULL);
    tern_rt *rt = rt_new(&cl_ops, c);
    if (!rt) {
        tern_rt tmp = {.impl = c};
        cl_close(&tmp);
        return tern_errorf("opencl runtime: out of memory");
    }
    char name[128] = "";
    clGetDeviceInfo(c->device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    snprintf(rt->device, sizeof rt->device, "%s", name);
    *out = rt;
    return NULL;
}

/* The device TERN_OPENCL_DEVICE names (an index over all platforms' devices, or a part of
 * a device name), else the first GPU, else the first device. */
static tern_error *pick_device(cl_device_id *out) {
    cl_uint np = 0;
    cl_int code = clGetPlatformIDs(0, NULL, &np);
    if (code != CL_SUCCESS || np == 0)
        return tern_errorf("opencl runtime: no OpenCL platform (is an ICD installed? %s)",
                           code == CL_SUCCESS ? "none found" : tern_cl_error_name(code));
    cl_platform_id plats[16];
    if (np > 16) np = 16;
    clGetPlatformIDs(np, plats, NULL);
    cl_device_id all[64];
    cl_uint n = 0;
    for (cl_uint p = 0; p < np && n < 64; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64 - n, all + n, &nd) == CL_SUCCESS) n += nd;
    }
    if (n == 0) return tern_errorf("opencl runtime: no OpenCL device");
    const char *want = getenv("TERN_OPENCL_DEVICE");
    if (want && *want) {
        char *end;
        long index = strtol(want, &end, 10);
        if (!*end) {
            if (index < 0 || index >= (long)n)
                return tern_errorf("opencl runtime: TERN_OPENCL_DEVICE=%s: there are %u devices", want, n);
            *out = all[index];
            return NULL;
        }
        for (cl_uint d = 0; d < n; d++) {
            char name[128] = "";
            clGetDeviceInfo(all[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
            if (strstr(name, want)) {
                *out = all[d];
                return NULL;
            }
        }
        return tern_errorf("opencl runtime: TERN_OPENCL_DEVICE=%s matches no device", want);
    }
    for (cl_uint d = 0; d < n; d++) {
        cl_device_type type = 0;
        clGetDeviceInfo(all[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
        if (type & CL_DEVICE_TYPE_GPU) {
            *out = all[d];
            return NULL;
        }
    }
    *out = all[0];
    return NULL;
}

tern_error *rt_open_opencl(tern_rt **out) {
    cl_rt *c = calloc(1, sizeof *c);
    if (!c) return tern_errorf("opencl runtime: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    tern_error *err = pick_device(&c->device);
    cl_int code = CL_SUCCESS;
    if (!err) {
        c->context = clCreateContext(NULL, 1, &c->device, NULL, NULL, &code);
        if (!c->context) err = cl_fail(code, "clCreateContext");
    }
    if (!err) {
        c->queue = clCreateCommandQueue(c->context, c->device, 0, &code);
        if (!c->queue) err = cl_fail(code, "clCreateCommandQueue");
    }
    if (err) {
        tern_rt tmp = {.impl = c};
        cl_close(&tmp);
        return err;
    }
    return cl_finish(c, out);
}

tern_error *rt_wrap_opencl(void *context, void *device, void *queue, tern_rt **out) {
    cl_rt *c = calloc(1, sizeof *c);
    if (!c) return tern_errorf("opencl runtime: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->context = (cl_context)context;
    c->device = (cl_device_id)device;
    c->queue = (cl_command_queue)queue;
    /* our references; the caller keeps its own */
    clRetainContext(c->context);
    clRetainCommandQueue(c->queue);
    return cl_finish(c, out);
}

#else /* no OpenCL at build time */

tern_error *rt_open_opencl(tern_rt **out) {
    (void)out;
    return tern_errorf("opencl runtime: not built in (OpenCL was not found when tern was built)");
}

tern_error *rt_wrap_opencl(void *context, void *device, void *queue, tern_rt **out) {
    (void)context, (void)device, (void)queue, (void)out;
    return tern_errorf("opencl runtime: not built in (OpenCL was not found when tern was built)");
}

#endif
