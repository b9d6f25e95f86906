/* matmul against a plain double-precision reference: every dtype combination the contract
 * allows (A f32/bf16, B f32/bf16/f16, C f32/bf16), transposes, row strides, batches with
 * strides, alpha/beta, bias, the GELU epilogue with aux, views at offsets, the small-m
 * kernels (m <= 8) and the blocked sgemm path; a separate addend (beta reads it instead of
 * C) with all of those; a product written then accumulated in chunks; the GELU_BACKWARD
 * epilogue against the reference and against the same handler's matmul then
 * gelu_backward; the SWIGLU epilogue against the reference and
 * against the same handler's matmul then swiglu, the ROPE epilogue likewise against matmul
 * then rope; then every validation error. */
#include "ops_test.h"

#define GK_TEST_MAX_M 40 /* the most rows a case here has */

typedef struct mm_case {
    int m, n, k, batch;
    bool ta, tb;
    int lda, ldb, ldc; /* 0: dense */
    long sa, sb, sc;   /* 0: dense */
    float alpha, beta;
    bool bias, gelu, aux;
    bool addend;      /* beta reads a separate buffer laid out as C */
    bool addend_same; /* the addend given as C's own view (today's beta * C) */
    tern_dtype da, db, dc, dbias, daux;
} mm_case;

/* 0.5 x (1 + tanh u) in the equivalent form x / (1 + exp(-2u)), accurate in double for x << 0 */
static double gelu_ref(double x) {
    return x / (1 + exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* Elements a stored operand needs: (batch - 1) * stride + (rows - 1) * ld + cols. */
static size_t extent(int batch, long stride, int rows, int ld, int cols, long *stride_out, int *ld_out) {
    int l = ld ? ld : cols;
    long s = stride ? stride : (long)rows * l;
    *stride_out = s;
    *ld_out = l;
    return (size_t)(batch - 1) * (size_t)s + (size_t)(rows - 1) * (size_t)l + (size_t)cols;
}

/* Sets the elements of C's matrix (not the gaps of a strided C) to NaN: they must not be read. */
static void poison_matrix(float *x, int batch, long sc, int m, int ldc, int n) {
    for (int e = 0; e < batch; e++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) x[e * sc + (long)i * ldc + j] = NAN;
}

static void run_case(ot_ctx *c, const mm_case *t, int id) {
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k;
    int br = t->tb ? t->n : t->k, bc = t->tb ? t->k : t->n;
    long sa, sb, sc;
    int lda, ldb, ldc;
    size_t na = extent(t->batch, t->sa, ar, t->lda, ac, &sa, &lda);
    size_t nb = extent(t->batch, t->sb, br, t->ldb, bc, &sb, &ldb);
    size_t nc = extent(t->batch, t->sc, t->m, t->ldc, t->n, &sc, &ldc);
    size_t mn = (size_t)t->batch * (size_t)t->m * (size_t)t->n;
    float *a = ot_random(na, -1, 1), *b = ot_random(nb, -1, 1), *c0 = ot_random(nc, -1, 1);
    float *bias = ot_random((size_t)t->n, -1, 1);
    ot_round(a, na, t->da);
    ot_round(b, nb, t->db);
    ot_round(c0, nc, t->dc);
    ot_round(bias, (size_t)t->n, t->dbias);
    /* a separate addend: other values, its gaps too (they must not reach C's gaps) */
    float *add0 = t->addend ? ot_random(nc, -1, 1) : NULL;
    if (add0) ot_round(add0, nc, t->dc);
    const float *src = add0 ? add0 : c0; /* what beta reads */
    float *want = malloc(nc * sizeof(float)), *want_aux = malloc(mn * sizeof(float));
    memcpy(want, c0, nc * sizeof(float));
    for (int e = 0; e < t->batch; e++)
        for (int i = 0; i < t->m; i++)
            for (int j = 0; j < t->n; j++) {
                double s = 0;
                for (int kk = 0; kk < t->k; kk++) {
                    double av = t->ta ? a[e * sa + (long)kk * lda + i] : a[e * sa + (long)i * lda + kk];
                    double bv = t->tb ? b[e * sb + (long)j * ldb + kk] : b[e * sb + (long)kk * ldb + j];
                    s += av * bv;
                }
                size_t at = (size_t)(e * sc + (long)i * ldc + j);
                double pre = t->alpha * s + (t->beta != 0 ? t->beta * (double)src[at] : 0.0);
                if (t->bias) pre += bias[j];
                want_aux[((size_t)e * t->m + i) * t->n + j] = (float)pre;
                want[at] = (float)(t->gelu ? gelu_ref(pre) : pre);
            }
    /* with beta == 0, C's matrix elements start as NaN: they must not be read; with a
     * separate addend neither must C's, and with beta == 0 not the addend's either */
    if (t->beta == 0 || add0) poison_matrix(c0, t->batch, sc, t->m, ldc, t->n);
    if (t->beta == 0 && add0) poison_matrix(add0, t->batch, sc, t->m, ldc, t->n);
    size_t off = (size_t)(id % 5);
    ot_buf ba = ot_make(c, t->da, na, off, a), bb = ot_make(c, t->db, nb, off + 1, b);
    ot_buf bcb = ot_make(c, t->dc, nc, off + 2, c0);
    /* at offset 0 of its allocation every third case, so that cuBLASLt sees both an aligned
     * addend and one aligned differently from C */
    ot_buf badd = ot_make(c, t->dc, add0 ? nc : 1, id % 3 ? off + 4 : 0, add0);
    ot_buf bbias = ot_make(c, t->dbias, (size_t)t->n, 3, bias);
    ot_buf baux = ot_make(c, t->daux, mn, 1, NULL);
    tern_matmul mm = {0};
    mm.m = t->m;
    mm.n = t->n;
    mm.k = t->k;
    mm.trans_a = t->ta;
    mm.trans_b = t->tb;
    mm.lda = t->lda;
    mm.ldb = t->ldb;
    mm.ldc = t->ldc;
    mm.batch = t->batch;
    mm.stride_a = t->sa;
    mm.stride_b = t->sb;
    mm.stride_c = t->sc;
    mm.alpha = t->alpha;
    mm.beta = t->beta;
    mm.bias = t->bias ? bbias.view : tern_none();
    mm.epilogue = t->gelu ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE;
    mm.aux = t->aux ? baux.view : tern_none();
    mm.addend = add0 ? badd.view : t->addend_same ? bcb.view : tern_none();
    CHECK_OK(c->ops->matmul(c->d, bcb.view, ba.view, bb.view, &mm));
    /* f32 accumulation over k <= 700 terms of size <= 1: ~1e-6 relative; with bf16/f16 only
     * in the inputs the reference uses the same rounded inputs, so only C's dtype widens it */
    double tol = ot_tol(t->dc, 2e-5);
    OT_EXPECT(c, bcb, want, tol,
              "case %d: m%d n%d k%d batch%d ta%d tb%d ld %d/%d/%d a %s b %s c %s alpha %g beta %g bias %d gelu %d "
              "addend %d%s",
              id, t->m, t->n, t->k, t->batch, t->ta, t->tb, t->lda, t->ldb, t->ldc,
              tern_dtype_name(t->da), tern_dtype_name(t->db), tern_dtype_name(t->dc),
              (double)t->alpha, (double)t->beta, t->bias, t->gelu, t->addend, t->addend_same ? " (c)" : "");
    if (t->aux) OT_EXPECT(c, baux, want_aux, ot_tol(t->daux, 2e-5), "case %d: aux", id);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb), "%s: case %d: inputs changed", c->handler, id);
    if (add0 && t->beta != 0) /* an input: exactly as it was */
        OT_EXPECT(c, badd, add0, 0.0, "case %d: the addend changed", id);
    CHECKF(ot_guard_ok(c, badd), "%s: case %d: wrote around the addend", c->handler, id);
    ot_free(c, &ba);
    ot_free(c, &bb);
    ot_free(c, &bcb);
    ot_free(c, &bbias);
    ot_free(c, &baux);
    ot_free(c, &badd);
    free(a);
    free(b);
    free(c0);
    free(add0);
    free(bias);
    free(want);
    free(want_aux);
}

static const tern_dtype b_types[3] = {TERN_F32, TERN_BF16, TERN_F16};

static mm_case random_case(int small) {
    mm_case t;
    memset(&t, 0, sizeof t);
    static const int small_m[] = {1, 2, 3, 5, 8};
    static const int big_m[] = {9, 16, 33, 64};
    static const int ns[] = {1, 7, 16, 17, 33, 64, 70, 129};
    static const int ks[] = {1, 3, 16, 31, 64, 100};
    t.m = small ? small_m[ot_randint(0, 5)] : big_m[ot_randint(0, 4)];
    t.n = ns[ot_randint(0, 8)];
    t.k = ks[ot_randint(0, 6)];
    t.batch = ot_randint(0, 4) == 0 ? 3 : 1;
    t.ta = ot_randint(0, 2);
    t.tb = ot_randint(0, 2);
    int ar = t.ta ? t.k : t.m, ac = t.ta ? t.m : t.k;
    int br = t.tb ? t.n : t.k, bc = t.tb ? t.k : t.n;
    if (ot_randint(0, 3) == 0) t.lda = ac + ot_randint(1, 4);
    if (ot_randint(0, 3) == 0) t.ldb = bc + ot_randint(1, 4);
    if (ot_randint(0, 3) == 0) t.ldc = t.n + ot_randint(1, 4);
    if (t.batch > 1 && ot_randint(0, 2)) {
        t.sa = (long)ar * (t.lda ? t.lda : ac) + ot_randint(0, 5);
        t.sb = (long)br * (t.ldb ? t.ldb : bc) + ot_randint(0, 5);
        t.sc = (long)t.m * (t.ldc ? t.ldc : t.n) + ot_randint(0, 5);
    }
    static const float alphas[] = {1.0f, 0.5f, -2.0f};
    static const float betas[] = {0.0f, 0.0f, 1.0f, 0.75f};
    t.alpha = alphas[ot_randint(0, 3)];
    t.beta = betas[ot_randint(0, 4)];
    t.bias = ot_randint(0, 2);
    t.gelu = ot_randint(0, 3) == 0;
    t.aux = t.gelu && ot_randint(0, 2);
    t.da = ot_float2[ot_randint(0, 2)];
    t.db = b_types[ot_randint(0, 3)];
    t.dc = ot_float2[ot_randint(0, 2)];
    t.dbias = ot_float2[ot_randint(0, 2)];
    t.daux = ot_float2[ot_randint(0, 2)];
    return t;
}

