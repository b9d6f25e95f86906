/* The small-m products (src/kernels/gemv.c) behind tern_matmul: which products they take,
 * and their launch geometry.
 *
 * The rule (gpu_gemv_applies): m <= GK_GEMV_MAX_M rows of A, a single product (batch 1),
 * A not transposed. Anything else in the contract is taken: any lda and ldc, B either way
 * round and any ldb (odd strides and offsets only narrow the vector width), alpha, beta,
 * bias, GELU and aux, the SWIGLU and ROPE epilogues for B [n, k] (gpu_gemv_paired), any k (A's rows
 * are staged in k-chunks). m = 8 covers decoding up to
 * eight sequences: there B is read once for all rows, as for one. */
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"

bool gpu_gemv_applies(const tern_matmul_dims *d) {
    return d->m >= 1 && d->m <= GK_GEMV_MAX_M && d->batch == 1 && !d->trans_a;
}

bool gpu_gemv_paired(const tern_matmul_dims *d) { return gpu_gemv_applies(d) && d->trans_b; }

/* B's vector width: 16 bytes, narrowed until B's offset, its row stride and `row` (n for
 * B [k, n], whose threads read W columns; k for B [n, k], read in W-element words) are all
 * multiples of it. */
static int b_width(tern_buf b, size_t ldb, size_t row) {
    int w = gpu_width(&b, 1, row);
    while (w > 1 && ldb % (size_t)w != 0) w /= 2;
    return w;
}

/* Threads per group across the columns of B [k, n] (TC): 32 columns of C a group (TC = 32 /
 * W: 4 threads of a 16-byte-wide bf16 B, a row's 64 contiguous bytes; 8 of an f32 one, 128).
 * Until the decode kernels overlapped (programmatic dependent launch), groups stayed
 * narrower while that left two per SM of an H200; with the overlap TC 8 beat 2 (GPT-2 124M
 * bf16 decoding at 2,627 tokens/s against 2,467: bench/h200/NOTES.md, run 18). With the
 * weights loaded before the wait and the norm prologue, bf16 at TC 4 (32 columns) beat 8
 * (64 columns) and 2: 0.257-0.258 ms a token against 0.264-0.266 and 0.265-0.266 (run 83),
 * while f32 at TC 4 (16 columns) lost to 8 (32 columns): 0.310-0.311 against 0.303-0.308
 * (run 84). The gemv_tc option (a power of two up to 32) overrides it, for measurements. A
 * group's columns stay at most 64 (TC W), which bounds the kernel's threadgroup memory for
 * the SIMD groups' sums to 16 KiB. */
static int columns_threads(const gpu_core *g, int w) {
    int tc = 32 / w;
    if (g->tune.gemv_tc) tc = g->tune.gemv_tc;
    while (tc > 1 && tc * w > 64) tc /= 2;
    return tc;
}

/* Threads per group for B [k, n]: GK_GEMV_GROUP, doubled (up to 1024) while a thread would
 * still have more than 8 rows of a k-chunk, so that each thread loads all its rows at once
 * (GPT-2's 3072 x 768 projection: 1024 threads, 6 rows each, instead of 24 rows in steps of
 * 8). Only for m = 1 (m = 2 up to 512): the registers per thread that a 1024-thread group
 * allows (64; 128 at 512) hold m W accumulators and the rows in flight. */
static int group_threads(int m, int tc, size_t kc) {
    int g = GK_GEMV_GROUP, most = m == 1 ? 1024 : m == 2 ? 512 : GK_GEMV_GROUP;
    while (g < most && (kc + (size_t)(g / tc) - 1) / (size_t)(g / tc) > 8) g *= 2;
    return g;
}

/* With B loaded before the wait, fewer column threads (TC) where that lets every row of a
 * thread's share be among the rows loaded then (gemv_unroll's 8 for m <= 2): GPT-2's 3072 x
 * 768 projection at TC = 2 is 48 groups of 1,024 threads with 6 rows each, all loaded
 * early, instead of 12 groups with 8 of their 24 rows loaded early. The groups' rows of B
 * are then 32 contiguous bytes (TC W bf16), a whole sector. gemv_narrow=0 keeps TC
 * (for measurements). */
