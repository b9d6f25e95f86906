/* The Llama family's operations, written once: RMSNorm, the rotary embedding and SwiGLU,
 * forward and backward, as DSL kernel families on the host interpreter and as the cpu
 * handler's bodies, against float64 references computed here; the references' gradients
 * against central finite differences of their forward passes; f32 and bf16; odd sizes.
 *
 * Tolerances (lt_error: elementwise relative, values below 1% of the tensor's largest
 * measured against that 1%): f32 1e-5 for RMSNorm (a sum of squares over C <= 576 terms in
 * f32, then a few roundings: at most 3e-6 seen), 4e-6 for SwiGLU (a few f32 roundings and an
 * exp of ~1 ulp: 5e-7 seen); the rotary embedding's error is measured against the tensor's
 * largest value instead (a rotation's rounding scales with its pair's norm, not with a
 * result that cancels), f32 1e-6; bf16 outputs 8e-3 (one rounding to bf16, at most 2^-8
 * relative, plus the f32 error: 3.9e-3 seen). */
#include "llama_ops_test.h"

#define F32_NORM_TOL 1e-5
#define F32_EW_TOL 4e-6
#define F32_ROPE_TOL 1e-6
#define BF16_TOL 8e-3

static double tol(tern_dtype dt, double f32_tol) { return dt == TERN_BF16 ? BF16_TOL : f32_tol; }

/* ==== RMSNorm ==== */

/* float64: rrms[r], y = x rrms w */
static void ref_rmsnorm(const float *x, const float *w, int rows, int C, float eps, double *y, double *rr) {
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int j = 0; j < C; j++) ss += (double)x[r * C + j] * x[r * C + j];
        double rs = 1 / sqrt(ss / C + eps);
        if (rr) rr[r] = rs;
        for (int j = 0; j < C; j++) y[r * C + j] = x[r * C + j] * rs * w[j];
    }
}

/* float64: dx = dx0 + rrms (w g - xhat mean(w g xhat)), dw = beta dw0 + sum g xhat, with the
 * given rrms (the forward's saved f32 values) */
static void ref_rmsnorm_backward(const float *dx0, const float *dw0, const float *g, const float *x,
                                 const float *w, const float *rrms, int rows, int C, float beta,
                                 double *dx, double *dw) {
    for (int j = 0; j < C; j++) dw[j] = beta == 0 ? 0 : (double)beta * dw0[j];
    for (int r = 0; r < rows; r++) {
        double rs = rrms[r], m = 0;
        for (int j = 0; j < C; j++) m += (double)w[j] * g[r * C + j] * x[r * C + j] * rs;
        m /= C;
        for (int j = 0; j < C; j++) {
            double xhat = x[r * C + j] * rs;
            dx[r * C + j] = dx0[r * C + j] + rs * ((double)w[j] * g[r * C + j] - xhat * m);
            dw[j] += (double)g[r * C + j] * xhat;
        }
    }
}

/* The reference gradient against central differences of L = sum g y(x, w), in float64. */
static void test_rmsnorm_reference_gradient(void) {
    enum { R = 2, C = 7 };
    float *x = lt_random(R * C, 1.0, 0.2, TERN_F32), *w = lt_random(C, 0.5, 1.0, TERN_F32);
    float *g = lt_random(R * C, 1.0, 0, TERN_F32), zero[R * C] = {0};
    double y[R * C], rr[R], dx[R * C], dw[C];
    float rrf[R];
    ref_rmsnorm(x, w, R, C, 1e-5f, y, rr);
    for (int r = 0; r < R; r++) rrf[r] = (float)rr[r];
    /* exact rrms for the difference check: pass the float64 value through a float copy only
     * for the API; the difference check below uses the float64 forward */
    ref_rmsnorm_backward(zero, zero, g, x, w, rrf, R, C, 0, dx, dw);
    double worst = 0;
    for (int which = 0; which < 2; which++) {
        int n = which ? C : R * C;
        for (int i = 0; i < n; i++) {
            /* perturb in double: a float64 forward over the perturbed input */
            double h = 1e-4, L[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                double acc = 0;
                for (int r = 0; r < R; r++) {
                    double ss = 0, xv[C];
                    for (int j = 0; j < C; j++) {
                        xv[j] = x[r * C + j];
                        if (!which && r * C + j == i) xv[j] += sgn ? h : -h;
                        ss += xv[j] * xv[j];
                    }
                    double rs = 1 / sqrt(ss / C + 1e-5f);
                    for (int j = 0; j < C; j++) {
                        double wj = w[j] + (which && j == i ? (sgn ? h : -h) : 0);
                        acc += g[r * C + j] * xv[j] * rs * wj;
                    }
                }
                L[sgn] = acc;
            }
            double fd = (L[1] - L[0]) / (2 * h), an = which ? dw[i] : dx[i];
            worst = fmax(worst, fabs(fd - an) / fmax(fabs(an), 1e-3));
        }
    }
    /* rrms rounded to f32 in the analytic gradient (~6e-8) and the O(h^2) difference error */
    CHECKF(worst < 1e-6, "rmsnorm reference gradient vs finite differences: %.3g", worst);
    free(x), free(w), free(g);
}

