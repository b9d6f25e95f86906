/* The handlers built into this library. TERN_HAVE_<H> comes from the build. */
#include <string.h>

#include "tern/handlers.h"

extern const tern_ops tern_cpu_ops;
extern const tern_ops tern_interp_ops;
#ifdef TERN_HAVE_CUDA
extern const tern_ops tern_cuda_ops;
#endif
#ifdef TERN_HAVE_OPENCL
extern const tern_ops tern_opencl_ops;
tern_error *tern_opencl_list_devices(char *out, size_t cap);
#endif

static const tern_ops *const built_in[] = {
    &tern_cpu_ops,
#ifdef TERN_HAVE_CUDA
    &tern_cuda_ops,
#endif
#ifdef TERN_HAVE_OPENCL
    &tern_opencl_ops,
#endif
    &tern_interp_ops, /* the GPU core on the interpreter: slow, the reference */
};

static const char *const built_in_names[] = {
    "cpu",
#ifdef TERN_HAVE_CUDA
    "cuda",
#endif
#ifdef TERN_HAVE_OPENCL
    "opencl",
#endif
    "interp",
};

const tern_ops *tern_handler_ops(const char *name) {
    for (size_t i = 0; i < sizeof built_in / sizeof built_in[0]; i++)
        if (!strcmp(built_in[i]->handler, name)) return built_in[i];
    return NULL;
}

const char *const *tern_handler_names(size_t *count) {
    *count = sizeof built_in_names / sizeof built_in_names[0];
    return built_in_names;
}

int tern_handler_known(const char *name) {
    return !strcmp(name, "cpu") || !strcmp(name, "interp") || !strcmp(name, "cuda") ||
           !strcmp(name, "opencl") || !strcmp(name, "metal");
}

tern_error *tern_handler_list_devices(const char *name, char *out, size_t cap) {
    if (cap) out[0] = 0;
#ifdef TERN_HAVE_OPENCL
    if (!strcmp(name, "opencl")) return tern_opencl_list_devices(out, cap);
#endif
    (void)name;
    return NULL;
}
