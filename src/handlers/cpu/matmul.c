/* matmul on cpu.
 *
 * - m <= CPU_SMALL_M (decoding): matmul_small.c streams B once with vector kernels.
 * - A and B both bf16 (on AVX512_BF16), or a B whose dtype the kernel table's
 *   gemm_f32_matmul names (f32 and q8_0 on AVX-512; bf16, f16 and q8_0 on AVX2): tern's own
 *   GEMM kernels, matmul_gemm.c.
 * - otherwise: OpenBLAS sgemm. The output is cut into rectangles (batch entry x rows x
 *   columns), one per unit of work, spread over our OpenMP threads, each calling sgemm
 *   single-threaded (OpenBLAS's own thread pool is set to 1 in open: two spinning pools on
 *   a few cores slow each other down). A bf16 A is converted to f32 once; a bf16/f16 B is
 *   converted per unit, in column chunks small enough to stay in L2; a bf16 C is computed
 *   in an f32 tile and stored at the end. Bias, aux and GELU are applied to each tile right
 *   after its sgemm, while it is in cache. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

/* Converted B chunks hold at most this many floats (1 MB, one Zen 4 core's L2). */
#define B_CHUNK_FLOATS ((size_t)1 << 18)
/* Columns finished at a time (bias converted once per block). */
#define FINISH_BLOCK 256
/* Rows of a converted [k, n] B chunk prefetched ahead of the conversion (a 64-token bf16
 * prompt's 48 products on the Zen 3: 89.2 -> 81.2 ms, medians of 4; 4 rows 84.5, 16 81.2). */
#define PF_ROWS 8

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

void cpu_mm_finish(const cpu_mm *mm, int e, int i0, int i1, int j0, int j1, float *t,
                   size_t ldt, bool raw) {
    const tern_matmul_dims *dm = &mm->dims;
    tern_buf c = mm->c;
    size_t c_entry = (size_t)e * dm->stride_c;
    float *c32 = c.dtype == TERN_F32 ? (float *)cpu_ptr(c) : NULL;
    bool t_is_c = c32 && t == c32 + c_entry + (size_t)i0 * dm->ldc + (size_t)j0;
    bool has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    bool gelu = mm->epilogue == TERN_EPILOGUE_GELU;
    if (!raw && !has_bias && !has_aux && !gelu && t_is_c) return; /* sgemm did it all */
    float bias[FINISH_BLOCK], cin[FINISH_BLOCK];
    for (int jb = j0; jb < j1; jb += FINISH_BLOCK) {
        int w = j1 - jb < FINISH_BLOCK ? j1 - jb : FINISH_BLOCK;
        if (has_bias) cpu_to_f32(bias, cpu_at(mm->bias, (size_t)jb), mm->bias.dtype, (size_t)w);
        for (int i = i0; i < i1; i++) {
            float *row = t + (size_t)(i - i0) * ldt + (size_t)(jb - j0);
            size_t c_at = c_entry + (size_t)i * dm->ldc + (size_t)jb;
            if (raw) {
                float alpha = mm->alpha, beta = mm->beta;
                if (beta != 0) { /* beta == 0: C is not read (it may hold NaN) */
                    const float *cr = cpu_row_in(c, c_at, (size_t)w, cin);
                    for (int j = 0; j < w; j++) row[j] = fmaf(alpha, row[j], beta * cr[j]);
                } else if (alpha != 1) {
                    for (int j = 0; j < w; j++) row[j] *= alpha;
                }
            }
            if (has_bias)
                for (int j = 0; j < w; j++) row[j] += bias[j];
            if (has_aux) {
                size_t aux_at = ((size_t)e * dm->m + (size_t)i) * dm->n + (size_t)jb;
                cpu_from_f32(cpu_at(mm->aux, aux_at), mm->aux.dtype, row, (size_t)w);
            }
            if (gelu)
#pragma omp simd
                for (int j = 0; j < w; j++) row[j] = cpu_gelu_f32(row[j]);
            if (!t_is_c) cpu_from_f32(cpu_at(c, c_at), c.dtype, row, (size_t)w);
        }
    }
}

void cpu_mm_a_to_f32(const cpu_mm *mm, float *a32) {
    const tern_matmul_dims *dm = &mm->dims;
    size_t total = (size_t)dm->batch * dm->a_rows;
#pragma omp for schedule(static)
    for (size_t r = 0; r < total; r++) {
        size_t e = r / dm->a_rows, i = r % dm->a_rows;
        cpu_to_f32(a32 + r * dm->a_cols, cpu_at(mm->a_in, e * dm->stride_a + i * dm->lda), mm->a_in.dtype,
                   dm->a_cols);
    }
}

