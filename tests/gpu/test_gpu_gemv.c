/* The GEMV kernels (src/kernels/gemv.c: matmul with m <= 8 rows of A, batch 1) against the
 * cpu handler, on each runtime: m = 1 .. 8, B [k, n] and [n, k], every epilogue (none,
 * GELU, GELU with aux), bias with beta 0 and beta != 0, alpha != 1, dtype mixes (f32, bf16,
 * f16 B), odd sizes (k and n not multiples of the vector width or of a group's columns),
 * row strides and odd offsets (the scalar paths), k longer than one staged chunk, the
 * SWIGLU and ROPE epilogues (B [n, k]), the LAYERNORM and RMSNORM prologues, and GPT-2's and
 * Llama-3.2-1B's decode shapes. Then:
 * the same call twice gives the same bits, C is not read when
 * beta == 0 (it holds NaN), and every variant compiles with NVRTC for sm_90.
 *
 * Tolerances: f32 results 2e-5 norm-wise (sums of up to 3072 products in different orders:
 * the cpu handler's per-thread blocks against the kernel's lanes and butterflies); results
 * stored in bf16 1e-2 (8 significant bits; the two sides may round an f32 tie-near value
 * to neighbouring bf16 values). */
#include "gpu_test.h"
#include "gpu_core/gpu_internal.h"
#include "nvrtc_check.h"

typedef struct gv_case {
    int m, n, k;
    bool trans_b;
    tern_dtype ta, tb, tc, tbias; /* tbias also aux's dtype */
    int epilogue;                 /* 0 none, 1 GELU, 2 GELU with aux */
    bool bias;
    float alpha, beta;
    int pad;    /* added to lda, ldb and ldc (0: dense) */
    size_t off; /* view offsets of A, B, C, bias (odd: the vector width drops) */
    bool swiglu; /* the SWIGLU epilogue (C [m, n/2]; with epilogue 2, aux [m, n]) */
    int rope_heads, head_dim; /* the ROPE epilogue when head_dim > 0 */
    tern_prologue norm;       /* a LAYERNORM or RMSNORM prologue (weights in A's dtype) */
    float shift; /* A's rows moved to about `shift`, their means slowly varying along k (a
                  * residual stream's offsets: the norm's statistics about a mean far from 0) */
} gv_case;

/* Runs one product on both sides and compares C (and aux); returns C of the GPU side as
 * raw bytes when `bits` is not NULL (for the determinism check). */