static void narrow_for_early(const gpu_core *core, int m, size_t rows, int32_t *tc, int32_t *g) {
    if (m > 2 || !core->tune.gemv_narrow) return;
    int t = *tc, threads = *g;
    while (t > 1 && (rows + (size_t)(threads / t) - 1) / (size_t)(threads / t) > 8) {
        t /= 2;
        threads = group_threads(m, t, rows);
    }
    if ((rows + (size_t)(threads / t) - 1) / (size_t)(threads / t) <= 8) *tc = t, *g = threads;
}

/* A's k-chunk: all of k (rounded up to 256) when m rows of it, of `size`-byte elements, fit
 * in GK_GEMV_X_BYTES. */
static size_t k_chunk(const tern_matmul_dims *d, size_t size) {
    size_t kc = ((size_t)d->k + 255) / 256 * 256;
    size_t cap = GK_GEMV_X_BYTES / ((size_t)d->m * size) / 256 * 256;
    return kc > cap ? cap : kc;
}

/* SIMD groups along k per row of B [n, k] (GK_GEMV_T's KS): doubled, up to 8, while the grid
 * has fewer than gemv_groups groups (512: about four a multiprocessor of an H200's 132) and
 * each lane still reads its step's words (gemv_t_words) of each row in one step:
 * Llama-3.2-1B's 2048 x 8192 down projection is 512 groups of 4 rows instead of 64 groups
 * of 32, its attention projection 128 instead of 64. Long rows only, since the SIMD groups'
 * sums meet in threadgroup memory after a barrier. On the H200 (bench/h200/NOTES.md, runs
 * 71-72) Llama-3.2-1B's decoding went from 1.565 to 1.139 ms a token with the splits and
 * early loads (1.247 without the splits), and the down projection's 8 splits (512) gave
 * 0.901 against 0.917 with 4 (256); letting a lane keep 2 words of a row (q|k|v and the
 * attention projection at 4 splits) was slower, 0.965 against 0.913 (run 74). The gemv_ks
 * option (1, 2, 4 or 8) overrides the rule and gemv_groups sets its grid, for measurements. */
/* The words of each row a GEMV_T lane loads at once: 4 on CUDA (16 loads of 16 bytes in
 * flight a lane at GK_GEMV_ROWS = 4; runs 71-74), 2 for m > 2, whose m R accumulators and x
 * words take registers too. On the host interpreter as on CUDA, so that the tests run CUDA's
 * body; 2 on OpenCL, where the longer unrolled body costs the compiler more than it gains
 * (PoCL, cold cache: test_llama_model on opencl 127 s with 4 a step, 100 with 2, 104 with
 * the GEMV_T before the k splits). */
static int gemv_t_words(const gpu_core *g, int m) {
    return (g->cuda || g->host) && m <= 2 ? 4 : 2;
}

static int k_splits(const gpu_core *g, int m, size_t n, size_t words) {
    if (g->tune.gemv_ks) return g->tune.gemv_ks;
    size_t u = (size_t)gemv_t_words(g, m), rows = (size_t)GK_GEMV_ROWS * (GK_GEMV_GROUP / 32);
    int ks = 1;
    while (ks < 8 && gpu_groups(n, rows / (size_t)ks) < (size_t)g->tune.gemv_groups && words >= 64 * (size_t)ks * u)
        ks *= 2;
    return ks;
}

/* Whether the GEMV may load B and the bias before its wait: no kernel launched since the
 * last barrier writes them (gpu_inflight_clear; decoding's weights), unless
 * gemv_early=0 (for measurements). */
static bool b_early(const gpu_core *g, tern_buf b, tern_buf bias) {
    if (!g->tune.gemv_early) return false;
    return gpu_inflight_clear(g, b) && (!tern_present(bias) || gpu_inflight_clear(g, bias));
}

/* A prologue's flags (kernels.h): RESIDENT when k is one chunk and a thread's elements of
 * A's m rows, ceil(kc / threads) a row, stay few (<= 16 registers in all); EARLY when its
 * weights may load before the wait (as b_early). */
static int32_t norm_flags(const gpu_core *g, const tern_matmul_dims *d, const tern_matmul *mm, size_t kc,
                          uint32_t threads) {
    size_t per = (kc + threads - 1) / threads;
    int32_t flags = 0;
    if ((size_t)d->k <= kc && per <= GK_GEMV_NORM_PER_THREAD && (size_t)d->m * per <= 16) flags |= GK_GEMV_NORM_RESIDENT;
    if (b_early(g, mm->norm.w, mm->norm.b)) flags |= GK_GEMV_NORM_EARLY;
    return flags;
}