static int rms_width(int C) {
    for (int W = 4; W >= 1; W /= 2)
        if (C % (32 * W) == 0 && C / 32 <= GK_LN_MAX_PER_LANE) return W;
    return 0;
}

static void test_rmsnorm_case(tern_rt *rt, lt_cpu *cpu, int rows, int C, tern_dtype dt, int groups_bwd) {
    size_t n = (size_t)rows * C;
    float eps = 1e-5f, beta = 0.5f;
    float *x = lt_random(n, 1.5, 0.1, dt), *w = lt_random((size_t)C, 0.5, 1.0, dt);
    float *g = lt_random(n, 1.0, 0, dt), *dx0 = lt_random(n, 0.3, 0, dt), *dw0 = lt_random((size_t)C, 1, 0, dt);
    double *y = malloc(n * sizeof *y), *rr = malloc((size_t)rows * sizeof *rr);
    double *dx = malloc(n * sizeof *dx), *dw = malloc((size_t)C * sizeof *dw);
    ref_rmsnorm(x, w, rows, C, eps, y, rr);
    float *rrf = malloc((size_t)rows * sizeof *rrf);
    for (int r = 0; r < rows; r++) rrf[r] = (float)rr[r];
    ref_rmsnorm_backward(dx0, dw0, g, x, w, rrf, rows, C, beta, dx, dw);
    int W = rms_width(C);
    const char *path = W ? "registers" : "generic";

    /* the DSL kernels on the host interpreter */
    gk_spec fs = {0};
    fs.t[0] = fs.t[1] = fs.t[2] = (uint8_t)lt_ttype(dt);
    fs.n[0] = W ? W : 1, fs.n[1] = W ? C : 0, fs.n[2] = 1;
    tern_kernel *kf = lt_kernel(GK_RMSNORM, &fs);
    gk_spec bs = {0};
    bs.t[0] = bs.t[1] = bs.t[2] = bs.t[3] = (uint8_t)lt_ttype(dt);
    bs.n[0] = fs.n[0], bs.n[1] = fs.n[1];
    tern_kernel *kb = lt_kernel(GK_RMSNORM_BACKWARD, &bs);
    gk_spec ps = {0};
    ps.t[0] = (uint8_t)lt_ttype(dt), ps.n[0] = 1;
    tern_kernel *kp = lt_kernel(GK_PARTIAL_ADD, &ps);
    if (kf && kb && kp) {
        tern_dbuf dout_ = lt_dev(rt, dt, NULL, n), dx_ = lt_dev(rt, TERN_F32, NULL, (size_t)rows);
        tern_dbuf dxin = lt_dev(rt, dt, x, n), dw_ = lt_dev(rt, dt, w, (size_t)C);
        uint32_t grid = (uint32_t)((rows + GK_LN_ROWS - 1) / GK_LN_ROWS);
        uint32_t group = rows < GK_LN_ROWS ? 32u * (uint32_t)rows : 32u * GK_LN_ROWS;
        tern_arg a[] = {tern_arg_dev(dout_), tern_arg_dev(dxin), tern_arg_dev(dw_), tern_arg_dev(dx_),
                        tern_arg_i32(rows), tern_arg_i32(C), tern_arg_f32(eps)};
        CHECK_OK(tern_launch(rt, kf, tern_dims1(grid), tern_dims1(group), a, 7));
        float *got = lt_dget(rt, dout_), *got_r = lt_dget(rt, dx_);
        double e = lt_error(got, y, n, 0.01), er = lt_error(got_r, rr, (size_t)rows, 0);
        CHECKF(e <= tol(dt, F32_NORM_TOL), "dsl rmsnorm %dx%d %s %s: out error %.3g", rows, C,
               tern_dtype_name(dt), path, e);
        CHECKF(er <= 2e-6, "dsl rmsnorm %dx%d: rrms error %.3g", rows, C, er);
        free(got), free(got_r);
        /* backward: fewer SIMD groups than rows, so groups take several rows */
        uint32_t G = (uint32_t)groups_bwd;
        int S = (int)G * GK_LN_ROWS, iters = (rows + S - 1) / S;
        tern_dbuf ddx = lt_dev(rt, dt, dx0, n), dgin = lt_dev(rt, dt, g, n), rrd = lt_dev(rt, TERN_F32, rrf, (size_t)rows);
        tern_dbuf part = lt_dev(rt, TERN_F32, NULL, (size_t)S * C), ddw = lt_dev(rt, dt, dw0, (size_t)C);
        tern_arg b[] = {tern_arg_dev(ddx), tern_arg_dev(part), tern_arg_dev(dgin), tern_arg_dev(dxin),
                        tern_arg_dev(dw_), tern_arg_dev(rrd), tern_arg_i32(rows), tern_arg_i32(C),
                        tern_arg_i32(S), tern_arg_i32(iters)};
        CHECK_OK(tern_launch(rt, kb, tern_dims1(G), tern_dims1(32 * GK_LN_ROWS), b, 10));
        tern_arg p[] = {tern_arg_dev(ddw), tern_arg_dev(part), tern_arg_i32(S), tern_arg_i32(C),
                        tern_arg_i32(C), tern_arg_i32(0), tern_arg_f32(beta)};
        CHECK_OK(tern_launch(rt, kp, tern_dims1((uint32_t)(C + 31) / 32), tern_dims1(GK_PA_GROUP), p, 7));
        float *gdx = lt_dget(rt, ddx), *gdw = lt_dget(rt, ddw);
        double e1 = lt_error(gdx, dx, n, 0.01), e2 = lt_error(gdw, dw, (size_t)C, 0.01);
        CHECKF(e1 <= tol(dt, F32_NORM_TOL) && e2 <= tol(dt, F32_NORM_TOL),
               "dsl rmsnorm_backward %dx%d %s %s: dx %.3g, dw %.3g", rows, C, tern_dtype_name(dt), path, e1, e2);
        free(gdx), free(gdw);
        tern_dbuf all[] = {dout_, dx_, dxin, dw_, ddx, dgin, rrd, part, ddw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tern_rt_free(rt, &all[i]);
    }
    tern_kernel_free(kf), tern_kernel_free(kb), tern_kernel_free(kp);

    /* the cpu bodies */
    tern_buf out = lt_buf(cpu, dt, NULL, n), rrms = lt_buf(cpu, TERN_F32, NULL, (size_t)rows);
    tern_buf xb = lt_buf(cpu, dt, x, n), wb = lt_buf(cpu, dt, w, (size_t)C);
    CHECK_OK(tern_validate_rmsnorm(NULL, out, rrms, xb, wb, rows, C, eps));
    CHECK_OK(cpu->ops->rmsnorm(cpu->d, out, rrms, xb, wb, rows, C, eps));
    float *got = lt_get(cpu, out), *got_r = lt_get(cpu, rrms);
    double e = lt_error(got, y, n, 0.01), er = lt_error(got_r, rr, (size_t)rows, 0);
    CHECKF(e <= tol(dt, F32_NORM_TOL) && er <= 2e-6, "cpu rmsnorm %dx%d %s: out %.3g, rrms %.3g", rows, C,
           tern_dtype_name(dt), e, er);
    free(got), free(got_r);
    tern_buf dxb = lt_buf(cpu, dt, dx0, n), dwb = lt_buf(cpu, dt, dw0, (size_t)C), gb = lt_buf(cpu, dt, g, n);
    tern_buf rb = lt_buf(cpu, TERN_F32, rrf, (size_t)rows);
    CHECK_OK(tern_validate_rmsnorm_backward(NULL, dxb, dwb, gb, xb, wb, rb, rows, C, beta));
    CHECK_OK(cpu->ops->rmsnorm_backward(cpu->d, dxb, dwb, gb, xb, wb, rb, rows, C, beta));
    float *gdx = lt_get(cpu, dxb), *gdw = lt_get(cpu, dwb);
    double e1 = lt_error(gdx, dx, n, 0.01), e2 = lt_error(gdw, dw, (size_t)C, 0.01);
    CHECKF(e1 <= tol(dt, F32_NORM_TOL) && e2 <= tol(dt, F32_NORM_TOL), "cpu rmsnorm_backward %dx%d %s: dx %.3g, dw %.3g",
           rows, C, tern_dtype_name(dt), e1, e2);
    /* grad_beta 0 writes dw without reading it (NaN there must not leak) */
    tern_buf dwnan = lt_buf(cpu, dt, NULL, (size_t)C);
    CHECK_OK(cpu->ops->rmsnorm_backward(cpu->d, dxb, dwnan, gb, xb, wb, rb, rows, C, 0.0f));
    float *gnan = lt_get(cpu, dwnan);
    int finite = 1;
    for (int j = 0; j < C; j++) finite &= isfinite(gnan[j]) != 0;
    CHECKF(finite, "cpu rmsnorm_backward grad_beta 0 read dw");
    free(gnan), free(gdx), free(gdw);
    tern_buf bufs[] = {out, rrms, xb, wb, dxb, dwb, gb, rb, dwnan};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lt_free(cpu, &bufs[i]);
    free(x), free(w), free(g), free(dx0), free(dw0), free(y), free(rr), free(dx), free(dw), free(rrf);
}

/* ==== rotary embedding ==== */

/* float64 rotation of the slice, from f32 angles float(pos) * inv_freq (as transformers and
 * the operations compute them); sign -1: the backward. Elements outside the slice are copied
 * from `base`. */
static void ref_rope(const float *x, const float *base, size_t len, const int32_t *pos, const float *f, int rows,
                     int heads, int hd, int stride, double sign, double *out) {
    for (size_t i = 0; i < len; i++) out[i] = base[i];
    int half = hd / 2;
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++)
            for (int j = 0; j < half; j++) {
                float a = (float)pos[r] * f[j];
                double c = cos((double)a), s = sign * sin((double)a);
                size_t lo = (size_t)r * stride + (size_t)h * hd + j, hi = lo + half;
                out[lo] = x[lo] * c - x[hi] * s;
                out[hi] = x[hi] * c + x[lo] * s;
            }
}

