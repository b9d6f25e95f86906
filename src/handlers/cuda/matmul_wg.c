/* bf16 products on Hopper through the warpgroup GEMM of our own (src/kernels/gemm_wg.c)
 * instead of cuBLASLt, where it fits and the gemm_wg tuning key asks for it: cuBLASLt's
 * GELU and DGELU epilogues run outside its main loop (a 124M step's two GELU products at
 * ~470 TFLOP/s where plain ones of the same size run at 680-745: bench/h200/NOTES.md, run
 * 148); ours stores a tile's epilogue while the next tile multiplies. */
#include <stdio.h>
#include <string.h>

#include "cuda_handler.h"

static bool all_bf16(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    bool ok = c.dtype == TERN_BF16 && a.dtype == TERN_BF16 && b.dtype == TERN_BF16;
    if (tern_present(mm->bias)) ok = ok && mm->bias.dtype == TERN_BF16;
    if (tern_present(mm->aux)) ok = ok && mm->aux.dtype == TERN_BF16;
    if (tern_present(mm->addend)) ok = ok && mm->addend.dtype == TERN_BF16;
    return ok;
}

/* A view's start on 16 bytes (the tile copies' and the epilogue's 16-byte pieces). */
static bool aligned(tern_buf x) { return x.offset % 8 == 0; }

/* The kernel's options for this product, or false where it does not fit: bf16 throughout,
 * one batch, A not transposed, dense rows (lda k, ldb n or k, ldc n), alpha 1 and beta 0, or
 * beta 1 with the addend (or C) as a residual; GELU with bias and aux, DGELU with aux and no
 * bias; no prologue, paired epilogue or bias gradient (the caller has taken those apart).
 * C's column sums (any dtype of col_sums) come in parts, summed by sum_rows after it. */
static bool wg_opts(const tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                    const tern_matmul_dims *dims, gk_gemm_wg_opts *o) {
    if (!d->hopper || !d->tune.gemm_wg || !all_bf16(c, a, b, mm)) return false;
    if (dims->batch != 1 || mm->trans_a || mm->alpha != 1.0f || (mm->beta != 0.0f && mm->beta != 1.0f)) return false;
    if (mm->prologue != TERN_PROLOGUE_NONE || tern_present(mm->bias_grad)) return false;
    o->col_sums = tern_present(mm->col_sums);
    /* a product of fewer tiles than multiprocessors leaves part of the card idle, where
     * cuBLASLt would split k (the lm head's input gradient: 96 tiles, k = 50,304) */
    if (!gk_gemm_wg_fits(mm->m, mm->n, mm->k) || gk_gemm_wg_tiles(mm->m, mm->n) < d->multiprocessors) return false;
    if (dims->lda != (size_t)mm->k || dims->ldb != (size_t)(mm->trans_b ? mm->k : mm->n) || dims->ldc != (size_t)mm->n)
        return false;
    bool has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    o->n = mm->n, o->k = mm->k, o->b_nk = mm->trans_b, o->band = d->tune.gemm_wg_band;
    switch (mm->epilogue) {
    case TERN_EPILOGUE_NONE:
        if (has_aux || d->tune.gemm_wg < 2) return false;
        o->epilogue = GK_GEMM_WG_PLAIN;
        o->bias = has_bias;
        o->addend = mm->beta != 0.0f;
        break;
    case TERN_EPILOGUE_GELU:
        if (!has_bias || !has_aux || mm->beta != 0.0f) return false;
        o->epilogue = GK_GEMM_WG_GELU;
        break;
    case TERN_EPILOGUE_GELU_BACKWARD:
        if (has_bias || !has_aux || mm->beta != 0.0f) return false;
        o->epilogue = GK_GEMM_WG_DGELU;
        o->prefetch = d->tune.gemm_wg_prefetch;
        break;
    default: return false;
    }
    tern_buf addend = tern_present(mm->addend) ? mm->addend : c;
    return aligned(a) && aligned(b) && aligned(c) && (!has_bias || aligned(mm->bias)) &&
           (!has_aux || aligned(mm->aux)) && (!o->addend || aligned(addend));
}