static tern_error *gemv_run(gpu_core *g, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                            const tern_matmul_dims *d, int parts, int hs, int joined);

/* matmul's ATTENTION prologue: the cached attention, then the product of its output. A
 * decoding step split S ways leaves its S parts to the GEMV, which merges them where it
 * stages A (one kernel's merge through a fence, a counter and a read of the parts fewer on
 * the step's critical path); otherwise the attention writes A and a plain GEMV follows. */
static tern_error *gemv_attention(gpu_core *g, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                                  const tern_matmul_dims *d) {
    const tern_matmul_attention *at = &mm->att;
    int parts = 0, joined = 0;
    /* with its q|k|v product: one kernel where the split attention computes q, k and v
     * itself (attention.c's rule), else the product's GEMV first */
    if (at->product) TERN_TRY(gpu_attention_joined_run(g, a, at, &parts, &joined));
    if (!joined) {
        if (at->product) {
            tern_matmul_dims pd;
            tern_matmul_resolve(at->product, &pd);
            if (!gpu_gemv_applies(&pd)) /* validated: the product has the projection's m rows */
                return tern_errorf("matmul: the ATTENTION prologue's product is not one for the GEMV kernels");
            TERN_TRY(gpu_gemv(g, at->qkv, at->x, at->w, at->product, &pd));
        }
        TERN_TRY(gpu_attention_cached_run(g, a, at->k_cache, at->v_cache, at->qkv, at->pos, at->B, at->T, at->NH,
                                          at->KV, at->hs, at->max_T, &parts));
    }
    tern_matmul rest = *mm;
    rest.prologue = TERN_PROLOGUE_NONE;
    rest.att = (tern_matmul_attention){0};
    return gemv_run(g, c, a, b, &rest, d, parts, at->hs, joined);
}

tern_error *gpu_gemv(gpu_core *g, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                     const tern_matmul_dims *d) {
    if (mm->prologue == TERN_PROLOGUE_ATTENTION) return gemv_attention(g, c, a, b, mm, d);
    return gemv_run(g, c, a, b, mm, d, 0, 0, 0);
}

/* parts > 0: A's rows are staged from the cached attention's S = parts parts of head size hs
 * (gemv_attention; A's k = NH hs), and written to A; joined > 0: with the new position's
 * part too (gpu_attention_joined_run). */
