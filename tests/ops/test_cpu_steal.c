/* The cpu handler's work stealing (src/handlers/cpu/steal.h): every unit is handed out exactly
 * once, whatever the thread count (one, two, more threads than units, more than the plan's
 * CPU_STEAL_RANGES ranges) and unit count (none, fewer than the threads, many); one thread
 * alone takes the units in order (its range is all of them); a thread that is slowed down
 * gets its units taken by the others from the back. */
#include <omp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "handlers/cpu/steal.h"

static void check_once(int threads, size_t n, bool slow_first) {
    cpu_steal plan;
    cpu_steal_init(&plan, threads, n);
    _Atomic int *taken = calloc(n ? n : 1, sizeof *taken);
    _Atomic long by_others = 0;
#pragma omp parallel num_threads(threads)
    {
        int me = omp_get_thread_num();
        for (long u; (u = cpu_steal_next(&plan, me)) >= 0;) {
            atomic_fetch_add(&taken[u], 1);
            /* thread 0 owns units 0 .. n / threads - 1: when it dawdles, others take them */
            if (me != 0 && (size_t)u < n / (size_t)threads) atomic_fetch_add(&by_others, 1);
            if (slow_first && me == 0) {
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL);
            }
        }
    }
    int wrong = 0;
    for (size_t u = 0; u < n; u++) wrong += taken[u] != 1;
    CHECKF(wrong == 0, "steal: %d threads, %zu units: %d units not taken exactly once", threads, n, wrong);
    if (slow_first && omp_get_max_threads() > 1 && threads > 1 && n >= 64 * (size_t)threads)
        CHECKF(by_others > 0, "steal: %d threads, %zu units: none of the slow thread's units was taken", threads,
               n);
    free((void *)taken);
}

int main(void) {
    static const int threads[] = {1, 2, 3, 7, CPU_STEAL_RANGES + 5};
    static const size_t ns[] = {0, 1, 2, 5, 64, 1000};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) check_once(threads[t], ns[i], false);
    check_once(2, 256, true);
    check_once(3, 300, true);
    /* alone: in order */
    cpu_steal plan;
    cpu_steal_init(&plan, 1, 10);
    int in_order = 1;
    for (long u = 0; u < 10; u++) in_order &= cpu_steal_next(&plan, 0) == u;
    CHECKF(in_order && cpu_steal_next(&plan, 0) == -1, "steal: one thread takes 0 .. 9 in order, then none");
    return check_summary("test_cpu_steal");
}
