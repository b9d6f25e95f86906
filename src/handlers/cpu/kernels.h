/* The cpu handler's instruction-set-specific kernels: one table per instruction set, each
 * compiled in its own file with its own flags (kernels_avx512bf16.c, kernels_avx512.c,
 * kernels_avx2.c, kernels_portable.c), from one body (kernels_simd.h); the AVX-512 tables add
 * the large-m GEMM kernels (kernels_gemm_f32.h, and kernels_gemm_bf16.h where the processor
 * has AVX512_BF16). The best table the processor runs is chosen once, when the first device
 * opens (isa.c), so one binary is fast on AVX-512 and on AVX2-only machines and correct
 * everywhere else.
 *
 * This header does not need TERN_HANDLER, so white-box tests include it to run every table
 * the machine supports against a double-precision reference. */
#ifndef TERN_HANDLERS_CPU_KERNELS_H
#define TERN_HANDLERS_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/effect.h"

/* Instruction sets, from the most portable up. */
typedef enum cpu_isa {
    CPU_ISA_PORTABLE, /* plain C with GNU vector types: the compiler's baseline (SSE2, NEON) */
    CPU_ISA_AVX2,     /* AVX2 + FMA + F16C */
    CPU_ISA_AVX512,   /* AVX-512 F + BW + VL */
    CPU_ISA_AVX512BF16, /* the same and AVX512_BF16 (vdpbf16ps): adds gemm_bf16 */
    CPU_ISA_COUNT
} cpu_isa;

/* Rows of A the small-batch kernels take at most (the decoding case). */
#define CPU_SMALL_M 8

/* Bytes of m rows of k activations quantized for the q8_0 products (q8_quantize_a). */
/* The bf16 GEMM's blocking (gemm_bf16): tiles of MR rows x NR columns in registers, k in
 * blocks of KC (even). */
#define CPU_GEMM_BF16_MR 8
#define CPU_GEMM_BF16_NR 48
#define CPU_GEMM_BF16_KC 384
/* Bytes of packing scratch gemm_bf16 needs for m rows: one block of A (m rounded up to MR,
 * KC deep) and one panel of B (KC x NR), 64-byte aligned. */
#define CPU_GEMM_BF16_ROUND_(x, r) (((size_t)(x) + (r) - 1) / (r) * (r))
#define CPU_GEMM_BF16_SCRATCH(m)                                                              \
    (CPU_GEMM_BF16_ROUND_(CPU_GEMM_BF16_ROUND_(m, CPU_GEMM_BF16_MR) * CPU_GEMM_BF16_KC * 2, 64) + \
     (size_t)CPU_GEMM_BF16_KC * CPU_GEMM_BF16_NR * 2)

/* The f32 GEMM's blocking (gemm_f32), as the bf16 one's. */
#define CPU_GEMM_F32_MR 8
#define CPU_GEMM_F32_NR 48
#ifndef CPU_GEMM_F32_KC
#define CPU_GEMM_F32_KC 256
#endif
/* The AVX2 table's f32 GEMM (kernels_gemm_avx2.h): tiles of MR rows x NV vectors of 8
 * columns, the same KC; MR <= CPU_GEMM_F32_MR and 8 NV <= CPU_GEMM_F32_NR. */
#define CPU_GEMM_AVX2_MR 6
#define CPU_GEMM_AVX2_NV 2
/* Bytes of packing scratch gemm_f32 needs for m rows, in every table: one block of A (m
 * rounded up to the table's MR, at most m + CPU_GEMM_F32_MR - 1 rows, KC deep) and one panel
 * of B (KC x NR), 64-byte aligned. */
#define CPU_GEMM_F32_SCRATCH(m)                                                                    \
    (CPU_GEMM_BF16_ROUND_(((size_t)(m) + CPU_GEMM_F32_MR - 1) * CPU_GEMM_F32_KC * 4, 64) +           \
     (size_t)CPU_GEMM_F32_KC * CPU_GEMM_F32_NR * 4)

#define CPU_Q8A_BYTES(m, k) ((size_t)(m) * (size_t)(k) / TERN_Q8_BLOCK * (TERN_Q8_BLOCK + sizeof(float)))

