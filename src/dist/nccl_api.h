/* NCCL, loaded at run time.
 *
 * tern never links libnccl: a tern program must start where NCCL is absent (CI, a machine
 * without GPUs) and say so only when a multi-rank cuda job asks for it. The functions tern
 * uses are looked up once with dlopen ($TERN_NCCL_LIBRARY, else "libnccl.so.2") into a
 * table; the types come from nccl.h of the CUDA toolkit. Built only where nccl.h is found
 * (TERN_HAVE_NCCL). */
#ifndef TERN_DIST_NCCL_API_H
#define TERN_DIST_NCCL_API_H

#include <nccl.h>

#include "tern/error.h"

#define TERN_NCCL_FUNCTIONS(X) \
    X(ncclGetVersion) \
    X(ncclGetUniqueId) \
    X(ncclCommInitRankConfig) \
    X(ncclCommGetAsyncError) \
    X(ncclCommAbort) \
    X(ncclCommDestroy) \
    X(ncclAllReduce) \
    X(ncclAllGather) \
    X(ncclGetErrorString) \
    X(ncclGetLastError)

#define TERN_NCCL_FIELD_(name) __typeof__(name) *name;
typedef struct tern_nccl_api {
    TERN_NCCL_FUNCTIONS(TERN_NCCL_FIELD_)
} tern_nccl_api;
#undef TERN_NCCL_FIELD_

/* The library's table, loaded on first use (thread-safe); an error naming what is missing. */
tern_error *tern_nccl_api_get(const tern_nccl_api **out) TERN_MUST_USE;

/* NULL for ncclSuccess, otherwise "<what>: <NCCL's text> (<last error>)". comm may be NULL. */
tern_error *tern_nccl_check(const tern_nccl_api *nc, ncclResult_t r, ncclComm_t comm,
                            const char *what) TERN_MUST_USE;

#endif