static void run_case(const gv_case *t, unsigned char **bits) {
    tern_matmul mm = {.m = t->m, .n = t->n, .k = t->k, .trans_b = t->trans_b, .alpha = t->alpha, .beta = t->beta,
                      .epilogue = t->swiglu ? TERN_EPILOGUE_SWIGLU : t->epilogue ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE};
    if (t->head_dim) mm.epilogue = TERN_EPILOGUE_ROPE;
    mm.prologue = t->norm;
    size_t b_rows = t->trans_b ? (size_t)t->n : (size_t)t->k, b_cols = t->trans_b ? (size_t)t->k : (size_t)t->n;
    size_t c_cols = t->swiglu ? (size_t)t->n / 2 : (size_t)t->n;
    if (t->pad) {
        mm.lda = t->k + t->pad;
        mm.ldb = (int)b_cols + t->pad;
        mm.ldc = (int)c_cols + t->pad;
    }
    size_t lda = mm.lda ? (size_t)mm.lda : (size_t)t->k, ldb = mm.ldb ? (size_t)mm.ldb : b_cols;
    size_t ldc = mm.ldc ? (size_t)mm.ldc : c_cols;
    size_t a_len = (size_t)t->m * lda, b_len = b_rows * ldb, c_len = (size_t)t->m * ldc;
    float *a = gt_random(a_len, -1, 1), *b = gt_random(b_len, -1, 1), *c0 = gt_random(c_len, -2, 2);
    for (size_t i = 0; t->shift != 0 && i < a_len; i++)
        a[i] += t->shift * (1.0f + 0.1f * sinf((float)(i % lda) / 40.0f));
    float *bias = gt_random((size_t)t->n, -1, 1);
    gt_pair pa = gt_make(t->ta, a_len, t->off, a), pb = gt_make(t->tb, b_len, t->off * 3, b);
    /* C [m, ldc]: poisoned (NaN) when beta == 0, so a kernel that reads it shows */
    gt_pair pc = gt_make(t->tc, c_len, t->off, t->beta != 0 ? c0 : NULL);
    gt_pair pbias = gt_make(t->tbias, (size_t)t->n, t->off * 5, bias);
    gt_pair paux = gt_make(t->tbias, (size_t)t->m * t->n, 0, NULL); /* aux [m, n] */
    /* ROPE: positions far into a long context (large angles), Llama 3's frequencies */
    int32_t pos[GK_GEMV_MAX_M];
    float freq[64];
    for (int i = 0; i < t->m; i++) pos[i] = 5 + 997 * i;
    for (int j = 0; j < t->head_dim / 2; j++) freq[j] = powf(500000.0f, -2.0f * (float)j / (float)t->head_dim);
    gt_pair ppos = gt_make_i32(pos, (size_t)t->m, t->off), pfreq = gt_make(TERN_F32, (size_t)(t->head_dim / 2 + 1), 0, freq);
    /* the prologue's weights, about 1, and shift */
    float *nw = gt_random((size_t)t->k, 0.5f, 1.5f), *nb = gt_random((size_t)t->k, -0.5f, 0.5f);
    gt_pair pnw = gt_make(t->ta, (size_t)t->k, t->off, nw), pnb = gt_make(t->ta, (size_t)t->k, t->off * 2, nb);
    if (t->beta == 0 && t->pad) { /* C's padding columns stay NaN on both sides: compare the rest */
        float *z = calloc(c_len, sizeof *z);
        gt_free(&pc);
        pc = gt_make(t->tc, c_len, t->off, z);
        free(z);
    }
    for (int gt_s_ = 0; gt_s_ < 2; gt_s_++) {
        gt_side *sd = gt_s_ ? &gt_gpu : &gt_cpu;
        tern_matmul x = mm;
        if (t->bias) x.bias = V(pbias);
        if (t->epilogue == 2) x.aux = V(paux);
        if (t->head_dim) x.rope = (tern_matmul_rope){V(ppos), tern_view(V(pfreq), 0, (size_t)t->head_dim / 2),
                                                    t->rope_heads, t->head_dim};
        if (t->norm)
            x.norm = (tern_matmul_norm){V(pnw), t->norm == TERN_PROLOGUE_LAYERNORM ? V(pnb) : tern_none(), 1e-5f};
        CHECK_OK(sd->ops->matmul(sd->d, V(pc), V(pa), V(pb), &x));
    }
    /* with a prologue, the normalised A is rounded to A's dtype on both sides, from
     * statistics summed in different orders: a bf16 A's values may round to neighbouring
     * bf16 values here and there (2^-8 of a term each), so 2e-3 there; 5e-5 for f32 */
    double tol = !t->norm ? gt_tol(t->tc, 2e-5) : gt_tol(t->tc, t->ta == TERN_BF16 ? 2e-3 : 5e-5);
    GT_EXPECT(pc, tol, "gemv m %d n %d k %d%s%s%s%s %s/%s/%s epi %d bias %d beta %g pad %d off %zu", t->m, t->n, t->k,
              t->trans_b ? " Bt" : "", t->swiglu ? " swiglu" : "", t->head_dim ? " rope" : "",
              t->norm == TERN_PROLOGUE_LAYERNORM ? " layernorm" : t->norm ? " rmsnorm" : "", tern_dtype_name(t->ta),
              tern_dtype_name(t->tb),
              tern_dtype_name(t->tc), t->epilogue, t->bias, (double)t->beta, t->pad, t->off);
    if (t->epilogue == 2) GT_EXPECT(paux, gt_tol(t->tbias, 2e-5), "gemv aux m %d n %d k %d", t->m, t->n, t->k);
    if (bits) {
        size_t bytes = c_len * tern_dtype_size(t->tc);
        *bits = malloc(bytes);
        CHECK_OK(gt_gpu.ops->download(gt_gpu.d, *bits, pc.view[1]));
    }
    gt_free(&pa), gt_free(&pb), gt_free(&pc), gt_free(&pbias), gt_free(&paux), gt_free(&ppos), gt_free(&pfreq);
    gt_free(&pnw), gt_free(&pnb);
    free(a), free(b), free(c0), free(bias), free(nw), free(nb);
}

