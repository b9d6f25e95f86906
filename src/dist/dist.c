/* The communicator: which rank this process is, from how the job was started, and MPI's
 * part (initialisation with errors returned, the host all-reduce, broadcast, abort). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "tern/half.h"

#ifdef TERN_HAVE_MPI
#include <mpi.h>
#endif

#define DEFAULT_TIMEOUT_SECONDS 600.0

double dist_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A whole non-negative number from the environment, or -1 when unset. */
static tern_error *env_int(const char *name, long max, long *out) {
    *out = -1;
    const char *v = getenv(name);
    if (!v || !*v) return NULL;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno || x < 0 || x > max)
        return tern_errorf("%s=%s: expected a whole number from 0 to %ld", name, v, max);
    *out = x;
    return NULL;
}

/* Whether an MPI launcher started this process: the variables the common launchers set
 * (Open MPI, MPICH's Hydra and Slurm's PMI, PMIx, MVAPICH). */
static bool launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                       "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return true;
    }
    return false;
}

bool tern_dist_launched(void) {
    const char *w = getenv("TERN_DIST_WORLD");
    return (w && *w) || launched_by_mpi();
}

#ifdef TERN_HAVE_MPI
/* NULL for MPI_SUCCESS, else "<what>: <MPI's message>". */
static tern_error *mpi_check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return NULL;
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return tern_errorf("%s: %s", what, text);
}

static tern_error *open_mpi(tern_dist *c) {
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready) return tern_errorf("MPI is already initialised in this process");
    TERN_TRY(mpi_check(MPI_Init(NULL, NULL), "MPI_Init"));
    c->mpi_initialised = true;
    /* Failures come back as values: a dead peer is an error, not an abort inside MPI. */
    TERN_TRY(mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                       "MPI_Comm_set_errhandler"));
    TERN_TRY(mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank), "MPI_Comm_rank"));
    TERN_TRY(mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &c->world), "MPI_Comm_size"));
    /* The rank on this host: the rank within the ranks that share memory with this one. */
    MPI_Comm node;
    TERN_TRY(mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank,
                                           MPI_INFO_NULL, &node), "MPI_Comm_split_type"));
    tern_error *err = mpi_check(MPI_Comm_rank(node, &c->local_rank), "MPI_Comm_rank (host)");
    MPI_Comm_free(&node);
    return err;
}
#endif

/* Ranks started by tern_dist_launch. */
static tern_error *open_tern(tern_dist *c) {
    long rank, world, local;
    TERN_TRY(env_int("TERN_DIST_RANK", INT_MAX, &rank));
    TERN_TRY(env_int("TERN_DIST_WORLD", 1 << 20, &world));
    TERN_TRY(env_int("TERN_DIST_LOCAL_RANK", INT_MAX, &local));
    if (world < 1) return tern_errorf("TERN_DIST_WORLD must be at least 1");
    if (rank < 0 || rank >= world)
        return tern_errorf("TERN_DIST_RANK must be set, below TERN_DIST_WORLD=%ld", world);
    c->rank = (int)rank;
    c->world = (int)world;
    c->local_rank = local >= 0 ? (int)local : (int)rank;
    return NULL;
}

static tern_error *read_timeout(double *out) {
    *out = DEFAULT_TIMEOUT_SECONDS;
    const char *v = getenv("TERN_DIST_TIMEOUT");
    if (!v || !*v) return NULL;
    char *end;
    double t = strtod(v, &end);
    if (*end || !(t > 0) || t > 1e7)
        return tern_errorf("TERN_DIST_TIMEOUT=%s: expected seconds above 0", v);
    *out = t;
    return NULL;
}

static bool opened; /* MPI initialises once per process, so the communicator opens once */

tern_error *tern_dist_open(tern_dist **out) {
    *out = NULL;
    if (opened) return tern_errorf("the communicator is already open in this process");
    tern_dist *c = calloc(1, sizeof *c);
    if (!c) return tern_errorf("out of memory");
    c->world = 1;
    tern_error *err = read_timeout(&c->timeout);
    const char *tern_world = getenv("TERN_DIST_WORLD");
    if (!err && tern_world && *tern_world) {
        c->kind = TERN_DIST_TERN;
        err = open_tern(c);
    } else if (!err && launched_by_mpi()) {
        c->kind = TERN_DIST_MPI;
#ifdef TERN_HAVE_MPI
        err = open_mpi(c);
#else
        err = tern_errorf("started by an MPI launcher, but this tern was built without MPI "
                          "(install libopenmpi-dev and rebuild, or use --procs N)");
#endif
    }
    if (err) {
        /* MPI cannot be initialised again: keep the process marked, and stop cleanly. */
        opened = c->mpi_initialised;
        free(c);
        return tern_error_wrap(err, "starting the communicator");
    }
    opened = true;
    *out = c;
    return NULL;
}

void tern_dist_close(tern_dist *c) {
    if (!c) return;
#ifdef TERN_HAVE_MPI
    if (c->mpi_initialised) MPI_Finalize();
#endif
    free(c);
}

int tern_dist_rank(const tern_dist *c) { return c ? c->rank : 0; }
int tern_dist_world(const tern_dist *c) { return c ? c->world : 1; }
int tern_dist_local_rank(const tern_dist *c) { return c ? c->local_rank : 0; }
tern_dist_kind tern_dist_get_kind(const tern_dist *c) { return c ? c->kind : TERN_DIST_SINGLE; }
double tern_dist_timeout(const tern_dist *c) { return c ? c->timeout : DEFAULT_TIMEOUT_SECONDS; }

