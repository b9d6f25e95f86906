/* matmul on the cuda handler: cuBLASLt, with bias and GELU epilogues fused; products with at
 * most 8 rows of A (decoding) go to the GPU core's GEMV kernels instead (gemv_wanted below).
 * A separate addend is cuBLASLt's C (D is our C), and GELU_BACKWARD its DGELU epilogue; the
 * paths that lack them (GEMV, the GPU core) compose them (tern_matmul_compose).
 *
 * cuBLASLt is column-major, tern row-major. A row-major [r, c] matrix with row stride ld is
 * the column-major [c, r] matrix with leading dimension ld, i.e. its transpose. So
 * C = op(A) op(B) (row-major) is computed as C^T = op(B)^T op(A)^T (column-major): cuBLASLt's
 * "A" is our B and its "B" is our A, with m and n swapped and the transpose flags kept.
 * Our bias[n] runs along C's columns, which are the rows of cuBLASLt's D: its bias epilogue.
 *
 * Plans (descriptors, layouts and the chosen algorithm) are cached per shape: the heuristic
 * query costs far more than the product itself for small decode-time shapes.
 *
 * The algorithm: cuBLASLt's heuristic ranks candidates by a model, and its first choice was
 * measured 3-5x off the chip's rate on some of GPT-2's training shapes. So on a shape's first
 * use the candidates it offers (up to the gemm_candidates option) are timed on scratch output
 * and the fastest kept (gemm_tune=0: the heuristic's first). The choice is stored in the
 * disk cache, keyed by device, cuBLASLt version and shape, so that later processes use the
 * same algorithm: results stay bitwise reproducible from run to run (resume relies on that),
 * which re-timing in every process would not give. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_handler.h"
#include "handlers/validate.h"
#include "dsl/disk_cache.h"

#define GEMM_CANDIDATES 8
#define GEMM_CANDIDATES_MAX 64

/* The candidates the heuristic is asked for: the gemm_candidates option (GEMM_CANDIDATES by
 * default; at most GEMM_CANDIDATES_MAX). */
static int gemm_candidates(const tern_dev *d) { return d->tune.gemm_candidates; }

static cudaDataType_t lt_type(tern_dtype t) {
    return t == TERN_BF16 ? CUDA_R_16BF : t == TERN_F16 ? CUDA_R_16F : CUDA_R_32F;
}

static tern_error *lt_check(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return NULL;
    return tern_errorf("cuBLASLt %s: %s", what, cublasLtGetStatusString(s));
}


/* Everything that selects a plan. */
typedef struct plan_key {
    int m, n, k, lda, ldb, ldc, batch;
    long stride_a, stride_b, stride_c;
    bool trans_a, trans_b;
    tern_dtype ta, tb, tc, tbias;
    int epilogue; /* cublasLtEpilogue_t */
    bool beta_zero;
    int align_a, align_b, align_c; /* bytes (a power of two up to 256): see pointer_alignment */
    int align_addend; /* of what cuBLASLt reads as C: our C, or a separate addend */
} plan_key;

struct cuda_matmul_plan {
    plan_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    struct cuda_matmul_plan *next;
};

static void plan_destroy(cuda_matmul_plan *p) {
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    free(p);
}

void cuda_matmul_plans_free(tern_dev *d) {
    while (d->plans) {
        cuda_matmul_plan *next = d->plans->next;
        plan_destroy(d->plans);
        d->plans = next;
    }
}

static tern_error *layout(cublasLtMatrixLayout_t *out, tern_dtype t, uint64_t rows, uint64_t cols,
                          int64_t ld, int batch, int64_t stride) {
    TERN_TRY(lt_check(cublasLtMatrixLayoutCreate(out, lt_type(t), rows, cols, ld), "layout"));
    if (batch > 1) {
        int32_t count = batch;
        TERN_TRY(lt_check(cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                           &count, sizeof count), "batch count"));
        TERN_TRY(lt_check(cublasLtMatrixLayoutSetAttribute(
                              *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
                          "batch stride"));
    }
    return NULL;
}