typedef struct cpu_kernels {
    const char *name; /* "avx512bf16", "avx512", "avx2", "portable" */
    /* B stored [n, k] (rows ldb elements apart) in dtype dt (f32, bf16, f16); a is dense f32
     * [m, k], m <= CPU_SMALL_M: t[r * ldt + j] = sum_kk a[r * k + kk] * B[j0 + j, kk] for
     * r < m, j < w. Accumulates in f32. */
    void (*small_t)(int m, tern_dtype dt, const float *a, size_t k, const void *b, size_t ldb,
                    size_t j0, size_t w, float *t, size_t ldt);
    /* B stored [k, n]: t[r * ldt + j] += sum over kk in [k0, k1) of a[r * k + kk] *
     * B[kk, j0 + j] for r < m, j < w. */
    void (*small_nt)(int m, tern_dtype dt, const float *a, size_t k, const void *b, size_t ldb,
                     size_t k0, size_t k1, size_t j0, size_t w, float *t, size_t ldt);
    /* small_t for a q8_0 B (effect.h: blocks of 32 weights and their f16 scale along k) and
     * int8 activations, llama.cpp's q8_0 x q8_0 product: aq holds A's m rows [m, k]
     * quantized by q8_quantize_a; b points at the block holding B[0, 0], rows ldb weights
     * apart (ldb and k multiples of 32). Each block's 32 products are summed exactly in
     * int32, then multiplied by the two blocks' scales and accumulated in f32. */
    void (*small_t_q8)(int m, const void *aq, size_t k, const void *b, size_t ldb, size_t j0,
                       size_t w, float *t, size_t ldt);
    /* A's rows (dense f32 [m, k], k a multiple of 32) quantized per block of 32 into aq
     * (CPU_Q8A_BYTES(m, k) bytes): d = max |x| / 127 (an f32), q = x / d rounded to nearest
     * (ties away from zero) in [-127, 127], so |x - d q| <= d / 2. The q first (row r at
     * aq + r k), then the d (row r's at (float *)(aq + m k) + r k / 32). A block holding a
     * non-finite value gets d = NaN, so the products it meets are NaN, as in f32. Every
     * table computes the same bytes. */
    void (*q8_quantize_a)(int m, const float *a, size_t k, void *aq);
    /* Row conversions of n elements, rounding to nearest even (bf16 keeps subnormals and
     * quiets NaN as tern_f32_to_bf16 does). */
    void (*bf16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_bf16)(uint16_t *dst, const float *src, size_t n);
    void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_f16)(uint16_t *dst, const float *src, size_t n);
    /* n weights (a multiple of 32) from q8_0 blocks at src: d * q, exactly. */
    void (*q8_to_f32)(float *dst, const void *src, size_t n);
    /* Decoding attention over a KV cache whose rows of hs elements (hs apart) are in dtype dt
     * (f32, bf16, f16), read as they are: s[j] = scale * (sum over i < hs of q[i] K[j, i])
     * for j < n; and o[i] = sum over j < n of p[j] V[j, i] for i < hs. f32 sums in an order
     * of their own. */
    void (*attn_scores)(tern_dtype dt, const float *q, const void *keys, size_t n, size_t hs, float scale,
                        float *s);
    void (*attn_values)(tern_dtype dt, const float *p, const void *values, size_t n, size_t hs, float *o);
    /* The bf16 x bf16 product of the large-m path (m > CPU_SMALL_M), NULL in the tables
     * without bf16 dot products: t[i * ldt + j] = sum over kk < k of A(i, kk) B(kk, j) for
     * i < m, j < n, where A(i, kk) is a[i * lda + kk] (a[kk * lda + i] when trans_a) and
     * B(kk, j) is b[kk * ldb + j] (b[j * ldb + kk] when trans_b), all bf16. Each product of
     * two bf16 is exact in f32; the sums are f32, in an order of their own; bf16 subnormal
     * inputs count as zero and subnormal sums are flushed (vdpbf16ps's DAZ and FTZ).
     * scratch: CPU_GEMM_BF16_SCRATCH(m) bytes, 64-byte aligned. */
    void (*gemm_bf16)(size_t m, size_t n, size_t k, const uint16_t *a, size_t lda, bool trans_a,
                      const uint16_t *b, size_t ldb, bool trans_b, float *t, size_t ldt, void *scratch);
    /* The same for an f32 A and an f32 or q8_0 B (bdt; q8_0 only trans_b, with k, ldb and B's
     * start multiples of 32, dequantized exactly as it is packed), and a bf16 or f16 B where
     * gemm_f32_matmul includes them (converted exactly as it is packed): FMA sums in f32, in
     * an order of their own; NULL in the tables without it. scratch: CPU_GEMM_F32_SCRATCH(m)
     * bytes, 64-byte aligned. */
    void (*gemm_f32)(size_t m, size_t n, size_t k, const float *a, size_t lda, bool trans_a, const void *b,
                     tern_dtype bdt, size_t ldb, bool trans_b, float *t, size_t ldt, void *scratch);
    /* The B dtypes (bit 1 << dtype) whose large-m products matmul hands to gemm_f32 rather
     * than to OpenBLAS's sgemm: those where gemm_f32 measured ahead on this table's
     * processors (docs/PERFORMANCE.md); 0 without gemm_f32. */
    unsigned gemm_f32_matmul;
} cpu_kernels;

/* The tables, each defined by its kernels_<isa>.c (the x86 ones only in x86 builds). Use
 * cpu_kernels_for, which checks that the processor runs them. */
extern const cpu_kernels cpu_kernels_avx512bf16, cpu_kernels_avx512, cpu_kernels_avx2, cpu_kernels_portable;

/* The table for an instruction set, or NULL when it is not built in (not an x86 build) or
 * this processor does not run it. */
const cpu_kernels *cpu_kernels_for(cpu_isa isa);

/* The instruction set the process uses: the best this processor runs, or the one named by
 * TERN_CPU_ISA ("avx512bf16", "avx512", "avx2", "portable"; read once, for measuring a lesser machine's
 * path). The first call decides; an unknown or unsupported name is an error (NULL result
 * and *why set to a message), and later calls give the same answer. */
const cpu_kernels *cpu_kernels_process(const char **why);

/* The table the conversions of this process use (cpu_to_f32, cpu_from_f32): the process's
 * choice once a device has opened, the portable one before. */
const cpu_kernels *cpu_kernels_convert(void);

/* Makes device d's matmul kernels those of `isa` (tests: each path on one machine); an
 * error when that table is not available here. d must be a cpu device. */
tern_error *cpu_device_force_isa(tern_dev *d, cpu_isa isa);

#endif
