/* matmul on cpu with m > CPU_SMALL_M (a prompt, a training batch) on tern's own GEMM kernels
 * (kernels.h), where the kernel table has them:
 *  - gemm_bf16 for bf16 A and bf16 B (AVX512_BF16's dot products): the operands are
 *    multiplied in bf16 as they are stored, with f32 sums, instead of being converted to f32
 *    for sgemm. Both are bf16 already, so the products are exact and only the order of the
 *    f32 sums differs from the sgemm path. An f32 A is not rounded to bf16 to come here: that
 *    would change its results (2^-9 relative an element), which tests/ops/test_ops_matmul.c's
 *    bounds for f32 A do not allow.
 *  - gemm_f32 for the B dtypes of the table's gemm_f32_matmul: f32 and q8_0 on AVX-512,
 *    bf16, f16 and q8_0 on AVX2 (each B converted exactly as it is packed, where the sgemm
 *    path converted each unit's B into a tile first); an A in bf16 or f16 is converted to
 *    f32 once, as the sgemm path does. The values multiplied are those the sgemm path
 *    multiplies; only the order of the f32 sums differs.
 *
 * The output is cut into rectangles (batch entry x rows x columns), one per unit of work,
 * spread over the OpenMP threads; each unit's sums go into an f32 tile (C itself when C is
 * f32 and beta is 0), which cpu_mm_finish turns into C (alpha, beta, bias, aux, GELU). */
#include <omp.h>

#include "cpu.h"

/* Rows and columns of a unit at most: its tile (192 x 1536 f32) stays in L2 with the packed
 * A block and B panel. */
#define UNIT_ROWS 192
#define UNIT_COLS 1536

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Whether the bf16 kernel takes the product (else gemm_f32 does). */
static bool on_gemm_bf16(const tern_dev *d, tern_dtype a, tern_dtype b) {
    return a == TERN_BF16 && b == TERN_BF16 && d->kern->gemm_bf16 != NULL;
}

bool cpu_matmul_gemm_takes(const tern_dev *d, tern_dtype a, tern_dtype b) {
    if (on_gemm_bf16(d, a, b)) return true;
    bool a_ok = a == TERN_F32 || a == TERN_BF16 || a == TERN_F16;
    return a_ok && d->kern->gemm_f32 && (unsigned)b < 32 && (d->kern->gemm_f32_matmul >> b & 1u);
}

tern_error *cpu_matmul_gemm(tern_dev *d, const cpu_mm *mm) {
    const tern_matmul_dims *dm = &mm->dims;
    bool bf16 = on_gemm_bf16(d, mm->a_in.dtype, mm->b.dtype);
    /* gemm_f32 with a half-precision A: A converted to dense f32 once, in its stored layout */
    bool convert_a = !bf16 && mm->a_in.dtype != TERN_F32;
    size_t m = (size_t)dm->m, n = (size_t)dm->n, k = (size_t)dm->k, batch = (size_t)dm->batch;
    size_t threads = (size_t)d->threads;
    /* rows: as few chunks as UNIT_ROWS allows, in whole register tiles */
    size_t ni = ceil_div(m, UNIT_ROWS);
    size_t h = round_up(ceil_div(m, ni), CPU_GEMM_BF16_MR);
    ni = ceil_div(m, h);
    /* columns: at most UNIT_COLS, and split further until every thread has a unit (splitting
     * columns repeats only the packing of A, the smaller operand at a prompt's m) */
    size_t nj = ceil_div(n, UNIT_COLS);
    if (batch * ni * nj < threads) nj = ceil_div(threads, batch * ni);
    size_t w = round_up(ceil_div(n, nj), CPU_GEMM_BF16_NR); /* (the f32 kernel's NR too) */
    nj = ceil_div(n, w);
    size_t units = batch * ni * nj;

    bool in_place = mm->c.dtype == TERN_F32 && mm->beta == 0;
    size_t tile_bytes = in_place ? 0 : cpu_round64(h * w * sizeof(float));
    size_t pack_bytes = bf16 ? CPU_GEMM_BF16_SCRATCH(h) : CPU_GEMM_F32_SCRATCH(h);
    size_t per = tile_bytes + cpu_round64(pack_bytes);
    size_t a32_count = convert_a ? batch * dm->a_rows * dm->a_cols : 0;
    unsigned char *scratch;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, cpu_round64(a32_count * sizeof(float)) + per * threads,
                                         (void **)&scratch), "matmul"));
    float *a32 = (float *)scratch;
    unsigned char *thread_scratch = scratch + cpu_round64(a32_count * sizeof(float));
    int nthreads = units < threads ? (int)units : (int)threads;
#pragma omp parallel num_threads(nthreads)
    {
        if (convert_a) cpu_mm_a_to_f32(mm, a32);
        unsigned char *mine = thread_scratch + per * (size_t)omp_get_thread_num();
        float *tile = (float *)mine;
        void *pack = mine + tile_bytes;
#pragma omp for schedule(dynamic)
        for (size_t u = 0; u < units; u++) {
            size_t e = u / (ni * nj), ri = (u / nj) % ni, cj = u % nj;
            size_t i0 = ri * h, i1 = min_size(i0 + h, m), j0 = cj * w, j1 = min_size(j0 + w, n);
            /* A rows i0..i1: [h, k] from row i0 (stored [k, h] from column i0 when trans_a);
             * B columns j0..j1: [k, w] from column j0 ([w, k] from row j0 when trans_b);
             * t: [h, w] f32, rows ldt apart */
            const void *a = cpu_at(mm->a_in, e * dm->stride_a + (dm->trans_a ? i0 : i0 * dm->lda));
            size_t lda = dm->lda;
            if (convert_a) {
                lda = dm->a_cols;
                a = a32 + e * dm->a_rows * lda + (dm->trans_a ? i0 : i0 * lda);
            }
            const void *b = cpu_at(mm->b, e * dm->stride_b + (dm->trans_b ? j0 * dm->ldb : j0));
            float *t = tile;
            size_t ldt = j1 - j0;
            if (in_place) {
                t = (float *)cpu_ptr(mm->c) + e * dm->stride_c + i0 * dm->ldc + j0;
                ldt = dm->ldc;
            }
            if (bf16)
                d->kern->gemm_bf16(i1 - i0, j1 - j0, k, a, lda, dm->trans_a, b, dm->ldb, dm->trans_b, t, ldt,
                                   pack);
            else
                d->kern->gemm_f32(i1 - i0, j1 - j0, k, a, lda, dm->trans_a, b, mm->b.dtype, dm->ldb,
                                  dm->trans_b, t, ldt, pack);
            cpu_mm_finish(mm, (int)e, (int)i0, (int)i1, (int)j0, (int)j1, t, ldt, true);
        }
    }
    return NULL;
}