/* The dtype mixes: the model's two precisions, then mixed operands. */
static const tern_dtype mixes[4][4] = {
    /* A, B, C, bias and aux */
    {TERN_F32, TERN_F32, TERN_F32, TERN_F32},
    {TERN_BF16, TERN_BF16, TERN_BF16, TERN_BF16},
    {TERN_BF16, TERN_F16, TERN_F32, TERN_F32},
    {TERN_F32, TERN_BF16, TERN_BF16, TERN_F32},
};

/* On compiled runtimes each variant is a driver compile (seconds on PoCL): these few cover
 * the decode step's products (bf16: projection into the residual, fc with GELU, logits),
 * f32, f16 B, aux, every epilogue, both layouts, and the scalar paths of odd offsets. */
static bool compiled_pick(int m, int tb, int mix, int epi, int bb) {
    static const int picks[][5] = {
        /* m, trans_b, mix, epilogue, beta != 0 */
        {1, 0, 1, 0, 1}, {1, 0, 1, 1, 0}, {1, 1, 1, 0, 0}, {3, 0, 0, 2, 1},
        {8, 1, 2, 2, 1}, {6, 0, 3, 0, 1}, {5, 1, 3, 1, 0},
    };
    for (size_t i = 0; i < sizeof picks / sizeof picks[0]; i++)
        if (picks[i][0] == m && picks[i][1] == tb && picks[i][2] == mix && picks[i][3] == epi && picks[i][4] == bb)
            return true;
    return false;
}

static void test_combinations(void) {
    /* n = 37: neither a multiple of the vector width nor of a group's columns (and narrows
     * W to 1 for B [k, n]); k = 45: the same along k (W = 1 for B [n, k]); n = 72, k = 40:
     * multiples of 8, the vector paths, with a last group of B [k, n] only partly used */
    int shapes[2][2] = {{37, 45}, {72, 40}};
    int count = 0;
    for (int m = 1; m <= GK_GEMV_MAX_M; m++)
        for (int tb = 0; tb < 2; tb++)
            for (int mix = 0; mix < 4; mix++)
                for (int epi = 0; epi < 3; epi++)
                    for (int bb = 0; bb < 2; bb++) { /* bias with beta 0, and bias with beta != 0 */
                        int sh = (m + mix + epi) % 2;
                        if (!gt_full() && !compiled_pick(m, tb, mix, epi, bb)) continue;
                        gv_case t = {.m = m, .n = shapes[sh][0], .k = shapes[sh][1], .trans_b = tb,
                                     .ta = mixes[mix][0], .tb = mixes[mix][1], .tc = mixes[mix][2],
                                     .tbias = mixes[mix][3], .epilogue = epi, .bias = true,
                                     .alpha = (m % 2) ? 1.0f : 0.75f, .beta = bb ? 0.5f : 0.0f,
                                     .pad = (m + epi) % 3 == 0 ? 3 : 0, .off = (size_t)(mix == 3 && m > 4)};
                        run_case(&t, NULL);
                        count++;
                    }
    /* no bias, beta 1: the residual update x = x + A B of the decode step, without bias */
    for (int tb = 0; tb < 2; tb++) {
        gv_case t = {.m = 2, .n = 64, .k = 48, .trans_b = tb, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16,
                     .tbias = TERN_BF16, .alpha = 1, .beta = 1};
        run_case(&t, NULL);
        count++;
    }
    printf("  %d small cases\n", count);
}