/* A view's device address. */
static CUdeviceptr address(tern_buf b) {
    return (CUdeviceptr)(uintptr_t)b.mem + b.offset * tern_dtype_size(b.dtype);
}

/* The largest power of two up to 256 that divides a device address. cuBLASLt assumes 256-byte
 * aligned operands unless told otherwise (the MIN_ALIGNMENT preferences), and an algorithm
 * chosen under that assumption gives wrong results on views at odd offsets: the op tests'
 * views at offsets 1-5 elements found it on the H200. */
static int pointer_alignment(CUdeviceptr p) {
    int a = 1;
    while (a < 256 && !(p & (CUdeviceptr)a)) a *= 2;
    return a;
}

/* The bias and aux vectors have no alignment preference: the epilogues read them in 16-byte
 * runs, so views less aligned than that go to the GPU core. */
#define EPILOGUE_ALIGNMENT 16

/* The disk cache's key for a plan's algorithm: everything the choice depends on. A separate
 * addend's alignment is appended only when it differs from C's, so that every product
 * without one keeps the key (and the cached choice, hence its bits) it had before addends. */
static void tune_key(const tern_dev *d, const plan_key *k, char *buf, size_t size) {
    char addend[16] = "", cands[16] = "";
    if (k->align_addend != k->align_c) snprintf(addend, sizeof addend, " ac%d", k->align_addend);
    /* a choice among another number of candidates is another choice (the default's key as before) */
    if (gemm_candidates(d) != GEMM_CANDIDATES) snprintf(cands, sizeof cands, " c%d", gemm_candidates(d));
    snprintf(buf, size,
             "gemm 2 %s lt%zu ws%zu m%d n%d k%d ld%d,%d,%d b%d s%ld,%ld,%ld t%d%d d%d,%d,%d,%d e%d z%d al%d,%d,%d%s%s",
             d->name,
             cublasLtGetVersion(), d->workspace_size, k->m, k->n, k->k, k->lda, k->ldb, k->ldc, k->batch,
             k->stride_a, k->stride_b, k->stride_c, k->trans_a, k->trans_b, (int)k->ta, (int)k->tb, (int)k->tc,
             (int)k->tbias, k->epilogue, k->beta_zero, k->align_a, k->align_b, k->align_c, addend, cands);
}

/* Whether a cuBLASLt epilogue reads or writes the aux matrix (GELU's pre-activation). */
static bool epilogue_has_aux(int epilogue) {
    return epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
           epilogue == CUBLASLT_EPILOGUE_DGELU;
}

/* Runs plan p with algorithm `algo` `reps` times, reading c_in (what beta multiplies) and
 * writing c (and aux); the mean time in ms, or a negative value when the algorithm fails. */
static float time_algo(tern_dev *d, cuda_matmul_plan *p, const cublasLtMatmulAlgo_t *algo, CUdeviceptr a,
                       CUdeviceptr b, CUdeviceptr c_in, CUdeviceptr c, CUevent start, CUevent stop, int reps) {
    float alpha = 1, beta = p->key.beta_zero ? 0.0f : 1.0f, ms = -1;
    if (d->cu->cuEventRecord(start, d->stream) != CUDA_SUCCESS) return -1;
    for (int i = 0; i < reps; i++) {
        gpu_inflight_unknown(&d->core); /* work the core did not launch */
        cublasStatus_t s = cublasLtMatmul(d->lt, p->desc, &alpha, (const void *)b, p->la, (const void *)a, p->lb,
                                          &beta, (const void *)c_in, p->lc, (void *)c, p->lc, algo,
                                          (void *)d->workspace, d->workspace_size, (cudaStream_t)d->stream);
        if (s != CUBLAS_STATUS_SUCCESS) return -1;
    }
    if (d->cu->cuEventRecord(stop, d->stream) != CUDA_SUCCESS || d->cu->cuEventSynchronize(stop) != CUDA_SUCCESS ||
        d->cu->cuEventElapsedTime(&ms, start, stop) != CUDA_SUCCESS)
        return -1;
    return ms / (float)reps;
}

