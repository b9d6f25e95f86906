/* mlp (the feed-forward pair) on every handler: against a double reference with the
 * composed path's roundings, against the same handler's two matmuls, in place (y = x) and
 * not, twice in a row (the GPU core's one kernel resets its counters), and its errors.
 *
 * The GPU core runs decoding's GPT-2 class (one row, GELU, weights [k, n]) as one kernel
 * (src/kernels/gemv_mlp.c), which leaves `hidden` unwritten; the cases marked `one` check
 * that on the GPU handlers, so the kernel is what they test there (a white-box check of
 * src/gpu_core/mlp.c's rule: the contract leaves hidden unspecified). */
#include "ops_test.h"

/* 0.5 x (1 + tanh u) as x / (1 + exp(-2u)) */
static double gelu_ref(double x) { return x / (1 + exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x))); }

static double silu_ref(double g) { return g / (1 + exp(-g)); }

typedef struct mlp_case {
    int m, C, H;
    tern_prologue norm;
    tern_epilogue act;
    bool trans_w, b1, b2, in_place;
    float beta;
    tern_dtype dx, dw; /* x, y, hidden, norm weights and biases; W1 and W2 */
    bool one;          /* the GPU core's one kernel takes it */
} mlp_case;

static float round_to(float v, tern_dtype dt) {
    float r = v;
    ot_round(&r, 1, dt);
    return r;
}

/* y = beta y0 + act(norm(x) W1 + b1) W2 + b2 in double, the normalised x and h rounded to
 * x's dtype where the composed products store them. */
static void reference(const mlp_case *t, const float *x, const float *y0, const float *w1, const float *w2,
                      const float *b1, const float *b2, const float *nw, const float *nb, float *want) {
    int C = t->C, H = t->H, n1 = t->act == TERN_EPILOGUE_SWIGLU ? 2 * H : H;
    double *xn = malloc((size_t)C * sizeof *xn), *p = malloc((size_t)n1 * sizeof *p);
    float *h = malloc((size_t)H * sizeof *h);
    for (int i = 0; i < t->m; i++) {
        const float *xr = x + (size_t)i * C;
        double mean = 0, ss = 0;
        if (t->norm == TERN_PROLOGUE_LAYERNORM) {
            for (int c = 0; c < C; c++) mean += xr[c];
            mean /= C;
        }
        for (int c = 0; c < C; c++) ss += (xr[c] - mean) * (xr[c] - mean);
        double rs = 1 / sqrt(ss / C + 1e-5);
        for (int c = 0; c < C; c++) {
            double v = xr[c];
            if (t->norm == TERN_PROLOGUE_LAYERNORM) v = (v - mean) * rs * nw[c] + nb[c];
            if (t->norm == TERN_PROLOGUE_RMSNORM) v = v * rs * nw[c];
            xn[c] = t->norm == TERN_PROLOGUE_NONE ? v : round_to((float)v, t->dx);
        }
        for (int j = 0; j < n1; j++) {
            double s = t->b1 ? b1[j] : 0;
            for (int c = 0; c < C; c++) s += xn[c] * (t->trans_w ? w1[(size_t)j * C + c] : w1[(size_t)c * n1 + j]);
            p[j] = s;
        }
        for (int j = 0; j < H; j++) {
            double v = t->act == TERN_EPILOGUE_GELU     ? gelu_ref(p[j])
                       : t->act == TERN_EPILOGUE_SWIGLU ? silu_ref(p[j]) * p[H + j]
                                                        : p[j];
            h[j] = round_to((float)v, t->dx);
        }
        for (int c = 0; c < C; c++) {
            double s = (t->b2 ? b2[c] : 0) + (double)t->beta * y0[(size_t)i * C + c];
            for (int j = 0; j < H; j++) s += (double)h[j] * (t->trans_w ? w2[(size_t)c * H + j] : w2[(size_t)j * C + c]);
            want[(size_t)i * C + c] = (float)s;
        }
    }
    free(xn), free(p), free(h);
}

