/* Data-parallel training across processes: the communicator.
 *
 * A tern program is one rank of a job of `world` ranks. The communicator says which rank this
 * process is and carries what the collective engines need: MPI's communicator (the cpu and
 * opencl handlers sum host memory with MPI_Allreduce) and NCCL's bootstrap (the cuda handler
 * sums device memory with ncclAllReduce). tern implements no collective itself: the Tensor
 * effect's `allreduce` and `allgather` operations hand the buffer to one of those engines.
 *
 * How the job was started decides the rest (tern_dist_open reads the environment):
 *  - by an MPI launcher (mpirun, mpiexec, srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK...):
 *    MPI is initialised with errors returned, never aborting; rank, world and the rank on
 *    this host come from MPI; NCCL's unique id is broadcast through MPI;
 *  - by `tern train --procs N` (tern_dist_launch): TERN_DIST_RANK, TERN_DIST_WORLD and
 *    TERN_DIST_LOCAL_RANK; NCCL rendezvous over TCP at NCCL_COMM_ID (host:port);
 *  - otherwise: a single rank (world 1), and every collective is a no-op.
 * docs/distributed.md has the commands. */
#ifndef TERN_DIST_H
#define TERN_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/effect.h"
#include "tern/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_dist tern_dist; /* also declared by effect.h */

#if defined(__GNUC__)
#define TERN_NORETURN __attribute__((noreturn))
#else
#define TERN_NORETURN
#endif

typedef enum tern_dist_kind {
    TERN_DIST_SINGLE, /* one process */
    TERN_DIST_MPI,    /* started by an MPI launcher */
    TERN_DIST_TERN,   /* started by tern_dist_launch (tern train --procs N) */
} tern_dist_kind;

/* The communicator of this process, from the environment (see above). Opening twice in one
 * process is an error (MPI may be initialised once). */
tern_error *tern_dist_open(tern_dist **out) TERN_MUST_USE;

/* Whether this process was started as a rank of a job (by an MPI launcher or by
 * tern_dist_launch), from the environment alone. */
bool tern_dist_launched(void);

/* Releases the communicator; finalises MPI when tern initialised it. Call it on success
 * only: after an error, tern_dist_abort stops the job instead. NULL: no-op. */
void tern_dist_close(tern_dist *c);

/* Rank, ranks in all, rank among the ranks of this host. NULL is a single rank. */
int tern_dist_rank(const tern_dist *c);
int tern_dist_world(const tern_dist *c);
int tern_dist_local_rank(const tern_dist *c);
tern_dist_kind tern_dist_get_kind(const tern_dist *c);

/* Seconds a collective waits for the other ranks before it gives up with an error (NCCL:
 * the communicator is aborted). TERN_DIST_TIMEOUT, default 600. */
double tern_dist_timeout(const tern_dist *c);

/* Sums `n` elements of host memory across the ranks, in place (f32 or bf16; bf16 is summed
 * in f32 and rounded once). Needs MPI: without it a world above 1 is an error. World 1 or
 * NULL: no-op. */
tern_error *tern_dist_allreduce_host(tern_dist *c, void *data, size_t n, tern_dtype dtype) TERN_MUST_USE;

/* Gathers host memory across the ranks, in place: `n` elements (f32 or bf16), a multiple of
 * the ranks; rank r contributes elements [r n/world, (r+1) n/world) and afterwards every rank
 * holds every rank's segment. Needs MPI as allreduce does. World 1 or NULL: no-op. */
tern_error *tern_dist_allgather_host(tern_dist *c, void *data, size_t n, tern_dtype dtype) TERN_MUST_USE;

/* Stops every rank of the job with `status`, for a program that has reported its error:
 * MPI_Abort under MPI (the launcher ends the other ranks); otherwise exit, and the launcher
 * of tern_dist_launch ends the others. Never returns. */
TERN_NORETURN void tern_dist_abort(tern_dist *c, int status);

/* ---- what this tern was built with (tern info) ---- */

/* The MPI library's version string, or NULL when tern was built without MPI. */
const char *tern_dist_mpi_library(void);

/* NCCL's version (e.g. 22809), loading libnccl.so.2 (or $TERN_NCCL_LIBRARY) at run time;
 * an error when tern was built without the CUDA toolkit or the library is absent. */
tern_error *tern_dist_nccl_version(int *version) TERN_MUST_USE;

/* ---- starting a job ---- */

typedef enum tern_dist_engine {
    TERN_DIST_ENGINE_MPI,  /* the ranks' collectives are MPI's: started by the MPI launcher */
    TERN_DIST_ENGINE_NCCL, /* NCCL's, bootstrapped over TCP: tern forks the ranks itself */
} tern_dist_engine;

/* The engine a handler's allreduce uses: NCCL for cuda, MPI for the others. */
tern_dist_engine tern_dist_engine_for(const char *backend);

typedef struct tern_dist_launch_options {
    int procs;             /* ranks to start, >= 1 */
    const char *program;   /* the executable each rank runs (e.g. "/proc/self/exe") */
    char *const *argv;     /* its arguments, argv[0] first, NULL-terminated */
    tern_dist_engine engine;
    double grace_seconds;  /* after a rank fails: SIGTERM to the others, SIGKILL after this */
} tern_dist_launch_options;

/* Starts `procs` ranks of `program` on this host and waits for them.
 * NCCL: forks each rank with TERN_DIST_RANK/WORLD/LOCAL_RANK and NCCL_COMM_ID set to a free
 * loopback port; when a rank fails (non-zero status or a signal) the others are stopped and
 * the error names the rank. MPI: runs the MPI launcher found at build time (mpiexec -n N)
 * and returns its outcome. NULL when every rank succeeded. */
tern_error *tern_dist_launch(const tern_dist_launch_options *o) TERN_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