/* The work split of the sgemm path: each unit is entry e, row chunk ri, column chunk cj. */
typedef struct plan {
    int ni, nj;    /* row and column chunks per entry */
    size_t h, w;   /* their sizes */
    size_t units;  /* batch * ni * nj */
    size_t b_tile; /* floats of converted B per thread (0: B used in place) */
    size_t c_tile; /* floats of f32 C tile per thread (0: C used in place) */
    size_t a32;    /* floats of converted A (0: A used in place) */
} plan;

static plan make_plan(const cpu_mm *mm, int threads) {
    const tern_matmul_dims *dm = &mm->dims;
    size_t m = (size_t)dm->m, n = (size_t)dm->n, k = (size_t)dm->k;
    plan p = {1, 1, m, n, 0, 0, 0, 0};
    size_t parts = dm->batch >= threads ? 1 : ceil_div((size_t)threads, (size_t)dm->batch);
    if (parts > 1) {
        /* each unit's sgemm packs all of its A rows and B columns: splitting n repeats A's
         * packing in every unit, splitting m repeats B's, so split the larger of m and n
         * (the lm head's dW [50304, 768] += A^T B splits m, its forward splits n) */
        if (n >= m) p.nj = (int)parts;
        else p.ni = (int)parts;
    }
    if (mm->b.dtype != TERN_F32) {
        /* converted B columns per unit: bounded so the chunk stays in L2 */
        size_t max_w = B_CHUNK_FLOATS / k;
        max_w = max_w < 16 ? 16 : max_w / 16 * 16;
        size_t nj = ceil_div(n, max_w);
        if (nj > (size_t)p.nj) p.nj = (int)round_up(nj, parts);
    }
    p.w = round_up(ceil_div(n, (size_t)p.nj), 16);
    if (p.w > n) p.w = n;
    p.nj = (int)ceil_div(n, p.w);
    p.h = ceil_div(m, (size_t)p.ni);
    p.ni = (int)ceil_div(m, p.h);
    p.units = (size_t)dm->batch * (size_t)p.ni * (size_t)p.nj;
    if (mm->b.dtype != TERN_F32) p.b_tile = p.w * k;
    if (mm->c.dtype != TERN_F32) p.c_tile = p.h * p.w;
    if (mm->a32 == NULL) p.a32 = (size_t)dm->batch * dm->a_rows * dm->a_cols;
    return p;
}

/* One unit: sgemm on its rectangle, then the finish. */
static void run_unit(const cpu_mm *mm, const plan *p, const float *a32, size_t u, float *b_tile,
                     float *c_tile) {
    const tern_matmul_dims *dm = &mm->dims;
    int e = (int)(u / ((size_t)p->ni * (size_t)p->nj));
    size_t rest = u % ((size_t)p->ni * (size_t)p->nj);
    size_t i0 = (rest / (size_t)p->nj) * p->h, j0 = (rest % (size_t)p->nj) * p->w;
    size_t i1 = min_size(i0 + p->h, (size_t)dm->m), j1 = min_size(j0 + p->w, (size_t)dm->n);
    size_t k = (size_t)dm->k, rows = i1 - i0, cols = j1 - j0;

    /* A rows i0..i1 of entry e (columns i0.. when stored transposed) */
    const float *a = a32 + (size_t)e * mm->a32_stride + (dm->trans_a ? i0 : i0 * mm->a32_ld);
    size_t lda = mm->a32_ld;

    /* B columns j0..j1 of entry e (rows j0.. when stored transposed) */
    const float *b;
    size_t ldb;
    size_t b_entry = (size_t)e * dm->stride_b;
    size_t b_first = b_entry + (dm->trans_b ? j0 * dm->ldb : j0);
    if (mm->b.dtype == TERN_F32) {
        b = (const float *)cpu_ptr(mm->b) + b_first;
        ldb = dm->ldb;
    } else if (dm->trans_b) {
        for (size_t j = 0; j < cols; j++)
            cpu_to_f32(b_tile + j * k, cpu_at(mm->b, b_first + j * dm->ldb), mm->b.dtype, k);
        b = b_tile;
        ldb = k;
    } else {
        /* the unit's B is k short runs ldb apart, which the hardware prefetchers follow
         * poorly: each row's run is prefetched PF_ROWS rows ahead */
        size_t run = tern_dtype_bytes(mm->b.dtype, cols);
        for (size_t kk = 0; kk < k; kk++) {
            if (kk + PF_ROWS < k) {
                const char *ahead = (const char *)cpu_at(mm->b, b_first + (kk + PF_ROWS) * dm->ldb);
                for (size_t off = 0; off < run; off += 64) __builtin_prefetch(ahead + off, 0, 3);
            }
            cpu_to_f32(b_tile + kk * cols, cpu_at(mm->b, b_first + kk * dm->ldb), mm->b.dtype, cols);
        }
        b = b_tile;
        ldb = cols;
    }

    /* C: in place when f32, else an f32 tile (loaded when beta reads it) */
    float *c;
    size_t ldc;
    size_t c_first = (size_t)e * dm->stride_c + i0 * dm->ldc + j0;
    if (mm->c.dtype == TERN_F32) {
        c = (float *)cpu_ptr(mm->c) + c_first;
        ldc = dm->ldc;
    } else {
        c = c_tile;
        ldc = cols;
        if (mm->beta != 0)
            for (size_t i = 0; i < rows; i++)
                cpu_to_f32(c + i * cols, cpu_at(mm->c, c_first + i * dm->ldc), mm->c.dtype, cols);
    }
    cblas_sgemm(CblasRowMajor, dm->trans_a ? CblasTrans : CblasNoTrans,
                dm->trans_b ? CblasTrans : CblasNoTrans, (int)rows, (int)cols, (int)k, mm->alpha,
                a, (int)lda, b, (int)ldb, mm->beta, c, (int)ldc);
    cpu_mm_finish(mm, e, (int)i0, (int)i1, (int)j0, (int)j1, c, ldc, false);
}

