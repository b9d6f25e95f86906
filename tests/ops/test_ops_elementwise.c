/* add, sum_rows, norm2, gelu, gelu_backward and adamw against double-precision references,
 * over every f32/bf16 combination, odd sizes, views at offsets and in-place use; gelu's
 * backward also against finite differences; adamw's split form against its f32 form, bit for
 * bit; then each operation's validation errors. */
#include "ops_test.h"

/* f32 arithmetic against a double reference: a few ulp per element, so 1e-5 norm-wise
 * leaves room for the 16-way partial sums and reassociation of vectorised loops. */
#define F32_TOL 1e-5

/* GELU and its derivative in double, in the sigmoid form: 0.5 x (1 + tanh u) =
 * x / (1 + exp(-2u)), the same function, but 1 + tanh(u) loses all precision in double once
 * tanh(u) rounds to -1 (x < -6) while exp(-2u) does not. */
static double gelu_ref(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x / (1 + exp(-2 * u));
}

static double gelu_grad_ref(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), e = exp(-2 * u), s = 1 / (1 + e);
    if (isinf(e)) return 0; /* x << 0: s = 0 and the product below would be inf * 0 */
    return s + 2 * x * s * (e * s) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

/* The literal tanh form, to check the two agree where both are accurate. */
static double gelu_tanh_form(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static void test_add(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(21);
    const size_t sizes[] = {1, 1000, 50001};
    for (size_t si = 0; si < 3; si++)
        for (int mask = 0; mask < 8; mask++) {
            size_t n = sizes[si];
            tern_dtype dout = ot_float2[mask & 1], da = ot_float2[(mask >> 1) & 1], db = ot_float2[mask >> 2];
            float *a = ot_random(n, -10, 10), *b = ot_random(n, -10, 10), *want = malloc(n * sizeof(float));
            ot_round(a, n, da);
            ot_round(b, n, db);
            for (size_t i = 0; i < n; i++) want[i] = (float)((double)a[i] + b[i]);
            ot_buf ba = ot_make(c, da, n, 1, a), bb = ot_make(c, db, n, 2, b), bo = ot_make(c, dout, n, 3, NULL);
            CHECK_OK(o->add(c->d, bo.view, ba.view, bb.view));
            OT_EXPECT(c, bo, want, ot_tol(dout, 1e-7), "add n %zu out %s a %s b %s", n,
                      tern_dtype_name(dout), tern_dtype_name(da), tern_dtype_name(db));
            /* in place: out is a, then out is b */
            CHECK_OK(o->add(c->d, ba.view, ba.view, bb.view));
            OT_EXPECT(c, ba, want, ot_tol(da, 1e-7), "add in place (out = a) n %zu", n);
            ot_free(c, &ba);
            ot_free(c, &bb);
            ot_free(c, &bo);
            free(a);
            free(b);
            free(want);
        }
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ot_buf a = ot_make(c, TERN_F32, 8, 0, x), b = ot_make(c, TERN_F32, 7, 0, x);
    ot_buf i = ot_make(c, TERN_I32, 8, 0, NULL), h = ot_make(c, TERN_F16, 8, 0, x);
    CHECK_ERR(o->add(c->d, a.view, a.view, b.view), "add: b has 7 elements, out's length needs 8");
    CHECK_ERR(o->add(c->d, i.view, a.view, a.view), "add: out is i32, needs f32 or bf16");
    CHECK_ERR(o->add(c->d, a.view, h.view, a.view), "add: a is f16, needs f32 or bf16");
    CHECK_ERR(o->add(c->d, a.view, tern_view(b.view, 2, 8), a.view), "add: a is an invalid view");
    CHECK_ERR(o->add(c->d, tern_view(a.all, 1, 8), a.view, a.view), "add: out partly overlaps a");
    CHECK_ERR(o->add(c->d, tern_none(), tern_none(), tern_none()), "add: out is absent");
    ot_free(c, &a);
    ot_free(c, &b);
    ot_free(c, &i);
    ot_free(c, &h);
}

static void test_sum_rows(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(22);
    /* the last two at offset 0: the GPU's wide loads (8 or 4 columns a thread), rows in
     * chunks that end in a part of four */
    const int shapes[][2] = {{1, 1}, {7, 300}, {256, 769}, {3, 2000}, {67, 48}, {301, 1024}};
    const float betas[] = {0, 0.5f, 1};
    for (int s = 0; s < 6; s++)
        for (int mask = 0; mask < 4; mask++)
            for (int bi = 0; bi < 3; bi++) {
                int rows = shapes[s][0], cols = shapes[s][1];
                float beta = betas[bi];
                tern_dtype dout = ot_float2[mask & 1], dx = ot_float2[mask >> 1];
                size_t n = (size_t)rows * cols;
                float *x = ot_random(n, -1, 1), *o0 = ot_random((size_t)cols, -1, 1);
                float *want = malloc((size_t)cols * sizeof(float));
                ot_round(x, n, dx);
                ot_round(o0, (size_t)cols, dout);
                for (int j = 0; j < cols; j++) {
                    double sum = beta != 0 ? (double)beta * o0[j] : 0;
                    for (int r = 0; r < rows; r++) sum += x[(size_t)r * cols + j];
                    want[j] = (float)sum;
                }
                ot_buf bx = ot_make(c, dx, n, s >= 4 ? 0 : 5, x);
                /* beta == 0: out starts as NaN and must not be read */
                ot_buf bo = ot_make(c, dout, (size_t)cols, 2, beta != 0 ? o0 : NULL);
                CHECK_OK(o->sum_rows(c->d, bo.view, bx.view, rows, cols, beta));
                OT_EXPECT(c, bo, want, ot_tol(dout, F32_TOL), "sum_rows %dx%d beta %g out %s x %s", rows,
                          cols, (double)beta, tern_dtype_name(dout), tern_dtype_name(dx));
                ot_free(c, &bx);
                ot_free(c, &bo);
                free(x);
                free(o0);
                free(want);
            }
    ot_buf x = ot_make(c, TERN_F32, 12, 0, NULL), out = ot_make(c, TERN_F32, 4, 0, NULL);
    CHECK_ERR(o->sum_rows(c->d, out.view, x.view, 3, 5, 0), "sum_rows: out has 4 elements, cols needs 5");
    CHECK_ERR(o->sum_rows(c->d, out.view, x.view, 2, 4, 0), "sum_rows: x has 12 elements, rows * cols needs 8");
    CHECK_ERR(o->sum_rows(c->d, out.view, x.view, 0, 4, 0), "sum_rows: rows must be positive");
    CHECK_ERR(o->sum_rows(c->d, out.view, x.view, 3, 4, NAN), "sum_rows: beta must be finite");
    CHECK_ERR(o->sum_rows(c->d, tern_view(x.all, 0, 4), x.view, 3, 4, 0), "sum_rows: out and x overlap");
    ot_free(c, &x);
    ot_free(c, &out);
}

static void test_norm2(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(23);
    const size_t sizes[] = {1, 17, 100003, 1000000};
    for (size_t si = 0; si < 4; si++)
        for (int t = 0; t < 2; t++) {
            size_t n = sizes[si];
            float *x = ot_random(n, -3, 3);
            ot_round(x, n, ot_float2[t]);
            double sum = 0;
            for (size_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
            ot_buf b = ot_make(c, ot_float2[t], n, 3, x);
            double got = -1;
            CHECK_OK(o->norm2(c->d, b.view, &got));
            /* accumulated in double on both sides: only summation order differs */
            CHECKF(fabs(got - sqrt(sum)) <= 1e-10 * sqrt(sum), "%s: norm2 n %zu %s: %.17g vs %.17g",
                   c->handler, n, tern_dtype_name(ot_float2[t]), got, sqrt(sum));
            ot_free(c, &b);
            free(x);
        }
    ot_buf i = ot_make(c, TERN_I32, 4, 0, NULL);
    double got;
    CHECK_ERR(o->norm2(c->d, i.view, &got), "norm2: x is i32, needs f32 or bf16");
    CHECK_ERR(o->norm2(c->d, i.view, NULL), "norm2: out is NULL");
    ot_free(c, &i);
}

/* The handler's gelu forward of x (n f32 values) into y. */
static void gelu_on(ot_ctx *c, const float *x, float *y, size_t n) {
    ot_buf bx = ot_make(c, TERN_F32, n, 0, x), by = ot_make(c, TERN_F32, n, 0, NULL);
    CHECK_OK(c->ops->gelu(c->d, by.view, bx.view));
    ot_read(c, by, y);
    ot_free(c, &bx);
    ot_free(c, &by);
}

static void test_gelu(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(24);
    const size_t sizes[] = {1, 33, 10007, 300000};
    for (size_t si = 0; si < 4; si++)
        for (int mask = 0; mask < 8; mask++) {
            size_t n = sizes[si];
            tern_dtype dout = ot_float2[mask & 1], dx = ot_float2[(mask >> 1) & 1], dg = ot_float2[mask >> 2];
            float *x = ot_random(n, -6, 6), *g = ot_random(n, -1, 1);
            if (n > 4) { /* the tails: exp overflow and underflow paths */
                x[0] = -100;
                x[1] = 100;
                x[2] = 0;
                x[3] = -12;
            }
            ot_round(x, n, dx);
            ot_round(g, n, dg);
            float *want = malloc(n * sizeof(float)), *want_d = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) {
                want[i] = (float)gelu_ref(x[i]);
                want_d[i] = (float)(g[i] * gelu_grad_ref(x[i]));
            }
            ot_buf bx = ot_make(c, dx, n, 1, x), bo = ot_make(c, dout, n, 2, NULL);
            CHECK_OK(o->gelu(c->d, bo.view, bx.view));
            OT_EXPECT(c, bo, want, ot_tol(dout, F32_TOL), "gelu n %zu out %s x %s", n,
                      tern_dtype_name(dout), tern_dtype_name(dx));
            if (dout == TERN_F32) {
                /* elementwise too, tails included: relative where |gelu| >= 0.1, absolute
                 * 1e-6 below (gelu(x) -> 0 for x << 0 is ill-conditioned in relative terms,
                 * and a literal f32 evaluation of 1 + tanh(u) cancels there) */
                float *got = malloc(n * sizeof(float));
                ot_read(c, bo, got);
                double worst = check_max_rel(got, want, n, 0.1);
                CHECKF(worst <= 1e-5, "%s: gelu elementwise error %.3g", c->handler, worst);
                free(got);
            }
            ot_buf bg = ot_make(c, dg, n, 3, g), bd = ot_make(c, dout, n, 0, NULL);
            CHECK_OK(o->gelu_backward(c->d, bd.view, bg.view, bx.view));
            OT_EXPECT(c, bd, want_d, ot_tol(dout, F32_TOL), "gelu_backward n %zu dx %s dout %s x %s", n,
                      tern_dtype_name(dout), tern_dtype_name(dg), tern_dtype_name(dx));
            CHECK_OK(o->gelu_backward(c->d, bg.view, bg.view, bx.view)); /* dx may be dout */
            OT_EXPECT(c, bg, want_d, ot_tol(dg, F32_TOL), "gelu_backward in place n %zu", n);
            CHECK_OK(o->gelu(c->d, bx.view, bx.view)); /* out may be x */
            OT_EXPECT(c, bx, want, ot_tol(dx, F32_TOL), "gelu in place n %zu", n);
            ot_free(c, &bx);
            ot_free(c, &bo);
            ot_free(c, &bg);
            ot_free(c, &bd);
            free(x);
            free(g);
            free(want);
            free(want_d);
        }
    for (double x = -5; x <= 5; x += 0.01)
        CHECKF(fabs(gelu_tanh_form(x) - gelu_ref(x)) <= 1e-12, "gelu reference forms differ at %g", x);
    /* the reference derivative is the derivative of the reference forward (double, central
     * differences with h = 1e-5: truncation ~1e-10, rounding ~1e-11) */
    double worst = 0;
    for (double x = -8; x <= 8; x += 0.037) {
        double fd = (gelu_ref(x + 1e-5) - gelu_ref(x - 1e-5)) / 2e-5;
        worst = fmax(worst, fabs(fd - gelu_grad_ref(x)));
    }
    CHECKF(worst < 1e-8, "gelu_grad_ref vs finite differences: %.3g", worst);
    /* the handler's backward against finite differences of its own forward, along a random
     * direction: L = sum w gelu(x); f32 forward noise (~1e-7 |L|) over 2h = 2e-2 and the
     * O(h^2) truncation keep the difference well under 1e-3 relative */
    size_t n = 4000;
    float *x = ot_random(n, -4, 4), *w = ot_random(n, -1, 1), *dir = ot_random(n, -1, 1);
    float *xp = malloc(n * sizeof(float)), *xm = malloc(n * sizeof(float)), *yp = malloc(n * sizeof(float)),
          *ym = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    const double h = 1e-2;
    for (size_t i = 0; i < n; i++) {
        xp[i] = (float)(x[i] + h * dir[i]);
        xm[i] = (float)(x[i] - h * dir[i]);
    }
    gelu_on(c, xp, yp, n);
    gelu_on(c, xm, ym, n);
    double lp = 0, lm = 0, fd, an = 0;
    for (size_t i = 0; i < n; i++) {
        lp += (double)w[i] * yp[i];
        lm += (double)w[i] * ym[i];
    }
    fd = (lp - lm) / (2 * h);
    ot_buf bx = ot_make(c, TERN_F32, n, 0, x), bw = ot_make(c, TERN_F32, n, 0, w), bd = ot_make(c, TERN_F32, n, 0, NULL);
    CHECK_OK(o->gelu_backward(c->d, bd.view, bw.view, bx.view));
    ot_read(c, bd, dx);
    for (size_t i = 0; i < n; i++) an += (double)dx[i] * dir[i];
    CHECKF(fabs(fd - an) <= 1e-3 * fabs(an), "%s: gelu_backward vs finite differences: %.9g vs %.9g",
           c->handler, an, fd);
    ot_free(c, &bx);
    ot_free(c, &bw);
    ot_free(c, &bd);
    free(x), free(w), free(dir), free(xp), free(xm), free(yp), free(ym), free(dx);
    /* errors */
    ot_buf a = ot_make(c, TERN_F32, 8, 0, NULL), b = ot_make(c, TERN_F32, 7, 0, NULL);
    CHECK_ERR(o->gelu(c->d, a.view, b.view), "gelu: x has 7 elements, out's length needs 8");
    CHECK_ERR(o->gelu(c->d, tern_view(a.all, 0, 8), tern_view(a.all, 1, 8)), "gelu: out partly overlaps x");
    CHECK_ERR(o->gelu_backward(c->d, a.view, a.view, a.view), "gelu_backward: dx and x overlap");
    CHECK_ERR(o->gelu_backward(c->d, a.view, b.view, a.view), "gelu_backward: dout has 7 elements");
    ot_free(c, &a);
    ot_free(c, &b);
}

static void test_adamw(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(25);
    const int steps[] = {1, 2, 10};
    const tern_dtype shadows[3] = {TERN_F32, TERN_F32, TERN_BF16}; /* [0]: none */
    for (int si = 0; si < 3; si++)
        for (int gi = 0; gi < 2; gi++)
            for (int sh = 0; sh < 3; sh++) {
                size_t n = si == 2 ? 100003 : 1031;
                tern_adamw hp = {1e-2f, 0.9f, 0.95f, 1e-6f, si == 1 ? 0.0f : 0.1f, steps[si], si == 0 ? 1.0f : 0.5f};
                float *p = ot_random(n, -1, 1), *g = ot_random(n, -2, 2), *m = ot_random(n, -0.1f, 0.1f);
                float *v = ot_random(n, 0, 0.1f);
                ot_round(g, n, ot_float2[gi]);
                float *wp = malloc(n * sizeof(float)), *wm = malloc(n * sizeof(float)), *wv = malloc(n * sizeof(float));
                double bc1 = 1 - pow(hp.beta1, hp.step), bc2 = 1 - pow(hp.beta2, hp.step);
                for (size_t i = 0; i < n; i++) {
                    double gg = (double)g[i] * hp.grad_scale;
                    double mm = hp.beta1 * (double)m[i] + (1 - (double)hp.beta1) * gg;
                    double vv = hp.beta2 * (double)v[i] + (1 - (double)hp.beta2) * gg * gg;
                    wm[i] = (float)mm;
                    wv[i] = (float)vv;
                    wp[i] = (float)(p[i] - hp.lr * (hp.weight_decay * (double)p[i] +
                                                    (mm / bc1) / (sqrt(vv / bc2) + hp.eps)));
                }
                ot_buf bp = ot_make(c, TERN_F32, n, 1, p), bg = ot_make(c, ot_float2[gi], n, 2, g);
                ot_buf bm = ot_make(c, TERN_F32, n, 3, m), bv = ot_make(c, TERN_F32, n, 4, v);
                ot_buf bs = ot_make(c, shadows[sh], n, 5, NULL);
                CHECK_OK(o->adamw(c->d, bp.view, sh ? bs.view : tern_none(), bg.view, bm.view, bv.view, &hp));
                OT_EXPECT(c, bp, wp, F32_TOL, "adamw param step %d grad %s", hp.step, tern_dtype_name(ot_float2[gi]));
                OT_EXPECT(c, bm, wm, F32_TOL, "adamw m step %d", hp.step);
                OT_EXPECT(c, bv, wv, F32_TOL, "adamw v step %d", hp.step);
                if (sh) OT_EXPECT(c, bs, wp, ot_tol(shadows[sh], F32_TOL), "adamw shadow %s", tern_dtype_name(shadows[sh]));
                ot_free(c, &bp), ot_free(c, &bg), ot_free(c, &bm), ot_free(c, &bv), ot_free(c, &bs);
                free(p), free(g), free(m), free(v), free(wp), free(wm), free(wv);
            }
    ot_buf p = ot_make(c, TERN_F32, 8, 0, NULL), p16 = ot_make(c, TERN_BF16, 8, 0, NULL), s = ot_make(c, TERN_F32, 7, 0, NULL);
    ot_buf g = ot_make(c, TERN_F32, 8, 0, NULL), m = ot_make(c, TERN_F32, 8, 0, NULL), v = ot_make(c, TERN_F32, 8, 0, NULL);
    tern_adamw hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1};
    CHECK_OK(o->adamw(c->d, p.view, tern_none(), g.view, m.view, v.view, &hp));
    tern_adamw bad = hp;
    bad.step = 0;
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), g.view, m.view, v.view, &bad), "adamw: step must be >= 1");
    bad = hp;
    bad.beta1 = 1;
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), g.view, m.view, v.view, &bad), "adamw: beta1 and beta2 must lie in [0, 1)");
    bad = hp;
    bad.lr = NAN;
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), g.view, m.view, v.view, &bad), "adamw: lr, eps and weight_decay");
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), g.view, m.view, v.view, NULL), "adamw: h is NULL");
    CHECK_ERR(o->adamw(c->d, p16.view, tern_none(), g.view, m.view, v.view, &hp), "adamw: param is bf16, needs f32 or u16");
    CHECK_ERR(o->adamw(c->d, p.view, s.view, g.view, m.view, v.view, &hp), "adamw: shadow has 7 elements");
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), g.view, tern_view(m.view, 0, 7), v.view, &hp), "adamw: m has 7 elements");
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), g.view, p.view, v.view, &hp), "adamw: param and m overlap");
    CHECK_ERR(o->adamw(c->d, p.view, tern_none(), m.view, m.view, v.view, &hp), "adamw: m and grad overlap");
    ot_free(c, &p), ot_free(c, &p16), ot_free(c, &s), ot_free(c, &g), ot_free(c, &m), ot_free(c, &v);
}

