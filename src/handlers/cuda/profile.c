/* Per-operation timing for the cuda handler, on when TERN_CUDA_PROFILE is set: each
 * operation is bracketed by stream synchronisations and its wall time added to a table that
 * is printed on stderr when the device closes. It serialises the GPU with the host, so it
 * shows where time goes, not how fast the whole runs. */
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
    if (!d->profile || d->capturing >= 0) return;
    d->cu->cuStreamSynchronize(d->stream);
    double dt = now() - t0;
    int i = 0;
    while (i < d->profile_len && strcmp(d->profile[i].name, name)) i++;
    if (i == d->profile_len) {
        if (d->profile_len == CUDA_PROFILE_SLOTS) return;
        snprintf(d->profile[i].name, sizeof d->profile[i].name, "%s", name);
        d->profile_len++;
    }
    d->profile[i].seconds += dt;
    d->profile[i].calls++;
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
    fprintf(stderr, "cuda profile: %.1f ms in operations\n", total * 1e3);
    for (int i = 0; i < d->profile_len; i++)
        fprintf(stderr, "  %-40s %9.2f ms %5.1f%% %7ld calls\n", d->profile[i].name,
                d->profile[i].seconds * 1e3, 100 * d->profile[i].seconds / total, d->profile[i].calls);
}