/* The disk cache's choice for tuning key `key`, into p->algo; whether it had one. */
static bool cached_algo(cuda_matmul_plan *p, const char *key) {
    void *cached = NULL;
    size_t size = 0;
    if (!disk_cache_load("gemm", key, &cached, &size)) return false;
    if (size == sizeof p->algo) memcpy(&p->algo, cached, sizeof p->algo);
    free(cached);
    return size == sizeof p->algo;
}

/* Picks p->algo among the heuristic's `found` candidates (p->algo holds the first): from the
 * disk cache when it has this shape, else by timing each. The timing writes the product's
 * own C and aux (c_out, aux_out), which it is about to overwrite, whenever that cannot
 * change what the product reads: when it reads no C (beta 0), or adds a separate addend
 * (c_in) that C does not overlap. No scratch as large as its output, then, which at GPT-2
 * 1.5B (the fc product's C and aux, 420 MB; a residual product's 52 MB) stood on top of the
 * first step's peak memory. A product that adds into C itself takes the choice made for
 * the same product without the addition (beta 0: the same candidates, ranked by the same
 * arithmetic) when that one was timed already (GPT-2's output-projection gradient, whose
 * chunks after the first add into it: 161 MB at 1.5B), else is timed on scratch. Any
 * failure leaves the heuristic's first choice: tuning is an optimisation, never an error. */
static void choose_algo(tern_dev *d, cuda_matmul_plan *p, const cublasLtMatmulHeuristicResult_t *results,
                        int found, CUdeviceptr bias, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c_in,
                        CUdeviceptr c_out, CUdeviceptr aux_out) {
    if (found < 2 || !d->tune.gemm_tune) return;
    char key[512];
    tune_key(d, &p->key, key, sizeof key);
    if (cached_algo(p, key)) return;
    const plan_key *k = &p->key;
    size_t elems = (size_t)(k->batch - 1) * (size_t)k->stride_c + (size_t)(k->m - 1) * (size_t)k->ldc + (size_t)k->n;
    size_t bytes = elems * tern_dtype_size(k->tc);
    bool separate = c_in != c_out && (c_in + bytes <= c_out || c_out + bytes <= c_in);
    if (!k->beta_zero && !separate) { /* adding into C: the beta-0 twin's choice, when made */
        plan_key twin = *k;
        twin.beta_zero = true;
        char twin_key[512];
        tune_key(d, &twin, twin_key, sizeof twin_key);
        if (cached_algo(p, twin_key)) {
            disk_cache_store("gemm", key, &p->algo, sizeof p->algo);
            return;
        }
    }
    if (d->capturing >= 0) return; /* no timing inside a graph capture */
    /* adding into C: scratch for C (and the GELU epilogues' aux, zeros for DGELU to read),
     * laid out as the plan's C, read and written */
    bool aux = epilogue_has_aux(k->epilogue), in_place = k->beta_zero || separate;
    size_t aux_bytes = aux ? (size_t)k->m * (size_t)k->n * tern_dtype_size(k->tc) : 0;
    CUdeviceptr scratch = 0, c = c_out, aux_ptr = aux_out, in = k->beta_zero ? c_out : c_in;
    CUevent start = NULL, stop = NULL;
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    if (!in_place) {
        if (d->cu->cuMemAlloc(&scratch, bytes + aux_bytes + 256) != CUDA_SUCCESS) return;
        if (d->cu->cuMemsetD8Async(scratch, 0, bytes + aux_bytes + 256, d->stream) != CUDA_SUCCESS) goto done;
        c = in = scratch;
        aux_ptr = (scratch + bytes + 255) & ~(CUdeviceptr)255;
    }
    if (d->cu->cuEventCreate(&start, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        d->cu->cuEventCreate(&stop, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        goto done;
    if (bias && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias))
        goto done;
    if (aux && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_ptr,
                                              sizeof aux_ptr))
        goto done;
    /* enough repetitions for about a millisecond per candidate, judged by the first */
    float best = -1;
    int best_i = 0;
    for (int i = 0; i < found; i++) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        float once = time_algo(d, p, &results[i].algo, a, b, in, c, start, stop, 1); /* warm-up */
        if (once < 0) continue;
        int reps = once > 0.5f ? 2 : once > 0.05f ? 5 : 20;
        float t = time_algo(d, p, &results[i].algo, a, b, in, c, start, stop, reps);
        if (t >= 0 && (best < 0 || t < best)) best = t, best_i = i;
    }
    if (best >= 0) {
        p->algo = results[best_i].algo;
        disk_cache_store("gemm", key, &p->algo, sizeof p->algo);
    }
done:
    if (start) d->cu->cuEventDestroy(start);
    if (stop) d->cu->cuEventDestroy(stop);
    d->cu->cuStreamSynchronize(d->stream);
    if (scratch) d->cu->cuMemFree(scratch);
}