static void test_random(ot_ctx *c) {
    ot_seed(42);
    for (int id = 0; id < 400; id++) {
        mm_case t = random_case(id % 2);
        run_case(c, &t, id);
    }
}

/* Every dtype combination once on each path, plus sizes that split into several units of
 * work, B chunks (n * k > 2^18) and multiple column blocks of the small kernels. */
static void test_combinations(ot_ctx *c) {
    ot_seed(7);
    int id = 1000;
    for (int da = 0; da < 2; da++)
        for (int db = 0; db < 3; db++)
            for (int dc = 0; dc < 2; dc++)
                for (int small = 0; small < 2; small++)
                    for (int tb = 0; tb < 2; tb++) {
                        mm_case t = {0};
                        t.m = small ? 4 : 40;
                        t.n = 45;
                        t.k = 37;
                        t.batch = 1;
                        t.tb = tb;
                        t.alpha = 1;
                        t.beta = 0.5f;
                        t.bias = true;
                        t.da = ot_float2[da];
                        t.db = b_types[db];
                        t.dc = ot_float2[dc];
                        t.dbias = TERN_F32;
                        t.daux = TERN_F32;
                        run_case(c, &t, id++);
                    }
    for (int db = 0; db < 3; db++)
        for (int tb = 0; tb < 2; tb++) {
            mm_case big = {0};
            big.m = 9;
            big.n = 1000;
            big.k = 600;
            big.batch = 1;
            big.tb = tb;
            big.alpha = 1;
            big.gelu = true;
            big.aux = true;
            big.bias = true;
            big.da = TERN_F32;
            big.db = b_types[db];
            big.dc = TERN_BF16;
            big.dbias = TERN_BF16;
            big.daux = TERN_F32;
            run_case(c, &big, id++);
            mm_case wide = big;
            wide.m = 3;
            wide.n = 1100;
            wide.k = 70;
            wide.dc = TERN_F32;
            run_case(c, &wide, id++);
            mm_case tall = big;
            tall.m = 300;
            tall.n = 12;
            tall.k = 20;
            tall.batch = 2;
            tall.dc = TERN_F32;
            run_case(c, &tall, id++);
        }
    /* bf16 A and B past a k block of the bf16 GEMM (384) with an odd k, both layouts of each,
     * batched with strides, beta, bias and GELU: the large-m bf16 path end to end */
    for (int dc = 0; dc < 2; dc++)
        for (int tab = 0; tab < 4; tab++) {
            mm_case t = {0};
            t.m = 37;
            t.n = 101;
            t.k = 801;
            t.batch = 2;
            t.ta = tab & 1;
            t.tb = tab & 2;
            t.lda = (t.ta ? t.m : t.k) + 3;
            t.sb = (long)(t.tb ? t.n : t.k) * (t.tb ? t.k : t.n) + 5;
            t.alpha = 0.5f;
            t.beta = 0.75f;
            t.bias = true;
            t.gelu = tab == 1;
            t.aux = tab == 1;
            t.da = t.db = TERN_BF16;
            t.dc = t.dbias = t.daux = ot_float2[dc];
            run_case(c, &t, id++);
        }
}

/* The random cases again with an addend: a separate one (beta from {1, 0.75, -0.5}, and 0,
 * where it must not be read) or C's own view; every dtype, transpose, stride, batch, bias and
 * GELU (with aux) the random cases draw, on the small-m and the blocked paths. */
static void test_addend(ot_ctx *c) {
    ot_seed(11);
    static const float betas[] = {1.0f, 0.75f, -0.5f, 0.0f};
    for (int id = 2000; id < 2240; id++) {
        mm_case t = random_case(id % 2);
        t.beta = betas[ot_randint(0, 4)];
        t.addend = ot_randint(0, 4) != 0;
        t.addend_same = !t.addend;
        run_case(c, &t, id);
    }
    /* the GPT-2 residual update's shape class: dense, bias, beta 1, f32 and bf16 */
    for (int dc = 0; dc < 2; dc++) {
        mm_case t = {0};
        t.m = 64;
        t.n = 96;
        t.k = 128;
        t.batch = 1;
        t.alpha = 1;
        t.beta = 1;
        t.bias = true;
        t.addend = true;
        t.da = t.db = t.dc = t.dbias = t.daux = ot_float2[dc];
        run_case(c, &t, 2300 + dc);
    }
}

/* A weight gradient over chunks of rows, as GPT-2's output projection takes it: C [m, n] =
 * A1^T B1 (beta 0), then C += A2^T B2 (beta 1, the same shape and alignment), f32 and bf16 C.
 * (The cuda handler tunes the second product by the first one's choice: the result must
 * not tell.) */
static void test_accumulate_after_write(ot_ctx *c) {
    ot_seed(12);
    const int m = 96, n = 64, k = 128;
    for (int dc = 0; dc < 2; dc++) {
        tern_dtype dt = ot_float2[dc];
        size_t na = (size_t)k * m, nb = (size_t)k * n, nc = (size_t)m * n;
        float *a = ot_random(2 * na, -1, 1), *b = ot_random(2 * nb, -1, 1);
        ot_round(a, 2 * na, dt), ot_round(b, 2 * nb, dt);
        float *want = malloc(nc * sizeof *want);
        for (size_t i = 0; i < (size_t)m; i++)
            for (size_t j = 0; j < (size_t)n; j++) {
                double sum = 0;
                for (size_t chunk = 0; chunk < 2; chunk++)
                    for (size_t r = 0; r < (size_t)k; r++)
                        sum += (double)a[chunk * na + r * m + i] * b[chunk * nb + r * n + j];
                want[i * n + j] = (float)sum;
            }
        ot_buf ba = ot_make(c, dt, 2 * na, 0, a), bb = ot_make(c, dt, 2 * nb, 0, b), bc = ot_make(c, dt, nc, 0, NULL);
        for (int chunk = 0; chunk < 2; chunk++) {
            tern_matmul mm = {.m = m, .n = n, .k = k, .trans_a = true, .alpha = 1, .beta = chunk ? 1.0f : 0.0f};
            CHECK_OK(c->ops->matmul(c->d, bc.view, tern_view(ba.view, chunk * na, na), tern_view(bb.view, chunk * nb, nb),
                                    &mm));
        }
        OT_EXPECT(c, bc, want, ot_tol(dt, 2e-5), "written, then accumulated: %s", tern_dtype_name(dt));
        ot_free(c, &ba), ot_free(c, &bb), ot_free(c, &bc);
        free(a), free(b), free(want);
    }
}

/* gelu'(x) of the tanh form, in double: d/dx 0.5 x (1 + tanh u), u = s (x + 0.044715 x^3). */
static double gelu_grad_ref(double x) {
    const double s = 0.7978845608028654;
    double u = s * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * s * (1 + 3 * 0.044715 * x * x);
}

typedef struct gb_case {
    int m, n, k, ldc;
    bool ta, tb;
    float alpha;
    tern_dtype dab, dc; /* A and B; C and aux */
    size_t aux_off;     /* 0: aligned, so cuBLASLt's DGELU epilogue can take it */
} gb_case;

/* C = gelu'(aux) * alpha op(A) op(B) with the GELU_BACKWARD epilogue, checked against the
 * double reference and against this handler's own matmul followed by gelu_backward. */
static void run_gelu_backward(ot_ctx *c, const gb_case *t, int id) {
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k;
    int br = t->tb ? t->n : t->k, bc = t->tb ? t->k : t->n;
    long sa, sb, sc;
    int lda, ldb, ldc;
    size_t na = extent(1, 0, ar, 0, ac, &sa, &lda), nb = extent(1, 0, br, 0, bc, &sb, &ldb);
    size_t nc = extent(1, 0, t->m, t->ldc, t->n, &sc, &ldc), mn = (size_t)t->m * (size_t)t->n;
    float *a = ot_random(na, -1, 1), *b = ot_random(nb, -1, 1), *aux = ot_random(mn, -3, 3);
    float *c0 = ot_random(nc, -1, 1);
    ot_round(a, na, t->dab);
    ot_round(b, nb, t->dab);
    ot_round(aux, mn, t->dc);
    ot_round(c0, nc, t->dc);
    float *want = malloc(nc * sizeof(float));
    memcpy(want, c0, nc * sizeof(float)); /* the gaps of a strided C stay */
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
            double s = 0;
            for (int kk = 0; kk < t->k; kk++)
                s += (double)(t->ta ? a[(long)kk * lda + i] : a[(long)i * lda + kk]) *
                     (double)(t->tb ? b[(long)j * ldb + kk] : b[(long)kk * ldb + j]);
            want[(long)i * ldc + j] = (float)(gelu_grad_ref(aux[(size_t)i * t->n + j]) * t->alpha * s);
        }
    poison_matrix(c0, 1, sc, t->m, ldc, t->n); /* beta == 0: C is not read */
    ot_buf ba = ot_make(c, t->dab, na, 1, a), bb = ot_make(c, t->dab, nb, 2, b);
    ot_buf bcf = ot_make(c, t->dc, nc, 3, c0), bcs = ot_make(c, t->dc, nc, 3, c0);
    ot_buf baux = ot_make(c, t->dc, mn, t->aux_off, aux);
    tern_matmul mm = {.m = t->m, .n = t->n, .k = t->k, .trans_a = t->ta, .trans_b = t->tb, .ldc = t->ldc,
                      .alpha = t->alpha, .epilogue = TERN_EPILOGUE_GELU_BACKWARD, .aux = baux.view};
    CHECK_OK(c->ops->matmul(c->d, bcf.view, ba.view, bb.view, &mm));
    /* the same handler's two steps, row by row (C may be strided; aux is dense) */
    tern_matmul plain = mm;
    plain.epilogue = TERN_EPILOGUE_NONE;
    plain.aux = tern_none();
    CHECK_OK(c->ops->matmul(c->d, bcs.view, ba.view, bb.view, &plain));
    for (int i = 0; i < t->m; i++) {
        tern_buf row = tern_view(bcs.view, (size_t)i * (size_t)ldc, (size_t)t->n);
        CHECK_OK(c->ops->gelu_backward(c->d, row, row, tern_view(baux.view, (size_t)i * t->n, (size_t)t->n)));
    }
    float *steps = malloc(nc * sizeof(float));
    ot_read(c, bcs, steps);
    /* f32: the product's 2e-5 (k <= 700 terms) and gelu' in f32, which cuBLASLt's DGELU
     * evaluates its own way (a few ulp; gelu' is at most 1.13): 5e-5. bf16 C and aux: one
     * rounding of the fused result (2^-9), two for the steps (the product, then the
     * gradient), within ot_tol's 8e-3 either way */
    char what[160];
    snprintf(what, sizeof what, "gelu_backward case %d: m%d n%d k%d ldc %d ta%d tb%d alpha %g ab %s c %s aux at %zu",
             id, t->m, t->n, t->k, t->ldc, t->ta, t->tb, (double)t->alpha, tern_dtype_name(t->dab),
             tern_dtype_name(t->dc), t->aux_off);
    OT_EXPECT(c, bcf, want, ot_tol(t->dc, 5e-5), "%s (reference)", what);
    OT_EXPECT(c, bcf, steps, ot_tol(t->dc, 5e-5), "%s (matmul then gelu_backward)", what);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb) && ot_guard_ok(c, baux), "%s: %s: inputs changed", c->handler,
           what);
    ot_free(c, &ba);
    ot_free(c, &bb);
    ot_free(c, &bcf);
    ot_free(c, &bcs);
    ot_free(c, &baux);
    free(a);
    free(b);
    free(aux);
    free(c0);
    free(want);
    free(steps);
}

