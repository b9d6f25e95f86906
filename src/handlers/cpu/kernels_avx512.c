/* The kernel table for AVX-512 F + BW + VL, 16 lanes (compiled with those flags whatever the
 * build's -march; used only where the processor reports them). */
#include "kernels_avx512.h"

#define TABLE cpu_kernels_avx512
#define TABLE_NAME "avx512"

#include "kernels_q8_256.h"
#include "kernels_simd.h"