void tern_dist_abort(tern_dist *c, int status) {
#ifdef TERN_HAVE_MPI
    if (c && c->mpi_initialised) MPI_Abort(MPI_COMM_WORLD, status);
#else
    (void)c;
#endif
    fflush(NULL);
    exit(status);
}

const char *tern_dist_mpi_library(void) {
#ifdef TERN_HAVE_MPI
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (!version[0] && MPI_Get_library_version(version, &len) != MPI_SUCCESS)
        snprintf(version, sizeof version, "MPI");
    version[strcspn(version, ",\n")] = 0; /* the first clause: "Open MPI v4.1.4" */
    return version;
#else
    return NULL;
#endif
}

tern_dist_engine tern_dist_engine_for(const char *backend) {
    /* the handler's name, before any ':options' */
    bool cuda = backend && !strncmp(backend, "cuda", 4) && (backend[4] == 0 || backend[4] == ':');
    return cuda ? TERN_DIST_ENGINE_NCCL : TERN_DIST_ENGINE_MPI;
}

/* Elements per MPI call: MPI counts are int, and a bf16 chunk's f32 copy stays small. */
#define CHUNK ((size_t)1 << 24)

tern_error *tern_dist_allreduce_host(tern_dist *c, void *data, size_t n, tern_dtype dtype) {
    if (dtype != TERN_F32 && dtype != TERN_BF16)
        return tern_errorf("allreduce: %s buffers are not summed (f32 or bf16)", tern_dtype_name(dtype));
    if (!c || c->world <= 1 || n == 0) return NULL;
    if (!data) return tern_errorf("allreduce: no host data");
#ifdef TERN_HAVE_MPI
    if (!c->mpi_initialised)
        return tern_errorf("allreduce: this handler sums with MPI; start the job with an MPI "
                           "launcher (mpirun -np N tern ...) or tern --procs N");
    float *tmp = NULL;
    if (dtype == TERN_BF16 && !(tmp = malloc((n < CHUNK ? n : CHUNK) * sizeof *tmp)))
        return tern_errorf("allreduce: out of memory");
    tern_error *err = NULL;
    for (size_t start = 0; start < n && !err; start += CHUNK) {
        size_t len = n - start < CHUNK ? n - start : CHUNK;
        if (dtype == TERN_F32) {
            err = mpi_check(MPI_Allreduce(MPI_IN_PLACE, (float *)data + start, (int)len, MPI_FLOAT,
                                          MPI_SUM, MPI_COMM_WORLD), "allreduce: MPI_Allreduce");
            continue;
        }
        uint16_t *h = (uint16_t *)data + start;
        for (size_t i = 0; i < len; i++) tmp[i] = tern_bf16_to_f32(h[i]);
        err = mpi_check(MPI_Allreduce(MPI_IN_PLACE, tmp, (int)len, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD), "allreduce: MPI_Allreduce");
        for (size_t i = 0; i < len && !err; i++) h[i] = tern_f32_to_bf16(tmp[i]);
    }
    free(tmp);
    return err;
#else
    return tern_errorf("allreduce: this handler sums with MPI, and this tern was built without "
                       "it (install libopenmpi-dev and rebuild)");
#endif
}

tern_error *tern_dist_allgather_host(tern_dist *c, void *data, size_t n, tern_dtype dtype) {
    if (dtype != TERN_F32 && dtype != TERN_BF16)
        return tern_errorf("allgather: %s buffers are not gathered (f32 or bf16)", tern_dtype_name(dtype));
    int world = c ? c->world : 1;
    if (n % (size_t)world)
        return tern_errorf("allgather: %zu elements are not a multiple of the %d ranks", n, world);
    if (world <= 1 || n == 0) return NULL;
    if (!data) return tern_errorf("allgather: no host data");
#ifdef TERN_HAVE_MPI
    if (!c->mpi_initialised)
        return tern_errorf("allgather: this handler gathers with MPI; start the job with an MPI "
                           "launcher (mpirun -np N tern ...) or tern --procs N");
    size_t k = n / (size_t)world;
    if (k > INT_MAX)
        return tern_errorf("allgather: a segment of %zu elements is more than MPI counts (%d)", k, INT_MAX);
    /* No arithmetic: bf16 travels as its 16-bit pattern. In place, each rank's segment is
     * already at its place in the buffer. */
    MPI_Datatype type = dtype == TERN_F32 ? MPI_FLOAT : MPI_UINT16_T;
    return mpi_check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, (int)k, type,
                                   MPI_COMM_WORLD), "allgather: MPI_Allgather");
#else
    return tern_errorf("allgather: this handler gathers with MPI, and this tern was built "
                       "without it (install libopenmpi-dev and rebuild)");
#endif
}

tern_error *dist_bcast_bytes(tern_dist *c, void *data, size_t size, int root) {
    if (!c || c->world <= 1) return NULL;
#ifdef TERN_HAVE_MPI
    if (c->mpi_initialised) {
        if (size > INT_MAX) return tern_errorf("broadcast of %zu bytes is too large", size);
        return mpi_check(MPI_Bcast(data, (int)size, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
#endif
    (void)data, (void)size, (void)root;
    return tern_errorf("broadcast: this job has no MPI");
}