/* *refused is set when cuBLASLt cannot do this product at all (its heuristic says not
 * supported or offers nothing), as opposed to failing (out of memory, ...). */
static tern_error *plan_create(tern_dev *d, const plan_key *k, CUdeviceptr bias, CUdeviceptr a,
                               CUdeviceptr b, CUdeviceptr c_in, CUdeviceptr c, CUdeviceptr aux,
                               cuda_matmul_plan **out, bool *refused) {
    cuda_matmul_plan *p = calloc(1, sizeof *p);
    if (!p) return tern_errorf("out of memory");
    p->key = *k;
    tern_error *err = NULL;
    /* fp32 stays fp32: TF32 is off, so the cuda handler matches the cpu handler's precision. */
    if ((err = lt_check(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "descriptor")))
        goto fail;
    cublasOperation_t op_lt_a = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our B */
    cublasOperation_t op_lt_b = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k->epilogue;
    if ((err = lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a,
                                                       sizeof op_lt_a), "transa")) ||
        (err = lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b,
                                                       sizeof op_lt_b), "transb")) ||
        (err = lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                       sizeof epi), "epilogue")))
        goto fail;
    if (epi & CUBLASLT_EPILOGUE_BIAS) {
        cudaDataType_t bt = lt_type(k->tbias);
        if ((err = lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                           &bt, sizeof bt), "bias type")))
            goto fail;
    }
    if (epilogue_has_aux(epi)) { /* GELU's aux is an output, DGELU's an input */
        int64_t aux_ld = k->n; /* aux is dense [m, n] row-major: column-major ld n */
        if ((err = lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                           &aux_ld, sizeof aux_ld), "aux ld")))
            goto fail;
    }
    /* cuBLASLt's A (our B): rows x cols as stored column-major. */
    uint64_t a_rows = k->trans_b ? (uint64_t)k->k : (uint64_t)k->n;
    uint64_t a_cols = k->trans_b ? (uint64_t)k->n : (uint64_t)k->k;
    uint64_t b_rows = k->trans_a ? (uint64_t)k->m : (uint64_t)k->k;
    uint64_t b_cols = k->trans_a ? (uint64_t)k->k : (uint64_t)k->m;
    if ((err = layout(&p->la, k->tb, a_rows, a_cols, k->ldb, k->batch, k->stride_b)) ||
        (err = layout(&p->lb, k->ta, b_rows, b_cols, k->lda, k->batch, k->stride_a)) ||
        (err = layout(&p->lc, k->tc, (uint64_t)k->n, (uint64_t)k->m, k->ldc, k->batch, k->stride_c)))
        goto fail;

    cublasLtMatmulPreference_t pref = NULL;
    if ((err = lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference"))) goto fail;
    uint64_t ws = d->workspace_size;
    cublasLtMatmulHeuristicResult_t results[GEMM_CANDIDATES_MAX];
    int found = 0;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &ws, sizeof ws);
    /* cuBLASLt's A is our B, its B our A; its D is our C, its C our C or a separate addend
     * (one layout serves both: the addend is laid out as C) */
    const struct { cublasLtMatmulPreferenceAttributes_t attr; uint32_t bytes; } aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, (uint32_t)k->align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, (uint32_t)k->align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, (uint32_t)k->align_addend},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, (uint32_t)k->align_c},
    };
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0] && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i].attr, &aligns[i].bytes, sizeof aligns[i].bytes);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(d->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, gemm_candidates(d),
                                           results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    *refused = s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && !found);
    if ((err = lt_check(s, "heuristic"))) goto fail;
    if (!found) {
        err = tern_errorf("cuBLASLt has no algorithm for a %dx%dx%d product (%s, %s -> %s)", k->m, k->n,
                          k->k, tern_dtype_name(k->ta), tern_dtype_name(k->tb), tern_dtype_name(k->tc));
        goto fail;
    }
    p->algo = results[0].algo;
    choose_algo(d, p, results, found, bias, a, b, c_in, c, aux);
    *out = p;
    return NULL;