/* k longer than the staged chunk of A (m = 8 rows of f32 take 1024 columns per chunk); long
 * k with m = 1 and 2 (groups of 1024 and 512 threads for B [k, n]); GPT-2 124M's decode
 * shapes at one sequence and at eight (bf16, bias, beta 1 where the step writes the
 * residual); Llama-3.2-1B's long rows of B [n, k]. */
static void test_shapes(void) {
    gv_case longer[4] = {
        {.m = 8, .n = 40, .k = 2100, .ta = TERN_F32, .tb = TERN_F32, .tc = TERN_F32, .tbias = TERN_F32,
         .bias = true, .alpha = 1, .beta = 0.25f},
        {.m = 7, .n = 33, .k = 2100, .trans_b = true, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32,
         .tbias = TERN_F32, .epilogue = 2, .bias = true, .alpha = 1, .beta = 0},
        {.m = 2, .n = 40, .k = 1100, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16, .tbias = TERN_BF16,
         .bias = true, .alpha = 1, .beta = 1},
        {.m = 1, .n = 37, .k = 3001, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32, .tbias = TERN_F32,
         .epilogue = 2, .bias = true, .alpha = 0.5f, .beta = 0},
    };
    for (int i = 0; i < 4; i++) run_case(&longer[i], NULL);
    /* the SWIGLU epilogue (B [n, k]: gate row j and up row n/2 + j finished together; the
     * cpu side composes the product and swiglu): k in one chunk and in several, with aux
     * and bias, a strided C at odd offsets, a half-filled last row group (n/2 = 37), m = 8 */
    gv_case swiglu[4] = {
        {.m = 1, .n = 74, .k = 3001, .trans_b = true, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32,
         .tbias = TERN_F32, .epilogue = 2, .bias = true, .alpha = 1, .swiglu = true},
        {.m = 3, .n = 80, .k = 520, .trans_b = true, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16,
         .tbias = TERN_BF16, .bias = true, .alpha = 1, .pad = 3, .off = 1, .swiglu = true},
        {.m = 2, .n = 66, .k = 256, .trans_b = true, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_F32,
         .tbias = TERN_F32, .alpha = 0.5f, .swiglu = true},
        {.m = 8, .n = 48, .k = 96, .trans_b = true, .ta = TERN_F32, .tb = TERN_F32, .tc = TERN_F32,
         .tbias = TERN_F32, .epilogue = 2, .alpha = 1, .swiglu = true},
    };
    for (int i = 0; i < 4; i++) run_case(&swiglu[i], NULL);
    /* the ROPE epilogue (B [n, k]: a head's columns j and j + hd/2 finished together; the
     * cpu side composes the product and rope): q and k heads rotated, the v heads after
     * them not, k in one chunk and in several, bias, a strided C at odd offsets, alpha, a
     * half-filled last row group, m = 8, head sizes 8 and 64 */
    gv_case rope[4] = {
        {.m = 1, .n = 6 * 8, .k = 3001, .trans_b = true, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32,
         .tbias = TERN_F32, .bias = true, .alpha = 1, .rope_heads = 4, .head_dim = 8},
        {.m = 3, .n = 5 * 8, .k = 520, .trans_b = true, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16,
         .tbias = TERN_BF16, .bias = true, .alpha = 1, .pad = 3, .off = 1, .rope_heads = 3, .head_dim = 8},
        {.m = 2, .n = 7 * 8, .k = 256, .trans_b = true, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_F32,
         .tbias = TERN_F32, .alpha = 0.5f, .rope_heads = 7, .head_dim = 8},
        {.m = 8, .n = 3 * 64, .k = 96, .trans_b = true, .ta = TERN_F32, .tb = TERN_F32, .tc = TERN_F32,
         .tbias = TERN_F32, .bias = true, .alpha = 1, .rope_heads = 2, .head_dim = 64},
    };
    for (int i = 0; i < 4; i++) run_case(&rope[i], NULL);
    /* the LAYERNORM and RMSNORM prologues (each group computes the rows' statistics, then
     * stages x through the norm): both layouts, k in one chunk and in several (the
     * statistics over all of k first), m = 1, 2, 5 and 8, A's rows apart at odd offsets, a
     * residual C (beta 1), GELU, under the SWIGLU and ROPE epilogues, and rows far from 0
     * whose mean drifts along k (the spread about a row's mean is its parts' spreads about
     * their own means plus their means' about the row's: statistics that drop either show) */
    gv_case norm[8] = {
        {.m = 1, .n = 72, .k = 768, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16, .tbias = TERN_BF16,
         .bias = true, .alpha = 1, .norm = TERN_PROLOGUE_LAYERNORM},
        {.m = 1, .n = 72, .k = 768, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32, .tbias = TERN_F32,
         .bias = true, .alpha = 1, .norm = TERN_PROLOGUE_LAYERNORM, .shift = 40},
        {.m = 2, .n = 64, .k = 3072, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16, .tbias = TERN_BF16,
         .alpha = 1, .beta = 1, .norm = TERN_PROLOGUE_LAYERNORM, .shift = -25},
        {.m = 8, .n = 40, .k = 2100, .ta = TERN_F32, .tb = TERN_F32, .tc = TERN_F32, .tbias = TERN_F32,
         .epilogue = 1, .bias = true, .alpha = 1, .beta = 1, .norm = TERN_PROLOGUE_LAYERNORM},
        {.m = 5, .n = 33, .k = 2100, .trans_b = true, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32,
         .tbias = TERN_F32, .bias = true, .alpha = 1, .pad = 3, .off = 1, .norm = TERN_PROLOGUE_RMSNORM},
        {.m = 2, .n = 100, .k = 520, .trans_b = true, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16,
         .tbias = TERN_BF16, .alpha = 1, .norm = TERN_PROLOGUE_LAYERNORM},
        {.m = 1, .n = 80, .k = 576, .trans_b = true, .ta = TERN_BF16, .tb = TERN_BF16, .tc = TERN_BF16,
         .tbias = TERN_BF16, .alpha = 1, .swiglu = true, .norm = TERN_PROLOGUE_RMSNORM},
        {.m = 3, .n = 5 * 8, .k = 96, .trans_b = true, .ta = TERN_F32, .tb = TERN_F32, .tc = TERN_F32,
         .tbias = TERN_F32, .bias = true, .alpha = 1, .rope_heads = 3, .head_dim = 8, .norm = TERN_PROLOGUE_RMSNORM},
    };
    for (int i = 0; i < 8; i++) run_case(&norm[i], NULL);
    if (!gt_full()) return; /* the larger shapes run on the interpreter (and on GPUs) */
    int C = 768;
    gv_case gpt2[] = {
        {.m = 1, .n = 3 * C, .k = C, .epilogue = 0, .beta = 0},     /* qkv */
        {.m = 1, .n = C, .k = C, .epilogue = 0, .beta = 1},         /* attention projection into x */
        {.m = 1, .n = 4 * C, .k = C, .epilogue = 1, .beta = 0},     /* fc with GELU */
        {.m = 1, .n = C, .k = 4 * C, .epilogue = 0, .beta = 1},     /* fc projection into x */
        {.m = 1, .n = 2053, .k = C, .trans_b = true, .beta = 0},    /* logits against wte (a slice) */
        {.m = 8, .n = C, .k = 4 * C, .epilogue = 0, .beta = 1},     /* eight sequences */
        {.m = 8, .n = 1031, .k = C, .trans_b = true, .beta = 0},
        /* Hugging Face Linear's B [n, k] with long rows, SIMD groups sharing them along k
         * (gemv.c's k_splits: 8 for Llama-3.2-1B's down projection, 2 at k = 2048) */
        {.m = 1, .n = 72, .k = 4 * 2048, .trans_b = true, .beta = 1},
        {.m = 2, .n = 100, .k = 2048, .trans_b = true, .beta = 0},
        /* Llama-3.2-1B's gate | up product with its SwiGLU (a slice of its 16,384 rows) */
        {.m = 1, .n = 144, .k = 2048, .trans_b = true, .beta = 0, .swiglu = true},
        /* its q | k | v product with the rotation (q, k and v heads of 64: 32, 8 and 8) */
        {.m = 1, .n = 48 * 64, .k = 2048, .trans_b = true, .beta = 0, .rope_heads = 40, .head_dim = 64},
    };
    for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++) {
        gv_case t = gpt2[i];
        t.ta = t.tb = t.tc = t.tbias = TERN_BF16;
        t.alpha = 1;
        t.bias = !t.trans_b;
        run_case(&t, NULL);
    }
}

