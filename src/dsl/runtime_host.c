/* The host runtime (TERN_GPU=host): device memory is host memory and kernels run in the
 * interpreter, the semantic reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/interp.h"
#include "dsl/runtime.h"

static void host_close(tern_rt *rt) { (void)rt; }

static tern_error *host_alloc(tern_rt *rt, size_t bytes, void **mem) {
    (void)rt;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    *mem = aligned_alloc(64, rounded ? rounded : 64);
    if (!*mem) return tern_errorf("host runtime: out of memory for %zu bytes", bytes);
    return NULL;
}

static void host_free(tern_rt *rt, void *mem) {
    (void)rt;
    free(mem);
}

static tern_error *host_upload(tern_rt *rt, void *mem, size_t offset, const void *src, size_t bytes) {
    (void)rt;
    memcpy((unsigned char *)mem + offset, src, bytes);
    return NULL;
}

static tern_error *host_download(tern_rt *rt, void *dst, void *mem, size_t offset, size_t bytes) {
    (void)rt;
    memcpy(dst, (unsigned char *)mem + offset, bytes);
    return NULL;
}

static tern_error *host_sync(tern_rt *rt) {
    (void)rt;
    return NULL;
}

static tern_error *host_prepare(tern_rt *rt, const tern_kernel *k) {
    (void)rt;
    (void)k; /* the interpreter's form is made with the kernel */
    return NULL;
}

/* A scalar argument in the interpreter's representation. */
static ev scalar_ev(const tern_arg *a) {
    switch (a->type) {
    case TERN_T_F32: return ev_from_f((float)a->value.f);
    case TERN_T_I32:
    case TERN_T_U32: return ev_norm(a->type, a->value.u);
    default: return ev_from_u(a->value.u);
    }
}

static tern_error *host_launch(tern_rt *rt, const tern_kernel *k, tern_dims grid, tern_dims group,
                               const tern_arg *args) {
    (void)rt;
    interp_arg *ia = calloc((size_t)k->nparams + 1, sizeof *ia);
    if (!ia) return tern_errorf("kernel '%s': out of memory", k->name);
    for (int32_t i = 0; i < k->nparams; i++) {
        const tern_arg *a = &args[i];
        if (k->params[i].is_buf) {
            size_t size = tern_type_size(a->type);
            ia[i].base = a->mem ? (unsigned char *)a->mem + a->offset * size : NULL;
            ia[i].len = a->mem ? a->len : 0;
            ia[i].offset = a->offset;
        } else {
            ia[i].scalar = scalar_ev(a);
        }
    }
    tern_error *err = interp_run(k, grid, group, ia, 0);
    free(ia);
    return err;
}

static const rt_ops host_ops = {
    .name = "host",
    .host_memory = true,
    .close = host_close,
    .alloc = host_alloc,
    .free = host_free,
    .upload = host_upload,
    .download = host_download,
    .sync = host_sync,
    .prepare = host_prepare,
    .launch = host_launch,
    .set_stream = NULL,
};

tern_error *rt_open_host(tern_rt **out) {
    tern_rt *rt = rt_new(&host_ops, NULL);
    if (!rt) return tern_errorf("host runtime: out of memory");
    snprintf(rt->device, sizeof rt->device, "host interpreter");
    *out = rt;
    return NULL;
}
