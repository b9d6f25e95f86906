/* The meaning of every scalar operation, shared by trace-time constant folding and the host
 * interpreter, so both compute exactly the same thing. Emitters produce target code with
 * the same results (see docs/kernels.md, "Semantics").
 *
 * A scalar lives in 8 bytes (ev): f32 in .f; integers in .i / .u normalised to their type
 * (i32 sign-extended, u32 zero-extended); bool as 0 or 1 in .u. Nothing here has undefined
 * behaviour in C: integer arithmetic wraps, shifts take their count modulo the width,
 * float-to-integer conversions saturate (NaN gives 0). Integer division by zero sets
 * *fault and gives 0. */
#ifndef TERN_KERNEL_EVAL_H
#define TERN_KERNEL_EVAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dsl/ir.h"

typedef union ev {
    int64_t i;
    uint64_t u;
    float f;
} ev;

static inline ev ev_from_u(uint64_t u) {
    ev r;
    r.u = u;
    return r;
}
static inline ev ev_from_f(float f) {
    ev r;
    r.u = 0;
    r.f = f;
    return r;
}

/* Wraps u to type t's width (t an integer type or bool). */
static inline ev ev_norm(int t, uint64_t u) {
    switch (t) {
    case TERN_T_I32: return ev_from_u((uint64_t)(int64_t)(int32_t)(uint32_t)u);
    case TERN_T_U32: return ev_from_u((uint32_t)u);
    case TERN_T_BOOL: return ev_from_u(u != 0);
    default: return ev_from_u(u);
    }
}

