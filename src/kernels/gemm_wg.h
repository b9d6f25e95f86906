/* A bf16 GEMM on Hopper's warpgroup products and tile copies, with a training step's
 * epilogues, for the cuda handler's large products (bench/h200/NOTES.md, runs 149-163 and
 * the thirty-sixth session's):
 *
 *   C [m, n] = A [m, k] op(B) + bias [n] (+ addend [m, n])     PLAIN
 *   aux = A op(B) + bias;  C = gelu(aux)                      GELU (GPT-2's fc)
 *   C = (A op(B)) gelu'(aux)                                 DGELU (its backward product)
 *
 * op(B) is B [k, n], or B given as [n, k] (b_nk: a product with a weight's transpose). A,
 * B, C, bias, aux and addend are bf16, dense and row-major; the products accumulate in f32,
 * and the value before the epilogue's last step is rounded to bf16 once (the tile's
 * staging; the aux GELU writes is that value).
 *
 * The kernel is persistent: gk_gemm_wg_groups groups of GK_GEMM_WG_THREADS threads walk the
 * 128 x 256 tiles of C in one pipe (TERN_PIPE). The third warpgroup produces: it copies each
 * 64-wide k slice of A and B into a ring of 3 slots (tile copies; TMA on CUDA). The first
 * two multiply (64 rows of the tile each, products chained one in flight). A tile's last
 * consume block puts the accumulators into a staging of the whole tile, and the producer's
 * warpgroup stores that tile through the epilogue in its next 8 produce blocks while the
 * consumers multiply the next tile: the tensor cores stop only for the staging. The
 * kernel uses nothing CUDA-specific, so tests run it on the host interpreter. */
#ifndef TERN_KERNELS_GEMM_WG_H
#define TERN_KERNELS_GEMM_WG_H

#include <stdbool.h>
#include <stdint.h>

#include "tern/kernel.h"

#define GK_GEMM_WG_TILE_M 128
#define GK_GEMM_WG_TILE_N 256
#define GK_GEMM_WG_SLICE 64
#define GK_GEMM_WG_THREADS 384
/* The producer stores a tile in 8 chunks, one a produce block of the next tile, which must
 * have as many slices after its first: k >= 9 slices. */
#define GK_GEMM_WG_MIN_K (9 * GK_GEMM_WG_SLICE)
/* The k loop is traced unrolled (a product stays in flight from one slice to the next), so
 * a kernel's code grows with k: at k = 3,072 (48 slices) its CUDA C is 1.5 MB and nvcc takes
 * ~18 s on it; at the lm head's k = 50,304 NVRTC ran for minutes (thirty-eighth session). */
#define GK_GEMM_WG_MAX_K (48 * GK_GEMM_WG_SLICE)

typedef enum gk_gemm_wg_epilogue {
    GK_GEMM_WG_PLAIN, /* C = A op(B) [+ bias] [+ addend] */
    GK_GEMM_WG_GELU,  /* aux = A op(B) + bias, C = gelu(aux) */
    GK_GEMM_WG_DGELU, /* C = (A op(B)) gelu'(aux), aux read */
} gk_gemm_wg_epilogue;

/* What a kernel is built for: n and k are constants of it. */
typedef struct gk_gemm_wg_opts {
    int n, k;
    gk_gemm_wg_epilogue epilogue;
    bool bias;     /* PLAIN: + bias [n] (GELU always has one, DGELU none) */
    bool addend;   /* PLAIN: + addend [m, n] (a residual: beta 1; it may be C itself) */
    bool b_nk;     /* B given as [n, k] */
    bool prefetch; /* DGELU: the producer asks for a tile's aux in L2 a tile before it is read */
    /* Also C's column sums (as computed, before C's rounding to bf16; a bias gradient when C
     * is a layer's output gradient) in parts: sums [m / 16, n] f32, whose column j adds up to
     * C's column j (C's row r is in part 8 (r / 128) + r % 8). */
    bool col_sums;
    /* Tiles walked m-fastest in bands of this many m blocks (the last band may be narrower),
     * so that a wave of tiles reads fewer of B's columns; 0: n-tiles fastest. */
    int band;
} gk_gemm_wg_opts;

/* Whether a product of this shape fits the kernel: m a multiple of 128, n of 256, k of 64
 * from GK_GEMM_WG_MIN_K to GK_GEMM_WG_MAX_K, and the whole of C at most 2^31 elements. */
bool gk_gemm_wg_fits(int m, int n, int k);

/* The kernel's parameters, in order: A, B, C, then bias (PLAIN with bias, GELU), aux
 * (GELU: written; DGELU: read), addend (PLAIN with addend), sums (col_sums), and the i32
 * tile count gk_gemm_wg_tiles(m, n). */
tern_error *gk_gemm_wg_build(const gk_gemm_wg_opts *opts, tern_kernel **out) TERN_MUST_USE;

/* The epilogue's GELU (GPT-2's tanh form, through tern_tanh_approx) and its derivative, for
 * kernels measured against this one (bench/dsl/bench_gemm_wg.c). */
tern_v gk_gemm_wg_gelu(tern_v x);
tern_v gk_gemm_wg_gelu_grad(tern_v x);

int gk_gemm_wg_tiles(int m, int n);
/* The groups a launch takes: one a multiprocessor, at most one a tile. */
uint32_t gk_gemm_wg_groups(int m, int n, int multiprocessors);

#endif
