/* The kernel table for AVX-512 F + BW + VL with AVX512_BF16: the avx512 table's kernels and
 * gemm_bf16, the large-m bf16 product on vdpbf16ps (kernels_gemm_bf16.h). Compiled with those
 * flags whatever the build's -march; used only where the processor reports them. */
#include "kernels_avx512.h"

#define TABLE cpu_kernels_avx512bf16
#define TABLE_NAME "avx512bf16"
#define TABLE_GEMM_BF16 gemm_bf16
#define TABLE_GEMM_F32 gemm_f32
#define TABLE_GEMM_F32_MATMUL (1u << TERN_F32 | 1u << TERN_Q8)

#include "kernels_gemm_bf16.h"
#include "kernels_gemm_f32.h"
#include "kernels_q8_256.h"
#include "kernels_simd.h"