static int rope_width(int hd, int stride) {
    for (int W = 4; W >= 1; W /= 2)
        if ((hd / 2) % W == 0 && stride % W == 0) return W;
    return 1;
}

/* qkv-like rows of (q_heads + 2 kv) heads: the rotation covers the first q_heads + kv. */
static void test_rope_case(tern_rt *rt, lt_cpu *cpu, int rows, int qh, int kvh, int hd, tern_dtype dt) {
    int heads = qh + kvh, stride = (qh + 2 * kvh) * hd;
    size_t len = (size_t)rows * stride;
    float *x = lt_random(len, 1.0, 0, dt), *nan = malloc(len * sizeof *nan);
    for (size_t i = 0; i < len; i++) nan[i] = NAN;
    int32_t *pos = malloc((size_t)rows * sizeof *pos);
    for (int r = 0; r < rows; r++) pos[r] = r % 7 == 3 ? 5000 + r : (r * 37) % 300;
    /* inv_freq of a llama3-scaled config with this head size, rounded to f32 */
    float f[512];
    for (int j = 0; j < hd / 2; j++) f[j] = (float)pow(10000.0, -2.0 * j / hd);
    double *want = malloc(len * sizeof *want), *want_b = malloc(len * sizeof *want_b);
    ref_rope(x, nan, len, pos, f, rows, heads, hd, stride, 1, want);
    ref_rope(x, nan, len, pos, f, rows, heads, hd, stride, -1, want_b);
    /* outside the slice the output must be untouched: NaN stays NaN; compare inside only */
    float *mask = malloc(len * sizeof *mask);
    int W = rope_width(hd, stride);
    for (int back = 0; back < 2; back++) {
        const double *ref = back ? want_b : want;
        /* DSL, out of place into a NaN-filled buffer */
        gk_spec s = {0};
        s.t[0] = s.t[1] = (uint8_t)lt_ttype(dt);
        s.n[0] = hd, s.n[1] = W, s.n[2] = back;
        tern_kernel *k = lt_kernel(GK_ROPE, &s);
        if (k) {
            tern_dbuf o = lt_dev(rt, dt, NULL, len), xi = lt_dev(rt, dt, x, len);
            tern_dbuf pb = lt_dev_i32(rt, pos, (size_t)rows), fb = lt_dev(rt, TERN_F32, f, (size_t)hd / 2);
            int pairs = rows * heads * hd / 2;
            uint32_t threads = (uint32_t)(pairs / W);
            tern_arg a[] = {tern_arg_dev(o), tern_arg_dev(xi), tern_arg_dev(pb), tern_arg_dev(fb),
                            tern_arg_i32(pairs), tern_arg_i32(heads), tern_arg_i32(stride)};
            CHECK_OK(tern_launch(rt, k, tern_dims1((threads + GK_EW_GROUP - 1) / GK_EW_GROUP), tern_dims1(GK_EW_GROUP), a, 7));
            float *got = lt_dget(rt, o);
            int untouched = 1;
            for (size_t i = 0; i < len; i++) {
                bool outside = isnan(ref[i]);
                untouched &= !outside || isnan(got[i]);
                mask[i] = outside ? 0.0f : got[i];
            }
            double *ref0 = malloc(len * sizeof *ref0);
            for (size_t i = 0; i < len; i++) ref0[i] = isnan(ref[i]) ? 0 : ref[i];
            double e = lt_error(mask, ref0, len, 1.0);
            CHECKF(untouched, "dsl rope wrote outside its slice");
            CHECKF(e <= tol(dt, F32_ROPE_TOL), "dsl rope%s rows %d heads %d hd %d W %d %s: error %.3g", back ? "_backward" : "",
                   rows, heads, hd, W, tern_dtype_name(dt), e);
            /* in place: the same view as input and output */
            tern_arg ip[] = {tern_arg_dev(xi), tern_arg_dev(xi), tern_arg_dev(pb), tern_arg_dev(fb),
                             tern_arg_i32(pairs), tern_arg_i32(heads), tern_arg_i32(stride)};
            CHECK_OK(tern_launch(rt, k, tern_dims1((threads + GK_EW_GROUP - 1) / GK_EW_GROUP), tern_dims1(GK_EW_GROUP), ip, 7));
            float *inplace = lt_dget(rt, xi);
            for (size_t i = 0; i < len; i++) ref0[i] = isnan(ref[i]) ? x[i] : ref[i];
            double e_in = lt_error(inplace, ref0, len, 1.0);
            CHECKF(e_in <= tol(dt, F32_ROPE_TOL), "dsl rope in place: error %.3g", e_in);
            free(got), free(inplace), free(ref0);
            tern_dbuf all[] = {o, xi, pb, fb};
            for (int i = 0; i < 4; i++) tern_rt_free(rt, &all[i]);
        }
        tern_kernel_free(k);

        /* cpu, out of place, then in place */
        tern_buf o = lt_buf(cpu, dt, NULL, len), xb = lt_buf(cpu, dt, x, len);
        tern_buf pb = lt_buf_i32(cpu, pos, (size_t)rows), fb = lt_buf(cpu, TERN_F32, f, (size_t)hd / 2);
        if (back) {
            CHECK_OK(tern_validate_rope_backward(NULL, o, xb, pb, fb, rows, heads, hd, stride));
            CHECK_OK(cpu->ops->rope_backward(cpu->d, o, xb, pb, fb, rows, heads, hd, stride));
        } else {
            CHECK_OK(tern_validate_rope(NULL, o, xb, pb, fb, rows, heads, hd, stride));
            CHECK_OK(cpu->ops->rope(cpu->d, o, xb, pb, fb, rows, heads, hd, stride));
        }
        float *got = lt_get(cpu, o);
        double *ref0 = malloc(len * sizeof *ref0);
        int untouched = 1;
        for (size_t i = 0; i < len; i++) {
            bool outside = isnan(ref[i]);
            untouched &= !outside || isnan(got[i]);
            mask[i] = outside ? 0.0f : got[i];
            ref0[i] = outside ? 0 : ref[i];
        }
        double e = lt_error(mask, ref0, len, 1.0);
        CHECKF(untouched, "cpu rope wrote outside its slice");
        CHECKF(e <= tol(dt, F32_ROPE_TOL), "cpu rope%s rows %d heads %d hd %d %s: error %.3g", back ? "_backward" : "", rows,
               heads, hd, tern_dtype_name(dt), e);
        CHECK_OK(back ? cpu->ops->rope_backward(cpu->d, xb, xb, pb, fb, rows, heads, hd, stride)
                      : cpu->ops->rope(cpu->d, xb, xb, pb, fb, rows, heads, hd, stride));
        float *inplace = lt_get(cpu, xb);
        for (size_t i = 0; i < len; i++) ref0[i] = isnan(ref[i]) ? x[i] : ref[i];
        double e_in = lt_error(inplace, ref0, len, 1.0);
        CHECKF(e_in <= tol(dt, F32_ROPE_TOL), "cpu rope in place: error %.3g", e_in);
        free(got), free(inplace), free(ref0);
        tern_buf all[] = {o, xb, pb, fb};
        for (int i = 0; i < 4; i++) lt_free(cpu, &all[i]);
    }
    /* the backward is the forward's transpose: <R x, y> = <x, R^T y> over the slice */
    double lhs = 0, rhs = 0;
    float *y = lt_random(len, 1.0, 0, TERN_F32);
    double *Ry = malloc(len * sizeof *Ry);
    ref_rope(y, nan, len, pos, f, rows, heads, hd, stride, -1, Ry);
    for (size_t i = 0; i < len; i++)
        if (!isnan(want[i])) lhs += want[i] * y[i], rhs += (double)x[i] * Ry[i];
    CHECKF(fabs(lhs - rhs) <= 1e-12 * (fabs(lhs) + 1), "rope backward is not the transpose: %.17g vs %.17g", lhs, rhs);
    free(y), free(Ry);
    free(x), free(nan), free(pos), free(want), free(want_b), free(mask);
}