static void test_gelu_backward(ot_ctx *c) {
    ot_seed(5);
    static const int ms[] = {1, 3, 8, 9, 40, 64, 130};
    static const int ns[] = {16, 45, 64, 96};
    static const int ks[] = {1, 17, 64, 200};
    int id = 3000;
    for (int dc = 0; dc < 2; dc++)
        for (int mi = 0; mi < 7; mi++) {
            gb_case t = {0};
            t.m = ms[mi];
            t.n = ns[ot_randint(0, 4)];
            t.k = ks[ot_randint(0, 4)];
            t.ta = ot_randint(0, 2);
            t.tb = ot_randint(0, 2);
            t.ldc = ot_randint(0, 4) == 0 ? t.n + ot_randint(1, 5) : 0;
            t.alpha = ot_randint(0, 3) == 0 ? -0.5f : 1.0f;
            t.dab = ot_float2[ot_randint(0, 2)];
            t.dc = ot_float2[dc];
            t.aux_off = ot_randint(0, 3) == 0 ? 1 : 0;
            run_gelu_backward(c, &t, id++);
        }
    /* GPT-2's shape class: dfch [BT, 4C] = dres [BT, C] @ W_fcproj [4C, C]^T, aux = fch */
    for (int dc = 0; dc < 2; dc++) {
        gb_case t = {.m = 64, .n = 256, .k = 64, .tb = true, .alpha = 1, .dab = ot_float2[dc], .dc = ot_float2[dc]};
        run_gelu_backward(c, &t, id++);
    }
}

typedef struct sw_case {
    int m, n, k, ldc; /* n: the product's columns (gate then up); C [m, n/2], ldc 0: dense */
    bool ta, tb, bias, aux;
    float alpha;
    tern_dtype dab, dc, daux; /* A and B; C and bias; aux */
} sw_case;

/* C [m, n/2] = silu(P_gate) P_up, P = alpha op(A) op(B) + bias [n], with the SWIGLU epilogue:
 * against the double reference, aux (P) too, and against this handler's own product into an
 * f32 [m, n] then swiglu into a dense [m, n/2]. */
static void run_swiglu(ot_ctx *c, const sw_case *t, int id) {
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k;
    int br = t->tb ? t->n : t->k, bc = t->tb ? t->k : t->n, h = t->n / 2;
    long sa, sb, sc;
    int lda, ldb, ldc;
    size_t na = extent(1, 0, ar, 0, ac, &sa, &lda), nb = extent(1, 0, br, 0, bc, &sb, &ldb);
    size_t nc = extent(1, 0, t->m, t->ldc, h, &sc, &ldc), mn = (size_t)t->m * (size_t)t->n, mh = (size_t)t->m * h;
    float *a = ot_random(na, -1, 1), *b = ot_random(nb, -1, 1), *bias = ot_random((size_t)t->n, -1, 1);
    float *c0 = ot_random(nc, -1, 1);
    ot_round(a, na, t->dab), ot_round(b, nb, t->dab), ot_round(bias, (size_t)t->n, t->dc), ot_round(c0, nc, t->dc);
    float *want = malloc(nc * sizeof(float)), *want_aux = malloc(mn * sizeof(float));
    memcpy(want, c0, nc * sizeof(float)); /* the gaps of a strided C stay */
    for (int i = 0; i < t->m; i++) {
        for (int j = 0; j < t->n; j++) {
            double s = 0;
            for (int kk = 0; kk < t->k; kk++)
                s += (double)(t->ta ? a[(long)kk * lda + i] : a[(long)i * lda + kk]) *
                     (double)(t->tb ? b[(long)j * ldb + kk] : b[(long)kk * ldb + j]);
            want_aux[(size_t)i * t->n + j] = (float)(t->alpha * s + (t->bias ? bias[j] : 0));
        }
        for (int j = 0; j < h; j++) {
            double g = want_aux[(size_t)i * t->n + j], u = want_aux[(size_t)i * t->n + h + j];
            want[(long)i * ldc + j] = (float)(g / (1 + exp(-g)) * u);
        }
    }
    poison_matrix(c0, 1, sc, t->m, ldc, h); /* beta == 0: C is not read */
    ot_buf ba = ot_make(c, t->dab, na, (size_t)(id % 3), a), bb = ot_make(c, t->dab, nb, 2, b);
    ot_buf bcf = ot_make(c, t->dc, nc, 1, c0), bcs = ot_make(c, t->dc, mh, 0, NULL);
    ot_buf bbias = ot_make(c, t->dc, (size_t)t->n, 3, bias), baux = ot_make(c, t->daux, mn, 1, NULL);
    ot_buf bp = ot_make(c, TERN_F32, mn, 0, NULL);
    tern_matmul mm = {.m = t->m, .n = t->n, .k = t->k, .trans_a = t->ta, .trans_b = t->tb, .ldc = t->ldc,
                      .alpha = t->alpha, .bias = t->bias ? bbias.view : tern_none(), .epilogue = TERN_EPILOGUE_SWIGLU,
                      .aux = t->aux ? baux.view : tern_none()};
    CHECK_OK(c->ops->matmul(c->d, bcf.view, ba.view, bb.view, &mm));
    /* the same handler's two steps: the product into an f32 P, swiglu of its halves */
    tern_matmul plain = mm;
    plain.epilogue = TERN_EPILOGUE_NONE;
    plain.aux = tern_none();
    plain.ldc = 0;
    CHECK_OK(c->ops->matmul(c->d, bp.view, ba.view, bb.view, &plain));
    size_t span = (size_t)(t->m - 1) * t->n + (size_t)h;
    CHECK_OK(c->ops->swiglu(c->d, bcs.view, tern_view(bp.view, 0, span), tern_view(bp.view, (size_t)h, span), t->m, h,
                            t->n));
    float *steps = malloc(nc * sizeof(float)), *dense = malloc(mh * sizeof(float));
    ot_read(c, bcs, dense);
    memcpy(steps, want, nc * sizeof(float)); /* the gaps as the reference has them */
    for (int i = 0; i < t->m; i++) memcpy(steps + (size_t)i * ldc, dense + (size_t)i * h, (size_t)h * sizeof(float));
    /* f32: the product's 2e-5 (sums of up to 200 terms), silu's few ulp: 5e-5; P may be
     * rounded to aux's dtype (or C's) before the activation: bf16 then, 2^-8 relative */
    char what[160];
    snprintf(what, sizeof what, "swiglu case %d: m%d n%d k%d ldc %d ta%d tb%d bias %d aux %s alpha %g ab %s c %s", id,
             t->m, t->n, t->k, t->ldc, t->ta, t->tb, t->bias, t->aux ? tern_dtype_name(t->daux) : "-",
             (double)t->alpha, tern_dtype_name(t->dab), tern_dtype_name(t->dc));
    tern_dtype rounded = t->aux && t->daux == TERN_BF16 ? TERN_BF16 : t->dc;
    OT_EXPECT(c, bcf, want, ot_tol(rounded, 5e-5), "%s (reference)", what);
    OT_EXPECT(c, bcf, steps, ot_tol(rounded, 5e-5), "%s (matmul then swiglu)", what);
    if (t->aux) OT_EXPECT(c, baux, want_aux, ot_tol(t->daux, 2e-5), "%s: aux", what);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb) && ot_guard_ok(c, bbias) && ot_guard_ok(c, bcf), "%s: %s: guards",
           c->handler, what);
    ot_free(c, &ba), ot_free(c, &bb), ot_free(c, &bcf), ot_free(c, &bcs), ot_free(c, &bbias), ot_free(c, &baux);
    ot_free(c, &bp);
    free(a), free(b), free(bias), free(c0), free(want), free(want_aux), free(steps), free(dense);
}

/* Decoding's rows (m <= 8 with B [n, k]: the GPU core's GEMV kernels finish gate and up rows
 * together) and more (every handler composes), both layouts, each dtype, aux and bias or
 * not, C's rows dense or apart; Llama's decode class last. */
