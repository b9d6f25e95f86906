/* The launcher of `tern train --procs N` for NCCL jobs (tern forks the ranks itself), run
 * with /bin/sh as the rank program: each rank sees its variables; a rank that fails, or is
 * killed, stops the others promptly and the error names it; bad options are errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "tern/dist.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static tern_error *run_sh(int procs, const char *script, double grace) {
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    tern_dist_launch_options o = {.procs = procs, .program = "/bin/sh", .argv = argv,
                                  .engine = TERN_DIST_ENGINE_NCCL, .grace_seconds = grace};
    return tern_dist_launch(&o);
}

int main(void) {
    char dir[] = "/tmp/tern-launch-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char script[1024];

    /* Every rank runs, with its rank, the world, its local rank and one rendezvous address. */
    snprintf(script, sizeof script,
             "echo \"$TERN_DIST_WORLD $TERN_DIST_LOCAL_RANK $NCCL_COMM_ID\" > %s/rank-$TERN_DIST_RANK", dir);
    CHECK_OK(run_sh(3, script, 1));
    char first_address[128] = "";
    for (int r = 0; r < 3; r++) {
        char path[256], world[16] = "", local[16] = "", address[128] = "";
        snprintf(path, sizeof path, "%s/rank-%d", dir, r);
        FILE *f = fopen(path, "r");
        CHECKF(f != NULL, "rank %d did not run", r);
        if (!f) continue;
        CHECK(fscanf(f, "%15s %15s %127s", world, local, address) == 3);
        fclose(f);
        unlink(path);
        CHECK(!strcmp(world, "3"));
        CHECK(atoi(local) == r);
        CHECKF(!strncmp(address, "127.0.0.1:", 10), "NCCL_COMM_ID is '%s'", address);
        if (r == 0) snprintf(first_address, sizeof first_address, "%s", address);
        else CHECK(!strcmp(address, first_address));
    }

    /* Rank 1 fails at once; rank 0 would sleep 300 s (exec: the rank is the sleeper, so no
     * grandchild holds ctest's output open): it is stopped (SIGTERM), and the
     * launcher returns long before. The bound is generous: the point is "no hang". */
    double t0 = now();
    tern_error *err = run_sh(2, "if [ \"$TERN_DIST_RANK\" = 1 ]; then exit 3; fi; exec sleep 300", 1);
    double waited = now() - t0;
    CHECK(err != NULL);
    if (err) {
        CHECKF(strstr(tern_error_message(err), "rank 1 of 2 exited with status 3"), "%s", tern_error_message(err));
        CHECK(strstr(tern_error_message(err), "the other ranks were stopped") != NULL);
    }
    tern_error_free(err);
    CHECKF(waited < 60, "the launcher took %.0f s to stop the other rank", waited);

    /* A rank killed by a signal; the other ignores SIGTERM, so the grace period ends in
     * SIGKILL. */
    t0 = now();
    err = run_sh(2, "if [ \"$TERN_DIST_RANK\" = 0 ]; then kill -9 $$; fi; trap '' TERM; exec sleep 300", 1);
    waited = now() - t0;
    CHECK(err != NULL);
    if (err) CHECKF(strstr(tern_error_message(err), "rank 0 of 2 was killed by signal 9"), "%s", tern_error_message(err));
    tern_error_free(err);
    CHECKF(waited < 60, "the launcher took %.0f s to stop a rank ignoring SIGTERM", waited);

    /* Bad requests. */
    char *argv[] = {"nothing", NULL};
    tern_dist_launch_options bad = {.procs = 0, .program = "/bin/true", .argv = argv,
                                    .engine = TERN_DIST_ENGINE_NCCL, .grace_seconds = 1};
    CHECK_ERR(tern_dist_launch(&bad), "0 processes");
    bad.procs = 2;
    bad.program = "/nonexistent/tern";
    CHECK_ERR(tern_dist_launch(&bad), "could not start /nonexistent/tern");
    CHECK_ERR(tern_dist_launch(NULL), "no program");

    rmdir(dir);
    return check_summary("test_dist_launch");
}