/* ==== SwiGLU ==== */

static double silu64(double g) { return g / (1 + exp(-g)); }

static void test_swiglu_reference_gradient(void) {
    double worst = 0;
    for (double g = -9; g <= 9; g += 0.37) {
        double u = 0.7, h = 1e-5, s = 1 / (1 + exp(-g));
        double dg = u * s * (1 + g * (1 - s)), du = silu64(g);
        double fd_g = (silu64(g + h) * u - silu64(g - h) * u) / (2 * h);
        double fd_u = (silu64(g) * (u + h) - silu64(g) * (u - h)) / (2 * h);
        worst = fmax(worst, fmax(fabs(fd_g - dg), fabs(fd_u - du)) / fmax(fabs(dg) + fabs(du), 1e-3));
    }
    CHECKF(worst < 1e-8, "swiglu reference gradient vs finite differences: %.3g", worst);
}

/* gate and up: two buffers (fused 0) or the halves of one [rows, 2 I] (fused 1) */
static void test_swiglu_case(tern_rt *rt, lt_cpu *cpu, int rows, int I, bool fused, tern_dtype dt) {
    int ld = fused ? 2 * I : I;
    size_t n = (size_t)rows * I, len = fused ? (size_t)rows * ld : n;
    /* gate spans the sigmoid's tails; one saturating value each way */
    float *gu = lt_random(fused ? len : 2 * n, 6.0, 0, dt), *dout = lt_random(n, 1.0, 0, dt);
    gu[0] = -100.0f, gu[1] = 100.0f;
    size_t up_off = fused ? (size_t)I : n;
    double *y = malloc(n * sizeof *y), *dg = malloc(n * sizeof *dg), *du = malloc(n * sizeof *du);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < I; c++) {
            size_t at = (size_t)r * ld + c, o = (size_t)r * I + c;
            double g = gu[at], u = gu[up_off + at], s = 1 / (1 + exp(-g));
            y[o] = g * s * u;
            dg[o] = dout[o] * u * s * (1 + g * (1 - s));
            du[o] = dout[o] * g * s;
        }
    int W = (I % 4 == 0 && ld % 4 == 0) ? 4 : 1;
    size_t total = fused ? len : 2 * n;
    /* collects the gradient elements of gate's and up's layout, dense [rows, I] each */
    float *got_g = malloc(n * sizeof *got_g), *got_u = malloc(n * sizeof *got_u);
