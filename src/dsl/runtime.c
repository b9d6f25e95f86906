/* tern_rt: opening runtimes, device memory, argument checks, host-array staging and the
 * launch entry point shared by every runtime. */
#include "dsl/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/hash.h"

tern_rt *rt_new(const rt_ops *ops, void *impl) {
    tern_rt *rt = calloc(1, sizeof *rt);
    if (!rt) return NULL;
    rt->ops = ops;
    rt->impl = impl;
    pthread_mutex_init(&rt->lock, NULL);
    return rt;
}

tern_error *tern_rt_open(const char *name, tern_rt **out) {
    if (!out) return tern_errorf("tern_rt_open: out is NULL");
    *out = NULL;
    if (!name || !*name) name = getenv("TERN_GPU");
    if (!name || !*name) name = "host";
    if (!strcmp(name, "host")) return rt_open_host(out);
    if (!strcmp(name, "opencl")) return rt_open_opencl(out);
    if (!strcmp(name, "cuda")) return rt_open_cuda(out);
    return tern_errorf("unknown GPU runtime '%s' (TERN_GPU takes host, opencl or cuda)", name);
}

tern_error *tern_rt_wrap_opencl(void *context, void *device, void *queue, tern_rt **out) {
    if (!out) return tern_errorf("tern_rt_wrap_opencl: out is NULL");
    *out = NULL;
    if (!context || !device || !queue)
        return tern_errorf("tern_rt_wrap_opencl: the context, device and queue must be given");
    return rt_wrap_opencl(context, device, queue, out);
}

tern_error *tern_rt_wrap_cuda(void *context, void *stream, tern_rt **out) {
    if (!out) return tern_errorf("tern_rt_wrap_cuda: out is NULL");
    *out = NULL;
    if (!context) return tern_errorf("tern_rt_wrap_cuda: the context must be given");
    return rt_wrap_cuda(context, stream, out);
}

void tern_rt_no_overlap(tern_rt *rt) {
    if (rt && rt->ops->no_overlap) rt->ops->no_overlap(rt);
}

void tern_rt_fence(tern_rt *rt) {
    if (rt && rt->ops->fence) rt->ops->fence(rt);
}

tern_error *tern_rt_set_stream(tern_rt *rt, void *stream) {
    if (!rt) return tern_errorf("tern_rt_set_stream: the runtime is NULL");
    if (!rt->ops->set_stream)
        return tern_errorf("%s runtime: streams are a cuda runtime feature", rt->ops->name);
    return rt->ops->set_stream(rt, stream);
}

void tern_rt_close(tern_rt *rt) {
    if (!rt) return;
    for (int i = 0; i < rt->nwrappers; i++) {
        tern_kernel_free(rt->wrappers[i].k);
        free(rt->wrappers[i].what);
    }
    free(rt->wrappers);
    pthread_mutex_destroy(&rt->lock);
    rt->ops->close(rt);
    free(rt);
}

const char *tern_rt_name(const tern_rt *rt) { return rt ? rt->ops->name : ""; }
const char *tern_rt_device(const tern_rt *rt) { return rt ? rt->device : ""; }

/* ---- memory ---- */

static tern_error *check_view(const tern_rt *rt, tern_dbuf b, const char *op) {
    if (!rt) return tern_errorf("%s: the runtime is NULL", op);
    size_t size = tern_type_size(b.type);
    if (!size || !ir_type_is_storage(b.type))
        return tern_errorf("%s runtime: %s: buffer of invalid type %d", rt->ops->name, op, (int)b.type);
    if (b.len > 0 && !b.mem)
        return tern_errorf("%s runtime: %s: the buffer is an invalid view", rt->ops->name, op);
    if (b.offset > SIZE_MAX / size - b.len)
        return tern_errorf("%s runtime: %s: the view is too large", rt->ops->name, op);
    return NULL;
}

tern_error *tern_rt_alloc(tern_rt *rt, tern_type type, size_t len, tern_dbuf *out) {
    if (!out) return tern_errorf("tern_rt_alloc: out is NULL");
    memset(out, 0, sizeof *out);
    if (!rt) return tern_errorf("tern_rt_alloc: the runtime is NULL");
    size_t size = tern_type_size(type);
    if (!ir_type_is_storage(type))
        return tern_errorf("%s runtime: alloc: %s is not an element type", rt->ops->name,
                           tern_type_name(type));
    if (len == 0 || len > (SIZE_MAX / 4) / size)
        return tern_errorf("%s runtime: alloc of %zu %s elements", rt->ops->name, len,
                           tern_type_name(type));
    void *mem = NULL;
    TERN_TRY(rt->ops->alloc(rt, len * size, &mem));
    out->mem = mem;
    out->offset = 0;
    out->len = len;
    out->type = type;
    return NULL;
}

