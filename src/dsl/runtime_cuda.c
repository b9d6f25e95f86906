/* The cuda runtime (TERN_GPU=cuda): NVRTC compiles the emitted CUDA C for the device's
 * architecture, the driver API (loaded at run time, cuda_api.c) loads and launches it.
 * Cubins are cached in memory by source and on disk (disk_cache.c) by source, arch and
 * NVRTC version. Every call makes the runtime's context current and restores the
 * caller's, so a runtime may wrap a context that other code also uses. Kernels with
 * tern_wait_previous launch with programmatic dependent launch on sm_90+ (TERN_CUDA_PDL=0:
 * plainly). */
#include "dsl/runtime.h"

#ifdef TERN_HAVE_CUDA

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/cuda_api.h"
#include "dsl/disk_cache.h"
#include "dsl/emit.h"
#include "dsl/emit_cuda.h"
#include "dsl/hash.h"
#include "dsl/nvrtc.h"

typedef struct cu_entry {
    /* the kernel object last served, and its content hash: a launch of the same object
     * finds its module without emitting the source again (the hash guards against a freed
     * kernel's address being reused by another) */
    const tern_kernel *kernel;
    uint64_t kernel_hash;
    uint64_t key;
    char *source;
    int maxrreg;        /* the register cap it was compiled with, 0: none */
    CUmodule module;
    CUfunction fn;
    int max_threads;    /* the most threads per block it can launch with */
    int dynamic_shared; /* bytes the function was opened up to, 0: static only */
} cu_entry;

typedef struct cu_rt {
    const tern_cuda_api *cu;
    CUcontext ctx;
    CUdevice dev;
    CUstream stream;
    bool owned; /* we retained the primary context and made the stream */
    char arch[16];
    int shared_optin; /* most shared memory per block, opted in */
    bool pdl;         /* kernels with tern_wait_previous launch overlapping the previous one */
    bool fence;       /* tern_rt_fence: the next kernel launches plainly, after all before it */
    pthread_mutex_t lock;
    cu_entry *entries;
    int nentries, cap;
    char last_kernel[64];
    /* cu_download_async: page-locked staging (grown, never shrunk), the event after the
     * copy into it, and where download_wait puts the bytes */
    void *staging;
    size_t staging_size;
    CUevent staged;
    void *pending_dst;
    size_t pending_bytes;
} cu_rt;

#define CHECK(c, call, what) tern_cuda_check((c)->cu, (c)->cu->call, what)

static tern_error *enter(cu_rt *c) { return CHECK(c, cuCtxPushCurrent(c->ctx), "cuda runtime: cuCtxPushCurrent"); }

static void leave(cu_rt *c) {
    CUcontext popped;
    c->cu->cuCtxPopCurrent(&popped);
}

static void cu_close(tern_rt *rt) {
    cu_rt *c = rt->impl;
    if (!c) return;
    if (c->cu && c->ctx && !enter(c)) {
        for (int i = 0; i < c->nentries; i++) c->cu->cuModuleUnload(c->entries[i].module);
        if (c->staging) c->cu->cuStreamSynchronize(c->stream); /* a download never waited for */
        if (c->staged) c->cu->cuEventDestroy(c->staged);
        if (c->staging) c->cu->cuMemFreeHost(c->staging);
        if (c->owned && c->stream) c->cu->cuStreamDestroy(c->stream);
        leave(c);
    }
    for (int i = 0; i < c->nentries; i++) free(c->entries[i].source);
    free(c->entries);
    if (c->owned && c->ctx) c->cu->cuDevicePrimaryCtxRelease(c->dev);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static tern_error *cu_alloc(tern_rt *rt, size_t bytes, void **mem) {
    cu_rt *c = rt->impl;
    TERN_TRY(enter(c));
    CUdeviceptr p = 0;
    tern_error *err = CHECK(c, cuMemAlloc(&p, bytes), "cuda runtime: cuMemAlloc");
    leave(c);
    if (err) return tern_error_wrap(err, "alloc of %zu bytes", bytes);
    *mem = (void *)(uintptr_t)p;
    return NULL;
}

static void cu_free(tern_rt *rt, void *mem) {
    cu_rt *c = rt->impl;
    if (enter(c)) return;
    c->cu->cuMemFree((CUdeviceptr)(uintptr_t)mem);
    leave(c);
}

/* Names the last kernel in an error that surfaced asynchronously. */
static tern_error *async_error(cu_rt *c, tern_error *err) {
    if (err && c->last_kernel[0])
        return tern_error_wrap(err, "after kernel '%s'", c->last_kernel);
    return err;
}

static tern_error *cu_upload(tern_rt *rt, void *mem, size_t offset, const void *src, size_t bytes) {
    cu_rt *c = rt->impl;
    TERN_TRY(enter(c));
    /* No wait: from pageable memory the driver stages src before this returns, and the
     * stream runs the copy after the work queued before it and before any queued after, so
     * the host can go on queueing (decoding's position before the next step). An earlier
     * fault surfaces here or at the next synchronising call. */
    tern_error *err = async_error(
        c, CHECK(c, cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)mem + offset, src, bytes, c->stream), "cuda runtime: upload"));
    leave(c);
    return err;
}

