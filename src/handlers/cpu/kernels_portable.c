/* The portable kernel table: GNU C vector types of 4 lanes (16 bytes), the width of SSE2 on
 * baseline x86-64 and of NEON on arm64, which the compiler maps to the target's own vectors
 * (a wider type would be split, and changes the ABI of the helpers without AVX). No
 * intrinsics: the build's flags decide the instructions. a * b + c stays two roundings here
 * (ISO C mode does not contract), which the tests' tolerances allow. */
#include <stdint.h>
#include <string.h>

#include "tern/half.h"

#define VN 4
typedef float vf __attribute__((vector_size(16)));
typedef uint32_t vu32 __attribute__((vector_size(16)));
typedef uint16_t vu16 __attribute__((vector_size(8)));
#define VZERO() ((vf){0})
#define VSET1(x) ((vf){0} + (x))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VADD(a, b) ((a) + (b))
#define VMUL(a, b) ((a) * (b))
#define VLOAD_I8(p) load_i8(p)
#define SCALAR_F16(h) tern_f16_to_f32(h)
#define VHSUM(v) hsum(v)
#define VLOAD(p) load_f32(p)
#define VSTORE(p, v) store_f32(p, v)
#define VLOAD_BF16(p) load_bf16(p)
#define VLOAD_F16(p) load_f16(p)
#define VSTORE_BF16(p, v) store_bf16(p, v)
#define VSTORE_F16(p, v) store_f16(p, v)
#define TABLE cpu_kernels_portable
#define TABLE_NAME "portable"

static inline vf load_f32(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store_f32(float *p, vf v) { memcpy(p, &v, sizeof v); }

typedef int8_t vi8 __attribute__((vector_size(4)));

static inline vf load_i8(const unsigned char *p) {
    vi8 q;
    memcpy(&q, p, sizeof q);
    return __builtin_convertvector(q, vf);
}

static inline float hsum(vf v) {
    float s = 0;
    for (int i = 0; i < VN; i++) s += v[i];
    return s;
}

static inline vu32 load_u16_as_u32(const uint16_t *p) {
    vu16 h;
    memcpy(&h, p, sizeof h);
    return __builtin_convertvector(h, vu32);
}

static inline vf load_bf16(const uint16_t *p) { return (vf)(load_u16_as_u32(p) << 16); }

/* f16 bits to f32 bits without branches: move exponent and mantissa into place and rebias;
 * inf/NaN get the rest of the f32 exponent; a subnormal (exponent 0) is made the normal
 * 2^-14 (1 + m / 1024) and 2^-14 subtracted, which is exact. */
static inline vf load_f16(const uint16_t *p) {
    vu32 h = load_u16_as_u32(p);
    vu32 o = (h & 0x7fffu) << 13;
    vu32 e = o & (0x7c00u << 13);
    o += (127u - 15u) << 23;
    vu32 is_special = (vu32)(e == (0x7c00u << 13));
    vu32 is_small = (vu32)(e == 0);
    o += is_special & ((128u - 16u) << 23);
    vf sub = (vf)(o + (1u << 23)) - (vf)((vu32){0} + (113u << 23));
    o = (is_small & (vu32)sub) | (~is_small & o);
    return (vf)(o | ((h & 0x8000u) << 16));
}

static inline void store_bf16(uint16_t *p, vf v) {
    vu32 b = (vu32)v;
    vu32 r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    vu32 nan = (vu32)((b & 0x7fffffffu) > 0x7f800000u);
    r = (nan & ((b >> 16) | 0x40u)) | (~nan & r);
    vu16 h = __builtin_convertvector(r, vu16);
    memcpy(p, &h, sizeof h);
}

/* f16 stores are rare (f16 outputs only): the scalar rounding, lane by lane. */
static inline void store_f16(uint16_t *p, vf v) {
    for (int i = 0; i < VN; i++) p[i] = tern_f32_to_f16(v[i]);
}

/* int8 dot products for q8_0 (kernels_simd.h's Q8_*): a plain loop over the 32 products,
 * summed in int32 (exact), which the compiler vectorises with the target's widening
 * multiply-adds (pmaddwd on SSE2, smlal/sdot on arm64). */
typedef float q8acc;
typedef const int8_t *q8w;
typedef const int8_t *q8a;
#define Q8_ZERO() 0.0f
#define Q8_HSUM(v) (v)
#define Q8_W(p) ((const int8_t *)(p))
#define Q8_A(p) ((const int8_t *)(p))
#define Q8_FMA(acc, w, a, s) q8_fma(acc, w, a, s)

static inline float q8_fma(float acc, const int8_t *w, const int8_t *a, float s) {
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) sum += (int32_t)w[i] * (int32_t)a[i];
    return acc + (float)sum * s;
}

#include "kernels_simd.h"