static void run_case(ot_ctx *c, const mlp_case *t, int id) {
    int C = t->C, H = t->H, n1 = t->act == TERN_EPILOGUE_SWIGLU ? 2 * H : H;
    size_t nx = (size_t)t->m * C, nw1 = (size_t)n1 * C, nw2 = (size_t)H * C;
    float s1 = 1.0f / sqrtf((float)C), s2 = 1.0f / sqrtf((float)H);
    float *x = ot_random(nx, -1, 1), *y0 = ot_random(nx, -1, 1);
    float *w1 = ot_random(nw1, -2 * s1, 2 * s1), *w2 = ot_random(nw2, -2 * s2, 2 * s2);
    float *b1 = ot_random((size_t)n1, -0.5f, 0.5f), *b2 = ot_random((size_t)C, -0.5f, 0.5f);
    float *nw = ot_random((size_t)C, 0.5f, 1.5f), *nb = ot_random((size_t)C, -0.5f, 0.5f);
    ot_round(x, nx, t->dx), ot_round(y0, nx, t->dx), ot_round(w1, nw1, t->dw), ot_round(w2, nw2, t->dw);
    ot_round(b1, (size_t)n1, t->dx), ot_round(b2, (size_t)C, t->dx), ot_round(nw, (size_t)C, t->dx);
    ot_round(nb, (size_t)C, t->dx);
    if (t->in_place) memcpy(y0, x, nx * sizeof *x);
    float *want = malloc(nx * sizeof *want), *steps = malloc(nx * sizeof *steps), *hid = malloc((size_t)t->m * H * sizeof *hid);
    reference(t, x, y0, w1, w2, b1, b2, nw, nb, want);

    ot_buf bx = ot_make(c, t->dx, nx, (size_t)(id % 3), x), by = ot_make(c, t->dx, nx, 1, y0);
    ot_buf bw1 = ot_make(c, t->dw, nw1, 0, w1), bw2 = ot_make(c, t->dw, nw2, 0, w2);
    ot_buf bb1 = ot_make(c, t->dx, (size_t)n1, 2, b1), bb2 = ot_make(c, t->dx, (size_t)C, 1, b2);
    ot_buf bnw = ot_make(c, t->dx, (size_t)C, 0, nw), bnb = ot_make(c, t->dx, (size_t)C, 3, nb);
    ot_buf bh = ot_make(c, t->dx, (size_t)t->m * H, 0, NULL);
    ot_buf out = t->in_place ? bx : by;
    tern_mlp f = {.m = t->m, .C = C, .H = H, .trans_w = t->trans_w, .act = t->act, .prologue = t->norm,
                  .norm = {bnw.view, t->norm == TERN_PROLOGUE_LAYERNORM ? bnb.view : tern_none(), 1e-5f},
                  .b1 = t->b1 ? bb1.view : tern_none(), .b2 = t->b2 ? bb2.view : tern_none(), .beta = t->beta,
                  .hidden = bh.view};
    char what[150];
    snprintf(what, sizeof what, "mlp case %d: m %d C %d H %d norm %d act %d trans %d b1 %d b2 %d beta %g %s x %s w %s",
             id, t->m, C, H, (int)t->norm, (int)t->act, t->trans_w, t->b1, t->b2, (double)t->beta,
             t->in_place ? "in place" : "apart", tern_dtype_name(t->dx), tern_dtype_name(t->dw));
    CHECK_OK(c->ops->mlp(c->d, out.view, bx.view, bw1.view, bw2.view, &f));
    /* f32: two chained products of a few thousand terms, 5e-5 (the norm prologue's bound);
     * bf16: y stored in bf16 (ot_tol's 8e-3), the rest rounded as the reference does */
    double tol = ot_tol(t->dx, 5e-5);
    OT_EXPECT(c, out, want, tol, "%s (reference)", what);
    if (t->one && !ot_is_cpu(c)) {
        ot_read(c, bh, hid);
        int written = 0;
        for (size_t i = 0; i < (size_t)t->m * H; i++) written += !isnan(hid[i]);
        CHECKF(written == 0, "%s: %s: hidden written (%d elements): not the one kernel", c->handler, what, written);
    }
    /* again, y poisoned first: the one kernel's counters are back at zero, or no group
     * would come last and y would stay NaN */
    if (!t->in_place && t->beta == 0) {
        float *first = malloc(nx * sizeof *first);
        ot_read(c, out, first);
        CHECK_OK(c->ops->fill(c->d, out.view, NAN));
        CHECK_OK(c->ops->mlp(c->d, out.view, bx.view, bw1.view, bw2.view, &f));
        OT_EXPECT(c, out, first, 0.0, "%s (a second launch, the same bits)", what);
        free(first);
        /* the same handler's two matmuls, as effect.h defines the block */
        ot_buf bs = ot_make(c, t->dx, nx, 0, NULL);
        tern_matmul m1 = {.m = t->m, .n = n1, .k = C, .trans_b = t->trans_w, .alpha = 1, .bias = f.b1,
                          .epilogue = t->act, .prologue = t->norm, .norm = f.norm};
        tern_matmul m2 = {.m = t->m, .n = C, .k = H, .trans_b = t->trans_w, .alpha = 1, .bias = f.b2};
        CHECK_OK(c->ops->matmul(c->d, bh.view, bx.view, bw1.view, &m1));
        CHECK_OK(c->ops->matmul(c->d, bs.view, bh.view, bw2.view, &m2));
        ot_read(c, bs, steps);
        /* the same roundings, the sums in another order: f32 2e-5; bf16 y may round the
         * other way (ot_tol) */
        OT_EXPECT(c, out, steps, ot_tol(t->dx, 2e-5), "%s (its two matmuls)", what);
        ot_free(c, &bs);
    }
    CHECKF(ot_guard_ok(c, bh) && ot_guard_ok(c, bw1) && ot_guard_ok(c, bw2) && ot_guard_ok(c, bb1) &&
               ot_guard_ok(c, bb2) && ot_guard_ok(c, bnw) && ot_guard_ok(c, bnb),
           "%s: %s: guards", c->handler, what);
    ot_free(c, &bx), ot_free(c, &by), ot_free(c, &bw1), ot_free(c, &bw2), ot_free(c, &bb1), ot_free(c, &bb2);
    ot_free(c, &bnw), ot_free(c, &bnb), ot_free(c, &bh);
    free(x), free(y0), free(w1), free(w2), free(b1), free(b2), free(nw), free(nb), free(want), free(steps);
    free(hid);
}

