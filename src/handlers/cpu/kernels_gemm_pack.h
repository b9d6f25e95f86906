/* What the f32 GEMMs (kernels_gemm_f32.h on AVX-512, kernels_gemm_avx2.h) share: A's packing. */
#ifndef TERN_HANDLERS_CPU_KERNELS_GEMM_PACK_H
#define TERN_HANDLERS_CPU_KERNELS_GEMM_PACK_H

#include <stdbool.h>
#include <stddef.h>

/* Rows [0, m) and k [k0, k0 + kc) of an f32 A ([m, k] rows lda apart, or stored [k, m] when
 * trans_a) into row panels of mr rows, [kc][mr] each (rows past m zero), panels kc * mr
 * floats apart. */
static inline void gemm_pack_a_f32(float *ap, const float *a, size_t lda, bool trans_a, size_t m, size_t k0,
                                   size_t kc, size_t mr) {
    for (size_t i0 = 0; i0 < m; i0 += mr) {
        float *panel = ap + (i0 / mr) * kc * mr;
        size_t rows = m - i0 < mr ? m - i0 : mr;
        if (!trans_a) {
            for (size_t r = 0; r < rows; r++) {
                const float *row = a + (i0 + r) * lda + k0;
                for (size_t p = 0; p < kc; p++) panel[p * mr + r] = row[p];
            }
        } else {
            for (size_t p = 0; p < kc; p++) {
                const float *col = a + (k0 + p) * lda + i0; /* A stored [k, m]: contiguous rows */
                for (size_t r = 0; r < rows; r++) panel[p * mr + r] = col[r];
            }
        }
        for (size_t r = rows; r < mr; r++)
            for (size_t p = 0; p < kc; p++) panel[p * mr + r] = 0;
    }
}

#endif
