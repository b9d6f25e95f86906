/* The communicator's private parts, shared by src/dist/ and the handlers' allreduce. */
#ifndef TERN_DIST_INTERNAL_H
#define TERN_DIST_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/dist.h"

struct tern_dist {
    tern_dist_kind kind;
    int rank, world, local_rank;
    double timeout; /* seconds */
    bool mpi_initialised; /* by tern: finalise on close */
};

/* Root's `size` bytes at data reach every rank (MPI_Bcast). An error without MPI. */
tern_error *dist_bcast_bytes(tern_dist *c, void *data, size_t size, int root) TERN_MUST_USE;

/* An id for ncclCommInitRank that every rank of the job gets the same of (`size` bytes, the
 * size of ncclUniqueId): with NCCL_COMM_ID set (tern --procs, or across hosts by hand) each
 * rank asks NCCL for the id of that address; under MPI rank 0 asks NCCL and broadcasts it.
 * Built only with NCCL's header (nccl_id.c). */
tern_error *dist_nccl_unique_id(tern_dist *c, void *id, size_t size) TERN_MUST_USE;

/* Seconds on a monotonic clock. */
double dist_now(void);

#endif