static tern_error *cu_download(tern_rt *rt, void *dst, void *mem, size_t offset, size_t bytes) {
    cu_rt *c = rt->impl;
    TERN_TRY(enter(c));
    tern_error *err = CHECK(c, cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)mem + offset, bytes, c->stream),
                            "cuda runtime: download");
    if (!err) err = async_error(c, CHECK(c, cuStreamSynchronize(c->stream), "cuda runtime: download"));
    leave(c);
    return err;
}

/* Into page-locked staging (a copy to pageable memory would wait for the stream), an event
 * after it; cu_download_wait waits for that event only and copies the bytes out. */
static tern_error *cu_download_async(tern_rt *rt, void *dst, void *mem, size_t offset, size_t bytes) {
    cu_rt *c = rt->impl;
    TERN_TRY(enter(c));
    tern_error *err = NULL;
    if (!c->staged) err = CHECK(c, cuEventCreate(&c->staged, CU_EVENT_DISABLE_TIMING), "cuda runtime: cuEventCreate");
    if (!err && c->staging_size < bytes) {
        if (c->staging) c->cu->cuMemFreeHost(c->staging);
        c->staging = NULL, c->staging_size = 0;
        err = CHECK(c, cuMemAllocHost(&c->staging, bytes), "cuda runtime: cuMemAllocHost");
        if (!err) c->staging_size = bytes;
    }
    if (!err)
        err = CHECK(c, cuMemcpyDtoHAsync(c->staging, (CUdeviceptr)(uintptr_t)mem + offset, bytes, c->stream),
                    "cuda runtime: download_async");
    if (!err) err = CHECK(c, cuEventRecord(c->staged, c->stream), "cuda runtime: cuEventRecord");
    leave(c);
    if (err) return async_error(c, err);
    c->pending_dst = dst, c->pending_bytes = bytes;
    return NULL;
}

static tern_error *cu_download_wait(tern_rt *rt) {
    cu_rt *c = rt->impl;
    if (!c->pending_dst) return NULL; /* the pending download had nothing to copy */
    TERN_TRY(enter(c));
    tern_error *err = async_error(c, CHECK(c, cuEventSynchronize(c->staged), "cuda runtime: download_wait"));
    leave(c);
    if (!err) memcpy(c->pending_dst, c->staging, c->pending_bytes);
    c->pending_dst = NULL, c->pending_bytes = 0;
    return err;
}

static tern_error *cu_sync(tern_rt *rt) {
    cu_rt *c = rt->impl;
    TERN_TRY(enter(c));
    tern_error *err = async_error(c, CHECK(c, cuStreamSynchronize(c->stream), "cuda runtime: sync"));
    leave(c);
    return err;
}

/* The loaded function for k, compiling (or reading the disk cache) on first use. Called
 * with the lock held and the context current. */