fail:
    plan_destroy(p);
    return err;
}

/* The plan of key k, made (and its algorithm chosen on these operands: bias, a, b, what
 * beta multiplies (c_in: C or the addend), and c and aux as the product will write them) on
 * its first use. */
static tern_error *find_plan(tern_dev *d, const plan_key *k, CUdeviceptr bias, CUdeviceptr a, CUdeviceptr b,
                             CUdeviceptr c_in, CUdeviceptr c, CUdeviceptr aux, cuda_matmul_plan **out,
                             bool *refused) {
    *refused = false;
    for (cuda_matmul_plan *p = d->plans; p; p = p->next) {
        if (!memcmp(&p->key, k, sizeof *k)) {
            *out = p;
            return NULL;
        }
    }
    TERN_TRY(plan_create(d, k, bias, a, b, c_in, c, aux, out, refused));
    (*out)->next = d->plans;
    d->plans = *out;
    return NULL;
}

/* Products with few rows of A (decoding: one per sequence) go to the GPU core's GEMV kernels
 * (src/kernels/gemv.c) rather than cuBLASLt: m <= 8 (GK_GEMV_MAX_M), batch 1, A not
 * transposed (gpu_gemv_applies), B either way round. They stream B in one pass with a group
 * per few columns; cuBLASLt's kernels for M = 1 took 5.8-6.9 us per GPT-2 124M product that
 * reads 1.2-4.7 MB, against 0.4-1.6 us at the H200's bandwidth. gemv=0 keeps every product
 * on cuBLASLt (for comparisons). */
static bool gemv_wanted(const tern_dev *d, const tern_matmul_dims *dims) {
    return dims->m <= d->tune.gemv && gpu_gemv_applies(dims);
}

static tern_error *gemv(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                        const tern_matmul_dims *dims) {
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_gemv(&d->core, c, a, b, mm, dims);
    if (d->profile) {
        char name[64];
        snprintf(name, sizeof name, "gemv %dx%dx%d%s%s %s", mm->m, mm->n, mm->k, mm->trans_b ? " Bt" : "",
                 mm->epilogue == TERN_EPILOGUE_GELU ? " gelu" : "", tern_dtype_name(c.dtype));
        cuda_profile_end(d, name, t0);
    }
    return err;
}

/* Products cuBLASLt does not take (A and B of different dtypes, an aux not in C's dtype, a
 * bias or aux view not 16-byte aligned, a combination its heuristic refuses, such as f32
 * operands into a bf16 C) run on the GPU
 * core's DSL matmul, which has the whole tern_matmul contract. The model never asks for
 * them; the op-level tests do. */
static tern_error *core_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    double t0 = cuda_profile_begin(d);
    tern_error *err = gpu_matmul_dsl(d, c, a, b, mm);
    cuda_profile_end(d, "matmul (GPU core)", t0);
    return err;
}

/* The steps of a composed product (tern_matmul_compose): this handler's own operations. */
TERN_MATMUL_STEPS(tern_dev, gpu_copy, cuda_matmul, gpu_gelu_backward, gpu_sum_rows, gpu_swiglu, gpu_rope, gpu_layernorm, gpu_rmsnorm, gpu_attention_cached, gpu_temp)

/* Where cuBLASLt does not take a product: a separate addend or GELU_BACKWARD is composed
 * (copy, the plain product, gelu_backward), so the plain product itself can still go to
 * cuBLASLt or the GEMV kernels; anything else goes to the GPU core. */
static tern_error *fallback(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                            const tern_matmul_dims *dims) {
    if (!tern_matmul_composite(c, mm)) return core_matmul(d, c, a, b, mm);
    const tern_matmul_steps steps = matmul_steps(d);
    return tern_matmul_compose(&steps, c, a, b, mm, dims);
}

