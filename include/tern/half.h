/* bf16 and f16 conversions on the host, round-to-nearest-even, NaN preserved. */
#ifndef TERN_HALF_H
#define TERN_HALF_H

#include <stdint.h>
#include <string.h>

static inline float tern_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t tern_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u); /* quiet NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static inline float tern_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t tern_f32_to_f16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint32_t sign = (bits >> 16) & 0x8000u;
    uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);           /* NaN */
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);          /* overflow to inf */
    if (abs < 0x38800000u) {                                            /* subnormal or zero */
        if (abs < 0x33000000u) return (uint16_t)sign;
        uint32_t e = abs >> 23;
        uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (113 - e) - 1 */
        uint32_t half = man >> shift;
        uint32_t rest = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    abs += 0xfffu + ((abs >> 13) & 1u);
    return (uint16_t)(sign | ((abs - 0x38000000u) >> 13));
}

/* An f32 kept as two 16-bit halves (AdamW's split master, effect.h): with M the f32's bit
 * pattern, in uint32 arithmetic modulo 2^32,
 *   hi = (M + 0x8000) >> 16      the bf16 value nearest M, ties away from zero in magnitude
 *   lo = (M + 0x8000) & 0xffff   the rest, biased
 * and M = (hi << 16) + lo - 0x8000 rebuilds M exactly, for every bit pattern (NaN
 * included). hi is a bf16 compute weight as it is; only magnitudes above about 3.39e38
 * round it to inf (M itself still comes back). */
static inline void tern_f32_split(float x, uint16_t *hi, uint16_t *lo) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits += 0x8000u;
    *hi = (uint16_t)(bits >> 16);
    *lo = (uint16_t)bits;
}

static inline float tern_f32_join(uint16_t hi, uint16_t lo) {
    uint32_t bits = ((uint32_t)hi << 16) + lo - 0x8000u;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
