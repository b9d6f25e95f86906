/* Helpers of the Llama ops tests: deterministic inputs, the kernel families on the host
 * interpreter (device buffers of the host runtime), the cpu handler's buffers, and
 * comparisons against float64 references. */
#ifndef TERN_TESTS_LLAMA_OPS_TEST_H
#define TERN_TESTS_LLAMA_OPS_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "handlers/validate.h"
#include "kernels/kernels.h"
#include "tern/effect.h"
#include "tern/half.h"
#include "tern/handlers.h"
#include "tern/kernel.h"

/* ---- inputs ---- */

static uint64_t lt_state = 0x9e3779b97f4a7c15ull;
static inline double lt_uniform(void) { /* [-1, 1) */
    lt_state = lt_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lt_state >> 11) / 4503599627370496.0 - 1.0;
}
/* n values in [-scale, scale) + offset, rounded to dtype (so a reference sees what the
 * operation sees) */
static inline float *lt_random(size_t n, double scale, double offset, tern_dtype dt) {
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        float f = (float)(lt_uniform() * scale + offset);
        v[i] = dt == TERN_BF16 ? tern_bf16_to_f32(tern_f32_to_bf16(f)) : f;
    }
    return v;
}
static inline float *lt_copy(const float *x, size_t n) {
    float *c = malloc(n * sizeof *c);
    memcpy(c, x, n * sizeof *c);
    return c;
}

/* max_i |got - want| / max(|want_i|, floor * max |want|): relative error elementwise, with
 * values near zero measured against a fraction of the tensor's scale. */
static inline double lt_error(const float *got, const double *want, size_t n, double floor) {
    double top = 0, worst = 0;
    for (size_t i = 0; i < n; i++) top = fmax(top, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double e = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor * top);
        worst = fmax(worst, e);
    }
    return worst;
}

/* ---- the host interpreter ---- */

static inline tern_type lt_ttype(tern_dtype dt) { return dt == TERN_BF16 ? TERN_T_BF16 : TERN_T_F32; }

/* A device buffer of the host runtime holding n floats of v as dtype dt (NULL: NaN). */
static inline tern_dbuf lt_dev(tern_rt *rt, tern_dtype dt, const float *v, size_t n) {
    tern_dbuf b = {0};
    CHECK_OK(tern_rt_alloc(rt, lt_ttype(dt), n, &b));
    void *raw = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        float f = v ? v[i] : NAN;
        if (dt == TERN_BF16) ((uint16_t *)raw)[i] = tern_f32_to_bf16(f);
        else ((float *)raw)[i] = f;
    }
    CHECK_OK(tern_rt_upload(rt, b, raw));
    free(raw);
    return b;
}
static inline tern_dbuf lt_dev_i32(tern_rt *rt, const int32_t *v, size_t n) {
    tern_dbuf b = {0};
    CHECK_OK(tern_rt_alloc(rt, TERN_T_I32, n, &b));
    CHECK_OK(tern_rt_upload(rt, b, v));
    return b;
}
static inline tern_dbuf lt_dview(tern_dbuf b, size_t offset, size_t len) {
    b.offset += offset;
    b.len = len;
    return b;
}
/* b's elements as f32 (bf16 widened) into a new array */
static inline float *lt_dget(tern_rt *rt, tern_dbuf b) {
    size_t n = b.len;
    void *raw = malloc(n * 4);
    float *v = malloc(n * sizeof *v);
    CHECK_OK(tern_rt_download(rt, raw, b));
    for (size_t i = 0; i < n; i++)
        v[i] = b.type == TERN_T_BF16 ? tern_bf16_to_f32(((uint16_t *)raw)[i]) : ((float *)raw)[i];
    free(raw);
    return v;
}
static inline tern_kernel *lt_kernel(gk_family f, const gk_spec *spec) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build(gk_family_name(f), gk_family_trace(f), (void *)spec, &k));
    return k;
}

/* ---- the cpu handler ---- */

typedef struct lt_cpu {
    const tern_ops *ops;
    tern_dev *d;
} lt_cpu;

static inline tern_buf lt_buf(lt_cpu *c, tern_dtype dt, const float *v, size_t n) {
    tern_buf b = tern_none();
    CHECK_OK(c->ops->alloc(c->d, dt, n, &b));
    void *raw = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        float f = v ? v[i] : NAN;
        if (dt == TERN_BF16) ((uint16_t *)raw)[i] = tern_f32_to_bf16(f);
        else ((float *)raw)[i] = f;
    }
    CHECK_OK(c->ops->upload(c->d, b, raw));
    free(raw);
    return b;
}
static inline tern_buf lt_buf_i32(lt_cpu *c, const int32_t *v, size_t n) {
    tern_buf b = tern_none();
    CHECK_OK(c->ops->alloc(c->d, TERN_I32, n, &b));
    CHECK_OK(c->ops->upload(c->d, b, v));
    return b;
}
static inline float *lt_get(lt_cpu *c, tern_buf b) {
    size_t n = b.len;
    void *raw = malloc(n * 4);
    float *v = malloc(n * sizeof *v);
    CHECK_OK(c->ops->download(c->d, raw, b));
    for (size_t i = 0; i < n; i++)
        v[i] = b.dtype == TERN_BF16 ? tern_bf16_to_f32(((uint16_t *)raw)[i]) : ((float *)raw)[i];
    free(raw);
    return v;
}
static inline void lt_free(lt_cpu *c, tern_buf *b) { CHECK_OK(c->ops->free(c->d, b)); }

#endif