/* What cuBLASLt reads as C: a separate addend when beta reads it, else our C (D). */
static tern_buf lt_c(tern_buf c, const tern_matmul *mm) {
    return mm->beta != 0 && tern_matmul_separate_addend(c, mm) ? mm->addend : c;
}

static cublasLtEpilogue_t lt_epilogue(const tern_matmul *mm) {
    bool has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    if (mm->epilogue == TERN_EPILOGUE_GELU_BACKWARD) return CUBLASLT_EPILOGUE_DGELU; /* aux in, no bias */
    if (mm->epilogue == TERN_EPILOGUE_GELU)
        return has_aux ? (has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                       : (has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
    return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

static plan_key make_key(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm, const tern_matmul_dims *dims) {
    plan_key key;
    memset(&key, 0, sizeof key); /* padding bytes too: keys are compared with memcmp */
    key.m = mm->m, key.n = mm->n, key.k = mm->k;
    key.trans_a = mm->trans_a, key.trans_b = mm->trans_b;
    key.lda = (int)dims->lda, key.ldb = (int)dims->ldb, key.ldc = (int)dims->ldc;
    key.batch = dims->batch;
    if (key.batch > 1) {
        key.stride_a = (long)dims->stride_a;
        key.stride_b = (long)dims->stride_b;
        key.stride_c = (long)dims->stride_c;
    }
    key.ta = a.dtype, key.tb = b.dtype, key.tc = c.dtype;
    key.tbias = tern_present(mm->bias) ? mm->bias.dtype : TERN_F32;
    key.epilogue = (int)lt_epilogue(mm);
    key.beta_zero = mm->beta == 0.0f;
    key.align_a = pointer_alignment(address(a));
    key.align_b = pointer_alignment(address(b));
    key.align_c = pointer_alignment(address(c));
    key.align_addend = pointer_alignment(address(lt_c(c, mm)));
    return key;
}

/* Whether cuBLASLt's epilogue can take this bias and aux: 16-byte aligned views (its
 * epilogues read them in 16-byte runs; they have no alignment preference); for aux also a
 * leading dimension (n) divisible by 8, which cuBLASLt requires of the GELU aux matrix, and
 * one batch (plans set no aux batch stride, whose default of 0 would put every entry's aux
 * in the same place). */
static bool epilogue_fits(const tern_matmul *mm, const tern_matmul_dims *dims) {
    bool has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    if (has_bias && pointer_alignment(address(mm->bias)) < EPILOGUE_ALIGNMENT) return false;
    return !has_aux || (pointer_alignment(address(mm->aux)) >= EPILOGUE_ALIGNMENT && mm->n % 8 == 0 &&
                        dims->batch == 1);
}

/* Sets the plan's per-call pointers (bias, aux), runs cublasLtMatmul; *s
 * its status. */
static tern_error *lt_matmul(tern_dev *d, cuda_matmul_plan *p, tern_buf c, tern_buf a, tern_buf b,
                             const tern_matmul *mm, CUdeviceptr pbias, cublasStatus_t *s) {
    if (pbias)
        TERN_TRY(lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pbias,
                                                         sizeof pbias), "bias pointer"));
    if (tern_present(mm->aux)) { /* GELU writes it, DGELU reads it */
        CUdeviceptr aux = address(mm->aux);
        TERN_TRY(lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                         &aux, sizeof aux), "aux pointer"));
    }
    float alpha = mm->alpha, beta = mm->beta;
    CUdeviceptr pc = address(c), pin = address(lt_c(c, mm)); /* D, and C (the addend) */
    double t0 = cuda_profile_begin(d);
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    *s = cublasLtMatmul(d->lt, p->desc, &alpha, (const void *)address(b), p->la, (const void *)address(a), p->lb,
                        &beta, (const void *)pin, p->lc, (void *)pc, p->lc, &p->algo, (void *)d->workspace,
                        d->workspace_size, (cudaStream_t)d->stream);
    if (d->profile) {
        static const char *const epi_names[] = {"", " gelu", " dgelu"};
        char name[80];
        snprintf(name, sizeof name, "matmul %dx%dx%d%s%s%s%s x%d %s", mm->m, mm->n, mm->k,
                 mm->trans_a ? " At" : "", mm->trans_b ? " Bt" : "", epi_names[mm->epilogue],
                 pin != pc ? " +addend" : "", p->key.batch, tern_dtype_name(c.dtype));
        cuda_profile_end(d, name, t0);
    }
    return NULL;
}