static void test_swiglu(ot_ctx *c) {
    ot_seed(9);
    static const int ms[] = {1, 2, 5, 8, 9, 33};
    static const int ns[] = {16, 74, 128};
    static const int ks[] = {17, 64, 200};
    int id = 5000;
    for (int dc = 0; dc < 2; dc++)
        for (int mi = 0; mi < 6; mi++) {
            sw_case t = {.m = ms[mi], .n = ns[ot_randint(0, 3)], .k = ks[ot_randint(0, 3)], .alpha = 1};
            t.tb = ot_randint(0, 4) != 0, t.ta = ot_randint(0, 4) == 0;
            t.ldc = ot_randint(0, 4) == 0 ? t.n / 2 + ot_randint(1, 5) : 0;
            t.bias = ot_randint(0, 2), t.aux = ot_randint(0, 2);
            if (ot_randint(0, 3) == 0) t.alpha = -0.5f;
            t.dab = ot_float2[ot_randint(0, 2)], t.dc = ot_float2[dc], t.daux = ot_float2[ot_randint(0, 2)];
            run_swiglu(c, &t, id++);
        }
    /* gate | up [1, 2I] = h [1, C] @ W_gu [2I, C]^T, bf16, as Llama's decoding */
    sw_case t = {.m = 1, .n = 512, .k = 576, .tb = true, .alpha = 1, .dab = TERN_BF16, .dc = TERN_BF16};
    run_swiglu(c, &t, id++);
}

typedef struct rp_case {
    int m, heads, hd, rot, k, ldc; /* n = heads hd columns, the first rot heads rotated; ldc 0: dense */
    bool ta, tb, bias;
    float alpha;
    tern_dtype dab, dc; /* A and B; C and bias */
} rp_case;

/* C [m, n] = P = alpha op(A) op(B) + bias with its first rot heads of hd columns rotated at
 * the rows' positions, with the ROPE epilogue: against the double reference and against
 * this handler's own product into C then rope over it. */
static void run_rope(ot_ctx *c, const rp_case *t, int id) {
    int n = t->heads * t->hd, half = t->hd / 2;
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k, br = t->tb ? n : t->k, bc = t->tb ? t->k : n;
    long sa, sb, sc;
    int lda, ldb, ldc;
    size_t na = extent(1, 0, ar, 0, ac, &sa, &lda), nb = extent(1, 0, br, 0, bc, &sb, &ldb);
    size_t nc = extent(1, 0, t->m, t->ldc, n, &sc, &ldc);
    float *a = ot_random(na, -1, 1), *b = ot_random(nb, -1, 1), *bias = ot_random((size_t)n, -1, 1);
    float *c0 = ot_random(nc, -1, 1), *freq = malloc((size_t)half * sizeof(float));
    int32_t *pos = malloc((size_t)t->m * sizeof(int32_t));
    for (int i = 0; i < t->m; i++) pos[i] = 3 + 131 * i; /* angles well past 2 pi */
    for (int j = 0; j < half; j++) freq[j] = powf(10000.0f, -2.0f * (float)j / (float)t->hd);
    ot_round(a, na, t->dab), ot_round(b, nb, t->dab), ot_round(bias, (size_t)n, t->dc), ot_round(c0, nc, t->dc);
    float *want = malloc(nc * sizeof(float));
    double *p = malloc((size_t)n * sizeof(double));
    memcpy(want, c0, nc * sizeof(float)); /* the gaps of a strided C stay */
    for (int i = 0; i < t->m; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int kk = 0; kk < t->k; kk++)
                sum += (double)(t->ta ? a[(long)kk * lda + i] : a[(long)i * lda + kk]) *
                       (double)(t->tb ? b[(long)j * ldb + kk] : b[(long)kk * ldb + j]);
            p[j] = t->alpha * sum + (t->bias ? bias[j] : 0);
            want[(long)i * ldc + j] = (float)p[j];
        }
        for (int h = 0; h < t->rot; h++)
            for (int j = 0; j < half; j++) {
                double ang = (double)((float)pos[i] * freq[j]); /* one f32 product, as rope's contract */
                double x1 = p[h * t->hd + j], x2 = p[h * t->hd + half + j];
                want[(long)i * ldc + h * t->hd + j] = (float)(x1 * cos(ang) - x2 * sin(ang));
                want[(long)i * ldc + h * t->hd + half + j] = (float)(x2 * cos(ang) + x1 * sin(ang));
            }
    }
    poison_matrix(c0, 1, sc, t->m, ldc, n); /* beta == 0: C is not read */
    ot_buf ba = ot_make(c, t->dab, na, (size_t)(id % 3), a), bb = ot_make(c, t->dab, nb, 2, b);
    ot_buf bcf = ot_make(c, t->dc, nc, 1, c0), bcs = ot_make(c, t->dc, nc, 0, c0);
    ot_buf bbias = ot_make(c, t->dc, (size_t)n, 3, bias), bpos = ot_make_i32(c, pos, (size_t)t->m, 1);
    ot_buf bfreq = ot_make(c, TERN_F32, (size_t)half, 2, freq);
    tern_matmul mm = {.m = t->m, .n = n, .k = t->k, .trans_a = t->ta, .trans_b = t->tb, .ldc = t->ldc,
                      .alpha = t->alpha, .bias = t->bias ? bbias.view : tern_none(), .epilogue = TERN_EPILOGUE_ROPE,
                      .rope = {bpos.view, bfreq.view, t->rot, t->hd}};
    CHECK_OK(c->ops->matmul(c->d, bcf.view, ba.view, bb.view, &mm));
    /* the same handler's two steps: the product into C, rope over its first rot heads */
    tern_matmul plain = mm;
    plain.epilogue = TERN_EPILOGUE_NONE;
    CHECK_OK(c->ops->matmul(c->d, bcs.view, ba.view, bb.view, &plain));
    tern_buf rows = tern_view(bcs.view, 0, (size_t)(t->m - 1) * ldc + (size_t)n);
    CHECK_OK(c->ops->rope(c->d, rows, rows, bpos.view, bfreq.view, t->m, t->rot, t->hd, ldc));
    float *steps = malloc(nc * sizeof(float));
    ot_read(c, bcs, steps);
    for (int i = 0; i + 1 < t->m; i++) /* the gaps (before the last row): as the reference has them */
        for (int j = n; j < ldc; j++) steps[(long)i * ldc + j] = want[(long)i * ldc + j];
    /* f32: the product's 2e-5 (sums of up to 200 terms) and the rotation's few ulp of
     * arguments up to ~1,000 rad: 5e-5; P may be rounded to C's dtype before the rotation */
    char what[160];
    snprintf(what, sizeof what, "rope case %d: m%d heads %d/%d hd %d k%d ldc %d ta%d tb%d bias %d alpha %g ab %s c %s",
             id, t->m, t->rot, t->heads, t->hd, t->k, t->ldc, t->ta, t->tb, t->bias, (double)t->alpha,
             tern_dtype_name(t->dab), tern_dtype_name(t->dc));
    OT_EXPECT(c, bcf, want, ot_tol(t->dc, 5e-5), "%s (reference)", what);
    OT_EXPECT(c, bcf, steps, ot_tol(t->dc, 5e-5), "%s (matmul then rope)", what);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb) && ot_guard_ok(c, bbias) && ot_guard_ok(c, bcf) &&
               ot_guard_ok(c, bpos) && ot_guard_ok(c, bfreq),
           "%s: %s: guards", c->handler, what);
    ot_free(c, &ba), ot_free(c, &bb), ot_free(c, &bcf), ot_free(c, &bcs), ot_free(c, &bbias), ot_free(c, &bpos);
    ot_free(c, &bfreq);
    free(a), free(b), free(bias), free(c0), free(freq), free(pos), free(want), free(p), free(steps);
}

/* Decoding's rows (m <= 8 with B [n, k]: the GPU core's GEMV kernels rotate as they finish)
 * and more (every handler composes), both layouts, each dtype, bias or not, C's rows dense
 * or apart, all heads rotated or some; Llama's decode class last. */
static void test_rope(ot_ctx *c) {
    ot_seed(11);
    static const int ms[] = {1, 2, 5, 8, 9, 33};
    static const int hds[] = {2, 8, 16};
    int id = 6000;
    for (int dc = 0; dc < 2; dc++)
        for (int mi = 0; mi < 6; mi++) {
            rp_case t = {.m = ms[mi], .hd = hds[ot_randint(0, 3)], .heads = ot_randint(1, 6), .alpha = 1};
            t.rot = ot_randint(1, t.heads + 1);
            t.k = 17 + 40 * ot_randint(0, 5);
            t.tb = ot_randint(0, 4) != 0, t.ta = ot_randint(0, 4) == 0;
            t.ldc = ot_randint(0, 4) == 0 ? t.heads * t.hd + ot_randint(1, 5) : 0;
            t.bias = ot_randint(0, 2);
            if (ot_randint(0, 3) == 0) t.alpha = -0.5f;
            t.dab = ot_float2[ot_randint(0, 2)], t.dc = ot_float2[dc];
            run_rope(c, &t, id++);
        }
    /* q | k | v [1, (4 + 2 + 2) 64] = h [1, 576] @ W_qkv^T, bf16, as grouped-query decoding */
    rp_case t = {.m = 1, .heads = 8, .hd = 64, .rot = 6, .k = 576, .tb = true, .alpha = 1, .dab = TERN_BF16,
                 .dc = TERN_BF16};
    run_rope(c, &t, id++);
}

typedef struct nm_case {
    int m, n, k, lda, ldc; /* lda, ldc 0: dense */
    tern_prologue kind;
    bool tb, bias, residual; /* residual: beta 1 reads C */
    tern_epilogue epi;       /* NONE, GELU (against the reference); SWIGLU, ROPE (against the steps) */
    tern_dtype dab, dc;      /* A, B and the norm's weights; C and bias */
} nm_case;

/* A's row i through the prologue, in double: layernorm's (a - mean) / sqrt(var + eps) w + b
 * (biased variance) or rmsnorm's a / sqrt(mean(a^2) + eps) w. */
static void norm_row_ref(const nm_case *t, const float *a, const float *w, const float *b, float eps, double *out) {
    double sum = 0, ss = 0, mean = 0;
    for (int j = 0; j < t->k; j++) sum += a[j];
    if (t->kind == TERN_PROLOGUE_LAYERNORM) mean = sum / t->k;
    for (int j = 0; j < t->k; j++) ss += (a[j] - mean) * (a[j] - mean);
    double rs = 1.0 / sqrt(ss / t->k + eps);
    for (int j = 0; j < t->k; j++)
        out[j] = (a[j] - mean) * rs * w[j] + (t->kind == TERN_PROLOGUE_LAYERNORM ? b[j] : 0);
}