static inline uint32_t ev_f_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}
static inline float ev_bits_f(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* f32 to an integer type, truncating and saturating; NaN gives 0. */
static inline ev ev_f_to_int(int t, float f) {
    double d = truncf(f);
    if (f != f) return ev_from_u(0);
    switch (t) {
    case TERN_T_I32:
        if (d <= -2147483648.0) return ev_norm(t, (uint64_t)(int64_t)INT32_MIN);
        if (d >= 2147483647.0) return ev_norm(t, INT32_MAX);
        return ev_norm(t, (uint64_t)(int64_t)d);
    case TERN_T_U32:
        if (d <= 0) return ev_from_u(0);
        if (d >= 4294967295.0) return ev_from_u(UINT32_MAX);
        return ev_from_u((uint64_t)d);
    case TERN_T_I64:
        if (d <= -9223372036854775808.0) return ev_from_u((uint64_t)INT64_MIN);
        if (d >= 9223372036854775807.0) return ev_from_u((uint64_t)INT64_MAX);
        return ev_from_u((uint64_t)(int64_t)d);
    case TERN_T_U64:
        if (d <= 0) return ev_from_u(0);
        if (d >= 18446744073709551615.0) return ev_from_u(UINT64_MAX);
        return ev_from_u((uint64_t)d);
    default: return ev_from_u(0);
    }
}

/* Conversion of value x of type `from` to type `to` (both value types). */
static inline ev ev_cast(int from, int to, ev x) {
    if (from == to) return x;
    if (to == TERN_T_BOOL) return ev_from_u(from == TERN_T_F32 ? x.f != 0.0f : x.u != 0);
    if (to == TERN_T_F32) {
        switch (from) {
        case TERN_T_BOOL: return ev_from_f(x.u ? 1.0f : 0.0f);
        case TERN_T_I32:
        case TERN_T_I64: return ev_from_f((float)x.i);
        default: return ev_from_f((float)x.u);
        }
    }
    if (from == TERN_T_F32) return ev_f_to_int(to, x.f);
    return ev_norm(to, x.u); /* integer or bool to integer: wrap */
}

static inline ev ev_bitcast(int from, int to, ev x) {
    if (from == TERN_T_F32) return ev_norm(to, ev_f_bits(x.f));
    if (to == TERN_T_F32) return ev_from_f(ev_bits_f((uint32_t)x.u));
    return ev_norm(to, x.u);
}

/* Shift count modulo the width of t. */
static inline unsigned ev_shift(int t, uint64_t s) {
    return (unsigned)(s & (uint64_t)(ir_type_bits(t) - 1));
}

static inline ev ev_unary(tern_op1 op, int t, ev a) {
    if (t == TERN_T_F32) {
        float x = a.f;
        switch (op) {
        case TERN_NEG: return ev_from_f(-x);
        case TERN_ABS: return ev_from_f(fabsf(x));
        case TERN_EXP: return ev_from_f(expf(x));
        case TERN_EXP2: return ev_from_f(exp2f(x));
        case TERN_LOG: return ev_from_f(logf(x));
        case TERN_LOG2: return ev_from_f(log2f(x));
        case TERN_SQRT: return ev_from_f(sqrtf(x));
        case TERN_RSQRT: return ev_from_f(1.0f / sqrtf(x));
        case TERN_TANH:
        case TERN_TANH_APPROX: return ev_from_f(tanhf(x));
        case TERN_ERF: return ev_from_f(erff(x));
        case TERN_SIN: return ev_from_f(sinf(x));
        case TERN_COS: return ev_from_f(cosf(x));
        case TERN_FLOOR: return ev_from_f(floorf(x));
        case TERN_CEIL: return ev_from_f(ceilf(x));
        case TERN_ROUND: return ev_from_f(roundf(x));
        case TERN_TRUNC: return ev_from_f(truncf(x));
        case TERN_ISNAN: return ev_from_u(x != x);
        case TERN_ISINF: return ev_from_u(fabsf(x) == INFINITY);
        default: return ev_from_u(0);
        }
    }
    switch (op) {
    case TERN_NEG: return ev_norm(t, 0 - a.u);
    case TERN_NOT: return ev_norm(t, ~a.u);
    case TERN_LNOT: return ev_from_u(!a.u);
    case TERN_ABS:
        return ir_type_is_signed(t) && a.i < 0 ? ev_norm(t, 0 - a.u) : a;
    default: return ev_from_u(0);
    }
}

/* a op b for operands of type t; comparisons give a bool. */
static inline ev ev_binary(tern_op2 op, int t, ev a, ev b, bool *fault) {
    if (t == TERN_T_F32) {
        float x = a.f, y = b.f;
        switch (op) {
        case TERN_ADD: return ev_from_f(x + y);
        case TERN_SUB: return ev_from_f(x - y);
        case TERN_MUL: return ev_from_f(x * y);
        case TERN_DIV: return ev_from_f(x / y);
        case TERN_REM: return ev_from_f(fmodf(x, y));
        case TERN_MIN: return ev_from_f(fminf(x, y));
        case TERN_MAX: return ev_from_f(fmaxf(x, y));
        case TERN_POW: return ev_from_f(powf(x, y));
        case TERN_LT: return ev_from_u(x < y);
        case TERN_LE: return ev_from_u(x <= y);
        case TERN_GT: return ev_from_u(x > y);
        case TERN_GE: return ev_from_u(x >= y);
        case TERN_EQ: return ev_from_u(x == y);
        case TERN_NE: return ev_from_u(x != y);
        default: return ev_from_u(0);
        }
    }
    bool s = ir_type_is_signed(t);
    switch (op) {
    case TERN_ADD: return ev_norm(t, a.u + b.u);
    case TERN_SUB: return ev_norm(t, a.u - b.u);
    case TERN_MUL: return ev_norm(t, a.u * b.u);
    case TERN_DIV:
    case TERN_REM:
        if (b.u == 0) {
            *fault = true;
            return ev_from_u(0);
        }
        if (s) {
            /* INT_MIN / -1 overflows: wrap like two's complement hardware */
            bool min = (t == TERN_T_I32 && a.i == INT32_MIN) || (t == TERN_T_I64 && a.i == INT64_MIN);
            if (min && b.i == -1) return op == TERN_DIV ? a : ev_from_u(0);
            return ev_norm(t, (uint64_t)(op == TERN_DIV ? a.i / b.i : a.i % b.i));
        }
        return ev_norm(t, op == TERN_DIV ? a.u / b.u : a.u % b.u);
    case TERN_MIN: return (s ? a.i < b.i : a.u < b.u) ? a : b;
    case TERN_MAX: return (s ? a.i > b.i : a.u > b.u) ? a : b;
    case TERN_AND: return ev_from_u(a.u & b.u);
    case TERN_OR: return ev_from_u(a.u | b.u);
    case TERN_XOR: return ev_norm(t, a.u ^ b.u);
    case TERN_SHL: return ev_norm(t, a.u << ev_shift(t, b.u));
    case TERN_SHR:
        if (s) {
            /* arithmetic shift without relying on implementation-defined >> of negatives */
            unsigned n = ev_shift(t, b.u);
            uint64_t r = a.u >> n;
            if (a.i < 0 && n) r |= ~(UINT64_MAX >> n);
            return ev_norm(t, r);
        }
        return ev_norm(t, a.u >> ev_shift(t, b.u));
    case TERN_LT: return ev_from_u(s ? a.i < b.i : a.u < b.u);
    case TERN_LE: return ev_from_u(s ? a.i <= b.i : a.u <= b.u);
    case TERN_GT: return ev_from_u(s ? a.i > b.i : a.u > b.u);
    case TERN_GE: return ev_from_u(s ? a.i >= b.i : a.u >= b.u);
    case TERN_EQ: return ev_from_u(a.u == b.u);
    case TERN_NE: return ev_from_u(a.u != b.u);
    case TERN_LAND: return ev_from_u(a.u && b.u);
    case TERN_LOR: return ev_from_u(a.u || b.u);
    default: return ev_from_u(0);
    }
}

static inline ev ev_fma(ev a, ev b, ev c) { return ev_from_f(fmaf(a.f, b.f, c.f)); }

#endif
