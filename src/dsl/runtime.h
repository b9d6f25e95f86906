/* What every runtime (host, opencl, cuda) provides behind tern_rt, private to src/dsl/.
 * runtime.c does the shared work (argument checks, host-array staging, the generic
 * operations' wrapper kernels) and calls these. */
#ifndef TERN_KERNEL_RUNTIME_H
#define TERN_KERNEL_RUNTIME_H

#include <pthread.h>

#include "dsl/ir.h"

typedef struct rt_ops {
    const char *name;
    /* host pointers are device memory (no staging of host arrays) */
    bool host_memory;
    void (*close)(tern_rt *rt);
    tern_error *(*alloc)(tern_rt *rt, size_t bytes, void **mem);
    void (*free)(tern_rt *rt, void *mem);
    tern_error *(*upload)(tern_rt *rt, void *mem, size_t offset, const void *src, size_t bytes);
    tern_error *(*download)(tern_rt *rt, void *dst, void *mem, size_t offset, size_t bytes);
    tern_error *(*sync)(tern_rt *rt);
    /* A download queued after the work before it, into dst once download_wait returns
     * (runtime.c allows one pending at a time); both NULL: runtime.c downloads at once. */
    tern_error *(*download_async)(tern_rt *rt, void *dst, void *mem, size_t offset, size_t bytes);
    tern_error *(*download_wait)(tern_rt *rt);
    tern_error *(*prepare)(tern_rt *rt, const tern_kernel *k);
    /* args are checked, one per parameter, DEVICE or SCALAR only */
    tern_error *(*launch)(tern_rt *rt, const tern_kernel *k, tern_dims grid, tern_dims group,
                          const tern_arg *args);
    tern_error *(*set_stream)(tern_rt *rt, void *stream); /* NULL: not supported */
    void (*no_overlap)(tern_rt *rt); /* NULL: launches never overlap anyway */
    void (*fence)(tern_rt *rt);      /* NULL: launches never overlap anyway */
} rt_ops;

/* A wrapper kernel made for a generic operation, kept per runtime. */
typedef struct rt_wrapper {
    uint64_t key;
    char *what; /* the full key text, compared on a hash match */
    tern_kernel *k;
} rt_wrapper;

struct tern_rt {
    const rt_ops *ops;
    void *impl;
    char device[160];
    pthread_mutex_t lock; /* guards wrappers */
    rt_wrapper *wrappers;
    int nwrappers, cap_wrappers;
    bool download_pending; /* a tern_rt_download_async not yet waited for */
};

/* A new tern_rt around impl (runtime.c); NULL when out of memory. */
tern_rt *rt_new(const rt_ops *ops, void *impl);

/* The runtimes' constructors. */
tern_error *rt_open_host(tern_rt **out);
tern_error *rt_open_opencl(tern_rt **out);
tern_error *rt_open_cuda(tern_rt **out);
tern_error *rt_wrap_opencl(void *context, void *device, void *queue, tern_rt **out);
tern_error *rt_wrap_cuda(void *context, void *stream, tern_rt **out);

/* Checks a launch: dims, argument count and types. NULL when it may go ahead. */
tern_error *rt_check_launch(const tern_kernel *k, tern_dims grid, tern_dims group,
                            const tern_arg *args, size_t count);

/* The wrapper kernel stored under `what` (traced by fn(user) on first use). */
tern_error *rt_wrapper_get(tern_rt *rt, const char *what, const char *name, tern_trace_fn fn,
                           void *user, const tern_kernel **out);

#endif