static tern_error *cu_get(cu_rt *c, const tern_kernel *k, int maxrreg, cu_entry **out) {
    for (int i = 0; i < c->nentries; i++) {
        cu_entry *e = &c->entries[i];
        if (e->kernel == k && e->kernel_hash == k->hash && e->maxrreg == maxrreg) {
            *out = e;
            return NULL;
        }
    }
    /* warpgroup products are sm_90a instructions: such a kernel compiles for that target
     * on sm_90 (and emits the fallback for any other) */
    char arch[sizeof c->arch + 1];
    snprintf(arch, sizeof arch, "%s%s", c->arch, (k->uses & IR_USES_WGMMA) && !strcmp(c->arch, "sm_90") ? "a" : "");
    char *src = NULL;
    int32_t *lines = NULL, nlines = 0;
    TERN_TRY(emit_source(k, &emit_cuda_dialect, &src, &lines, &nlines));
    uint64_t key = hash_finish(hash_u64(hash_str(hash_str(HASH_SEED, arch), src), (uint64_t)maxrreg));
    for (int i = 0; i < c->nentries; i++)
        if (c->entries[i].key == key && c->entries[i].maxrreg == maxrreg && !strcmp(c->entries[i].source, src)) {
            c->entries[i].kernel = k;
            c->entries[i].kernel_hash = k->hash;
            *out = &c->entries[i];
            free(src);
            free(lines);
            return NULL;
        }
    tern_error *err = NULL;
    /* the disk key: everything the cubin depends on */
    const char *ver = nvrtc_version_string();
    size_t klen = strlen(ver) + strlen(arch) + strlen(src) + 32;
    char *disk_key = malloc(klen);
    void *cubin = NULL;
    size_t size = 0;
    if (!disk_key) {
        err = tern_errorf("kernel '%s': out of memory", k->name);
    } else {
        snprintf(disk_key, klen, "%s\n%s\nmaxrregcount=%d\n%s", ver, arch, maxrreg, src);
        if (!disk_cache_load("cuda", disk_key, &cubin, &size)) {
            err = nvrtc_compile_source(k, src, lines, nlines, arch, maxrreg, &cubin, &size);
            if (!err) disk_cache_store("cuda", disk_key, cubin, size);
        }
    }
    free(disk_key);
    free(lines);
    CUmodule module = NULL;
    CUfunction fn = NULL;
    if (!err) err = CHECK(c, cuModuleLoadData(&module, cubin), "cuda runtime: cuModuleLoadData");
    free(cubin);
    if (!err) err = CHECK(c, cuModuleGetFunction(&fn, module, k->name), "cuda runtime: cuModuleGetFunction");
    int max_threads = 0;
    if (!err)
        err = CHECK(c, cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
                    "cuda runtime: cuFuncGetAttribute");
    if (!err && c->nentries == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        cu_entry *e = realloc(c->entries, (size_t)cap * sizeof *e);
        if (!e)
            err = tern_errorf("kernel '%s': out of memory", k->name);
        else {
            c->entries = e;
            c->cap = cap;
        }
    }
    if (err) {
        if (module) c->cu->cuModuleUnload(module);
        free(src);
        return tern_error_wrap(err, "kernel '%s'", k->name);
    }
    cu_entry e = {k, k->hash, key, src, maxrreg, module, fn, max_threads, 0};
    c->entries[c->nentries] = e;
    *out = &c->entries[c->nentries++];
    return NULL;
}

static tern_error *cu_prepare(tern_rt *rt, const tern_kernel *k) {
    cu_rt *c = rt->impl;
    TERN_TRY(enter(c));
    pthread_mutex_lock(&c->lock);
    cu_entry *e;
    tern_error *err = cu_get(c, k, 0, &e);
    pthread_mutex_unlock(&c->lock);
    leave(c);
    return err;
}

/* The function to launch with `threads` per block: the plain compile, or, when it needs
 * more registers than a block that size can have, a compile capped at 65536 / threads
 * registers per thread (tern_max_threads lets the compiler plan for it instead). */
static tern_error *cu_fit(cu_rt *c, const tern_kernel *k, int threads, cu_entry **out) {
    TERN_TRY(cu_get(c, k, 0, out));
    if ((*out)->max_threads >= threads) return NULL;
    int cap = 65536 / threads / 8 * 8;
    if (cap < 16) cap = 16;
    TERN_TRY(cu_get(c, k, cap, out));
    if ((*out)->max_threads >= threads) return NULL;
    return tern_errorf("kernel '%s': blocks of %d threads need more registers than the device has, even "
                       "capped at %d per thread (at most %d threads fit)", k->name, threads, cap, (*out)->max_threads);
}

/* Launches fn on the stream. A kernel with tern_wait_previous may start while the previous
 * kernel still runs (programmatic stream serialization; in a captured graph, a programmatic
 * edge): its griddepcontrol.wait holds it until that kernel is done and its memory visible.
 * Any other kernel launches plainly: started early, it would race. *what names the call. */
