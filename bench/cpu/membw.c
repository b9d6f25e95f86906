/* Memory bandwidth of this machine, STREAM-like: the ceiling for batch-1 decoding, which reads
 * every weight once a token. Three arrays of `mib` MiB each (default 1024, well
 * past any last-level cache), first touched by the threads that later read them; each test's
 * best of `reps` runs.
 *   read:  s += a[i]            (bytes: the array once)
 *   copy:  b[i] = a[i]          (bytes: read + written)
 *   triad: b[i] = a[i] + q c[i] (bytes: two read + one written)
 * usage: membw [MiB] [reps]; threads from OMP_NUM_THREADS. Prints one line per test. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sum of n floats with 16 independent partial sums, so it is bound by loads, not adds. */
static float read_sum(const float *a, size_t n) {
    float part[16] = {0};
    for (size_t i = 0; i + 16 <= n; i += 16)
        for (int q = 0; q < 16; q++) part[q] += a[i + q];
    float s = 0;
    for (int q = 0; q < 16; q++) s += part[q];
    return s;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (mib < 16 || reps < 1) {
        fprintf(stderr, "usage: membw [MiB >= 16] [reps >= 1]\n");
        return 2;
    }
    size_t n = mib * 1024 * 1024 / sizeof(float);
    n -= n % (16 * 64);
    float *a = aligned_alloc(64, n * sizeof(float)), *b = aligned_alloc(64, n * sizeof(float));
    float *c = aligned_alloc(64, n * sizeof(float));
    if (!a || !b || !c) {
        fprintf(stderr, "membw: out of memory for 3 x %zu MiB\n", mib);
        return 1;
    }
    int threads = omp_get_max_threads();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;
    double best[3] = {1e30, 1e30, 1e30};
    volatile float sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        float total = 0;
#pragma omp parallel reduction(+ : total)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t chunk = n / (size_t)nt / 16 * 16, lo = (size_t)t * chunk;
            size_t hi = t == nt - 1 ? n : lo + chunk;
            total += read_sum(a + lo, hi - lo);
        }
        sink = total;
        double t1 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) b[i] = a[i];
        double t2 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) b[i] = a[i] + 0.5f * c[i];
        double t3 = now();
        if (t1 - t0 < best[0]) best[0] = t1 - t0;
        if (t2 - t1 < best[1]) best[1] = t2 - t1;
        if (t3 - t2 < best[2]) best[2] = t3 - t2;
    }
    (void)sink;
    double bytes = (double)n * sizeof(float);
    printf("membw: %d thread%s, %zu MiB arrays, best of %d\n", threads, threads == 1 ? "" : "s", mib, reps);
    printf("membw: read  %.1f GB/s\n", bytes / best[0] / 1e9);
    printf("membw: copy  %.1f GB/s (read + write)\n", 2 * bytes / best[1] / 1e9);
    printf("membw: triad %.1f GB/s (2 reads + write)\n", 3 * bytes / best[2] / 1e9);
    free(a);
    free(b);
    free(c);
    return 0;
}
