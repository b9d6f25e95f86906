/* The collectives, allreduce and allgather, with NCCL on the device's stream (device memory,
 * no copy to the host).
 *
 * The NCCL communicator is made on the first call, from the tern communicator's rendezvous
 * (MPI broadcast or NCCL_COMM_ID), and is nonblocking: tern polls it, so a rank that died
 * or hangs turns into an error after the communicator's timeout (the NCCL communicator is
 * then aborted), never a hang. A call returns when its collective is complete. */
#include <stdint.h>
#include <time.h>

#include "cuda_handler.h"
#include "tern/dist.h"

#ifdef TERN_HAVE_NCCL
#include "dist/dist_internal.h"
#include "dist/nccl_api.h"

static void pause_briefly(void) {
    struct timespec ts = {0, 20000}; /* 20 us: a sum of gradients takes milliseconds */
    nanosleep(&ts, NULL);
}

/* Aborts the communicator after a failure; later calls answer with an error at once. */
static tern_error *fail_comm(tern_dev *d, const tern_nccl_api *nc, const char *op, tern_error *err) {
    if (d->nccl) nc->ncclCommAbort(d->nccl);
    d->nccl = NULL;
    d->nccl_failed = true;
    return tern_error_wrap(err, "%s (NCCL)", op);
}

/* Waits until the nonblocking communicator has finished its last call (ncclInProgress
 * while it has not), giving up at the deadline. */
static tern_error *settle(tern_dev *d, const tern_nccl_api *nc, const char *op, double deadline,
                          const char *what) {
    for (;;) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = nc->ncclCommGetAsyncError(d->nccl, &state);
        if (r != ncclSuccess)
            return fail_comm(d, nc, op, tern_nccl_check(nc, r, d->nccl, "ncclCommGetAsyncError"));
        if (state == ncclSuccess) return NULL;
        if (state != ncclInProgress) return fail_comm(d, nc, op, tern_nccl_check(nc, state, d->nccl, what));
        if (dist_now() > deadline)
            return fail_comm(d, nc, op, tern_errorf("%s: no answer from the other ranks within %.0f s "
                                                    "(TERN_DIST_TIMEOUT); a rank may have died", what,
                                                    tern_dist_timeout(d->nccl_dist)));
        pause_briefly();
    }
}

