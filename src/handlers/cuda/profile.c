/* Per-operation timing for the cuda handler, on with its profile option
 * (TERN_CUDA_TUNE=profile=1): each operation is bracketed by stream synchronisations and its wall time added to a table that
 * is printed on stderr when the device closes. It serialises the GPU with the host, so it
 * shows where time goes, not how fast the whole runs. Each entry's first call is kept apart
 * and left out of the report: it carries the one-time costs (kernel compilation, cuBLASLt's
 * algorithm choice, scratch growth) that would otherwise swamp a short run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_handler.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double cuda_profile_begin(tern_dev *d) {
    if (!d->profile) return 0;
    d->cu->cuStreamSynchronize(d->stream);
    return now();
}

void cuda_profile_end(tern_dev *d, const char *name, double t0) {
    if (!d->profile || d->capturing >= 0 || !strcmp(name, "matmul")) return; /* matmul: by path */
    d->cu->cuStreamSynchronize(d->stream);
    double dt = now() - t0;
    int i = 0;
    while (i < d->profile_len && strcmp(d->profile[i].name, name)) i++;
    if (i == d->profile_len) {
        if (d->profile_len == CUDA_PROFILE_SLOTS) return;
        snprintf(d->profile[i].name, sizeof d->profile[i].name, "%s", name);
        d->profile_len++;
    }
    if (d->profile[i].calls++ == 0) d->profile[i].first = dt;
    else d->profile[i].seconds += dt;
}

static int by_time(const void *a, const void *b) {
    double x = ((const cuda_profile_entry *)a)->seconds, y = ((const cuda_profile_entry *)b)->seconds;
    return (x < y) - (x > y);
}

void cuda_profile_report(tern_dev *d) {
    if (!d->profile || !d->profile_len) return;
    qsort(d->profile, (size_t)d->profile_len, sizeof *d->profile, by_time);
    double total = 0;
    for (int i = 0; i < d->profile_len; i++) total += d->profile[i].seconds;
    if (total <= 0) total = 1e-30;
    fprintf(stderr, "cuda profile: %.2f ms in operations after each one's first call\n", total * 1e3);
    for (int i = 0; i < d->profile_len; i++) {
        const cuda_profile_entry *e = &d->profile[i];
        long steady = e->calls - 1;
        fprintf(stderr, "  %-44s %9.3f ms %5.1f%% %6ld calls %9.1f us/call (first %.1f us)\n", e->name,
                e->seconds * 1e3, 100 * e->seconds / total, steady, steady ? e->seconds * 1e6 / steady : 0.0,
                e->first * 1e6);
    }
}
