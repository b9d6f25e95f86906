/* Branch-free f32 exp and GELU that the compiler vectorises inside `omp simd` loops (libm's
 * expf and tanhf are scalar calls, and softmax over 50257 logits or GELU over every MLP
 * activation would spend most of their time in them). GCC turns the selects below into
 * vector blends only under -fno-trapping-math (the cpu handler's CMakeLists sets it): without
 * it every loop calling these stayed scalar ("control flow in loop").
 *
 * cpu_expf: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, then the degree-7 Taylor
 * polynomial (truncation error 0.3466^8 / 8! < 5e-9 relative); about 1 ulp overall. Results
 * below 2^-125 (x < -86.6) flush to 0; x > 88.72 gives inf; NaN stays NaN. */
#ifndef TERN_HANDLERS_CPU_FASTMATH_H
#define TERN_HANDLERS_CPU_FASTMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float cpu_expf(float x) {
    const float lo = -86.6f, hi = 88.7228393555f;
    float xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    /* n = round(x / ln2) with the 1.5 * 2^23 trick (default rounding mode) */
    const float shifter = 12582912.0f;
    float n = fmaf(xc, 1.44269504088896341f, shifter) - shifter;
    /* ln2 split so that n * ln2_hi is exact for |n| <= 128 */
    float r = fmaf(n, -0.693359375f, xc);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    /* 2^n as 2 * 2^(n-1), so n = 128 still has a normal exponent (and overflows to inf) */
    int32_t e = (int32_t)n + 126;
    uint32_t bits = (uint32_t)e << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = (p * 2.0f) * scale;
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* GPT-2's GELU, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), computed as
 * x * sigmoid(2u) = x / (1 + exp(-2u)): the same function without the cancellation of
 * 1 + tanh(u) for negative x, so it is accurate to a few ulp everywhere. */
#define CPU_GELU_S 0.7978845608028654f /* sqrt(2 / pi) */
#define CPU_GELU_C 0.044715f

static inline float cpu_gelu_f32(float x) {
    float u = CPU_GELU_S * fmaf(CPU_GELU_C * x, x * x, x);
    float e = cpu_expf(-2.0f * u);
    return x / (1.0f + e);
}

/* d gelu / dx. With s = sigmoid(2u): 1 + tanh u = 2s and 1 - tanh^2 u = 4 s (1 - s), so
 * gelu' = s + 2 x s (1 - s) u', u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2). 1 - s = e s. */
static inline float cpu_gelu_grad_f32(float x) {
    float x2 = x * x;
    float u = CPU_GELU_S * fmaf(CPU_GELU_C * x, x2, x);
    float e = cpu_expf(-2.0f * u);
    float s = 1.0f / (1.0f + e);
    float one_minus_s = e * s;
    float du = CPU_GELU_S * fmaf(3.0f * CPU_GELU_C, x2, 1.0f);
    float g = s + 2.0f * x * s * one_minus_s * du;
    /* e = inf (x very negative): s = 0 and e * s is NaN; the gradient is 0 there */
    return e > 3.0e38f ? 0.0f : g;
}

/* Sum of n floats with 16 partial sums (vectorises without -ffast-math; also more accurate
 * than one running sum). */
static inline float cpu_sum(const float *x, size_t n) {
    float part[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 16; q++) part[q] += x[i + q];
    for (; i < n; i++) part[i & 15] += x[i];
    float s = 0;
    for (int q = 0; q < 16; q++) s += part[q];
    return s;
}

/* Dot product of n floats, 16 partial sums. */
static inline float cpu_dot(const float *x, const float *y, size_t n) {
    float part[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 16; q++) part[q] = fmaf(x[i + q], y[i + q], part[q]);
    for (; i < n; i++) part[i & 15] = fmaf(x[i], y[i], part[i & 15]);
    float s = 0;
    for (int q = 0; q < 16; q++) s += part[q];
    return s;
}

#endif
