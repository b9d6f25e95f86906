/* matmul against a plain double-precision reference: every dtype combination the contract
 * allows (A f32/bf16, B f32/bf16/f16, C f32/bf16), transposes, row strides, batches with
 * strides, alpha/beta, bias, the GELU epilogue with aux, views at offsets, the small-m
 * kernels (m <= 8) and the blocked sgemm path; then every validation error. */
#include "ops_test.h"

typedef struct mm_case {
    int m, n, k, batch;
    bool ta, tb;
    int lda, ldb, ldc; /* 0: dense */
    long sa, sb, sc;   /* 0: dense */
    float alpha, beta;
    bool bias, gelu, aux;
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
                double pre = t->alpha * s + (t->beta != 0 ? t->beta * (double)c0[at] : 0.0);
                if (t->bias) pre += bias[j];
                want_aux[((size_t)e * t->m + i) * t->n + j] = (float)pre;
                want[at] = (float)(t->gelu ? gelu_ref(pre) : pre);
            }
    /* with beta == 0, C's matrix elements start as NaN: they must not be read */
    if (t->beta == 0)
        for (int e = 0; e < t->batch; e++)
            for (int i = 0; i < t->m; i++)
                for (int j = 0; j < t->n; j++) c0[e * sc + (long)i * ldc + j] = NAN;
    size_t off = (size_t)(id % 5);
    ot_buf ba = ot_make(c, t->da, na, off, a), bb = ot_make(c, t->db, nb, off + 1, b);
    ot_buf bcb = ot_make(c, t->dc, nc, off + 2, c0);
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
    CHECK_OK(c->ops->matmul(c->d, bcb.view, ba.view, bb.view, &mm));
    /* f32 accumulation over k <= 700 terms of size <= 1: ~1e-6 relative; with bf16/f16 only
     * in the inputs the reference uses the same rounded inputs, so only C's dtype widens it */
    double tol = ot_tol(t->dc, 2e-5);
    OT_EXPECT(c, bcb, want, tol,
              "case %d: m%d n%d k%d batch%d ta%d tb%d ld %d/%d/%d a %s b %s c %s alpha %g beta %g bias %d gelu %d",
              id, t->m, t->n, t->k, t->batch, t->ta, t->tb, t->lda, t->ldb, t->ldc,
              tern_dtype_name(t->da), tern_dtype_name(t->db), tern_dtype_name(t->dc),
              (double)t->alpha, (double)t->beta, t->bias, t->gelu);
    if (t->aux) OT_EXPECT(c, baux, want_aux, ot_tol(t->daux, 2e-5), "case %d: aux", id);
    CHECKF(ot_guard_ok(c, ba) && ot_guard_ok(c, bb), "%s: case %d: inputs changed", c->handler, id);
    ot_free(c, &ba);
    ot_free(c, &bb);
    ot_free(c, &bcb);
    ot_free(c, &bbias);
    ot_free(c, &baux);
    free(a);
    free(b);
    free(c0);
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
    test_errors(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_matmul");
}