void tern_rt_free(tern_rt *rt, tern_dbuf *buf) {
    if (!rt || !buf || !buf->mem) return;
    rt->ops->free(rt, buf->mem);
    memset(buf, 0, sizeof *buf);
}

tern_error *tern_rt_upload(tern_rt *rt, tern_dbuf dst, const void *src) {
    TERN_TRY(check_view(rt, dst, "upload"));
    if (!dst.len) return NULL;
    if (!src) return tern_errorf("%s runtime: upload: the source is NULL", rt->ops->name);
    size_t size = tern_type_size(dst.type);
    return rt->ops->upload(rt, dst.mem, dst.offset * size, src, dst.len * size);
}

tern_error *tern_rt_download(tern_rt *rt, void *dst, tern_dbuf src) {
    TERN_TRY(check_view(rt, src, "download"));
    if (!src.len) return NULL;
    if (!dst) return tern_errorf("%s runtime: download: the destination is NULL", rt->ops->name);
    size_t size = tern_type_size(src.type);
    return rt->ops->download(rt, dst, src.mem, src.offset * size, src.len * size);
}

tern_error *tern_rt_download_async(tern_rt *rt, void *dst, tern_dbuf src) {
    TERN_TRY(check_view(rt, src, "download_async"));
    if (!dst) return tern_errorf("%s runtime: download_async: the destination is NULL", rt->ops->name);
    if (rt->download_pending)
        return tern_errorf("%s runtime: download_async: a download is already pending (tern_rt_download_wait first)",
                           rt->ops->name);
    size_t size = tern_type_size(src.type);
    if (src.len) {
        size_t offset = src.offset * size, bytes = src.len * size;
        TERN_TRY(rt->ops->download_async ? rt->ops->download_async(rt, dst, src.mem, offset, bytes)
                                         : rt->ops->download(rt, dst, src.mem, offset, bytes)); /* at once */
    }
    rt->download_pending = true;
    return NULL;
}

tern_error *tern_rt_download_wait(tern_rt *rt) {
    if (!rt) return tern_errorf("tern_rt_download_wait: the runtime is NULL");
    if (!rt->download_pending) return NULL;
    rt->download_pending = false;
    return rt->ops->download_wait ? rt->ops->download_wait(rt) : NULL;
}

tern_error *tern_rt_sync(tern_rt *rt) {
    if (!rt) return tern_errorf("tern_rt_sync: the runtime is NULL");
    return rt->ops->sync(rt);
}

tern_error *tern_rt_prepare(tern_rt *rt, const tern_kernel *k) {
    if (!rt || !k) return tern_errorf("tern_rt_prepare: %s is NULL", rt ? "the kernel" : "the runtime");
    return rt->ops->prepare(rt, k);
}

/* ---- arguments ---- */

tern_arg tern_arg_dev(tern_dbuf b) {
    tern_arg a;
    memset(&a, 0, sizeof a);
    a.kind = TERN_ARG_DEVICE;
    a.type = b.type;
    a.mem = b.mem;
    a.offset = b.offset;
    a.len = b.len;
    return a;
}

tern_arg tern_arg_buf(tern_buf b) {
    tern_arg a;
    memset(&a, 0, sizeof a);
    a.kind = TERN_ARG_DEVICE;
    a.type = tern_type_of_dtype(b.dtype);
    a.mem = b.mem;
    a.offset = b.offset;
    a.len = b.len;
    return a;
}

tern_arg tern_arg_host(tern_type type, void *data, size_t len) {
    tern_arg a;
    memset(&a, 0, sizeof a);
    a.kind = TERN_ARG_HOST;
    a.type = type;
    a.mem = data;
    a.len = len;
    return a;
}

tern_arg tern_arg_host_in(tern_type type, const void *data, size_t len) {
    tern_arg a = tern_arg_host(type, (void *)(uintptr_t)data, len);
    a.read_only = true;
    return a;
}

