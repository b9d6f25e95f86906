/* Cached attention for a block of a prompt's queries on the GEMM kernel (kernels.h's
 * gemm_f32): the scores of qb queries against their keys as one product, the causal softmax
 * row by row, then the weighted values as a second product. Per query and key the loop of
 * attention.c takes a dot product of hs elements and a horizontal sum; here the kernel's
 * register tiles do the same sums, several queries and keys at a time (docs/PERFORMANCE.md). */
#include <math.h>

#include "cpu.h"

void cpu_attention_block(const cpu_kernels *kern, const float *q, size_t qb, size_t first, const float *keys,
                         const float *values, size_t hs, float scale, float *s, float *o, void *pack) {
    /* q [qb, hs]: queries at positions first .. first + qb - 1, each seeing keys 0 .. its
     * position; keys, values [first + qb, hs]; s [qb, n] with n = first + qb; o [qb, hs] */
    size_t n = first + qb;
    kern->gemm_f32(qb, n, hs, q, hs, false, keys, TERN_F32, hs, true, s, n, pack); /* s = q keys^T */
    for (size_t r = 0; r < qb; r++) {
        float *row = s + r * n;
        size_t seen = first + r + 1; /* keys this query attends */
        float mx = -INFINITY;
        for (size_t j = 0; j < seen; j++) {
            row[j] *= scale;
            mx = row[j] > mx ? row[j] : mx;
        }
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (size_t j = 0; j < seen; j++) {
            row[j] = cpu_expf(row[j] - mx);
            sum += row[j];
        }
        float inv = 1.0f / sum;
#pragma omp simd
        for (size_t j = 0; j < seen; j++) row[j] *= inv;
        for (size_t j = seen; j < n; j++) row[j] = 0; /* the keys after it */
    }
    kern->gemm_f32(qb, hs, n, s, n, false, values, TERN_F32, hs, false, o, hs, pack); /* o = s values */
}
