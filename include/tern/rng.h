/* Counter-based random numbers, the same on every handler (GPU kernels compute the same
 * 32-bit hash), so sampling and initialisation are reproducible from a seed alone. */
#ifndef TERN_RNG_H
#define TERN_RNG_H

#include <stdint.h>

/* A 32-bit integer hash with good avalanche (the "lowbias32" constants). */
static inline uint32_t tern_hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* 32 random bits for draw `index` of the stream `seed`. */
static inline uint32_t tern_random_bits(uint64_t seed, uint32_t index) {
    uint32_t s = tern_hash32(tern_hash32((uint32_t)seed) ^ (uint32_t)(seed >> 32));
    return tern_hash32(s ^ tern_hash32(index));
}

/* A float in [0, 1) with 24 random bits. */
static inline float tern_uniform(uint64_t seed, uint32_t index) {
    return (float)(tern_random_bits(seed, index) >> 8) * (1.0f / 16777216.0f);
}

#endif