static CUresult launch_fn(cu_rt *c, const tern_kernel *k, CUfunction fn, tern_dims grid, tern_dims group,
                          unsigned int shared, void **params, const char **what) {
#if CUDA_VERSION >= 11080
    if (c->pdl && !c->fence && (k->uses & IR_USES_WAIT_PREVIOUS)) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg = {grid.x, grid.y, grid.z, group.x, group.y, group.z, shared, c->stream, &attr, 1};
        *what = "cuda runtime: cuLaunchKernelEx with programmatic dependent launch (pdl=0 in TERN_CUDA_TUNE turns it off; TERN_CUDA_PDL=0 for the runtime opened by name)";
        return c->cu->cuLaunchKernelEx(&cfg, fn, params, NULL);
    }
#else
    (void)k;
#endif
    *what = "cuda runtime: cuLaunchKernel";
    return c->cu->cuLaunchKernel(fn, grid.x, grid.y, grid.z, group.x, group.y, group.z, shared, c->stream,
                                 params, NULL);
}

/* tern_copy_tile's tensor maps (ir_tile_maps) for this launch's buffers: each matrix a 2-D
 * bf16 tensor of as many whole rows as its argument holds, the box one panel of 64 columns
 * by the copy's rows, swizzled as tern_wg_tile's layout (128 bytes), zeros outside. Below
 * sm_90 the kernel copies without them, and they stay zero. */
static tern_error *make_tile_maps(const cu_rt *c, const tern_kernel *k, const tern_arg *args, CUtensorMap *maps) {
    ir_tile_box boxes[IR_TILE_MAX_MAPS];
    int n = k->uses & IR_USES_TILE_COPY ? ir_tile_maps(k, boxes) : 0;
    memset(maps, 0, sizeof *maps * (size_t)n);
    if (!n || atoi(c->arch + 3) < 90) return NULL;
#if CUDA_VERSION >= 12000
    if (!c->cu->cuTensorMapEncodeTiled)
        return tern_errorf("kernel '%s' copies tiles; this driver has no cuTensorMapEncodeTiled", k->name);
    for (int m = 0; m < n; m++) {
        const ir_buf *b = &k->bufs[boxes[m].buf];
        const tern_arg *a = &args[b->param];
        uintptr_t at = (uintptr_t)a->mem + a->offset * 2;
        uint64_t rows = a->len / (uint64_t)boxes[m].cols;
        const char *name = ir_string(k, b->name);
        if (!a->mem || at % 16)
            return tern_errorf("kernel '%s': matrix '%s' of a tile copy does not start on 16 bytes", k->name, name);
        if (rows < (uint64_t)boxes[m].rows || rows >= (uint64_t)1 << 32)
            return tern_errorf("kernel '%s': matrix '%s' has %llu rows of %lld; a tile copy's box is %d rows, and a "
                               "matrix under 2^32", k->name, name, (unsigned long long)rows,
                               (long long)boxes[m].cols, boxes[m].rows);
        cuuint64_t dims[2] = {(cuuint64_t)boxes[m].cols, rows}, strides[1] = {(cuuint64_t)boxes[m].cols * 2};
        cuuint32_t box[2] = {64, (cuuint32_t)boxes[m].rows}, step[2] = {1, 1};
        CUresult r = c->cu->cuTensorMapEncodeTiled(&maps[m], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)at, dims,
                                                   strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        tern_error *err = tern_cuda_check(c->cu, r, "cuda runtime: cuTensorMapEncodeTiled");
        if (err) return tern_error_wrap(err, "kernel '%s', matrix '%s'", k->name, name);
    }
    return NULL;
#else
    return tern_errorf("kernel '%s' copies tiles; tern was built with a CUDA toolkit older than 12", k->name);
#endif
}

