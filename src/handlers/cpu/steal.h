/* Work stealing over the units 0 .. n-1 of one parallel region. Each thread owns a contiguous
 * range (its static share) and takes its units front to back, so it streams its weights in
 * order as a static schedule would; a thread whose range is empty takes the last unit of the
 * range with the most left. On a shared 2-core VM the two threads' speeds differ from product
 * to product (one vCPU ran 30% slower from L3 in one test, another tenant's memory traffic
 * comes and goes), and a static split left the faster thread waiting at every product's
 * end (docs/PERFORMANCE.md). Which thread runs a unit varies, so callers must make a unit's
 * result independent of that (each unit writes its own outputs or its own partial sums). */
#ifndef TERN_HANDLERS_CPU_STEAL_H
#define TERN_HANDLERS_CPU_STEAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Ranges a plan holds at most: with more threads, thread t shares range t % CPU_STEAL_RANGES
 * (both take its front; the compare-and-swap keeps each unit to one taker). */
#define CPU_STEAL_RANGES 64

/* One range, front and back packed as (front << 32 | back), alone on its cache line (the
 * owner updates it once a unit). */
typedef struct cpu_steal_range {
    _Alignas(64) _Atomic uint64_t fb;
} cpu_steal_range;

typedef struct cpu_steal {
    cpu_steal_range r[CPU_STEAL_RANGES];
    int ranges;
} cpu_steal;

static inline uint64_t cpu_steal_pack(uint64_t front, uint64_t back) { return front << 32 | back; }

/* Splits units 0 .. n-1 (n < 2^32) into contiguous ranges for `threads` threads, as
 * schedule(static) would. */
static inline void cpu_steal_init(cpu_steal *s, int threads, size_t n) {
    int ranges = threads < CPU_STEAL_RANGES ? threads : CPU_STEAL_RANGES;
    if (ranges < 1) ranges = 1;
    s->ranges = ranges;
    for (int t = 0; t < ranges; t++) {
        uint64_t lo = (uint64_t)n * (uint64_t)t / (uint64_t)ranges;
        uint64_t hi = (uint64_t)n * (uint64_t)(t + 1) / (uint64_t)ranges;
        atomic_init(&s->r[t].fb, cpu_steal_pack(lo, hi));
    }
}

/* The next unit for thread t, or -1 when none is left anywhere. */
static inline long cpu_steal_next(cpu_steal *s, int t) {
    cpu_steal_range *own = &s->r[t % s->ranges];
    uint64_t fb = atomic_load_explicit(&own->fb, memory_order_relaxed);
    while ((fb >> 32) < (fb & 0xffffffffu)) /* its own, from the front */
        if (atomic_compare_exchange_weak(&own->fb, &fb, fb + ((uint64_t)1 << 32))) return (long)(fb >> 32);
    for (;;) { /* the back of the range with the most left */
        int victim = -1;
        uint64_t most = 0, vfb = 0;
        for (int v = 0; v < s->ranges; v++) {
            uint64_t x = atomic_load_explicit(&s->r[v].fb, memory_order_relaxed);
            uint64_t left = (x & 0xffffffffu) > (x >> 32) ? (x & 0xffffffffu) - (x >> 32) : 0;
            if (left > most) most = left, victim = v, vfb = x;
        }
        if (victim < 0) return -1;
        if (atomic_compare_exchange_weak(&s->r[victim].fb, &vfb, vfb - 1)) return (long)(vfb & 0xffffffffu) - 1;
    }
}

#endif
