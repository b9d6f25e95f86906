/* Starting the ranks of a job on this host (tern train --procs N).
 *
 * NCCL jobs: tern forks the ranks itself and supervises them; the ranks meet through NCCL's
 * own TCP rendezvous (NCCL_COMM_ID), so no MPI is needed. When a rank fails, the others are
 * stopped (SIGTERM, then SIGKILL after a grace period), so a dead rank never leaves the
 * others waiting in a collective. MPI jobs: the MPI launcher starts the ranks (an MPI job
 * cannot be formed from processes started otherwise), and tern waits for it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "dist/dist_internal.h"

extern char **environ;

#define MAX_PROCS 4096

/* A TCP port on the loopback that nothing listens on now (the kernel's choice). NCCL's rank 0
 * binds it a moment later; another program taking it in between makes the rendezvous fail
 * with an error, not a hang. */
static tern_error *free_port(int *out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return tern_errorf("socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    tern_error *err = NULL;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        err = tern_errorf("finding a free port for the rendezvous: %s", strerror(errno));
    else
        *out = ntohs(a.sin_port);
    close(fd);
    return err;
}

static bool is_rank_variable(const char *entry) {
    static const char *const names[] = {"TERN_DIST_RANK=", "TERN_DIST_WORLD=",
                                        "TERN_DIST_LOCAL_RANK=", "NCCL_COMM_ID="};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(entry, names[i], strlen(names[i]))) return true;
    return false;
}

/* This process's environment without the rank variables, plus room for `extra` entries
 * (filled by the caller), NULL-terminated. The strings stay environ's. */
static char **environment_with(size_t extra, size_t *used) {
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + extra + 1, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_rank_variable(environ[i])) env[k++] = environ[i];
    *used = k;
    return env;
}

/* A readable outcome of a wait status. */
static void describe_status(int status, char *out, size_t cap) {
    if (WIFEXITED(status)) snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(out, cap, "stopped (status %d)", status);
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for every child in pids (0: already reaped). After the first failure, the others get
 * SIGTERM, and SIGKILL once `grace` seconds have passed. *failed: the first failing index
 * (-1 when none), with its status. */
static void supervise(pid_t *pids, int n, double grace, int *failed, int *failed_status) {
    int live = 0;
    for (int i = 0; i < n; i++) live += pids[i] > 0;
    *failed = -1;
    double kill_at = 0;
    bool killed = false;
    while (live > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p < 0 && errno != EINTR) break; /* no children left */
        if (p > 0) {
            for (int i = 0; i < n; i++) {
                if (pids[i] != p) continue;
                pids[i] = 0;
                live--;
                bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
                if (!ok && *failed < 0) {
                    *failed = i;
                    *failed_status = status;
                    for (int j = 0; j < n; j++)
                        if (pids[j] > 0) kill(pids[j], SIGTERM);
                    kill_at = dist_now() + grace;
                }
            }
            continue;
        }
        if (*failed >= 0 && !killed && dist_now() >= kill_at) {
            for (int j = 0; j < n; j++)
                if (pids[j] > 0) kill(pids[j], SIGKILL);
            killed = true;
        }
        sleep_ms(10);
    }
}

/* Starts program with argv and env; the child dies with this process (Linux). */
static pid_t spawn(const char *program, char *const *argv, char **env) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid; /* the parent, or -1 */
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* the parent died before prctl */
#else
    (void)parent;
#endif
    execve(program, argv, env);
    _exit(127);
}

static tern_error *launch_forked(const tern_dist_launch_options *o) {
    int port = 0;
    TERN_TRY(free_port(&port));
    size_t base = 0;
    char **env = environment_with(4, &base);
    pid_t *pids = calloc((size_t)o->procs, sizeof *pids);
    char(*vars)[4][64] = calloc((size_t)o->procs, sizeof *vars);
    if (!env || !pids || !vars) {
        free(env);
        free(pids);
        free(vars);
        return tern_errorf("out of memory");
    }
    tern_error *err = NULL;
    int started = 0;
    for (int r = 0; r < o->procs; r++) {
        snprintf(vars[r][0], sizeof vars[r][0], "TERN_DIST_RANK=%d", r);
        snprintf(vars[r][1], sizeof vars[r][1], "TERN_DIST_WORLD=%d", o->procs);
        snprintf(vars[r][2], sizeof vars[r][2], "TERN_DIST_LOCAL_RANK=%d", r);
        snprintf(vars[r][3], sizeof vars[r][3], "NCCL_COMM_ID=127.0.0.1:%d", port);
        for (int k = 0; k < 4; k++) env[base + (size_t)k] = vars[r][k];
        pids[r] = spawn(o->program, o->argv, env);
        if (pids[r] < 0) {
            pids[r] = 0;
            err = tern_errorf("starting rank %d: fork: %s", r, strerror(errno));
            for (int j = 0; j < r; j++) kill(pids[j], SIGTERM);
            break;
        }
        started++;
    }
    int failed = -1, status = 0;
    supervise(pids, started, o->grace_seconds, &failed, &status);
    if (!err && failed >= 0) {
        char what[96];
        describe_status(status, what, sizeof what);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            err = tern_errorf("rank %d could not start %s", failed, o->program);
        else
            err = tern_errorf("rank %d of %d %s; the other ranks were stopped", failed, o->procs, what);
    }
    free(env);
    free(pids);
    free(vars);
    return err;
}