static tern_error *cu_launch(tern_rt *rt, const tern_kernel *k, tern_dims grid, tern_dims group,
                             const tern_arg *args) {
    cu_rt *c = rt->impl;
    size_t shared = k->shared_bytes > CUDA_STATIC_SHARED_LIMIT ? k->shared_bytes : 0;
    if (shared > (size_t)c->shared_optin)
        return tern_errorf("kernel '%s' needs %zu bytes of threadgroup memory; %s allows %d", k->name,
                           k->shared_bytes, rt->device, c->shared_optin);
    /* parameter values, and pointers to them as cuLaunchKernel wants */
    int nmaps = k->uses & IR_USES_TILE_COPY ? ir_tile_maps(k, NULL) : 0; /* a scan: only where there are copies */
    uint64_t *slots = calloc((size_t)k->nparams + 1, sizeof *slots);
    void **params = calloc((size_t)(k->nparams + nmaps) + 1, sizeof *params);
    CUtensorMap *maps = nmaps ? aligned_alloc(64, sizeof *maps * (size_t)nmaps) : NULL;
    if (!slots || !params || (nmaps && !maps)) {
        free(slots);
        free(params);
        free(maps);
        return tern_errorf("kernel '%s': out of memory", k->name);
    }
    for (int32_t p = 0; p < k->nparams; p++) {
        const tern_arg *a = &args[p];
        if (k->params[p].is_buf) {
            CUdeviceptr base = (CUdeviceptr)(uintptr_t)a->mem;
            slots[p] = base ? base + a->offset * tern_type_size(a->type) : 0;
        } else if (a->type == TERN_T_F32) {
            float f = (float)a->value.f;
            memcpy(&slots[p], &f, sizeof f);
        } else if (a->type == TERN_T_I32 || a->type == TERN_T_U32) {
            uint32_t u = (uint32_t)a->value.u;
            memcpy(&slots[p], &u, sizeof u);
        } else {
            slots[p] = a->value.u;
        }
        params[p] = &slots[p];
    }
    for (int m = 0; m < nmaps; m++) params[k->nparams + m] = &maps[m];
    tern_error *err = enter(c);
    if (!err) {
        pthread_mutex_lock(&c->lock);
        cu_entry *e = NULL;
        err = make_tile_maps(c, k, args, maps); /* in the context: the driver wants one */
        if (!err) err = cu_fit(c, k, (int)((size_t)group.x * group.y * group.z), &e);
        if (!err && shared && e->dynamic_shared < (int)shared) {
            err = CHECK(c, cuFuncSetAttribute(e->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared),
                        "cuda runtime: cuFuncSetAttribute");
            if (!err) e->dynamic_shared = (int)shared;
        }
        if (!err) {
            const char *what;
            CUresult r = launch_fn(c, k, e->fn, grid, group, (unsigned int)shared, params, &what);
            if (r != CUDA_SUCCESS) err = tern_cuda_check(c->cu, r, what);
            else c->fence = false;
            snprintf(c->last_kernel, sizeof c->last_kernel, "%s", k->name);
        }
        pthread_mutex_unlock(&c->lock);
        leave(c);
        if (err) err = tern_error_wrap(err, "kernel '%s' on (%u,%u,%u) x (%u,%u,%u)", k->name, grid.x, grid.y,
                                       grid.z, group.x, group.y, group.z);
    }
    free(slots);
    free(params);
    free(maps);
    return err;
}

static tern_error *cu_set_stream(tern_rt *rt, void *stream) {
    cu_rt *c = rt->impl;
    if (c->owned) return tern_errorf("cuda runtime: set_stream is for runtimes made by tern_rt_wrap_cuda");
    c->stream = (CUstream)stream;
    return NULL;
}

static void cu_no_overlap(tern_rt *rt) {
    cu_rt *c = rt->impl;
    c->pdl = false;
}

static void cu_fence(tern_rt *rt) {
    cu_rt *c = rt->impl;
    pthread_mutex_lock(&c->lock);
    c->fence = true;
    pthread_mutex_unlock(&c->lock);
}

static const rt_ops cu_ops = {
    .name = "cuda",
    .host_memory = false,
    .close = cu_close,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .sync = cu_sync,
    .download_async = cu_download_async,
    .download_wait = cu_download_wait,
    .prepare = cu_prepare,
    .launch = cu_launch,
    .set_stream = cu_set_stream,
    .no_overlap = cu_no_overlap,
    .fence = cu_fence,
};

/* Whether kernels with tern_wait_previous launch overlapped: compute capability 9.0 or newer
 * (griddepcontrol), a driver with cuLaunchKernelEx, and TERN_CUDA_PDL not "0". */
