/* The DSL kernels of attention on the tensor cores (see attention_gemm.c). */
#ifndef TERN_KERNELS_ATTENTION_GEMM_H
#define TERN_KERNELS_ATTENTION_GEMM_H

#include <stdbool.h>

#include "tern/kernel.h"

/* Rows of the score matrix per threadgroup of the softmax kernels: one SIMD group each. */
#define GK_ATT_GEMM_ROWS 8
/* The longest score row the softmax kernels hold in registers (32 values per lane in
 * bf16); longer rows take the looping form. */
#define GK_ATT_GEMM_MAX_RESIDENT 1024

typedef enum gk_att_gemm_kernel {
    GK_ATT_GEMM_PERMUTE,          /* token-major [B, T, G, NH, hs] <-> head-major [G, B, NH, T, hs] */
    GK_ATT_GEMM_SOFTMAX_FORWARD,  /* S [rows, T] -> causal softmax(scale S) in place; lse [rows] */
    GK_ATT_GEMM_SOFTMAX_BACKWARD, /* S, dP -> P, P (dP - sum P dP) scale in place */
} gk_att_gemm_kernel;

typedef struct gk_att_gemm_spec {
    tern_type act;  /* element type of activations and scores: f32 or bf16 */
    bool to_heads;  /* GK_ATT_GEMM_PERMUTE: the direction */
    bool vec;       /* GK_ATT_GEMM_PERMUTE: runs of 16 bytes per thread (see gk_att_gemm_permute_vec_fits) */
    int resident;   /* softmax: 0 for the looping form, else the longest row (a multiple of
                       32 x the vector width, at most GK_ATT_GEMM_MAX_RESIDENT) held in registers */
} gk_att_gemm_spec;

/* Parameters, in order:
 *   PERMUTE           src, dst, B, T, G, NH, hs       one thread per element, or per 16 bytes (vec)
 *   SOFTMAX_FORWARD   S, lse (f32), T, rows, scale, block      groups of 32 * GK_ATT_GEMM_ROWS
 *   SOFTMAX_BACKWARD  S, dP, lse (f32), T, rows, scale, block  groups of 32 * GK_ATT_GEMM_ROWS
 * Row r of the scores is read and written over columns [0, min(T, (t / block + 1) block)),
 * t = r % T: the causal block that holds the diagonal (block = T: the whole row). */
/* Whether the permutes can move 16-byte runs: hs and both buffers' starts (offsets in
 * elements) multiples of the vector width. */
bool gk_att_gemm_permute_vec_fits(tern_type act, int hs, size_t src_offset, size_t dst_offset);

/* Whether rows of T scores fit the resident form (T <= GK_ATT_GEMM_MAX_RESIDENT and a multiple
 * of the vector width, so that every row starts aligned). */
bool gk_att_gemm_resident_fits(tern_type act, int T);

tern_error *gk_att_gemm_kernel_build(gk_att_gemm_kernel which, const gk_att_gemm_spec *spec,
                                  tern_kernel **out) TERN_MUST_USE;

#endif