static tern_error *matmul_sgemm(tern_dev *d, cpu_mm *mm) {
    const tern_matmul_dims *dm = &mm->dims;
    plan p = make_plan(mm, d->threads);
    size_t per_thread = cpu_round64(p.b_tile * sizeof(float)) + cpu_round64(p.c_tile * sizeof(float));
    size_t bytes = cpu_round64(p.a32 * sizeof(float)) + per_thread * (size_t)d->threads;
    unsigned char *cursor = NULL;
    if (bytes) TERN_TRY(tern_error_wrap(cpu_scratch(d, bytes, (void **)&cursor), "matmul"));
    float *a32 = p.a32 ? cpu_carve(&cursor, p.a32 * sizeof(float)) : NULL;
    unsigned char *thread_scratch = cursor;
    size_t rows_a = dm->a_rows, cols_a = dm->a_cols;
    if (a32) { /* A converted to dense f32 in its stored layout */
        mm->a32_ld = cols_a;
        mm->a32_stride = rows_a * cols_a;
    }
    int threads = p.units < (size_t)d->threads ? (int)p.units : d->threads;
#pragma omp parallel num_threads(threads)
    {
        if (a32) cpu_mm_a_to_f32(mm, a32);
        unsigned char *mine = thread_scratch + per_thread * (size_t)omp_get_thread_num();
        float *b_tile = p.b_tile ? cpu_carve(&mine, p.b_tile * sizeof(float)) : NULL;
        float *c_tile = p.c_tile ? cpu_carve(&mine, p.c_tile * sizeof(float)) : NULL;
        const float *a = a32 ? a32 : mm->a32;
#pragma omp for schedule(dynamic)
        for (size_t u = 0; u < p.units; u++) run_unit(mm, &p, a, u, b_tile, c_tile);
    }
    return NULL;
}

/* The steps of a composed product (tern_matmul_compose): this handler's own operations. */
TERN_MATMUL_STEPS(tern_dev, cpu_copy, cpu_matmul, cpu_gelu_backward, cpu_sum_rows, cpu_swiglu, cpu_rope, cpu_layernorm, cpu_rmsnorm, cpu_attention_cached, cpu_temp)

tern_error *cpu_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mmp) {
    cpu_mm mm;
    memset(&mm, 0, sizeof mm);
    tern_matmul_resolve(mmp, &mm.dims);
    if (tern_matmul_composite(c, mmp) || tern_matmul_paired(mmp) || mmp->prologue != TERN_PROLOGUE_NONE) {
        /* sgemm's beta reads C itself, and the finish has no GELU gradient, SwiGLU or
         * rotation: compose (the copy, the gradient, the activation and the rotation are each
         * one more pass over C, cheap next to the product; a prologue's norm one pass over A) */
        const tern_matmul_steps steps = matmul_steps(d);
        return tern_matmul_compose(&steps, c, a, b, mmp, &mm.dims);
    }
    mm.alpha = mmp->alpha;
    mm.beta = mmp->beta;
    mm.epilogue = mmp->epilogue;
    mm.c = c;
    mm.bias = mmp->bias;
    mm.aux = mmp->aux;
    mm.a_in = a;
    mm.b = b;
    if (mm.dims.m <= CPU_SMALL_M) return cpu_matmul_small(d, &mm);
    if (cpu_matmul_gemm_takes(d, a.dtype, b.dtype)) return cpu_matmul_gemm(d, &mm);
    if (a.dtype == TERN_F32) {
        mm.a32 = (const float *)cpu_ptr(a);
        mm.a32_ld = mm.dims.lda;
        mm.a32_stride = mm.dims.stride_a;
    }
    return matmul_sgemm(d, &mm);
}