/* C = epilogue(op(norm(A)) op(B) + beta C + bias) with the LAYERNORM or RMSNORM prologue:
 * against the double reference (epilogues NONE and GELU) and against this handler's own
 * layernorm or rmsnorm into a dense [m, k], then matmul of that (every epilogue). */
static void run_norm(ot_ctx *c, const nm_case *t, int id) {
    int n = t->n, cn = t->epi == TERN_EPILOGUE_SWIGLU ? n / 2 : n, hd = 8;
    int lda = t->lda ? t->lda : t->k, ldc = t->ldc ? t->ldc : cn, ldb = t->tb ? t->k : n;
    size_t na = (size_t)(t->m - 1) * lda + t->k, nb = (size_t)n * t->k, nc = (size_t)(t->m - 1) * ldc + cn;
    float *a = ot_random(na, -2, 3), *b = ot_random(nb, -1, 1), *bias = ot_random((size_t)n, -1, 1);
    float *w = ot_random((size_t)t->k, 0.5, 1.5), *sh = ot_random((size_t)t->k, -0.5, 0.5);
    float *c0 = ot_random(nc, -1, 1), eps = 1e-5f, freq[4];
    int32_t pos[GK_TEST_MAX_M];
    for (int i = 0; i < t->m; i++) pos[i] = 7 + 53 * i;
    for (int j = 0; j < hd / 2; j++) freq[j] = powf(10000.0f, -2.0f * (float)j / (float)hd);
    ot_round(a, na, t->dab), ot_round(b, nb, t->dab), ot_round(w, (size_t)t->k, t->dab);
    ot_round(sh, (size_t)t->k, t->dab), ot_round(bias, (size_t)n, t->dc), ot_round(c0, nc, t->dc);
    float *want = malloc(nc * sizeof(float));
    double *xn = malloc((size_t)t->k * sizeof(double));
    memcpy(want, c0, nc * sizeof(float)); /* the gaps of a strided C stay */
    for (int i = 0; i < t->m; i++) {
        norm_row_ref(t, a + (size_t)i * lda, w, sh, eps, xn);
        for (int j = 0; j < n && (t->epi == TERN_EPILOGUE_NONE || t->epi == TERN_EPILOGUE_GELU); j++) {
            double sum = 0;
            for (int kk = 0; kk < t->k; kk++) sum += xn[kk] * (double)(t->tb ? b[(long)j * ldb + kk] : b[(long)kk * ldb + j]);
            double v = sum + (t->residual ? c0[(long)i * ldc + j] : 0) + (t->bias ? bias[j] : 0);
            want[(long)i * ldc + j] = (float)(t->epi == TERN_EPILOGUE_GELU ? gelu_ref(v) : v);
        }
    }
    ot_buf ba = ot_make(c, t->dab, na, (size_t)(id % 3), a), bb = ot_make(c, t->dab, nb, 2, b);
    ot_buf bcf = ot_make(c, t->dc, nc, 1, c0), bcs = ot_make(c, t->dc, nc, 0, c0);
    ot_buf bbias = ot_make(c, t->dc, (size_t)n, 3, bias), bw = ot_make(c, t->dab, (size_t)t->k, 1, w);
    ot_buf bsh = ot_make(c, t->dab, (size_t)t->k, 2, sh), bpos = ot_make_i32(c, pos, (size_t)t->m, 1);
    ot_buf bfreq = ot_make(c, TERN_F32, (size_t)hd / 2, 2, freq);
    ot_buf bx = ot_make(c, t->dab, (size_t)t->m * t->k, 0, NULL);
    bool layer = t->kind == TERN_PROLOGUE_LAYERNORM;
    tern_matmul mm = {.m = t->m, .n = n, .k = t->k, .trans_b = t->tb, .lda = t->lda, .ldc = t->ldc, .alpha = 1,
                      .beta = t->residual ? 1.0f : 0.0f, .bias = t->bias ? bbias.view : tern_none(),
                      .epilogue = t->epi, .prologue = t->kind,
                      .norm = {bw.view, layer ? bsh.view : tern_none(), eps}};
    if (t->epi == TERN_EPILOGUE_ROPE) mm.rope = (tern_matmul_rope){bpos.view, bfreq.view, n / hd / 2, hd};
    CHECK_OK(c->ops->matmul(c->d, bcf.view, ba.view, bb.view, &mm));
    /* the same handler's two steps: the norm into a dense x, the product of x */
    for (int i = 0; i < t->m; i++) {
        tern_buf row = tern_view(ba.view, (size_t)i * lda, (size_t)t->k), out = tern_view(bx.view, (size_t)i * t->k, (size_t)t->k);
        if (layer) CHECK_OK(c->ops->layernorm(c->d, out, tern_none(), tern_none(), row, bw.view, bsh.view, 1, t->k, eps));
        else CHECK_OK(c->ops->rmsnorm(c->d, out, tern_none(), row, bw.view, 1, t->k, eps));
    }
    tern_matmul plain = mm;
    plain.prologue = TERN_PROLOGUE_NONE;
    plain.norm = (tern_matmul_norm){0};
    plain.lda = 0;
    CHECK_OK(c->ops->matmul(c->d, bcs.view, bx.view, bb.view, &plain));
    float *steps = malloc(nc * sizeof(float));
    ot_read(c, bcs, steps);
    char what[160];
    snprintf(what, sizeof what, "norm case %d: %s m%d n%d k%d lda %d ldc %d tb%d bias %d residual %d epilogue %d ab %s c %s",
             id, layer ? "layernorm" : "rmsnorm", t->m, n, t->k, t->lda, t->ldc, t->tb, t->bias, t->residual,
             (int)t->epi, tern_dtype_name(t->dab), tern_dtype_name(t->dc));
    /* f32: the product's 2e-5 and the norm's few ulp: 5e-5. A bf16: the normalised values may
     * be rounded to bf16 (relative 2^-9 each, about 1.1e-3 norm-wise in the sums): 4e-3 */
    double tol = ot_tol(t->dc, t->dab == TERN_BF16 ? 4e-3 : 5e-5);
    if (t->epi == TERN_EPILOGUE_NONE || t->epi == TERN_EPILOGUE_GELU)
        OT_EXPECT(c, bcf, want, tol, "%s (reference)", what);
    OT_EXPECT(c, bcf, steps, tol, "%s (norm then matmul)", what);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bw) && ot_guard_ok(c, bsh) && ot_guard_ok(c, bbias),
           "%s: %s: guards", c->handler, what);
    ot_free(c, &ba), ot_free(c, &bb), ot_free(c, &bcf), ot_free(c, &bcs), ot_free(c, &bbias), ot_free(c, &bw);
    ot_free(c, &bsh), ot_free(c, &bpos), ot_free(c, &bfreq), ot_free(c, &bx);
    free(a), free(b), free(bias), free(w), free(sh), free(c0), free(want), free(xn), free(steps);
}

/* Decoding's rows (m <= 8: the GPU core's GEMV kernels normalise as they stage A) and more
 * (every other path composes), both layouts and kinds, each dtype, A's rows apart, C's rows
 * apart, a residual C; a k of several staging chunks (f32 A at m = 8: 1,100 > 1,024); then
 * the norm under the SWIGLU and ROPE epilogues, and GPT-2's and Llama's decode classes. */
static void test_norm(ot_ctx *c) {
    ot_seed(13);
    static const int ms[] = {1, 2, 3, 5, 8, 9, 33};
    int id = 8000;
    for (int dc = 0; dc < 2; dc++)
        for (int mi = 0; mi < 7; mi++) {
            nm_case t = {.m = ms[mi], .n = 8 + 24 * ot_randint(0, 4), .k = 17 + 40 * ot_randint(0, 6)};
            t.kind = ot_randint(0, 2) ? TERN_PROLOGUE_LAYERNORM : TERN_PROLOGUE_RMSNORM;
            t.tb = ot_randint(0, 2), t.bias = ot_randint(0, 2), t.residual = ot_randint(0, 3) == 0;
            t.lda = ot_randint(0, 3) == 0 ? t.k + ot_randint(1, 9) : 0;
            t.ldc = ot_randint(0, 4) == 0 ? t.n + ot_randint(1, 5) : 0;
            t.epi = ot_randint(0, 3) == 0 ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE;
            t.dab = ot_float2[ot_randint(0, 2)], t.dc = ot_float2[dc];
            run_norm(c, &t, id++);
        }
    nm_case chunks = {.m = 8, .n = 24, .k = 1100, .kind = TERN_PROLOGUE_LAYERNORM, .tb = true, .bias = true,
                      .dab = TERN_F32, .dc = TERN_F32};
    run_norm(c, &chunks, id++);
    chunks.tb = false, chunks.kind = TERN_PROLOGUE_RMSNORM;
    run_norm(c, &chunks, id++);
    for (int m = 1; m <= 9; m += 8) {
        nm_case sw = {.m = m, .n = 48, .k = 96, .kind = TERN_PROLOGUE_RMSNORM, .tb = true, .epi = TERN_EPILOGUE_SWIGLU,
                      .dab = TERN_BF16, .dc = TERN_BF16};
        run_norm(c, &sw, id++);
        nm_case rp = {.m = m, .n = 64, .k = 72, .kind = TERN_PROLOGUE_RMSNORM, .tb = true, .bias = true,
                      .epi = TERN_EPILOGUE_ROPE, .dab = TERN_F32, .dc = TERN_F32};
        run_norm(c, &rp, id++);
    }
    /* GPT-2's ln_1 + q|k|v (B [k, n]) and Llama's rmsnorm + gate|up class (B [n, k]), bf16 */
    nm_case gpt2 = {.m = 1, .n = 2304, .k = 768, .kind = TERN_PROLOGUE_LAYERNORM, .bias = true, .dab = TERN_BF16,
                    .dc = TERN_BF16};
    run_norm(c, &gpt2, id++);
    nm_case llama = {.m = 1, .n = 1536, .k = 576, .kind = TERN_PROLOGUE_RMSNORM, .tb = true,
                     .epi = TERN_EPILOGUE_SWIGLU, .dab = TERN_BF16, .dc = TERN_BF16};
    run_norm(c, &llama, id++);
}

typedef struct bg_case {
    int m, n, k;
    bool ta;
    float beta;
    tern_dtype dab, dc, dg; /* A and B; C; bias_grad */
    size_t g_off;           /* bias_grad's offset (1: not 16-byte aligned) */
} bg_case;

