/* Built only with the CUDA toolkit (its cuda.h gives the driver's types). */
#ifdef TERN_HAVE_CUDA
#include "dsl/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static tern_cuda_api api;
static char load_error[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define TERN_CUDA_STR_(x) #x
#define TERN_CUDA_STR(x) TERN_CUDA_STR_(x) /* the symbol a (possibly versioned) name expands to */

static void load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error, "no CUDA driver (libcuda.so.1 not found)");
        return;
    }
    /* dlsym returns void *; converting it to a function pointer is what POSIX requires to
     * work, through a union to keep strict ISO C quiet. */
#define TERN_CUDA_LOAD_(name)                                                              \
    {                                                                                      \
        union { void *p; __typeof__(api.name) f; } u = {dlsym(lib, TERN_CUDA_STR(name))};  \
        if (!u.p) {                                                                        \
            snprintf(load_error, sizeof load_error,                                        \
                     "the CUDA driver lacks %s: it is too old", TERN_CUDA_STR(name));      \
            return;                                                                        \
        }                                                                                  \
        api.name = u.f;                                                                    \
    }
    TERN_CUDA_FUNCTIONS(TERN_CUDA_LOAD_)
#undef TERN_CUDA_LOAD_
#define TERN_CUDA_LOAD_OPTIONAL_(name)                                                     \
    {                                                                                      \
        union { void *p; __typeof__(api.name) f; } u = {dlsym(lib, TERN_CUDA_STR(name))};  \
        api.name = u.f; /* NULL when the driver lacks it */                               \
    }
    TERN_CUDA_OPTIONAL_FUNCTIONS(TERN_CUDA_LOAD_OPTIONAL_)
#undef TERN_CUDA_LOAD_OPTIONAL_
    CUresult r = api.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        api.cuGetErrorName(r, &name);
        snprintf(load_error, sizeof load_error, "the CUDA driver failed to start: cuInit: %s",
                 name);
    }
}

tern_error *tern_cuda_api_get(const tern_cuda_api **out) {
    pthread_once(&once, load);
    if (load_error[0]) return tern_errorf("%s", load_error);
    *out = &api;
    return NULL;
}

tern_error *tern_cuda_check(const tern_cuda_api *cu, CUresult r, const char *what) {
    if (r == CUDA_SUCCESS) return NULL;
    const char *name = "unknown error", *text = "";
    if (cu && cu->cuGetErrorName) cu->cuGetErrorName(r, &name);
    if (cu && cu->cuGetErrorString) cu->cuGetErrorString(r, &text);
    return tern_errorf("%s: %s (%s)", what, name, text);
}

#endif