#define GATHER(all)                                                                           \
    for (int r = 0; r < rows; r++)                                                            \
        for (int c = 0; c < I; c++) {                                                         \
            got_g[(size_t)r * I + c] = (all)[(size_t)r * ld + c];                             \
            got_u[(size_t)r * I + c] = (all)[up_off + (size_t)r * ld + c];                    \
        }
    char what[96];
    snprintf(what, sizeof what, "%dx%d %s %s W %d", rows, I, fused ? "fused" : "separate", tern_dtype_name(dt), W);

    gk_spec fs = {0}, bs = {0};
    fs.t[0] = fs.t[1] = fs.t[2] = (uint8_t)lt_ttype(dt), fs.n[0] = W;
    for (int i = 0; i < 5; i++) bs.t[i] = (uint8_t)lt_ttype(dt);
    bs.n[0] = W;
    tern_kernel *kf = lt_kernel(GK_SWIGLU, &fs), *kb = lt_kernel(GK_SWIGLU_BACKWARD, &bs);
    if (kf && kb) {
        tern_dbuf all = lt_dev(rt, dt, gu, total), out = lt_dev(rt, dt, NULL, n), dy = lt_dev(rt, dt, dout, n);
        tern_dbuf gate = lt_dview(all, 0, len), up = lt_dview(all, up_off, len - (fused ? (size_t)I : 0));
        if (!fused) gate = lt_dview(all, 0, n), up = lt_dview(all, n, n);
        uint32_t grid = (uint32_t)((n / (size_t)W + GK_EW_GROUP - 1) / GK_EW_GROUP);
        tern_arg a[] = {tern_arg_dev(out), tern_arg_dev(gate), tern_arg_dev(up), tern_arg_i32((int)n),
                        tern_arg_i32(I), tern_arg_i32(ld)};
        CHECK_OK(tern_launch(rt, kf, tern_dims1(grid), tern_dims1(GK_EW_GROUP), a, 6));
        float *got = lt_dget(rt, out);
        double e = lt_error(got, y, n, 0.01);
        CHECKF(e <= tol(dt, F32_EW_TOL), "dsl swiglu %s: error %.3g", what, e);
        /* backward in place: dgate is gate, dup is up */
        tern_arg b[] = {tern_arg_dev(gate), tern_arg_dev(up), tern_arg_dev(dy), tern_arg_dev(gate),
                        tern_arg_dev(up), tern_arg_i32((int)n), tern_arg_i32(I), tern_arg_i32(ld)};
        CHECK_OK(tern_launch(rt, kb, tern_dims1(grid), tern_dims1(GK_EW_GROUP), b, 8));
        float *grads = lt_dget(rt, all);
        GATHER(grads);
        double e1 = lt_error(got_g, dg, n, 0.01), e2 = lt_error(got_u, du, n, 0.01);
        CHECKF(e1 <= tol(dt, F32_EW_TOL) && e2 <= tol(dt, F32_EW_TOL), "dsl swiglu_backward %s: dgate %.3g, dup %.3g",
               what, e1, e2);
        free(got), free(grads);
        tern_rt_free(rt, &all), tern_rt_free(rt, &out), tern_rt_free(rt, &dy);
    }
    tern_kernel_free(kf), tern_kernel_free(kb);

    tern_buf all = lt_buf(cpu, dt, gu, total), out = lt_buf(cpu, dt, NULL, n), dy = lt_buf(cpu, dt, dout, n);
    tern_buf gate = fused ? tern_view(all, 0, len) : tern_view(all, 0, n);
    tern_buf up = fused ? tern_view(all, up_off, len - (size_t)I) : tern_view(all, n, n);
    CHECK_OK(tern_validate_swiglu(NULL, out, gate, up, rows, I, ld));
    CHECK_OK(cpu->ops->swiglu(cpu->d, out, gate, up, rows, I, ld));
    float *got = lt_get(cpu, out);
    double e = lt_error(got, y, n, 0.01);
    CHECKF(e <= tol(dt, F32_EW_TOL), "cpu swiglu %s: error %.3g", what, e);
    /* out of place into a second fused buffer, then in place */
    tern_buf gall = lt_buf(cpu, dt, NULL, total);
    tern_buf dgate = fused ? tern_view(gall, 0, len) : tern_view(gall, 0, n);
    tern_buf dup = fused ? tern_view(gall, up_off, len - (size_t)I) : tern_view(gall, n, n);
    CHECK_OK(tern_validate_swiglu_backward(NULL, dgate, dup, dy, gate, up, rows, I, ld));
    CHECK_OK(cpu->ops->swiglu_backward(cpu->d, dgate, dup, dy, gate, up, rows, I, ld));
    float *grads = lt_get(cpu, gall);
    GATHER(grads);
    double e1 = lt_error(got_g, dg, n, 0.01), e2 = lt_error(got_u, du, n, 0.01);
    CHECKF(e1 <= tol(dt, F32_EW_TOL) && e2 <= tol(dt, F32_EW_TOL), "cpu swiglu_backward %s: dgate %.3g, dup %.3g", what,
           e1, e2);
    free(grads);
    CHECK_OK(tern_validate_swiglu_backward(NULL, gate, up, dy, gate, up, rows, I, ld));
    CHECK_OK(cpu->ops->swiglu_backward(cpu->d, gate, up, dy, gate, up, rows, I, ld));
    grads = lt_get(cpu, all);
    GATHER(grads);
    e1 = lt_error(got_g, dg, n, 0.01), e2 = lt_error(got_u, du, n, 0.01);
    CHECKF(e1 <= tol(dt, F32_EW_TOL) && e2 <= tol(dt, F32_EW_TOL), "cpu swiglu_backward in place %s: dgate %.3g, dup %.3g",
           what, e1, e2);
