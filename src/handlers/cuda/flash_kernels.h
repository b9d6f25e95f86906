/* Flash attention on the tensor cores, written in the DSL with its warp-matrix operation
 * (tern_mma_bf16): causal attention over bf16 activations without materialising the score
 * matrices. Used by the cuda handler for bf16 (attention_gemm.c picks it); the kernels use
 * nothing CUDA-specific, so tests run them on the host interpreter (tests/cuda_attention).
 *
 * Layouts (token-major, as the model holds them; no permutes):
 *   qkv, dqkv  bf16 [B, T, 3, NH, hs]   out, dout  bf16 [B, T, NH, hs]
 *   lse, D     f32  [B, NH, T]          (the logsumexp of each query row; D = rowsum(dO * O))
 *
 * Every kernel runs groups of CUDA_FLASH_THREADS threads (4 SIMD groups of 16 rows each)
 * over tiles of CUDA_FLASH_TILE query or key positions; grid (ceil(T / tile), B * NH) for
 * the three tiled kernels, ceil(B * T * NH / CUDA_FLASH_THREADS) groups for DELTA. */
#ifndef TERN_HANDLERS_CUDA_FLASH_KERNELS_H
#define TERN_HANDLERS_CUDA_FLASH_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/kernel.h"

#define CUDA_FLASH_TILE 64
#define CUDA_FLASH_THREADS 128

typedef enum cuda_flash_kernel {
    CUDA_FLASH_FORWARD,     /* qkv, out, lse, B, T, NH, scale: out and lse */
    CUDA_FLASH_DELTA,       /* out, dout, D, B, T, NH: D = rowsum(dout * out) per query row */
    CUDA_FLASH_BACKWARD_KV, /* qkv, dout, lse, D, dqkv, B, T, NH, scale: dK and dV into dqkv */
    CUDA_FLASH_BACKWARD_Q,  /* qkv, dout, lse, D, dqkv, B, T, NH, scale: dQ into dqkv */
} cuda_flash_kernel;

/* How a kernel is compiled (zero: no hints). Chosen on the H200 (bench/h200/NOTES.md). */
typedef struct cuda_flash_opts {
    int min_groups; /* threadgroups per SM the compiler budgets registers for (tern_min_groups) */
    bool kv_halves; /* BACKWARD_KV walks each query tile in two halves: fewer live registers */
} cuda_flash_opts;

/* Whether a head size and buffers starting at these element offsets suit the kernels: hs a
 * multiple of 16 up to 128, every buffer's start 16-byte aligned. */
bool cuda_flash_fits(int hs, const size_t *offsets, int count);

/* opts may be NULL (no hints). */
tern_error *cuda_flash_kernel_build(cuda_flash_kernel which, int hs, const cuda_flash_opts *opts,
                                    tern_kernel **out) TERN_MUST_USE;

#endif