/* The GPU core's matmul hook (the entry has validated the product). */
tern_error *cuda_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    tern_matmul_dims dims;
    tern_matmul_resolve(mm, &dims);
    /* the LAYERNORM and RMSNORM prologues: the GEMV kernels normalise A's rows as they stage
     * them; before cuBLASLt, a layernorm or rmsnorm pass into the core's temp */
    if (mm->prologue != TERN_PROLOGUE_NONE && !gemv_wanted(d, &dims)) {
        const tern_matmul_steps steps = matmul_steps(d);
        return tern_matmul_compose(&steps, c, a, b, mm, &dims);
    }
    /* the SWIGLU and ROPE epilogues: the GEMV kernels for B [n, k] apply them as they finish;
     * cuBLASLt has neither, so its product (into aux or the core's temp), then a swiglu or
     * rope pass */
    if (tern_matmul_paired(mm) && !(gemv_wanted(d, &dims) && dims.trans_b)) {
        const tern_matmul_steps steps = matmul_steps(d);
        return tern_matmul_compose(&steps, c, a, b, mm, &dims);
    }
    /* A bias gradient is the plain product, then sum_rows over B: cuBLASLt's BGRADA epilogue
     * runs a reduction kernel of its own after the product anyway, and was the slower on the
     * H200 (bench/h200/NOTES.md, run 52). */
    if (tern_present(mm->bias_grad)) {
        tern_matmul plain = *mm;
        plain.bias_grad = tern_none();
        TERN_TRY(cuda_matmul(d, c, a, b, &plain));
        return gpu_sum_rows(d, mm->bias_grad, tern_view(b, 0, (size_t)mm->k * (size_t)mm->n), mm->k, mm->n,
                                  mm->beta);
    }
    /* C's column sums: the product, then sum_rows over C (a GEMM of our own summing its tiles
     * as it stored them lost to this in the step: bench/h200/NOTES.md, runs 164-165) */
    if (tern_present(mm->col_sums)) {
        tern_matmul rest = *mm;
        rest.col_sums = tern_none();
        TERN_TRY(cuda_matmul(d, c, a, b, &rest));
        return gpu_sum_rows(d, mm->col_sums, tern_view(c, 0, (size_t)mm->m * (size_t)mm->n), mm->m, mm->n,
                            mm->col_sums_beta);
    }
    bool has_aux = tern_present(mm->aux);
    if (a.dtype != b.dtype || (has_aux && mm->aux.dtype != c.dtype)) return fallback(d, c, a, b, mm, &dims);
    if (gemv_wanted(d, &dims)) {
        if (tern_matmul_composite(c, mm)) return fallback(d, c, a, b, mm, &dims); /* the plain one: GEMV */
        return gemv(d, c, a, b, mm, &dims);
    }
    if (!epilogue_fits(mm, &dims)) return fallback(d, c, a, b, mm, &dims);

    plan_key key = make_key(c, a, b, mm, &dims);
    cuda_matmul_plan *p = NULL;
    CUdeviceptr pbias = tern_present(mm->bias) ? address(mm->bias) : 0;
    bool refused = false;
    CUdeviceptr paux = has_aux ? address(mm->aux) : 0;
    tern_error *err = find_plan(d, &key, pbias, address(a), address(b), address(lt_c(c, mm)), address(c), paux, &p,
                                &refused);
    if (err && refused) {
        tern_error_free(err);
        return fallback(d, c, a, b, mm, &dims);
    }
    TERN_TRY(err);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    TERN_TRY(lt_matmul(d, p, c, a, b, mm, pbias, &s));
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) return fallback(d, c, a, b, mm, &dims); /* a late refusal */
    return lt_check(s, "matmul");
}
