/* The f32 FMA peak of this machine's cores: 12 independent chains of 8-lane FMAs per thread
 * (enough to hide the FMA latency on two pipes), one thread per OpenMP thread, best of 5.
 *   cc -std=c11 -O3 -mavx2 -mfma -fopenmp bench/cpu/fma_peak.c -o fma_peak && OMP_NUM_THREADS=N ./fma_peak
 * A GEMM's rate divided by this is the share of the cores it uses. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 12
#define STEPS 100000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    double best = 0;
    float sink = 0;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
#pragma omp parallel reduction(+ : sink)
        {
            __m256 acc[CHAINS], mul = _mm256_set1_ps(1.0000001f), add = _mm256_set1_ps(1e-7f);
            for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
            for (long s = 0; s < STEPS; s++)
#pragma GCC unroll 12
                for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
            for (int i = 0; i < CHAINS; i++) sink += _mm256_cvtss_f32(acc[i]);
        }
        double gflops = 2.0 * 8 * CHAINS * STEPS * omp_get_max_threads() / (now() - t0) / 1e9;
        if (gflops > best) best = gflops;
    }
    printf("fma_peak: %d threads, best of 5: %.1f GFLOP/s (f32, 8-lane FMA) [%g]\n", omp_get_max_threads(), best,
           (double)sink);
    return 0;
}