#undef GATHER
    free(got), free(grads);
    lt_free(cpu, &all), lt_free(cpu, &out), lt_free(cpu, &dy), lt_free(cpu, &gall);
    free(gu), free(dout), free(y), free(dg), free(du), free(got_g), free(got_u);
}

/* ==== validation ==== */

static void test_validation(lt_cpu *cpu) {
    tern_buf a = lt_buf(cpu, TERN_F32, NULL, 64), w = lt_buf(cpu, TERN_F32, NULL, 8), r = lt_buf(cpu, TERN_F32, NULL, 8);
    tern_buf pos = lt_buf_i32(cpu, (const int32_t[8]){0}, 8), big = lt_buf(cpu, TERN_F32, NULL, 256);
    tern_buf half = tern_view(big, 0, 128), other = tern_view(big, 128, 128);
    CHECK_ERR(tern_validate_rmsnorm(NULL, a, r, a, w, 8, 8, 1e-5f), "rmsnorm: out and x overlap");
    CHECK_ERR(tern_validate_rmsnorm(NULL, half, r, other, w, 8, 8, 1e-5f), "rmsnorm: out has 128 elements");
    CHECK_ERR(tern_validate_rmsnorm(NULL, a, tern_view(a, 0, 8), tern_view(big, 0, 64), w, 8, 8, 1e-5f), "rmsnorm: out and rrms overlap");
    CHECK_ERR(tern_validate_rmsnorm(NULL, a, r, tern_view(big, 0, 64), w, 8, 8, -1), "rmsnorm: eps must be finite");
    CHECK_ERR(tern_validate_rmsnorm_backward(NULL, a, w, a, tern_view(big, 0, 64), w, r, 8, 8, 0),
              "rmsnorm_backward: dx and dout overlap");
    CHECK_ERR(tern_validate_rmsnorm_backward(NULL, a, w, tern_view(big, 0, 64), tern_view(big, 64, 64), w, r, 8, 8, 0),
              "rmsnorm_backward: dw and w overlap");
    /* rope: 8 rows of 2 heads of 4 in rows of 16 */
    CHECK_OK(tern_validate_rope(NULL, half, half, pos, tern_view(w, 0, 2), 8, 2, 4, 16));
    CHECK_ERR(tern_validate_rope(NULL, half, half, pos, tern_view(w, 0, 2), 8, 2, 3, 16), "rope: head_dim must be even");
    CHECK_ERR(tern_validate_rope(NULL, half, half, pos, tern_view(w, 0, 2), 8, 2, 4, 7), "rope: stride 7 is less than");
    CHECK_ERR(tern_validate_rope(NULL, tern_view(big, 0, 100), tern_view(big, 0, 100), pos, tern_view(w, 0, 2), 8, 2, 4, 16),
              "rope: out has 100 elements, the rows need at least 120");
    CHECK_ERR(tern_validate_rope(NULL, tern_view(big, 4, 128), half, pos, tern_view(w, 0, 2), 8, 2, 4, 16),
              "rope: out and x overlap");
    CHECK_ERR(tern_validate_rope_backward(NULL, half, other, pos, w, 8, 2, 4, 16), "rope_backward: inv_freq has 8 elements");
    CHECK_ERR(tern_validate_rope(NULL, half, other, w, tern_view(w, 0, 2), 8, 2, 4, 16), "rope: pos");
    /* swiglu: 4 rows of 16 fused into rows of 32 */
    tern_buf g = tern_view(big, 0, 128), u = tern_view(big, 16, 112);
    CHECK_OK(tern_validate_swiglu(NULL, a, g, u, 4, 16, 32));
    CHECK_ERR(tern_validate_swiglu(NULL, a, g, u, 4, 16, 8), "swiglu: ld 8 is less than I (16)");
    CHECK_ERR(tern_validate_swiglu(NULL, g, g, u, 4, 16, 32), "swiglu: out has 128 elements");
    CHECK_OK(tern_validate_swiglu_backward(NULL, g, u, a, g, u, 4, 16, 32));                   /* in place */
    CHECK_ERR(tern_validate_swiglu_backward(NULL, g, tern_view(big, 8, 120), a, g, u, 4, 16, 32),
              "swiglu_backward: dgate and dup share elements");
    CHECK_ERR(tern_validate_swiglu_backward(NULL, u, g, a, g, u, 4, 16, 32), "swiglu_backward: dgate shares elements with up");
    tern_buf big2 = lt_buf(cpu, TERN_F32, NULL, 128);
    CHECK_ERR(tern_validate_swiglu_backward(NULL, tern_view(big, 2, 126), big2, a, g, u, 4, 16, 32),
              "swiglu_backward: dgate must be gate's view or share none of its elements");
    CHECK_ERR(tern_validate_swiglu_backward(NULL, big2, tern_view(big, 18, 112), a, g, u, 4, 16, 32), "swiglu_backward: dup must be up's view");
    CHECK_ERR(tern_validate_swiglu_backward(NULL, g, u, g, g, u, 4, 16, 32), "swiglu_backward: dout has 128 elements");
    tern_buf bufs[] = {a, w, r, pos, big, big2};
    for (int i = 0; i < 6; i++) lt_free(cpu, &bufs[i]);
}