static bool pdl_wanted(const cu_rt *c, int major) {
#if CUDA_VERSION >= 11080
    /* the environment is for the runtime opened by name; a wrapping handler has its own
     * switch (tern_rt_no_overlap) */
    const char *env = c->owned ? getenv("TERN_CUDA_PDL") : NULL;
    return major >= 9 && c->cu->cuLaunchKernelEx && !(env && !strcmp(env, "0"));
#else
    (void)c, (void)major;
    return false;
#endif
}

/* Device facts (name, arch, shared memory), with the context current. */
static tern_error *device_facts(cu_rt *c, tern_rt *rt) {
    int major = 0, minor = 0;
    TERN_TRY(CHECK(c, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev),
                   "cuda runtime: cuDeviceGetAttribute"));
    TERN_TRY(CHECK(c, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev),
                   "cuda runtime: cuDeviceGetAttribute"));
    TERN_TRY(CHECK(c, cuDeviceGetAttribute(&c->shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                           c->dev), "cuda runtime: cuDeviceGetAttribute"));
    snprintf(c->arch, sizeof c->arch, "sm_%d%d", major, minor);
    c->pdl = pdl_wanted(c, major);
    char name[128] = "";
    c->cu->cuDeviceGetName(name, (int)sizeof name - 1, c->dev);
    snprintf(rt->device, sizeof rt->device, "%s", name);
    return NULL;
}

static tern_error *finish(cu_rt *c, tern_rt **out) {
    tern_rt *rt = rt_new(&cu_ops, c);
    if (!rt) {
        tern_rt tmp = {.impl = c};
        cu_close(&tmp);
        return tern_errorf("cuda runtime: out of memory");
    }
    tern_error *err = enter(c);
    if (!err) {
        err = device_facts(c, rt);
        leave(c);
    }
    if (err) {
        tern_rt_close(rt);
        return err;
    }
    *out = rt;
    return NULL;
}

tern_error *rt_open_cuda(tern_rt **out) {
    const tern_cuda_api *cu;
    TERN_TRY(tern_error_wrap(tern_cuda_api_get(&cu), "cuda runtime"));
    cu_rt *c = calloc(1, sizeof *c);
    if (!c) return tern_errorf("cuda runtime: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->cu = cu;
    c->owned = true;
    int count = 0, index = 0;
    const char *want = getenv("TERN_CUDA_DEVICE");
    if (want && *want) index = atoi(want);
    tern_error *err = CHECK(c, cuDeviceGetCount(&count), "cuda runtime: cuDeviceGetCount");
    if (!err && (index < 0 || index >= count))
        err = tern_errorf("cuda runtime: no CUDA device %d (%d found)", index, count);
    if (!err) err = CHECK(c, cuDeviceGet(&c->dev, index), "cuda runtime: cuDeviceGet");
    if (!err) err = CHECK(c, cuDevicePrimaryCtxRetain(&c->ctx, c->dev), "cuda runtime: cuDevicePrimaryCtxRetain");
    if (!err && !(err = enter(c))) {
        err = CHECK(c, cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING), "cuda runtime: cuStreamCreate");
        leave(c);
    }
    if (err) {
        tern_rt tmp = {.impl = c};
        cu_close(&tmp);
        return err;
    }
    return finish(c, out);
}

tern_error *rt_wrap_cuda(void *context, void *stream, tern_rt **out) {
    const tern_cuda_api *cu;
    TERN_TRY(tern_error_wrap(tern_cuda_api_get(&cu), "cuda runtime"));
    cu_rt *c = calloc(1, sizeof *c);
    if (!c) return tern_errorf("cuda runtime: out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->cu = cu;
    c->ctx = (CUcontext)context;
    c->stream = (CUstream)stream;
    tern_error *err = enter(c);
    if (!err) {
        err = CHECK(c, cuCtxGetDevice(&c->dev), "cuda runtime: cuCtxGetDevice");
        leave(c);
    }
    if (err) {
        tern_rt tmp = {.impl = c};
        cu_close(&tmp);
        return err;
    }
    return finish(c, out);
}

#else /* no CUDA toolkit at build time */

tern_error *rt_open_cuda(tern_rt **out) {
    (void)out;
    return tern_errorf("cuda runtime: not built in (no CUDA toolkit when tern was built)");
}

tern_error *rt_wrap_cuda(void *context, void *stream, tern_rt **out) {
    (void)context, (void)stream, (void)out;
    return tern_errorf("cuda runtime: not built in (no CUDA toolkit when tern was built)");
}

#endif