/* The MPI launcher: $TERN_MPIEXEC, else the one found when tern was built. */
static const char *mpiexec_path(void) {
    const char *env = getenv("TERN_MPIEXEC");
    if (env && *env) return env;
#ifdef TERN_MPIEXEC
    return TERN_MPIEXEC;
#else
    return NULL;
#endif
}

/* Open MPI's launcher refuses to run as root, and to start more ranks than there are cores,
 * unless told; `tern train --procs N` is meant to work as typed, so tern tells it, says so on
 * stderr, and leaves alone whatever the caller already set. (MPICH ignores these variables.) */
#define MPI_SETTINGS 3
static void mpi_settings(char **env, size_t at, int procs) {
    static char *const root[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
    static char *const oversubscribe = "OMPI_MCA_rmaps_base_oversubscribe=1";
    if (geteuid() == 0 && !getenv("OMPI_ALLOW_RUN_AS_ROOT")) {
        env[at++] = root[0];
        if (!getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")) env[at++] = root[1];
        fprintf(stderr, "tern: --procs: running as root, so Open MPI is allowed to (OMPI_ALLOW_RUN_AS_ROOT=1)\n");
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && procs > cores && !getenv("OMPI_MCA_rmaps_base_oversubscribe")) {
        env[at++] = oversubscribe;
        fprintf(stderr, "tern: --procs: %d ranks on %ld cores, so Open MPI may oversubscribe them "
                        "(OMPI_MCA_rmaps_base_oversubscribe=1)\n", procs, cores);
    }
}

static tern_error *launch_mpi(const tern_dist_launch_options *o) {
    const char *mpiexec = mpiexec_path();
    if (!mpiexec || !tern_dist_mpi_library())
        return tern_errorf("--procs for this handler needs MPI, and this tern was built without it "
                           "(install libopenmpi-dev openmpi-bin and rebuild)");
    size_t argc = 0;
    while (o->argv[argc]) argc++;
    char count[16];
    snprintf(count, sizeof count, "%d", o->procs);
    char **args = calloc(argc + 5, sizeof *args);
    if (!args) return tern_errorf("out of memory");
    size_t k = 0;
    args[k++] = (char *)mpiexec;
    args[k++] = "-n";
    args[k++] = count;
    args[k++] = (char *)o->program;
    for (size_t i = 1; i < argc; i++) args[k++] = o->argv[i];
    size_t base = 0;
    char **env = environment_with(MPI_SETTINGS, &base);
    if (env) mpi_settings(env, base, o->procs);
    pid_t pid = env ? spawn(mpiexec, args, env) : -1;
    tern_error *err = NULL;
    if (pid < 0) {
        err = tern_errorf("starting %s: %s", mpiexec, env ? strerror(errno) : "out of memory");
    } else {
        int failed = -1, status = 0;
        supervise(&pid, 1, o->grace_seconds, &failed, &status);
        if (failed >= 0) {
            char what[96];
            describe_status(status, what, sizeof what);
            err = WIFEXITED(status) && WEXITSTATUS(status) == 127
                      ? tern_errorf("could not start the MPI launcher %s", mpiexec)
                      : tern_errorf("the MPI job of %d ranks failed: %s %s", o->procs, mpiexec, what);
        }
    }
    free(env);
    free(args);
    return err;
}

tern_error *tern_dist_launch(const tern_dist_launch_options *o) {
    if (!o || !o->program || !o->argv || !o->argv[0]) return tern_errorf("launch: no program to start");
    if (o->procs < 1 || o->procs > MAX_PROCS)
        return tern_errorf("launch: %d processes; expected 1 to %d", o->procs, MAX_PROCS);
    if (!(o->grace_seconds >= 0)) return tern_errorf("launch: the grace period must be >= 0");
    return o->engine == TERN_DIST_ENGINE_MPI ? launch_mpi(o) : launch_forked(o);
}