/* The same product twice on one runtime: identical bits (a fixed order, no atomics). */
static void test_deterministic(void) {
    for (int tb = 0; tb < 2; tb++) {
        if (!gt_full() && tb == 0) continue; /* one variant on compiled runtimes */
        gv_case t = {.m = 3, .n = 300, .k = 520, .trans_b = tb, .ta = TERN_F32, .tb = TERN_BF16, .tc = TERN_F32,
                     .tbias = TERN_F32, .bias = true, .alpha = 1, .beta = 0};
        unsigned char *first = NULL, *second = NULL;
        gt_state = 77;
        run_case(&t, &first);
        gt_state = 77;
        run_case(&t, &second);
        CHECKF(first && second && !memcmp(first, second, (size_t)t.m * t.n * 4), "[%s] gemv%s: two runs differ",
               gt_runtime, tb ? " Bt" : "");
        free(first), free(second);
    }
}

/* Which products take the GEMV kernels. */
static void test_rule(void) {
    tern_matmul_dims d = {.m = 8, .n = 5, .k = 3, .batch = 1};
    CHECK(gpu_gemv_applies(&d));
    d.trans_b = true;
    CHECK(gpu_gemv_applies(&d));
    d.m = 9;
    CHECK(!gpu_gemv_applies(&d));
    d.m = 1, d.batch = 2;
    CHECK(!gpu_gemv_applies(&d));
    d.batch = 1, d.trans_a = true;
    CHECK(!gpu_gemv_applies(&d));
}