/* The weight gradient's product with the bias gradient: C = op(A) B + beta C, bias_grad =
 * beta * bias_grad + the sums of B's k rows, against double references. */
static void run_bias_grad(ot_ctx *c, const bg_case *t, int id) {
    int ar = t->ta ? t->k : t->m, ac = t->ta ? t->m : t->k;
    size_t na = (size_t)ar * ac, nb = (size_t)t->k * t->n, nc = (size_t)t->m * t->n;
    float *a = ot_random(na, -1, 1), *b = ot_random(nb, -1, 1), *c0 = ot_random(nc, -1, 1);
    float *g0 = ot_random((size_t)t->n, -1, 1);
    ot_round(a, na, t->dab), ot_round(b, nb, t->dab), ot_round(c0, nc, t->dc), ot_round(g0, (size_t)t->n, t->dg);
    float *want_c = malloc(nc * sizeof(float)), *want_g = malloc((size_t)t->n * sizeof(float));
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
            double s = t->beta != 0 ? (double)t->beta * c0[(size_t)i * t->n + j] : 0;
            for (int kk = 0; kk < t->k; kk++)
                s += (double)(t->ta ? a[(size_t)kk * ac + i] : a[(size_t)i * ac + kk]) * b[(size_t)kk * t->n + j];
            want_c[(size_t)i * t->n + j] = (float)s;
        }
    for (int j = 0; j < t->n; j++) {
        double s = t->beta != 0 ? (double)t->beta * g0[j] : 0;
        for (int kk = 0; kk < t->k; kk++) s += b[(size_t)kk * t->n + j];
        want_g[j] = (float)s;
    }
    if (t->beta == 0) { /* neither is read */
        for (size_t i = 0; i < nc; i++) c0[i] = NAN;
        for (int j = 0; j < t->n; j++) g0[j] = NAN;
    }
    ot_buf ba = ot_make(c, t->dab, na, 1, a), bb = ot_make(c, t->dab, nb, 2, b), bc = ot_make(c, t->dc, nc, 0, c0);
    ot_buf bg = ot_make(c, t->dg, (size_t)t->n, t->g_off, g0);
    tern_matmul mm = {.m = t->m, .n = t->n, .k = t->k, .trans_a = t->ta, .alpha = 1, .beta = t->beta,
                      .bias_grad = bg.view};
    CHECK_OK(c->ops->matmul(c->d, bc.view, ba.view, bb.view, &mm));
    char what[160];
    snprintf(what, sizeof what, "bias_grad case %d: m%d n%d k%d ta%d beta %g ab %s c %s grad %s at %zu", id, t->m,
             t->n, t->k, t->ta, (double)t->beta, tern_dtype_name(t->dab), tern_dtype_name(t->dc),
             tern_dtype_name(t->dg), t->g_off);
    /* f32: sums of up to 300 terms of magnitude 1 in f32 (about 300 * 2^-24 relative per
     * term, far less norm-wise): 2e-5; bf16 results: one rounding, ot_tol's 8e-3 */
    OT_EXPECT(c, bc, want_c, ot_tol(t->dc, 2e-5), "%s (c)", what);
    OT_EXPECT(c, bg, want_g, ot_tol(t->dg, 2e-5), "%s (bias_grad)", what);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb), "%s: %s: inputs changed", c->handler, what);
    ot_free(c, &ba), ot_free(c, &bb), ot_free(c, &bc), ot_free(c, &bg);
    free(a), free(b), free(c0), free(g0), free(want_c), free(want_g);
}

static void test_bias_grad(ot_ctx *c) {
    ot_seed(9);
    static const int ms[] = {1, 16, 40, 64};
    static const int ns[] = {8, 24, 64, 96};
    static const int ks[] = {1, 9, 64, 300};
    int id = 5000;
    for (int i = 0; i < 24; i++) {
        bg_case t = {.m = ms[ot_randint(0, 4)], .n = ns[ot_randint(0, 4)], .k = ks[ot_randint(0, 4)],
                     .ta = ot_randint(0, 2), .beta = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 1.0f : 0.5f,
                     .dab = ot_float2[ot_randint(0, 2)], .dc = ot_float2[ot_randint(0, 2)],
                     .dg = ot_float2[ot_randint(0, 2)], .g_off = ot_randint(0, 4) == 0 ? 1 : 0};
        run_bias_grad(c, &t, id++);
    }
    /* GPT-2's shape class: dW [C, 4C] = ln2^T [C, BT] dfch [BT, 4C], db_fc [4C] */
    for (int beta = 0; beta < 2; beta++)
        for (int dt = 0; dt < 2; dt++) {
            bg_case t = {.m = 64, .n = 256, .k = 128, .ta = true, .beta = (float)beta, .dab = ot_float2[dt],
                         .dc = ot_float2[dt], .dg = ot_float2[dt]};
            run_bias_grad(c, &t, id++);
        }
}

typedef struct cs_case {
    int m, n, k;
    bool tb;
    tern_epilogue epi; /* NONE (with bias and a separate addend when beta is 1), GELU (bias, aux), GELU_BACKWARD */
    float beta, sums_beta;
    tern_dtype dab, dc, ds; /* A and B; C, aux, bias and addend; col_sums */
} cs_case;

/* C's column sums with the product: col_sums = sums_beta * col_sums + the sums of C's rows,
 * C after its epilogue, against double references. The last cases have GPT-2's bf16 shapes
 * (m % 128, n % 256, k >= 576), as a GEMM summing C's tiles as it stores them would take. */
static void run_col_sums(ot_ctx *c, const cs_case *t, int id) {
    size_t na = (size_t)t->m * t->k, nb = (size_t)t->k * t->n, nc = (size_t)t->m * t->n;
    float *a = ot_random(na, -1, 1), *b = ot_random(nb, -0.25, 0.25), *add = ot_random(nc, -1, 1);
    float *aux = ot_random(nc, -3, 3), *bias = ot_random((size_t)t->n, -1, 1), *g0 = ot_random((size_t)t->n, -1, 1);
    ot_round(a, na, t->dab), ot_round(b, nb, t->dab), ot_round(add, nc, t->dc), ot_round(aux, nc, t->dc);
    ot_round(bias, (size_t)t->n, t->dc), ot_round(g0, (size_t)t->n, t->ds);
    float *want_c = malloc(nc * sizeof(float)), *want_aux = malloc(nc * sizeof(float));
    float *want_g = malloc((size_t)t->n * sizeof(float));
    bool with_bias = t->epi == TERN_EPILOGUE_GELU || (t->epi == TERN_EPILOGUE_NONE && t->beta != 0);
    for (int j = 0; j < t->n; j++) want_g[j] = t->sums_beta != 0 ? t->sums_beta * g0[j] : 0.0f;
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
            size_t at = (size_t)i * t->n + j;
            double x = 0;
            for (int kk = 0; kk < t->k; kk++)
                x += (double)a[(size_t)i * t->k + kk] * (t->tb ? b[(size_t)j * t->k + kk] : b[(size_t)kk * t->n + j]);
            if (with_bias) x += bias[j];
            want_aux[at] = (float)x;
            if (t->epi == TERN_EPILOGUE_GELU) x = gelu_ref(x);
            if (t->epi == TERN_EPILOGUE_GELU_BACKWARD) x *= gelu_grad_ref(aux[at]);
            if (t->beta != 0) x += t->beta * add[at];
            want_c[at] = (float)x;
            want_g[j] += (float)x;
        }
    if (t->sums_beta == 0)
        for (int j = 0; j < t->n; j++) g0[j] = NAN; /* not read */
    ot_buf ba = ot_make(c, t->dab, na, 1, a), bb = ot_make(c, t->dab, nb, 2, b), bc = ot_make(c, t->dc, nc, 0, NULL);
    ot_buf baux = ot_make(c, t->dc, nc, 0, aux), bbias = ot_make(c, t->dc, (size_t)t->n, 0, bias);
    ot_buf badd = ot_make(c, t->dc, nc, 0, add), bg = ot_make(c, t->ds, (size_t)t->n, 0, g0);
    tern_matmul mm = {.m = t->m, .n = t->n, .k = t->k, .trans_b = t->tb, .alpha = 1, .beta = t->beta,
                      .epilogue = t->epi, .col_sums = bg.view, .col_sums_beta = t->sums_beta};
    if (with_bias) mm.bias = bbias.view;
    if (t->epi != TERN_EPILOGUE_NONE) mm.aux = baux.view;
    if (t->beta != 0) mm.addend = badd.view;
    CHECK_OK(c->ops->matmul(c->d, bc.view, ba.view, bb.view, &mm));
    char what[160];
    snprintf(what, sizeof what,
             "col_sums case %d: m%d n%d k%d tb%d epilogue %d beta %g sums_beta %g ab %s c %s sums %s", id, t->m,
             t->n, t->k, t->tb, (int)t->epi, (double)t->beta, (double)t->sums_beta, tern_dtype_name(t->dab),
             tern_dtype_name(t->dc), tern_dtype_name(t->ds));
    /* f32: the product's 2e-5 and gelu' as in run_gelu_backward: 5e-5; the sums add m such
     * values (norm-wise, the same bound). bf16 C: one rounding of each element, which a
     * handler summing C as stored adds up: ot_tol's 8e-3 norm-wise, whatever the sums' dtype */
    double tol = ot_tol(t->dc, 5e-5) > ot_tol(t->ds, 5e-5) ? ot_tol(t->dc, 5e-5) : ot_tol(t->ds, 5e-5);
    OT_EXPECT(c, bc, want_c, ot_tol(t->dc, 5e-5), "%s (c)", what);
    if (t->epi == TERN_EPILOGUE_GELU) OT_EXPECT(c, baux, want_aux, ot_tol(t->dc, 5e-5), "%s (aux)", what);
    OT_EXPECT(c, bg, want_g, tol, "%s (col_sums)", what);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb), "%s: %s: inputs changed", c->handler, what);
    ot_free(c, &ba), ot_free(c, &bb), ot_free(c, &bc), ot_free(c, &baux), ot_free(c, &bbias), ot_free(c, &badd);
    ot_free(c, &bg);
    free(a), free(b), free(add), free(aux), free(bias), free(g0), free(want_c), free(want_aux), free(want_g);
}