/* Decoding's GPT-2 class (one kernel on the GPU core: 124M's shape, f32 and bf16, in place
 * as the model calls it), the one kernel's edges (sets of unequal size, C not a multiple
 * of 256, no biases, beta 0, each prologue), and the composed forms (m > 1, weights
 * transposed, SWIGLU, no activation). On opencl the representative set (ot_full). */
static void test_cases(ot_ctx *c) {
    ot_seed(29);
    int id = 0;
    static const tern_dtype dts[2] = {TERN_F32, TERN_BF16};
    for (int i = 0; i < 2; i++) {
        mlp_case gpt2 = {.m = 1, .C = 768, .H = 3072, .norm = TERN_PROLOGUE_LAYERNORM, .act = TERN_EPILOGUE_GELU,
                         .b1 = true, .b2 = true, .in_place = true, .beta = 1, .dx = dts[i], .dw = dts[i],
                         .one = dts[i] == TERN_BF16}; /* f32 rows of both weights take too many registers */
        run_case(c, &gpt2, id++);
        gpt2.in_place = false, gpt2.beta = 0;
        if (ot_full(c) || i == 1) run_case(c, &gpt2, id++);
    }
    /* 7 groups of 32 hidden units: sets of 3, 3 and 1 */
    mlp_case sets = {.m = 1, .C = 64, .H = 224, .norm = TERN_PROLOGUE_RMSNORM, .act = TERN_EPILOGUE_GELU,
                     .b2 = true, .beta = 0, .dx = TERN_BF16, .dw = TERN_BF16, .one = true};
    run_case(c, &sets, id++);
    /* f32 weights (32 units a group at 8 threads a row), C = 200: kc 256, 4-wide W2 rows */
    mlp_case odd = {.m = 1, .C = 200, .H = 160, .norm = TERN_PROLOGUE_NONE, .act = TERN_EPILOGUE_GELU, .b1 = true,
                    .beta = 0, .dx = TERN_F32, .dw = TERN_F32, .one = true};
    run_case(c, &odd, id++);
    odd.beta = 0.5f, odd.b2 = true, odd.dw = TERN_BF16;
    if (ot_full(c)) run_case(c, &odd, id++);
    /* composed: two rows; weights transposed; SWIGLU (Llama's); no activation; H not a
     * multiple of a group's units */
    mlp_case two = {.m = 2, .C = 96, .H = 128, .norm = TERN_PROLOGUE_LAYERNORM, .act = TERN_EPILOGUE_GELU,
                    .b1 = true, .b2 = true, .in_place = true, .beta = 1, .dx = TERN_BF16, .dw = TERN_BF16};
    run_case(c, &two, id++);
    mlp_case llama = {.m = 1, .C = 64, .H = 96, .norm = TERN_PROLOGUE_RMSNORM, .act = TERN_EPILOGUE_SWIGLU,
                      .trans_w = true, .in_place = true, .beta = 1, .dx = TERN_BF16, .dw = TERN_BF16};
    run_case(c, &llama, id++);
    mlp_case plain = {.m = 3, .C = 40, .H = 48, .act = TERN_EPILOGUE_NONE, .trans_w = true, .b1 = true,
                      .dx = TERN_F32, .dw = TERN_F32};
    run_case(c, &plain, id++);
    mlp_case ragged = {.m = 1, .C = 64, .H = 100, .norm = TERN_PROLOGUE_LAYERNORM, .act = TERN_EPILOGUE_GELU,
                       .b1 = true, .b2 = true, .dx = TERN_F32, .dw = TERN_F32};
    run_case(c, &ragged, id++);
}