/* The kernels compile for the H200 (sm_90) where NVRTC is built in: each m and both layouts,
 * with the dtype mixes, epilogues, vector widths (the 16-byte and the scalar paths) and
 * column splits (B [k, n]) or k splits (B [n, k]) spread over them. */
static void test_nvrtc(void) {
    int compiled = 0;
    for (int m = 1; m <= GK_GEMV_MAX_M; m++)
        for (int tb = 0; tb < 2; tb++)
            for (int v = 0; v < 2; v++) {
                int mix = (m + tb + v) % 4, epi = (m + v) % 3;
                gk_spec s = {0};
                s.t[0] = (uint8_t)tern_type_of_dtype(mixes[mix][2]);
                s.t[1] = (uint8_t)tern_type_of_dtype(mixes[mix][0]);
                s.t[2] = (uint8_t)tern_type_of_dtype(mixes[mix][1]);
                s.t[3] = (uint8_t)tern_type_of_dtype(mixes[mix][3]);
                s.t[4] = epi == 2 ? s.t[3] : 0;
                s.n[0] = m;
                int w = mixes[mix][1] == TERN_F32 ? 4 : 8;
                s.n[1] = v ? w : 1;
                s.n[2] = epi > 0;
                s.n[3] = (m + v) % 2;
                s.n[4] = epi == 2;
                s.n[5] = tb ? 1 << ((m + v) % 4) : (v ? 1 << (m % 4) : 16); /* GEMV_T: its k splits */
                s.n[6] = 256 * (1 + m % 3);
                s.n[7] = tb ? 0 : m == 1 ? 1024 : m == 2 ? 512 : 256; /* the group sizes gpu_gemv uses */
                s.n[11] = tb ? m % 2 : v; /* B loaded before the wait */
                s.n[8] = tb ? (m <= 2 ? 4 : 2) : 0; /* GEMV_T's words a step, as on CUDA */
                /* the SWIGLU and ROPE epilogues (B [n, k] only), without GELU beside them */
                s.n[9] = tb && (m + v) % 2 == 1 ? (m % 4 < 2 ? GK_GEMV_SWIGLU : GK_GEMV_ROPE) : 0;
                if (s.n[9]) s.n[2] = 0;
                if (s.n[9] == GK_GEMV_ROPE) s.n[4] = 0, s.n[10] = 64; /* no aux */
                /* the prologues, on every third variant */
                s.n[12] = (m + tb + v) % 3 == 0 ? (m % 2 ? GK_GEMV_LAYERNORM : GK_GEMV_RMSNORM) : 0;
                if (s.n[12]) s.t[5] = s.t[6] = s.t[1];
                if (s.n[12] && v) s.n[12] |= GK_GEMV_NORM_RESIDENT | (m % 2 ? GK_GEMV_NORM_EARLY : 0);
                tern_kernel *k = NULL;
                CHECK_OK(tern_kernel_build("gemv_nvrtc", gk_family_trace(tb ? GK_GEMV_T : GK_GEMV), &s, &k));
                if (!k) continue;
                int r = nvrtc_check_compile(k);
                tern_kernel_free(k);
                if (r < 0) return;
                compiled += r;
            }
    printf("  nvrtc: %d gemv kernels compiled for sm_90\n", compiled);
}

