/* Flash attention on the tensor cores, written in the DSL with its warp-matrix operation
 * (tern_mma_bf16): causal attention over bf16 activations without materialising the score
 * matrices. Used by the cuda handler for bf16 (attention_gemm.c picks it); the kernels use
 * nothing CUDA-specific, so tests run them on the host interpreter (tests/attention_kernels).
 *
 * Layouts (token-major, as the model holds them; no permutes):
 *   qkv, dqkv  bf16 [B, T, 3, NH, hs]   out, dout  bf16 [B, T, NH, hs]
 *   lse, D     f32  [B, NH, T]          (the logsumexp of each query row; D = rowsum(dO * O))
 * With grouped key/value heads (opts.group = NH / KV > 1, the attention op's layout for
 * KV < NH) qkv and dqkv are [B, T, (NH + 2 KV) hs]: query head h at channels h hs, key/value
 * head g's key at NH hs + g hs and value at (NH + KV) hs + g hs; query head h reads key/value
 * head h / group. out, dout, lse and D stay per query head.
 *
 * Every kernel runs groups of GK_FLASH_THREADS threads (4 SIMD groups of 16 rows each)
 * over tiles of GK_FLASH_TILE query or key positions; grid (ceil(T / tile), B * heads) for
 * the three tiled kernels, heads NH, or KV for BACKWARD_KV with grouped heads (each group
 * sums dK and dV over its key/value head's query heads: no atomics), gk_flash_delta_groups
 * for DELTA (gk_flash_rows, gk_flash_threads and gk_flash_heads say so). */
#ifndef TERN_KERNELS_FLASH_H
#define TERN_KERNELS_FLASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/kernel.h"

#define GK_FLASH_TILE 64
#define GK_FLASH_THREADS 128

typedef enum gk_flash_kernel {
    GK_FLASH_FORWARD,     /* qkv, out, lse, B, T, NH, scale: out and lse */
    GK_FLASH_DELTA,       /* out, dout, D, B, T, NH: D = rowsum(dout * out) per query row */
    GK_FLASH_BACKWARD_KV, /* qkv, dout, lse, D, dqkv, B, T, NH, scale: dK and dV into dqkv */
    GK_FLASH_BACKWARD_Q,  /* qkv, dout, lse, D, dqkv, B, T, NH, scale: dQ into dqkv */
} gk_flash_kernel;

/* How a kernel is compiled (zero: no hints, today's kernels). Chosen on the H200
 * (bench/h200/NOTES.md). */
typedef struct gk_flash_opts {
    /* groups of GK_FLASH_THREADS threads per SM the compiler budgets registers for
     * (tern_min_groups) */
    int min_groups;
    bool kv_halves; /* BACKWARD_KV walks each query tile in two halves: fewer live registers */
    /* BACKWARD_KV also stores dS^T / scale (bf16, key-major, only the causal part: see
     * gk_flash_ds_len) as a last parameter, and BACKWARD_Q reads it (its last parameter)
     * instead of recomputing P and dP: one product per tile instead of three. T a multiple
     * of 8. */
    bool ds_saved;
    /* FORWARD, BACKWARD_KV and BACKWARD_Q with ds_saved stage their tiles one ahead, by
     * asynchronous copies into double buffers (tern_copy_async): the next tile loads while
     * the products run on this one. Twice the tiles' shared memory. */
    bool pipelined;
    /* BACKWARD_Q with ds_saved and pipelined: the tiles in flight plus one, 2 to
     * GK_FLASH_MAX_STAGES (0 is 2: double buffers). Its products are short, so each tile's
     * step waits mostly on memory: more tiles in flight, more bytes. stages times the two
     * tiles' shared memory. */
    int stages;
    /* The products as warpgroup products (tern_wgmma_bf16: Hopper's wgmma, tern_mma_bf16
     * tiles elsewhere), their operands staged as 128-byte-swizzled tiles (tern_shared_tiles)
     * instead of padded rows; head sizes 64 and 128 (others keep the warp-level products).
     * The cuda handler's default on Hopper (bench/h200/NOTES.md, the twenty-fourth session:
     * GPT-2 124M's step 3.4% faster, 1.5B's 2.5%, on an H100). */
    bool wgmma;
    /* Not tuning but the layout: query heads per key/value head, NH / KV (0 or 1: KV = NH,
     * GPT-2's [B, T, 3, NH, hs], traced exactly as before grouped heads existed). NH must
     * be a multiple of it; DELTA ignores it. */
    int group;
} gk_flash_opts;

#define GK_FLASH_MAX_STAGES 4

/* The query or key rows one group of a tiled kernel covers (its grid is (ceil(T / rows),
 * B * NH)), and the group's threads (two per row: 16 rows per SIMD group); DELTA's groups
 * are GK_FLASH_THREADS threads, one row each. opts may be NULL. */
int gk_flash_rows(gk_flash_kernel which, const gk_flash_opts *opts);
int gk_flash_threads(gk_flash_kernel which, const gk_flash_opts *opts);

/* The heads a tiled kernel's grid covers per sequence (its grid's second dimension is B
 * times this): NH, or NH / group for BACKWARD_KV. opts may be NULL. */
int gk_flash_heads(gk_flash_kernel which, const gk_flash_opts *opts, int NH);

/* DELTA's groups (of GK_FLASH_THREADS) for B sequences of T positions and NH heads of
 * size hs: a few threads share each row. */
uint32_t gk_flash_delta_groups(int B, int T, int NH, int hs);

/* The elements of the dS^T buffer that ds_saved hands over, for B sequences of T positions
 * and NH query heads. Per head, key tile kt (keys TILE kt ..) keeps TILE rows of the queries
 * from TILE kt on, T - TILE kt each (the causal part: about half of T T), the tiles one
 * after another; plus GK_FLASH_TILE elements for the last tile's reads past its end. */
size_t gk_flash_ds_len(int B, int T, int NH);

/* Whether a head size and buffers starting at these element offsets suit the kernels: hs a
 * multiple of 16 up to 128, every buffer's start 16-byte aligned. */
bool gk_flash_fits(int hs, const size_t *offsets, int count);

/* opts may be NULL (no hints). */
tern_error *gk_flash_kernel_build(gk_flash_kernel which, int hs, const gk_flash_opts *opts,
                                    tern_kernel **out) TERN_MUST_USE;

#endif