static tern_arg scalar(tern_type t) {
    tern_arg a;
    memset(&a, 0, sizeof a);
    a.kind = TERN_ARG_SCALAR;
    a.type = t;
    return a;
}
tern_arg tern_arg_i32(int32_t x) {
    tern_arg a = scalar(TERN_T_I32);
    a.value.i = x;
    return a;
}
tern_arg tern_arg_u32(uint32_t x) {
    tern_arg a = scalar(TERN_T_U32);
    a.value.u = x;
    return a;
}
tern_arg tern_arg_i64(int64_t x) {
    tern_arg a = scalar(TERN_T_I64);
    a.value.i = x;
    return a;
}
tern_arg tern_arg_u64(uint64_t x) {
    tern_arg a = scalar(TERN_T_U64);
    a.value.u = x;
    return a;
}
tern_arg tern_arg_f32(float x) {
    tern_arg a = scalar(TERN_T_F32);
    a.value.f = x;
    return a;
}

static const char *arg_kind(const tern_arg *a) {
    switch (a->kind) {
    case TERN_ARG_DEVICE: return "device buffer";
    case TERN_ARG_HOST: return "host array";
    case TERN_ARG_SCALAR: return "scalar";
    }
    return "invalid argument";
}

tern_error *rt_check_launch(const tern_kernel *k, tern_dims grid, tern_dims group,
                            const tern_arg *args, size_t count) {
    if (k->result >= 0)
        return tern_errorf("kernel '%s' is a function (it ends with tern_result): inline it with "
                           "tern_call or pass it to a generic operation", k->name);
    uint64_t threads = (uint64_t)group.x * group.y * group.z;
    if (!grid.x || !grid.y || !grid.z || !group.x || !group.y || !group.z)
        return tern_errorf("kernel '%s': launch with an empty grid (%u,%u,%u) or threadgroup "
                           "(%u,%u,%u)", k->name, grid.x, grid.y, grid.z, group.x, group.y, group.z);
    if (threads > 1024 || group.z > 64)
        return tern_errorf("kernel '%s': threadgroup (%u,%u,%u) has more than 1024 threads (or z "
                           "> 64)", k->name, group.x, group.y, group.z);
    if (grid.x > INT32_MAX || grid.y > 65535 || grid.z > 65535)
        return tern_errorf("kernel '%s': grid (%u,%u,%u) is larger than every target allows "
                           "(x < 2^31, y and z <= 65535)", k->name, grid.x, grid.y, grid.z);
    if (k->max_threads && threads > (uint64_t)k->max_threads)
        return tern_errorf("kernel '%s': a threadgroup of %llu threads; the kernel declares at most %d "
                           "(tern_max_threads)", k->name, (unsigned long long)threads, k->max_threads);
    if ((k->uses & IR_USES_SIMD) && threads % TERN_SIMD_WIDTH)
        return tern_errorf("kernel '%s' uses SIMD-group operations: its threadgroup size (%llu) "
                           "must be a multiple of %d", k->name, (unsigned long long)threads,
                           TERN_SIMD_WIDTH);
    if (count != (size_t)k->nparams || (count && !args))
        return tern_errorf("kernel '%s' takes %d argument%s, %zu given", k->name, k->nparams,
                           k->nparams == 1 ? "" : "s", count);
    for (int32_t i = 0; i < k->nparams; i++) {
        const ir_param *p = &k->params[i];
        const tern_arg *a = &args[i];
        const char *name = ir_string(k, p->name);
        if (a->kind != TERN_ARG_DEVICE && a->kind != TERN_ARG_HOST && a->kind != TERN_ARG_SCALAR)
            return tern_errorf("kernel '%s': argument %d ('%s') has an invalid kind", k->name, i + 1, name);
        if (p->is_buf) {
            if (a->kind == TERN_ARG_SCALAR || a->type != p->type)
                return tern_errorf("kernel '%s': argument %d ('%s') must be a %s buffer, given a "
                                   "%s %s", k->name, i + 1, name, tern_type_name(p->type),
                                   tern_type_name(a->type), arg_kind(a));
            if (a->len > 0 && !a->mem)
                return tern_errorf("kernel '%s': argument %d ('%s') is an invalid view (out of "
                                   "range, or NULL memory)", k->name, i + 1, name);
            if (a->kind == TERN_ARG_HOST && a->read_only && (p->intent & TERN_WRITE))
                return tern_errorf("kernel '%s': argument %d ('%s') is written by the kernel but "
                                   "was passed read-only (tern_arg_host_in)", k->name, i + 1, name);
            size_t size = tern_type_size(a->type);
            if (a->offset > SIZE_MAX / size - a->len)
                return tern_errorf("kernel '%s': argument %d ('%s') is too large", k->name, i + 1, name);
        } else {
            if (a->kind != TERN_ARG_SCALAR || a->type != p->type)
                return tern_errorf("kernel '%s': argument %d ('%s') must be a %s scalar, given a "
                                   "%s %s", k->name, i + 1, name, tern_type_name(p->type),
                                   tern_type_name(a->type), arg_kind(a));
        }
    }
    return NULL;
}