static void test_inflight(void) {
    gpu_core *g = &gt_gpu.d->core;
    const int m = 1, k = 768, n = 256;
    float *a = gt_random((size_t)m * k, -1, 1), *w = gt_random((size_t)k * n, -0.1f, 0.1f);
    gt_pair pa = gt_make(TERN_BF16, (size_t)m * k, 0, a), pw = gt_make(TERN_BF16, (size_t)k * n, 0, w);
    gt_pair pw2 = gt_make(TERN_BF16, (size_t)k * n, 0, NULL), pc = gt_make(TERN_F32, (size_t)m * n, 0, NULL);
    CHECKF(gpu_inflight_clear(g, pw.view[1]) && gpu_inflight_clear(g, pw2.view[1]), "[%s] uploaded: clear",
           gt_runtime);
    /* views of one allocation: a kernel writing one half leaves the other clear (a model's
     * buffers are views of a few pools) */
    tern_buf lo = pw2.view[1], hi = pw2.view[1], src = pw.view[1];
    lo.len = hi.len = src.len = pw2.view[1].len / 2;
    hi.offset += lo.len;
    tern_buf mid = hi; /* the last element of lo and the first of hi */
    mid.offset -= 1, mid.len = 2;
    CHECKF(gpu_inflight_clear(g, lo) && gpu_inflight_clear(g, hi), "[%s] uploaded: both halves clear", gt_runtime);
    CHECK_OK(gpu_copy(gt_gpu.d, hi, src));
    CHECKF(gpu_inflight_clear(g, lo), "[%s] the other half of the allocation written: clear", gt_runtime);
    CHECKF(!gpu_inflight_clear(g, hi) && !gpu_inflight_clear(g, mid) && !gpu_inflight_clear(g, pw2.view[1]),
           "[%s] a view overlapping the written half: not clear", gt_runtime);
    CHECK_OK(gpu_copy(gt_gpu.d, lo, src));
    CHECKF(!gpu_inflight_clear(g, lo), "[%s] both halves written: not clear", gt_runtime);
    CHECKF(g->inflight_len == 1, "[%s] touching ranges of one allocation joined: %d ranges", gt_runtime,
           g->inflight_len);
    CHECK_OK(gpu_sync(gt_gpu.d));
    CHECK_OK(gpu_copy(gt_gpu.d, pw2.view[1], pw.view[1])); /* a kernel writes pw2 */
    CHECKF(!gpu_inflight_clear(g, pw2.view[1]), "[%s] written by a kernel: not clear", gt_runtime);
    CHECKF(gpu_inflight_clear(g, pw.view[1]), "[%s] only read by a kernel: clear", gt_runtime);
    CHECK_OK(gt_cpu.ops->copy(gt_cpu.d, pw2.view[0], pw.view[0]));
    tern_matmul mm = {.m = m, .n = n, .k = k, .alpha = 1};
    for (int i = 0; i < 2; i++) { /* B just written (after the wait), then B clear (before it) */
        gt_pair b = i ? pw : pw2;
        CHECK_OK(gt_cpu.ops->matmul(gt_cpu.d, pc.view[0], pa.view[0], b.view[0], &mm));
        CHECK_OK(gt_gpu.ops->matmul(gt_gpu.d, pc.view[1], pa.view[1], b.view[1], &mm));
        GT_EXPECT(pc, 2e-5, "gemv after %s", i ? "an upload" : "a kernel wrote B");
    }
    /* a resident prologue whose weights a kernel just wrote (read after the wait), then
     * uploaded ones (before it) */
    float *nw = gt_random((size_t)k, 0.5f, 1.5f);
    gt_pair pnw = gt_make(TERN_BF16, (size_t)k, 0, nw), pnw2 = gt_make(TERN_BF16, (size_t)k, 0, NULL);
    CHECK_OK(gpu_copy(gt_gpu.d, pnw2.view[1], pnw.view[1]));
    CHECK_OK(gt_cpu.ops->copy(gt_cpu.d, pnw2.view[0], pnw.view[0]));
    for (int i = 0; i < 2; i++) {
        gt_pair nwi = i ? pnw : pnw2;
        mm.prologue = TERN_PROLOGUE_RMSNORM;
        mm.norm = (tern_matmul_norm){nwi.view[0], tern_none(), 1e-5f};
        CHECK_OK(gt_cpu.ops->matmul(gt_cpu.d, pc.view[0], pa.view[0], pw.view[0], &mm));
        mm.norm.w = nwi.view[1];
        CHECK_OK(gt_gpu.ops->matmul(gt_gpu.d, pc.view[1], pa.view[1], pw.view[1], &mm));
        GT_EXPECT(pc, 2e-3, "gemv rmsnorm after %s", i ? "an upload" : "a kernel wrote its weights");
    }
    gt_free(&pnw), gt_free(&pnw2);
    free(nw);
    gpu_inflight_unknown(g);
    CHECKF(!gpu_inflight_clear(g, pw.view[1]), "[%s] after outside work: not clear", gt_runtime);
    CHECK_OK(gpu_sync(gt_gpu.d));
    CHECKF(gpu_inflight_clear(g, pw2.view[1]), "[%s] after a sync: clear", gt_runtime);
    gt_pair all[] = {pa, pw, pw2, pc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gt_free(&all[i]);
    free(a), free(w);
}

/* The shapes again with B's early rows held in registers (gemv_smem off; the default puts
 * them in threadgroup memory by asynchronous copies). */
static void test_shapes_registers(void) {
    gpu_tune saved = gt_gpu.d->core.tune;
    gt_gpu.d->core.tune.gemv_smem = false;
    test_shapes();
    gt_gpu.d->core.tune = saved;
}

static void all(void) {
    test_inflight();
    test_combinations();
    test_shapes();
    test_shapes_registers();
    test_deterministic();
}

int main(void) {
    test_rule();
    gt_run(all);
    test_nvrtc();
    return check_summary("test_gpu_gemv");
}