static void test_col_sums(ot_ctx *c) {
    ot_seed(11);
    static const int ms[] = {1, 16, 40, 130};
    static const int ns[] = {8, 24, 64, 96};
    static const int ks[] = {1, 9, 64, 300};
    static const tern_epilogue epis[] = {TERN_EPILOGUE_NONE, TERN_EPILOGUE_GELU, TERN_EPILOGUE_GELU_BACKWARD};
    int id = 6000;
    for (int i = 0; i < 18; i++) {
        tern_epilogue epi = epis[i % 3];
        cs_case t = {.m = ms[ot_randint(0, 4)], .n = ns[ot_randint(0, 4)], .k = ks[ot_randint(0, 4)],
                     .tb = ot_randint(0, 2), .epi = epi, .beta = epi == TERN_EPILOGUE_NONE && i % 2 ? 1.0f : 0.0f,
                     .sums_beta = i % 4 == 0 ? 0.0f : i % 4 == 1 ? 1.0f : 0.5f,
                     .dab = ot_float2[ot_randint(0, 2)], .dc = ot_float2[ot_randint(0, 2)],
                     .ds = ot_float2[ot_randint(0, 2)]};
        t.dab = t.dc; /* cuBLASLt's epilogues take A and B in C's dtype */
        run_col_sums(c, &t, id++);
    }
    /* the warpgroup GEMM's shapes (GPT-2's: dfch and d(b_fc), a residual projection, the fc) */
    const cs_case wg[] = {
        {256, 256, 576, true, TERN_EPILOGUE_GELU_BACKWARD, 0, 1, TERN_BF16, TERN_BF16, TERN_F32},
        {256, 256, 576, false, TERN_EPILOGUE_NONE, 1, 0, TERN_BF16, TERN_BF16, TERN_BF16},
        {128, 512, 640, false, TERN_EPILOGUE_GELU, 0, 0.5f, TERN_BF16, TERN_BF16, TERN_F32},
    };
    for (size_t i = 0; i < sizeof wg / sizeof *wg; i++) run_col_sums(c, &wg[i], id++);
}

/* col_sums: [n], C dense, one batch, no paired epilogue, apart from every other buffer. */
static void test_errors_col_sums(ot_ctx *c, ot_buf cc, ot_buf a, ot_buf b, tern_matmul mm) {
    const tern_ops *o = c->ops;
    ot_buf g = ot_make(c, TERN_F32, 3, 0, NULL), g4 = ot_make(c, TERN_F32, 4, 0, NULL);
    tern_matmul bad = mm;
    bad.col_sums = g4.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: col_sums has 4 elements");
    ot_buf c11 = ot_make(c, TERN_F32, 11, 0, NULL); /* 3 rows of 3 at ldc 4 */
    bad = mm;
    bad.col_sums = g.view;
    bad.ldc = 4;
    CHECK_ERR(o->matmul(c->d, c11.view, a.view, b.view, &bad), "matmul: col_sums needs C dense (ldc == n), got ldc 4");
    bad = mm;
    bad.col_sums = tern_view(a.view, 0, 3);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: col_sums and a overlap");
    bad = mm;
    bad.col_sums = tern_view(cc.view, 0, 3);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: col_sums and c overlap");
    bad = mm;
    bad.col_sums = tern_none();
    bad.col_sums.dtype = (tern_dtype)9;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: col_sums has an invalid dtype");
    ot_free(c, &g), ot_free(c, &g4), ot_free(c, &c11);
}

/* bias_grad: [n], B plain and dense, one batch, nothing else around the product. */
static void test_errors_bias_grad(ot_ctx *c, ot_buf cc, ot_buf a, ot_buf b, tern_matmul mm) {
    const tern_ops *o = c->ops;
    ot_buf g = ot_make(c, TERN_F32, 3, 0, NULL), g4 = ot_make(c, TERN_F32, 4, 0, NULL);
    ot_buf bias = ot_make(c, TERN_F32, 3, 0, NULL), add = ot_make(c, TERN_F32, 9, 0, NULL);
    tern_matmul bad = mm;
    bad.bias_grad = g4.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad has 4 elements");
    bad = mm;
    bad.bias_grad = g.view;
    bad.trans_b = true;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad needs B not transposed");
    bad = mm;
    bad.bias_grad = g.view;
    bad.bias = bias.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad takes no bias");
    bad = mm;
    bad.bias_grad = g.view;
    bad.epilogue = TERN_EPILOGUE_GELU;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad takes no epilogue");
    bad = mm;
    bad.bias_grad = g.view;
    bad.beta = 1;
    bad.addend = add.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad takes no addend");
    bad = mm;
    bad.bias_grad = tern_view(b.view, 0, 3);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad and b overlap");
    bad = mm;
    bad.bias_grad = tern_view(cc.view, 0, 3);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad and c overlap");
    bad = mm;
    bad.bias_grad = tern_none();
    bad.bias_grad.dtype = (tern_dtype)9;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias_grad has an invalid dtype");
    ot_free(c, &g), ot_free(c, &g4), ot_free(c, &bias), ot_free(c, &add);
}

/* addend: laid out as c (its dtype and length), c's own view or disjoint from it. */
static void test_errors_addend(ot_ctx *c, ot_buf cc, ot_buf a, ot_buf b, tern_matmul mm) {
    const tern_ops *o = c->ops;
    ot_buf add = ot_make(c, TERN_F32, 9, 1, NULL), add16 = ot_make(c, TERN_BF16, 9, 0, NULL);
    ot_buf aux = ot_make(c, TERN_F32, 9, 0, NULL);
    tern_matmul bad = mm;
    bad.beta = 1;
    bad.addend = cc.view; /* c itself: allowed (beta reads c, as without an addend) */
    CHECK_OK(o->matmul(c->d, cc.view, a.view, b.view, &bad));
    bad.addend = add16.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend is bf16, needs c's dtype f32");
    bad.addend = tern_view(add.view, 0, 8);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend has 8 elements, needs c's 9");
    bad.addend = tern_view(cc.all, 1, 9); /* one element past c: same allocation, overlapping */
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend partly overlaps c");
    bad.addend = tern_view(add.view, 5, 9);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend is an invalid view");
    bad.addend = add.view;
    bad.epilogue = TERN_EPILOGUE_GELU;
    bad.aux = add.view; /* the GELU epilogue writes aux: it may not be the addend */
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend and aux overlap");
    bad = mm;
    bad.addend = add.view;
    bad.addend.dtype = (tern_dtype)9;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend has an invalid dtype");
    bad.addend = tern_none();
    bad.addend.dtype = (tern_dtype)9;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: addend has an invalid dtype");
    /* beta == 0: the addend is not read (it holds NaN here) */
    ot_buf fill = ot_make(c, TERN_F32, 9, 0, NULL);
    bad = mm;
    bad.addend = fill.view;
    CHECK_OK(o->matmul(c->d, aux.view, a.view, b.view, &bad));
    float got[9];
    ot_read(c, aux, got);
    int finite = 1;
    for (int i = 0; i < 9; i++) finite &= isfinite(got[i]) != 0;
    CHECKF(finite, "%s: matmul with beta == 0 read its addend", c->handler);
    ot_free(c, &fill);
    ot_free(c, &add);
    ot_free(c, &add16);
    ot_free(c, &aux);
}

/* GELU_BACKWARD: aux required in c's dtype; no bias, beta 0, no separate addend, one batch. */
static void test_errors_gelu_backward(ot_ctx *c, ot_buf cc, ot_buf a, ot_buf b, tern_matmul mm) {
    const tern_ops *o = c->ops;
    ot_buf aux = ot_make(c, TERN_F32, 9, 0, NULL), aux16 = ot_make(c, TERN_BF16, 9, 0, NULL);
    ot_buf bias = ot_make(c, TERN_F32, 3, 0, NULL), add = ot_make(c, TERN_F32, 9, 0, NULL);
    float pre[9];
    for (int i = 0; i < 9; i++) pre[i] = 0.25f * (float)(i - 4);
    CHECK_OK(o->upload(c->d, aux.view, pre));
    mm.epilogue = TERN_EPILOGUE_GELU_BACKWARD;
    mm.aux = aux.view;
    CHECK_OK(o->matmul(c->d, cc.view, a.view, b.view, &mm));
    tern_matmul bad = mm;
    bad.addend = cc.view; /* c's own view is no separate addend */
    CHECK_OK(o->matmul(c->d, cc.view, a.view, b.view, &bad));
    bad = mm;
    bad.aux = tern_none();
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the GELU_BACKWARD epilogue needs aux");
    bad = mm;
    bad.bias = bias.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the GELU_BACKWARD epilogue takes no bias");
    bad = mm;
    bad.beta = 1;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad),
              "matmul: the GELU_BACKWARD epilogue needs beta == 0, got 1");
    bad = mm;
    bad.addend = add.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the GELU_BACKWARD epilogue takes no addend");
    bad = mm;
    bad.aux = aux16.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad),
              "matmul: the GELU_BACKWARD epilogue needs aux in c's dtype f32, got bf16");
    bad = mm;
    bad.aux = tern_view(aux.view, 0, 8);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: aux has 8 elements");
    bad = mm;
    bad.aux = tern_view(cc.view, 0, 9);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: c and aux overlap");
    /* one batch: two entries of [3, 3] with a dense [2, 3, 3] aux still refused */
    ot_buf c18 = ot_make(c, TERN_F32, 18, 0, NULL), aux18 = ot_make(c, TERN_F32, 18, 0, NULL);
    bad = mm;
    bad.batch = 2;
    bad.stride_a = 0;
    bad.stride_b = 0;
    bad.aux = aux18.view;
    ot_buf a24 = ot_make(c, TERN_F32, 24, 0, NULL), b24 = ot_make(c, TERN_F32, 24, 0, NULL);
    CHECK_ERR(o->matmul(c->d, c18.view, a24.view, b24.view, &bad),
              "matmul: the GELU_BACKWARD epilogue takes one batch, got 2");
    ot_free(c, &a24);
    ot_free(c, &b24);
    ot_free(c, &c18);
    ot_free(c, &aux18);
    ot_free(c, &aux);
    ot_free(c, &aux16);
    ot_free(c, &bias);
    ot_free(c, &add);
}