/* The kernel built for o: found among those built, else built into a free slot (NULL when
 * every slot is taken: the product stays on cuBLASLt). */
static tern_error *wg_kernel(tern_dev *d, const gk_gemm_wg_opts *o, const tern_kernel **out) {
    *out = NULL;
    int i = 0;
    for (; i < CUDA_GEMM_WG_SLOTS && d->gemm_wg[i]; i++)
        if (!memcmp(&d->gemm_wg_opts[i], o, sizeof *o)) {
            *out = d->gemm_wg[i];
            return NULL;
        }
    if (i == CUDA_GEMM_WG_SLOTS) return NULL;
    TERN_TRY(gk_gemm_wg_build(o, &d->gemm_wg[i]));
    d->gemm_wg_opts[i] = *o;
    *out = d->gemm_wg[i];
    return NULL;
}

tern_error *cuda_matmul_wg(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                           const tern_matmul_dims *dims, bool *done) {
    *done = false;
    gk_gemm_wg_opts o;
    memset(&o, 0, sizeof o); /* padding too: options are compared with memcmp */
    if (!wg_opts(d, c, a, b, mm, dims, &o)) return NULL;
    const tern_kernel *k;
    TERN_TRY(wg_kernel(d, &o, &k));
    if (!k) return NULL;
    size_t mn = (size_t)mm->m * (size_t)mm->n;
    tern_buf parts = tern_none(); /* the column sums' parts [m / 16, n] f32 */
    if (o.col_sums) TERN_TRY(gpu_temp(d, TERN_TEMP_PRODUCT, TERN_F32, (size_t)mm->m / 16 * (size_t)mm->n, &parts));
    tern_arg args[8];
    size_t n = 0;
    args[n++] = tern_arg_buf(tern_view(a, 0, (size_t)mm->m * (size_t)mm->k));
    args[n++] = tern_arg_buf(tern_view(b, 0, (size_t)mm->k * (size_t)mm->n));
    args[n++] = tern_arg_buf(tern_view(c, 0, mn));
    if (o.epilogue == GK_GEMM_WG_GELU || o.bias) args[n++] = tern_arg_buf(tern_view(mm->bias, 0, (size_t)mm->n));
    if (o.epilogue != GK_GEMM_WG_PLAIN) args[n++] = tern_arg_buf(tern_view(mm->aux, 0, mn));
    if (o.addend) args[n++] = tern_arg_buf(tern_view(tern_present(mm->addend) ? mm->addend : c, 0, mn));
    if (o.col_sums) args[n++] = tern_arg_buf(parts);
    args[n++] = tern_arg_i32(gk_gemm_wg_tiles(mm->m, mm->n));
    double t0 = cuda_profile_begin(d);
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    TERN_TRY(tern_launch(d->rt, k, tern_dims1(gk_gemm_wg_groups(mm->m, mm->n, d->multiprocessors)),
                         tern_dims1(GK_GEMM_WG_THREADS), args, n));
    if (d->profile) {
        static const char *const epi[] = {"", " gelu", " dgelu"};
        char name[64];
        snprintf(name, sizeof name, "gemm_wg %dx%dx%d%s%s%s", mm->m, mm->n, mm->k, mm->trans_b ? " Bt" : "",
                 epi[o.epilogue], o.addend ? " +addend" : "");
        cuda_profile_end(d, name, t0);
    }
    *done = true;
    if (!o.col_sums) return NULL;
    return gpu_sum_rows(d, mm->col_sums, parts, mm->m / 16, mm->n, mm->col_sums_beta);
}

void cuda_matmul_wg_free(tern_dev *d) {
    for (int i = 0; i < CUDA_GEMM_WG_SLOTS; i++) {
        tern_kernel_free(d->gemm_wg[i]);
        d->gemm_wg[i] = NULL;
    }
}
