/* splitmix64 random numbers for the cpu kernel tests, one stream a test: define
 * SPLITMIX_SEED before including. */
#ifndef TERN_TESTS_OPS_SPLITMIX_H
#define TERN_TESTS_OPS_SPLITMIX_H
#include <stdint.h>

static uint64_t rng = SPLITMIX_SEED;

static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi), from 53 random bits. */
static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(next_u64() >> 11) * (1.0 / 9007199254740992.0));
}
#endif