static void test_errors(ot_ctx *c) {
    ot_seed(3);
    float *x = ot_random(64, -1, 1);
    ot_buf a = ot_make(c, TERN_F32, 12, 0, x), b = ot_make(c, TERN_F32, 12, 0, x);
    ot_buf cc = ot_make(c, TERN_F32, 9, 0, NULL), ai = ot_make(c, TERN_I32, 12, 0, NULL);
    ot_buf cf16 = ot_make(c, TERN_F16, 9, 0, NULL), bias = ot_make(c, TERN_F32, 2, 0, x);
    tern_matmul mm = {0};
    mm.m = 3;
    mm.n = 3;
    mm.k = 4;
    mm.alpha = 1;
    const tern_ops *o = c->ops;
    CHECK_OK(o->matmul(c->d, cc.view, a.view, b.view, &mm));
    CHECK_ERR(o->matmul(c->d, cc.view, ai.view, b.view, &mm), "matmul: a is i32, needs f32 or bf16");
    CHECK_ERR(o->matmul(c->d, cf16.view, a.view, b.view, &mm), "matmul: c is f16");
    CHECK_ERR(o->matmul(c->d, cc.view, tern_view(a.view, 1, 11), b.view, &mm), "matmul: a has 11 elements");
    CHECK_ERR(o->matmul(c->d, cc.view, tern_view(a.view, 10, 12), b.view, &mm), "invalid view");
    CHECK_ERR(o->matmul(c->d, tern_view(cc.view, 0, 8), a.view, b.view, &mm), "matmul: c has 8 elements");
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, tern_none(), &mm), "matmul: b is absent");
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, NULL), "matmul: mm is NULL");
    tern_matmul bad = mm;
    bad.m = 0;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: m must be positive");
    bad = mm;
    bad.k = -2;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: k must be positive");
    bad = mm;
    bad.lda = 2;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: lda = 2 is less than");
    bad = mm;
    bad.ldb = -1;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: ldb must not be negative");
    bad = mm;
    bad.batch = 2;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "needs 24");
    bad = mm;
    bad.batch = -1;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: batch must not be negative");
    bad = mm;
    bad.bias = bias.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: bias has 2 elements, n needs 3");
    bad = mm;
    bad.aux = tern_view(cc.view, 0, 9);
    bad.epilogue = TERN_EPILOGUE_GELU;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: c and aux overlap");
    bad = mm;
    bad.aux = a.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: aux has 12 elements");
    bad = mm;
    bad.epilogue = (tern_epilogue)7;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: unknown epilogue");
    bad = mm;
    bad.alpha = NAN;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: alpha and beta must be finite");
    tern_buf c_over = tern_view(a.all, 2, 9); /* c inside a's allocation, overlapping a */
    CHECK_ERR(o->matmul(c->d, c_over, a.view, b.view, &mm), "matmul: c and a overlap");
    bad = mm;
    bad.m = 2;
    bad.stride_c = 1;
    bad.batch = 2;
    bad.stride_a = 1;
    bad.stride_b = 12;
    ot_buf b24 = ot_make(c, TERN_F32, 24, 0, x);
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b24.view, &bad), "makes the batch entries of c overlap");
    ot_free(c, &b24);
    test_errors_addend(c, cc, a, b, mm);
    test_errors_gelu_backward(c, cc, a, b, mm);
    test_errors_bias_grad(c, cc, a, b, mm);
    test_errors_col_sums(c, cc, a, b, mm);
    /* the SWIGLU epilogue: C [m, n/2] of an even n, nothing of beta's term */
    bad = mm;
    bad.epilogue = TERN_EPILOGUE_SWIGLU;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: c has 9 elements, its shape needs 3");
    CHECK_ERR(o->matmul(c->d, tern_view(cc.view, 0, 3), a.view, b.view, &bad),
              "matmul: the SWIGLU epilogue needs an even n (gate and up halves), got 3");
    bad.n = 2;
    bad.beta = 1;
    CHECK_ERR(o->matmul(c->d, tern_view(cc.view, 0, 3), a.view, tern_view(b.view, 0, 8), &bad),
              "matmul: the SWIGLU epilogue needs beta == 0, got 1");
    /* the ROPE epilogue: even head_dim dividing n, heads within n, nothing of beta's term
     * or aux, positions [m] and frequencies [head_dim / 2] */
    bad = mm; /* m 3, n 3 */
    bad.epilogue = TERN_EPILOGUE_ROPE;
    int32_t pos3[3] = {0, 1, 2};
    ot_buf pos = ot_make_i32(c, pos3, 3, 0), freq = ot_make(c, TERN_F32, 4, 0, x);
    bad.rope = (tern_matmul_rope){pos.view, tern_view(freq.view, 0, 1), 1, 2};
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad),
              "matmul: the ROPE epilogue needs an even head_dim dividing n (3), got 2");
    bad.n = 2; /* B [k 3, n 2] */
    bad.rope.heads = 2;
    tern_buf c6 = tern_view(cc.view, 0, 6), b6 = tern_view(b.view, 0, 8); /* C [3, 2], B [4, 2] */
    CHECK_ERR(o->matmul(c->d, c6, a.view, b6, &bad), "matmul: the ROPE epilogue needs heads * head_dim <= n (2), got 4");
    bad.rope.heads = 0;
    CHECK_ERR(o->matmul(c->d, c6, a.view, b6, &bad), "matmul: rope.heads must be positive, got 0");
    bad.rope.heads = 1;
    bad.beta = 1;
    CHECK_ERR(o->matmul(c->d, c6, a.view, b6, &bad), "matmul: the ROPE epilogue needs beta == 0, got 1");
    bad.beta = 0;
    ot_buf aux = ot_make(c, TERN_F32, 6, 0, NULL);
    bad.aux = aux.view;
    CHECK_ERR(o->matmul(c->d, c6, a.view, b6, &bad), "matmul: the ROPE epilogue takes no aux");
    bad.aux = tern_none();
    ot_free(c, &aux);
    bad.rope.pos = tern_view(pos.view, 0, 2);
    CHECK_ERR(o->matmul(c->d, c6, a.view, b6, &bad), "matmul: rope.pos has 2 elements, m needs 3");
    bad.rope.pos = pos.view;
    bad.rope.inv_freq = tern_view(freq.view, 0, 2);
    CHECK_ERR(o->matmul(c->d, c6, a.view, b6, &bad), "matmul: rope.inv_freq has 2 elements, head_dim / 2 needs 1");
    bad.rope.inv_freq = tern_view(freq.view, 0, 1);
    CHECK_OK(o->matmul(c->d, c6, a.view, b6, &bad)); /* the same call, valid */
    ot_free(c, &pos), ot_free(c, &freq);
    /* the LAYERNORM and RMSNORM prologues: A not transposed, one batch, weights [k], a finite
     * eps >= 0, no shift for RMSNORM, nothing written over the weights */
    bad = mm; /* m 3, n 3, k 4 */
    ot_buf nw = ot_make(c, TERN_F32, 8, 0, x), nb = ot_make(c, TERN_F32, 4, 0, x);
    bad.prologue = (tern_prologue)7;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: unknown prologue 7");
    bad.prologue = TERN_PROLOGUE_LAYERNORM;
    bad.norm = (tern_matmul_norm){tern_view(nw.view, 0, 4), nb.view, 1e-5f};
    CHECK_OK(o->matmul(c->d, cc.view, a.view, b.view, &bad));
    bad.trans_a = true;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the LAYERNORM prologue needs A not transposed");
    bad.trans_a = false;
    bad.norm.w = nw.view;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: norm.w has 8 elements, k needs 4");
    bad.norm.w = tern_view(nw.view, 0, 4);
    bad.norm.b = tern_none();
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: norm.b is absent");
    bad.norm.b = nb.view;
    bad.norm.eps = -1;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the LAYERNORM prologue needs norm.eps finite and >= 0");
    bad.norm.eps = NAN;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the LAYERNORM prologue needs norm.eps finite and >= 0");
    bad.norm.eps = 1e-5f;
    bad.prologue = TERN_PROLOGUE_RMSNORM;
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: the RMSNORM prologue takes no norm.b");
    bad.norm.b = tern_none();
    CHECK_OK(o->matmul(c->d, cc.view, a.view, b.view, &bad));
    bad.norm.w = tern_view(cc.view, 0, 4); /* C is written over the weights */
    CHECK_ERR(o->matmul(c->d, cc.view, a.view, b.view, &bad), "matmul: c and norm.w overlap");
    bad.norm.w = tern_view(nw.view, 0, 4);
    bad.batch = 2;
    bad.stride_a = 0, bad.stride_b = 0, bad.stride_c = 0;
    ot_buf a24 = ot_make(c, TERN_F32, 24, 0, x), b24n = ot_make(c, TERN_F32, 24, 0, x), c18 = ot_make(c, TERN_F32, 18, 0, NULL);
    CHECK_ERR(o->matmul(c->d, c18.view, a24.view, b24n.view, &bad), "matmul: the RMSNORM prologue takes one batch, got 2");
    ot_free(c, &a24), ot_free(c, &b24n), ot_free(c, &c18), ot_free(c, &nw), ot_free(c, &nb);
    /* a failed call writes nothing */
    ot_buf fresh = ot_make(c, TERN_F32, 9, 2, NULL);
    CHECK_ERR(o->matmul(c->d, fresh.view, ai.view, b.view, &mm), "matmul");
    float got[9];
    ot_read(c, fresh, got);
    int untouched = 1;
    for (int i = 0; i < 9; i++) untouched &= isnan(got[i]) != 0;
    CHECKF(untouched && ot_guard_ok(c, fresh), "%s: a failed matmul wrote to c", c->handler);
    ot_free(c, &fresh);
    ot_free(c, &a);
    ot_free(c, &b);
    ot_free(c, &cc);
    ot_free(c, &ai);
    ot_free(c, &cf16);
    ot_free(c, &bias);
    free(x);
}

static void test_all(ot_ctx *c) {
    test_random(c);
    test_combinations(c);
    test_addend(c);
    test_accumulate_after_write(c);
    test_gelu_backward(c);
    test_bias_grad(c);
    test_col_sums(c);
    test_swiglu(c);
    test_rope(c);
    test_norm(c);
    test_errors(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_matmul");
}