static tern_error *gemv_run(gpu_core *g, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                            const tern_matmul_dims *d, int parts, int hs, int joined) {
    if (!gpu_gemv_applies(d))
        return tern_errorf("matmul: a %dx%dx%d product (batch %d%s) is not one for the GEMV kernels", d->m, d->n,
                           d->k, d->batch, d->trans_a ? ", A transposed" : "");
    if (tern_matmul_composite(c, mm)) /* the kernels read beta's term from C and would write aux */
        return tern_errorf("matmul: the GEMV kernels take a plain product (compose the addend and GELU_BACKWARD first)");
    if (tern_matmul_paired(mm) && !d->trans_b)
        return tern_errorf("matmul: the GEMV kernels take the SWIGLU and ROPE epilogues for B [n, k] only");
    bool has_bias = tern_present(mm->bias), has_aux = tern_present(mm->aux);
    TERN_TRY(gpu_check_index("matmul", "a", a.len));
    TERN_TRY(gpu_check_index("matmul", "b", b.len));
    TERN_TRY(gpu_check_index("matmul", "c", c.len));
    if (has_aux) TERN_TRY(gpu_check_index("matmul", "aux", mm->aux.len));
    size_t kc = k_chunk(d, tern_dtype_size(a.dtype)); /* x is staged in A's dtype */

    gk_spec s = {0};
    s.t[0] = gpu_t(c);
    s.t[1] = gpu_t(a);
    s.t[2] = gpu_t(b);
    s.t[3] = has_bias ? gpu_t(mm->bias) : 0;
    s.t[4] = has_aux ? gpu_t(mm->aux) : 0;
    s.n[0] = d->m;
    s.n[1] = b_width(b, d->ldb, d->trans_b ? (size_t)d->k : (size_t)d->n);
    s.n[2] = mm->epilogue == TERN_EPILOGUE_GELU;
    s.n[3] = has_bias;
    s.n[4] = has_aux;
    s.n[6] = (int32_t)kc;
    s.n[9] = mm->epilogue == TERN_EPILOGUE_SWIGLU ? GK_GEMV_SWIGLU : mm->epilogue == TERN_EPILOGUE_ROPE ? GK_GEMV_ROPE : 0;
    s.n[10] = mm->epilogue == TERN_EPILOGUE_ROPE ? mm->rope.head_dim : 0;
    s.n[12] = mm->prologue == TERN_PROLOGUE_LAYERNORM ? GK_GEMV_LAYERNORM
              : mm->prologue == TERN_PROLOGUE_RMSNORM ? GK_GEMV_RMSNORM
                                                      : 0;
    int norm = s.n[12];
    if (norm) s.t[5] = gpu_t(mm->norm.w);
    if (norm == GK_GEMV_LAYERNORM) s.t[6] = gpu_t(mm->norm.b);
    uint32_t groups, threads = GK_GEMV_GROUP;
    if (d->trans_b) {
        size_t cols = (size_t)d->k < kc ? (size_t)d->k : kc;
        s.n[11] = (size_t)d->k <= kc && b_early(g, b, has_bias ? mm->bias : tern_none());
        s.n[5] = k_splits(g, d->m, (size_t)d->n, cols / (size_t)s.n[1]);
        s.n[8] = gemv_t_words(g, d->m);
        /* a group's rows of B: GK_GEMV_ROWS a row group; under SWIGLU half of them gate rows
         * and half their up rows (under ROPE a head's columns j and j + hd/2), so a group
         * finishes half as many pairs of n / 2 */
        groups = gpu_groups((size_t)d->n, (size_t)GK_GEMV_ROWS * (GK_GEMV_GROUP / 32) / (size_t)s.n[5]);
    } else {
        size_t rows = (size_t)d->k < kc ? (size_t)d->k : kc;
        s.n[11] = (size_t)d->k <= kc && b_early(g, b, has_bias ? mm->bias : tern_none());
        s.n[5] = columns_threads(g, s.n[1]);
        s.n[7] = group_threads(d->m, s.n[5], rows);
        if (s.n[11]) narrow_for_early(g, d->m, rows, &s.n[5], &s.n[7]);
        size_t word = (size_t)s.n[1] * tern_dtype_size(b.dtype); /* an asynchronous copy's bytes */
        if (s.n[11] && g->tune.gemv_smem && (word == 4 || word == 8 || word == 16)) s.n[11] = 2;
        groups = gpu_groups((size_t)d->n, (size_t)s.n[5] * (size_t)s.n[1]);
        threads = (uint32_t)s.n[7];
    }
    if (norm) s.n[12] |= norm_flags(g, d, mm, (size_t)s.n[6], threads);
    if (parts) {
        s.n[12] = GK_GEMV_MERGE;
        s.n[13] = parts;
        s.n[14] = hs;
        s.n[15] = joined;
    }
    tern_arg args[20];
    size_t n = gpu_matmul_buffer_args(args, c, a, b, mm);
    if (mm->epilogue == TERN_EPILOGUE_ROPE) {
        args[n++] = tern_arg_buf(mm->rope.pos);
        args[n++] = tern_arg_buf(mm->rope.inv_freq);
    }
    if (norm) args[n++] = tern_arg_buf(mm->norm.w);
    if (norm == GK_GEMV_LAYERNORM) args[n++] = tern_arg_buf(mm->norm.b);
    if (parts) args[n++] = tern_arg_dev(g->att_partial);
    args[n++] = tern_arg_i32(d->n);
    args[n++] = tern_arg_i32(d->k);
    args[n++] = tern_arg_i32((int32_t)d->lda);
    args[n++] = tern_arg_i32((int32_t)d->ldb);
    args[n++] = tern_arg_i32((int32_t)d->ldc);
    args[n++] = tern_arg_f32(mm->alpha);
    args[n++] = tern_arg_f32(mm->beta);
    if (mm->epilogue == TERN_EPILOGUE_ROPE) args[n++] = tern_arg_i32(mm->rope.heads * mm->rope.head_dim / 2);
    if (norm) args[n++] = tern_arg_f32(mm->norm.eps);
    return gpu_run(g, "matmul", d->trans_b ? GK_GEMV_T : GK_GEMV, &s, tern_dims1(groups), tern_dims1(threads), args,
                   n);
}
