/* Built only with NCCL's header (TERN_HAVE_NCCL). */
#ifdef TERN_HAVE_NCCL
#include "dist/nccl_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static tern_nccl_api api;
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *path = getenv("TERN_NCCL_LIBRARY");
    if (!path || !*path) path = "libnccl.so.2";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error,
                 "NCCL is not installed (%s not found; set TERN_NCCL_LIBRARY to its path)", path);
        return;
    }
    /* dlsym's void * becomes a function pointer through a union (POSIX guarantees it works). */
#define TERN_NCCL_LOAD_(name)                                                              \
    {                                                                                      \
        union { void *p; __typeof__(api.name) f; } u = {dlsym(lib, #name)};                \
        if (!u.p) {                                                                        \
            snprintf(load_error, sizeof load_error, "%s lacks %s: NCCL 2.14 or later is "  \
                     "needed", path, #name);                                               \
            return;                                                                        \
        }                                                                                  \
        api.name = u.f;                                                                    \
    }
    TERN_NCCL_FUNCTIONS(TERN_NCCL_LOAD_)
#undef TERN_NCCL_LOAD_
}

tern_error *tern_nccl_api_get(const tern_nccl_api **out) {
    pthread_once(&once, load);
    if (load_error[0]) return tern_errorf("%s", load_error);
    *out = &api;
    return NULL;
}

tern_error *tern_nccl_check(const tern_nccl_api *nc, ncclResult_t r, ncclComm_t comm,
                            const char *what) {
    if (r == ncclSuccess) return NULL;
    const char *text = nc && nc->ncclGetErrorString ? nc->ncclGetErrorString(r) : "NCCL error";
    const char *last = nc && nc->ncclGetLastError ? nc->ncclGetLastError(comm) : NULL;
    if (last && *last) return tern_errorf("%s: %s (%s)", what, text, last);
    return tern_errorf("%s: %s", what, text);
}
#endif