int main(void) {
    tern_rt *rt = NULL;
    CHECK_OK(tern_rt_open("host", &rt));
    lt_cpu cpu = {tern_handler_ops("cpu"), NULL};
    CHECK(cpu.ops != NULL);
    if (!rt || !cpu.ops) return check_summary("test_llama_ops");
    CHECK_OK(cpu.ops->open(NULL, &cpu.d));

    test_rmsnorm_reference_gradient();
    test_swiglu_reference_gradient();
    tern_dtype dts[2] = {TERN_F32, TERN_BF16};
    for (int i = 0; i < 2; i++) {
        tern_dtype dt = dts[i];
        test_rmsnorm_case(rt, &cpu, 13, 64, dt, 1);   /* registers, W 2; 2 rows per SIMD group */
        test_rmsnorm_case(rt, &cpu, 5, 576, dt, 1);   /* SmolLM2's width: registers, W 2 */
        test_rmsnorm_case(rt, &cpu, 3, 512, dt, 1);   /* registers, W 4 */
        test_rmsnorm_case(rt, &cpu, 11, 100, dt, 1);  /* generic */
        test_rmsnorm_case(rt, &cpu, 1, 37, dt, 1);    /* generic, one row */
        test_rope_case(rt, &cpu, 10, 2, 1, 16, dt);   /* q and k of a fused qkv, W 4 */
        test_rope_case(rt, &cpu, 3, 3, 3, 6, dt);     /* odd half (3), W 1 */
        test_rope_case(rt, &cpu, 7, 4, 2, 64, dt);    /* SmolLM2's head size */
        test_swiglu_case(rt, &cpu, 7, 37, false, dt); /* W 1 */
        test_swiglu_case(rt, &cpu, 5, 64, true, dt);  /* fused halves, W 4 */
        test_swiglu_case(rt, &cpu, 3, 19, true, dt);  /* fused, odd */
    }
    test_validation(&cpu);
    CHECK_OK(cpu.ops->close(cpu.d));
    tern_rt_close(rt);
    return check_summary("test_llama_ops");
}