static tern_error *open_comm(tern_dev *d, const tern_nccl_api *nc, const char *op, tern_dist *comm) {
    ncclUniqueId id;
    TERN_TRY(dist_nccl_unique_id(comm, &id, sizeof id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t c = NULL;
    ncclResult_t r = nc->ncclCommInitRankConfig(&c, tern_dist_world(comm), id, tern_dist_rank(comm), &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (c) nc->ncclCommAbort(c);
        return tern_nccl_check(nc, r, NULL, "ncclCommInitRankConfig");
    }
    d->nccl = c;
    d->nccl_dist = comm;
    return settle(d, nc, op, dist_now() + tern_dist_timeout(comm), "ncclCommInitRankConfig");
}

/* The checks every collective makes before it starts, then NCCL's table and communicator
 * (made on the first call). */
static tern_error *begin(tern_dev *d, const char *op, tern_dist *comm, const tern_nccl_api **nc) {
    if (d->capturing >= 0) return tern_errorf("%s: not allowed inside a replayable section", op);
    if (d->nccl_failed) return tern_errorf("%s: the NCCL communicator failed earlier", op);
    if (d->nccl && d->nccl_dist != comm)
        return tern_errorf("%s: this device already uses another communicator", op);
    TERN_TRY(cuda_make_current(d));
    TERN_TRY(tern_nccl_api_get(nc));
    if (!d->nccl) TERN_TRY(tern_error_wrap(open_comm(d, *nc, op, comm), "%s: starting NCCL", op));
    return NULL;
}

/* After the collective `what` was enqueued (r its result): waits for it on the stream,
 * watching NCCL's state and the deadline; any failure aborts the communicator. */
static tern_error *finish(tern_dev *d, const tern_nccl_api *nc, const char *op, const char *what,
                          ncclResult_t r, double deadline) {
    if (r != ncclSuccess && r != ncclInProgress)
        return fail_comm(d, nc, op, tern_nccl_check(nc, r, d->nccl, what));
    TERN_TRY(settle(d, nc, op, deadline, what));
    for (;;) {
        CUresult q = d->cu->cuStreamQuery(d->stream);
        if (q == CUDA_SUCCESS) return NULL;
        if (q != CUDA_ERROR_NOT_READY)
            return fail_comm(d, nc, op, tern_cuda_check(d->cu, q, "cuStreamQuery"));
        ncclResult_t state = ncclSuccess;
        nc->ncclCommGetAsyncError(d->nccl, &state);
        if (state != ncclSuccess && state != ncclInProgress)
            return fail_comm(d, nc, op, tern_nccl_check(nc, state, d->nccl, what));
        if (dist_now() > deadline)
            return fail_comm(d, nc, op, tern_errorf("%s: no answer from the other ranks within %.0f s "
                                                    "(TERN_DIST_TIMEOUT); a rank may have died",
                                                    what, tern_dist_timeout(d->nccl_dist)));
        pause_briefly();
    }
}

static char *device_ptr(tern_buf buf, size_t element) {
    return (char *)((uintptr_t)buf.mem + (buf.offset + element) * tern_dtype_size(buf.dtype));
}

static ncclDataType_t nccl_type(tern_dtype dtype) {
    return dtype == TERN_BF16 ? ncclBfloat16 : ncclFloat32;
}

tern_error *cuda_allreduce(tern_dev *d, tern_buf buf, tern_dist *comm) {
    if (tern_dist_world(comm) <= 1) return NULL;
    const tern_nccl_api *nc = NULL;
    TERN_TRY(begin(d, "allreduce", comm, &nc));
    double deadline = dist_now() + tern_dist_timeout(comm);
    void *p = device_ptr(buf, 0);
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    ncclResult_t r = nc->ncclAllReduce(p, p, buf.len, nccl_type(buf.dtype), ncclSum, d->nccl, d->stream);
    return finish(d, nc, "allreduce", "ncclAllReduce", r, deadline);
}

/* In place: NCCL's in-place form sends from this rank's segment of the receive buffer. */
tern_error *cuda_allgather(tern_dev *d, tern_buf buf, tern_dist *comm) {
    int world = tern_dist_world(comm);
    if (world <= 1) return NULL;
    const tern_nccl_api *nc = NULL;
    TERN_TRY(begin(d, "allgather", comm, &nc));
    double deadline = dist_now() + tern_dist_timeout(comm);
    size_t k = buf.len / (size_t)world;
    void *mine = device_ptr(buf, (size_t)tern_dist_rank(comm) * k), *all = device_ptr(buf, 0);
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    ncclResult_t r = nc->ncclAllGather(mine, all, k, nccl_type(buf.dtype), d->nccl, d->stream);
    return finish(d, nc, "allgather", "ncclAllGather", r, deadline);
}

void cuda_nccl_close(tern_dev *d) {
    const tern_nccl_api *nc = NULL;
    tern_error *err = d->nccl ? tern_nccl_api_get(&nc) : NULL;
    /* Abort rather than destroy: it never waits for the other ranks. */
    if (d->nccl && !err) nc->ncclCommAbort(d->nccl);
    tern_error_free(err);
    d->nccl = NULL;
}

#else

tern_error *cuda_allreduce(tern_dev *d, tern_buf buf, tern_dist *comm) {
    if (tern_dist_world(comm) <= 1) return NULL;
    return tern_errorf("allreduce: this tern was built without NCCL's header (nccl.h)");
}

tern_error *cuda_allgather(tern_dev *d, tern_buf buf, tern_dist *comm) {
    if (tern_dist_world(comm) <= 1) return NULL;
    return tern_errorf("allgather: this tern was built without NCCL's header (nccl.h)");
}

void cuda_nccl_close(tern_dev *d) { (void)d; }

#endif
