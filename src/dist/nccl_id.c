/* NCCL's side of the communicator: the unique id every rank's ncclCommInitRank needs, and
 * NCCL's version for tern info. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"
#ifdef TERN_HAVE_NCCL
#include "dist/nccl_api.h"
#endif

tern_error *tern_dist_nccl_version(int *version) {
    *version = 0;
#ifdef TERN_HAVE_NCCL
    const tern_nccl_api *nc = NULL;
    TERN_TRY(tern_nccl_api_get(&nc));
    return tern_nccl_check(nc, nc->ncclGetVersion(version), NULL, "ncclGetVersion");
#else
    return tern_errorf("this tern was built without NCCL's header (the CUDA toolkit's nccl.h)");
#endif
}

tern_error *dist_nccl_unique_id(tern_dist *c, void *id, size_t size) {
#ifdef TERN_HAVE_NCCL
    if (size != sizeof(ncclUniqueId)) return tern_errorf("NCCL's unique id has %zu bytes, not %zu", sizeof(ncclUniqueId), size);
    const tern_nccl_api *nc = NULL;
    TERN_TRY(tern_nccl_api_get(&nc));
    ncclUniqueId uid;
    memset(&uid, 0, sizeof uid);
    const char *address = getenv("NCCL_COMM_ID");
    if (address && *address) {
        /* Every rank derives the same id from the address; NCCL's rank 0 listens there. */
        TERN_TRY(tern_nccl_check(nc, nc->ncclGetUniqueId(&uid), NULL, "ncclGetUniqueId (NCCL_COMM_ID)"));
    } else if (tern_dist_get_kind(c) == TERN_DIST_MPI) {
        if (tern_dist_rank(c) == 0)
            TERN_TRY(tern_nccl_check(nc, nc->ncclGetUniqueId(&uid), NULL, "ncclGetUniqueId"));
        TERN_TRY(dist_bcast_bytes(c, &uid, sizeof uid, 0));
    } else {
        return tern_errorf("the ranks have no way to meet: start them with an MPI launcher, with "
                           "tern --procs N, or set NCCL_COMM_ID=host:port on every rank");
    }
    memcpy(id, &uid, sizeof uid);
    return NULL;
#else
    (void)c, (void)id, (void)size;
    return tern_errorf("this tern was built without NCCL's header (the CUDA toolkit's nccl.h)");
#endif
}