static float from_bits(uint32_t b) {
    float x;
    memcpy(&x, &b, 4);
    return x;
}

/* Raw 16-bit elements to and from a view (ot_make converts from f32 values). */
static void put_u16(ot_ctx *c, ot_buf b, const uint16_t *x) { CHECK_OK(c->ops->upload(c->d, b.view, x)); }
static void get_bits(ot_ctx *c, ot_buf b, void *out) { CHECK_OK(c->ops->download(c->d, out, b.view)); }

/* The split form (param u16 low halves, shadow bf16 high halves of an f32: tern_f32_split)
 * against the f32 form, step after step with the same gradients: the rebuilt f32, m and v
 * equal the f32 form's bit for bit, and the shadow is the high half of the f32 form's
 * param (not its round to nearest even). */
static void test_adamw_split(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(26);
    const size_t sizes[] = {1031, 100003};
    for (size_t si = 0; si < 2; si++)
        for (int gi = 0; gi < 2; gi++) {
            size_t n = sizes[si];
            float *p = ot_random(n, -1, 1), *m = ot_random(n, -0.1f, 0.1f), *v = ot_random(n, 0, 0.1f);
            /* the encoding's edges: zeros, a tie (low bits 0x8000, hi rounds away from zero),
             * the largest low half, a subnormal, a huge value */
            const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0xbf808000u, 0x3f80ffffu,
                                      0x00000001u, 0x7f000000u};
            for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) p[e * 7] = from_bits(edges[e]);
            uint16_t *hi = malloc(n * 2), *lo = malloc(n * 2);
            for (size_t i = 0; i < n; i++) tern_f32_split(p[i], &hi[i], &lo[i]);
            size_t k = si ? 0 : 1; /* views at odd offsets (element by element), or at 0 (vector accesses) */
            ot_buf bp = ot_make(c, TERN_F32, n, k, p), bm = ot_make(c, TERN_F32, n, 3 * k, m), bv = ot_make(c, TERN_F32, n, 4 * k, v);
            ot_buf blo = ot_make(c, TERN_U16, n, 5 * k, NULL), bhi = ot_make(c, TERN_BF16, n, 6 * k, NULL);
            ot_buf bm2 = ot_make(c, TERN_F32, n, 7 * k, m), bv2 = ot_make(c, TERN_F32, n, 2 * k, v);
            put_u16(c, blo, lo);
            put_u16(c, bhi, hi);
            for (int step = 1; step <= 4; step++) {
                tern_adamw hp = {1e-2f, 0.9f, 0.95f, 1e-6f, 0.1f, step, step == 2 ? 1.0f : 0.5f};
                float *g = ot_random(n, -2, 2);
                ot_buf bg = ot_make(c, ot_float2[gi], n, 8 * k, g);
                CHECK_OK(o->adamw(c->d, bp.view, tern_none(), bg.view, bm.view, bv.view, &hp));
                CHECK_OK(o->adamw(c->d, blo.view, bhi.view, bg.view, bm2.view, bv2.view, &hp));
                ot_free(c, &bg);
                free(g);
            }
            float *want = malloc(n * 4), *m1 = malloc(n * 4), *v1 = malloc(n * 4), *m2 = malloc(n * 4), *v2 = malloc(n * 4);
            get_bits(c, bp, want), get_bits(c, bm, m1), get_bits(c, bv, v1), get_bits(c, bm2, m2), get_bits(c, bv2, v2);
            get_bits(c, blo, lo), get_bits(c, bhi, hi);
            size_t bad_p = 0, bad_hi = 0, first = n;
            for (size_t i = 0; i < n; i++) {
                float got = tern_f32_join(hi[i], lo[i]);
                uint16_t want_hi, want_lo;
                tern_f32_split(want[i], &want_hi, &want_lo);
                if (memcmp(&got, &want[i], 4)) bad_p++, first = first < i ? first : i;
                if (hi[i] != want_hi) bad_hi++;
            }
            CHECKF(bad_p == 0, "adamw split n %zu grad %s: %zu rebuilt params differ from the f32 form's (first %zu)", n,
                   tern_dtype_name(ot_float2[gi]), bad_p, first);
            CHECKF(bad_hi == 0, "adamw split n %zu: %zu shadows are not the high half", n, bad_hi);
            CHECKF(!memcmp(m1, m2, n * 4) && !memcmp(v1, v2, n * 4), "adamw split n %zu: m or v differ from the f32 form's", n);
            CHECKF(ot_guard_ok(c, blo) && ot_guard_ok(c, bhi), "adamw split n %zu: the guards changed", n);
            ot_free(c, &bp), ot_free(c, &bm), ot_free(c, &bv), ot_free(c, &blo), ot_free(c, &bhi);
            ot_free(c, &bm2), ot_free(c, &bv2);
            free(p), free(m), free(v), free(hi), free(lo), free(want), free(m1), free(v1), free(m2), free(v2);
        }
    /* errors */
    ot_buf lo = ot_make(c, TERN_U16, 8, 0, NULL), hi = ot_make(c, TERN_BF16, 8, 0, NULL), f = ot_make(c, TERN_F32, 8, 0, NULL);
    ot_buf g = ot_make(c, TERN_F32, 8, 0, NULL), m = ot_make(c, TERN_F32, 8, 0, NULL), v = ot_make(c, TERN_F32, 8, 0, NULL);
    tern_adamw hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1, 1};
    CHECK_ERR(o->adamw(c->d, lo.view, tern_none(), g.view, m.view, v.view, &hp),
              "adamw: a u16 param (the low halves of a split f32) needs a bf16 shadow (the high halves), not none");
    CHECK_ERR(o->adamw(c->d, lo.view, f.view, g.view, m.view, v.view, &hp), "needs a bf16 shadow (the high halves), not f32");
    CHECK_ERR(o->adamw(c->d, lo.view, tern_view(hi.view, 0, 7), g.view, m.view, v.view, &hp), "adamw: shadow has 7 elements");
    CHECK_ERR(o->adamw(c->d, lo.view, lo.view, g.view, m.view, v.view, &hp), "adamw: shadow is u16");
    CHECK_ERR(o->adamw(c->d, lo.view, hi.view, g.view, m.view, lo.view, &hp), "adamw: v is u16, needs f32");
    ot_free(c, &lo), ot_free(c, &hi), ot_free(c, &f), ot_free(c, &g), ot_free(c, &m), ot_free(c, &v);
}

static void test_all(ot_ctx *c) {
    test_add(c);
    test_sum_rows(c);
    test_norm2(c);
    test_gelu(c);
    test_adamw(c);
    test_adamw_split(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_elementwise");
}
