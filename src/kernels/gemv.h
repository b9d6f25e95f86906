/* The GEMV kernels' parameters as traced (gemv.c), shared with their norm prologue
 * (gemv_norm.c). Private to src/kernels/. */
#ifndef TERN_KERNELS_GEMV_H
#define TERN_KERNELS_GEMV_H

#include "kernels/kutil.h"

typedef struct gemv_params {
    tern_v c, a, b, bias, aux;
    tern_v N, K, lda, ldb, ldc, alpha, beta;
    bool gelu, has_bias, has_aux;
    int pair;             /* GK_GEMV_T's paired epilogues: 0 none, GK_GEMV_SWIGLU or GK_GEMV_ROPE */
    int hd;               /* ROPE: the head size */
    tern_v pos, inv_freq; /* ROPE: the rows' positions, the frequencies */
    tern_v rope_pairs;    /* ROPE: pairs p below it are rotated */
    int norm;             /* the prologue: 0 none, GK_GEMV_LAYERNORM or GK_GEMV_RMSNORM */
    tern_v norm_w, norm_b, eps;
    tern_v mu[GK_GEMV_MAX_M], rs[GK_GEMV_MAX_M]; /* the prologue's statistics (norm_stats) */
    /* a resident prologue (k in one chunk, few elements a thread): this thread's NE elements
     * e_i = tid + i G of A's rows (nx, loaded once for the statistics and the staging), of
     * the weights (nw, nb: before the wait when nothing in flight writes them), e_i < k */
    bool resident, weights_early;
    int NE;
    tern_v nx[GK_GEMV_MAX_M][GK_GEMV_NORM_PER_THREAD], nw[GK_GEMV_NORM_PER_THREAD], nb[GK_GEMV_NORM_PER_THREAD];
    tern_v nvalid[GK_GEMV_NORM_PER_THREAD];
    bool merge;           /* MERGE: A's rows from the attention's split parts */
    tern_v partial;       /* MERGE: f32 [m NH, S, hs + 2] */
    int S, hs;            /* MERGE: the parts of a row, the head size */
    int J;                /* MERGE: > 0 when the attention joined the q|k|v product (the new part's dots) */
    int M, W, KC;
    int G;      /* threads per group */
    int a_size; /* bytes per element of A (and of x in threadgroup memory) */
} gemv_params;

/* The prologue (matmul's LAYERNORM and RMSNORM; p->norm != 0), in the order a GEMV calls it:
 * before the wait, its weights prefetched or loaded (resident and early); the threadgroup
 * memory for its sums (declared with the kernel's other shared arrays); after the wait, the
 * rows' statistics into p->mu and p->rs (every thread of the group reaches it: barriers);
 * then, for each k-chunk, x staged through the norm into xs [M, KC] in A's dtype. */
void gemv_norm_prefetch(tern_kb *kb, gemv_params *p, tern_v tid);
tern_v gemv_norm_scratch(tern_kb *kb, const gemv_params *p);
void gemv_norm_stats(tern_kb *kb, gemv_params *p, tern_v tid, tern_v nred);
void gemv_norm_stage(tern_kb *kb, const gemv_params *p, tern_v xs, tern_v k0, tern_v kc, tern_v tid);

#endif