/* ---- launch ---- */

tern_error *tern_launch(tern_rt *rt, const tern_kernel *k, tern_dims grid, tern_dims group,
                        const tern_arg *args, size_t count) {
    if (!rt || !k) return tern_errorf("tern_launch: %s is NULL", rt ? "the kernel" : "the runtime");
    TERN_TRY(rt_check_launch(k, grid, group, args, count));
    tern_arg *dev = malloc((count + 1) * sizeof *dev);
    if (!dev) return tern_errorf("kernel '%s': out of memory", k->name);
    if (count) memcpy(dev, args, count * sizeof *dev);
    bool staged = false;
    tern_error *err = NULL;
    /* host arrays: used in place where host memory is device memory, else staged */
    for (size_t i = 0; i < count && !err; i++) {
        if (args[i].kind != TERN_ARG_HOST) continue;
        dev[i].kind = TERN_ARG_DEVICE;
        dev[i].offset = 0;
        if (rt->ops->host_memory || args[i].len == 0) {
            if (!rt->ops->host_memory) dev[i].mem = NULL;
            continue;
        }
        size_t bytes = args[i].len * tern_type_size(args[i].type);
        dev[i].mem = NULL;
        err = rt->ops->alloc(rt, bytes, &dev[i].mem);
        if (!err) err = rt->ops->upload(rt, dev[i].mem, 0, args[i].mem, bytes);
        staged = true;
    }
    if (!err) err = rt->ops->launch(rt, k, grid, group, dev);
    if (staged) {
        for (size_t i = 0; i < count && !err; i++) {
            const ir_param *p = &k->params[i];
            if (args[i].kind != TERN_ARG_HOST || !dev[i].mem || !(p->intent & TERN_WRITE)) continue;
            err = rt->ops->download(rt, args[i].mem, dev[i].mem, 0,
                                    args[i].len * tern_type_size(args[i].type));
        }
        if (!err) err = rt->ops->sync(rt);
        for (size_t i = 0; i < count; i++)
            if (args[i].kind == TERN_ARG_HOST && dev[i].mem) rt->ops->free(rt, dev[i].mem);
    }
    free(dev);
    return err;
}

/* ---- wrapper kernels of the generic operations ---- */

tern_error *rt_wrapper_get(tern_rt *rt, const char *what, const char *name, tern_trace_fn fn,
                           void *user, const tern_kernel **out) {
    uint64_t key = hash_finish(hash_str(HASH_SEED, what));
    pthread_mutex_lock(&rt->lock);
    for (int i = 0; i < rt->nwrappers; i++)
        if (rt->wrappers[i].key == key && !strcmp(rt->wrappers[i].what, what)) {
            *out = rt->wrappers[i].k;
            pthread_mutex_unlock(&rt->lock);
            return NULL;
        }
    pthread_mutex_unlock(&rt->lock);
    tern_kernel *k = NULL;
    TERN_TRY(tern_kernel_build(name, fn, user, &k));
    pthread_mutex_lock(&rt->lock);
    tern_error *err = NULL;
    if (rt->nwrappers == rt->cap_wrappers) {
        int cap = rt->cap_wrappers ? rt->cap_wrappers * 2 : 8;
        rt_wrapper *w = realloc(rt->wrappers, (size_t)cap * sizeof *w);
        if (w) {
            rt->wrappers = w;
            rt->cap_wrappers = cap;
        }
    }
    char *copy = strdup(what);
    if (rt->nwrappers < rt->cap_wrappers && copy) {
        rt_wrapper w = {key, copy, k};
        rt->wrappers[rt->nwrappers++] = w;
        *out = k;
    } else {
        free(copy);
        tern_kernel_free(k);
        err = tern_errorf("kernel '%s': out of memory", name);
    }
    pthread_mutex_unlock(&rt->lock);
    return err;
}
