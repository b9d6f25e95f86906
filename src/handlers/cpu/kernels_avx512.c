/* The kernel table for AVX-512 F + BW + VL, 16 lanes (compiled with those flags whatever the
 * build's -march; used only where the processor reports them), with gemm_f32, the large-m
 * f32 product (kernels_gemm_f32.h). */
#include "kernels_avx512.h"

#define TABLE cpu_kernels_avx512
#define TABLE_NAME "avx512"
#define TABLE_GEMM_F32 gemm_f32
#define TABLE_GEMM_F32_MATMUL (1u << TERN_F32 | 1u << TERN_Q8)

#include "kernels_gemm_f32.h"
#include "kernels_q8_256.h"
#include "kernels_simd.h"