/* One line each, the same on every handler. */
static void test_errors(ot_ctx *c) {
    ot_buf x = ot_make(c, TERN_F32, 64, 0, NULL), y = ot_make(c, TERN_F32, 64, 0, NULL);
    ot_buf w1 = ot_make(c, TERN_F32, 64 * 32, 0, NULL), w2 = ot_make(c, TERN_F32, 32 * 64, 0, NULL);
    ot_buf h = ot_make(c, TERN_F32, 32, 0, NULL), hb = ot_make(c, TERN_BF16, 32, 0, NULL);
    tern_mlp f = {.m = 1, .C = 64, .H = 32, .act = TERN_EPILOGUE_GELU, .hidden = h.view};
    const tern_ops *o = c->ops;
    CHECK_ERR(o->mlp(c->d, y.view, x.view, w1.view, w2.view, NULL), "mlp: the block's description is NULL");
    tern_mlp bad = f;
    bad.H = 0;
    CHECK_ERR(o->mlp(c->d, y.view, x.view, w1.view, w2.view, &bad), "mlp: H must be positive");
    bad = f, bad.act = TERN_EPILOGUE_ROPE;
    CHECK_ERR(o->mlp(c->d, y.view, x.view, w1.view, w2.view, &bad), "mlp: act must be NONE, GELU or SWIGLU, got 4");
    bad = f, bad.hidden = hb.view;
    CHECK_ERR(o->mlp(c->d, y.view, x.view, w1.view, w2.view, &bad), "mlp: hidden");
    bad = f, bad.hidden = tern_view(x.view, 0, 32);
    CHECK_ERR(o->mlp(c->d, y.view, x.view, w1.view, w2.view, &bad), "mlp: hidden and x overlap");
    CHECK_ERR(o->mlp(c->d, tern_view(x.all, 1, 64), x.view, w1.view, w2.view, &f),
              "mlp: y partly overlaps x (it may only be the same view)");
    CHECK_ERR(o->mlp(c->d, y.view, x.view, tern_view(w1.view, 0, 64 * 31), w2.view, &f),
              "mlp: the first product: matmul: b has 1984 elements, its shape needs 2048");
    bad = f, bad.beta = NAN;
    CHECK_ERR(o->mlp(c->d, y.view, x.view, w1.view, w2.view, &bad), "mlp: the second product: matmul:");
    ot_free(c, &x), ot_free(c, &y), ot_free(c, &w1), ot_free(c, &w2), ot_free(c, &h), ot_free(c, &hb);
}

static void test_all(ot_ctx *c) {
    test_cases(c);
    test_errors(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("mlp");
}
