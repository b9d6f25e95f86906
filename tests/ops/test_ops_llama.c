/* The Llama family's operations through the op table, on every handler: rmsnorm, rope and
 * swiglu, forward and backward, attention with grouped key/value heads, and embed without a
 * position table, against float64 references computed here; f32 and bf16; views at
 * offsets with guards; rope in place on the q and k slice of a fused qkv row (stride > the
 * slice) and on the k heads alone (a view at an offset); swiglu on the halves of a fused
 * [rows, 2I] product and on two buffers; then the shared validation's errors. (Register
 * path and width 4 need aligned views: those cases sit at offset 0, the others at odd ones.)
 *
 * The shapes are few on purpose: one per kernel variant that matters (the register, the
 * generic and the few-row path of rmsnorm, vector width 4 and 1 of rope and swiglu), since PoCL compiles
 * each variant (issue 18: the suite's time).
 *
 * Tolerances (check_rel_error: norm-wise relative): f32 rmsnorm 1e-5 (a sum of squares over
 * C terms in f32, then a few roundings), rope 1e-6 (a rotation: a few roundings of values of
 * the pair's norm), swiglu 4e-6 (a few roundings and an exp of ~1 ulp), attention 1e-5
 * (softmax and dot products over hs and T terms in f32), 5e-5 for its gradient (dP - sum P dP
 * cancels); a bf16 output 8e-3 (one rounding to bf16, <= 2^-9 relative, on the f32 error).
 * The references see the inputs as rounded to their dtype. */
#include "ops_test.h"

#define NORM_TOL 1e-5
#define ROPE_TOL 1e-6
#define EW_TOL 4e-6

static float *to_float(const double *x, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}

/* n values in [lo, hi), rounded to dt */
static float *random_in(size_t n, float lo, float hi, tern_dtype dt) {
    float *v = ot_random(n, lo, hi);
    ot_round(v, n, dt);
    return v;
}

/* ==== rmsnorm ==== */

/* y [rows, C] = x rrms w, rrms[r] = 1 / sqrt(mean(x[r]^2) + eps), in double */
static void ref_rmsnorm(const float *x, const float *w, int rows, int C, double eps, double *y, double *rr) {
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int j = 0; j < C; j++) ss += (double)x[(size_t)r * C + j] * x[(size_t)r * C + j];
        double rs = 1 / sqrt(ss / C + eps);
        rr[r] = rs;
        for (int j = 0; j < C; j++) y[(size_t)r * C + j] = x[(size_t)r * C + j] * rs * w[j];
    }
}

/* dx = dx0 + rrms (w g - xhat mean(w g xhat)), dw = beta dw0 + sum g xhat (beta 0: dw0
 * unread), with the f32 rrms the forward saved */
static void ref_rmsnorm_backward(const float *dx0, const float *dw0, const float *g, const float *x,
                                 const float *w, const float *rrms, int rows, int C, float beta, double *dx,
                                 double *dw) {
    for (int j = 0; j < C; j++) dw[j] = beta == 0 ? 0 : (double)beta * dw0[j];
    for (int r = 0; r < rows; r++) {
        double rs = rrms[r], m = 0;
        const float *gr = g + (size_t)r * C, *xr = x + (size_t)r * C;
        for (int j = 0; j < C; j++) m += (double)w[j] * gr[j] * xr[j] * rs;
        m /= C;
        for (int j = 0; j < C; j++) {
            double xhat = xr[j] * rs;
            dx[(size_t)r * C + j] = dx0[(size_t)r * C + j] + rs * ((double)w[j] * gr[j] - xhat * m);
            dw[j] += (double)gr[j] * xhat;
        }
    }
}

/* C 128: the register path (width 4 at offset 0), f32 and bf16; C 37 at odd offsets: the
 * generic path, bf16. rows 13 > GK_LN_ROWS, so the backward's SIMD groups take several rows.
 * C 896 (Qwen2-0.5B) and 2048 (Llama-3.2-1B): the backward's rows shared by teams of two
 * and four SIMD groups on the GPU core (gk_lnb_team), several rows a team. */
static void test_rmsnorm(ot_ctx *c) {
    const tern_ops *o = c->ops;
    /* rows, C, view offset, bf16; the fourth: decoding's few rows, a row split over SIMD
     * groups on the GPU core (forward only: the backward has no few-row path) */
    const int shapes[6][4] = {{13, 128, 0, 0}, {13, 128, 0, 1}, {5, 37, 1, 1}, {3, 512, 0, 1}, {37, 896, 0, 1},
                              {21, 2048, 0, 0}};
    ot_seed(221);
    for (int s = 0; s < 6; s++) {
        int rows = shapes[s][0], C = shapes[s][1];
        size_t off = (size_t)shapes[s][2], n = (size_t)rows * C;
        tern_dtype dt = ot_float2[shapes[s][3]];
        float eps = 1e-5f;
        float *x = random_in(n, -1.5f, 1.7f, dt), *w = random_in((size_t)C, 0.5f, 1.5f, dt);
        double *y = malloc(n * sizeof *y), *rr = malloc((size_t)rows * sizeof *rr);
        ref_rmsnorm(x, w, rows, C, eps, y, rr);
        float *want = to_float(y, n), *want_r = to_float(rr, (size_t)rows);
        ot_buf bx = ot_make(c, dt, n, off, x), bw = ot_make(c, dt, (size_t)C, off, w);
        ot_buf bo = ot_make(c, dt, n, 3 * off, NULL), br = ot_make(c, TERN_F32, (size_t)rows, off, NULL);
        CHECK_OK(o->rmsnorm(c->d, bo.view, br.view, bx.view, bw.view, rows, C, eps));
        OT_EXPECT(c, bo, want, ot_tol(dt, NORM_TOL), "rmsnorm %dx%d %s", rows, C, tern_dtype_name(dt));
        OT_EXPECT(c, br, want_r, 1e-6, "rmsnorm %dx%d %s: rrms", rows, C, tern_dtype_name(dt));
        /* rrms absent: the same output (one case: a kernel variant of its own) */
        ot_buf bo2 = ot_make(c, dt, n, 3 * off, NULL);
        if (s == 2) {
            CHECK_OK(o->rmsnorm(c->d, bo2.view, tern_none(), bx.view, bw.view, rows, C, eps));
            OT_EXPECT(c, bo2, want, ot_tol(dt, NORM_TOL), "rmsnorm %dx%d %s without rrms", rows, C,
                      tern_dtype_name(dt));
        }

        if (s == 3) {
            ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bo), ot_free(c, &br), ot_free(c, &bo2);
            free(x), free(w), free(y), free(rr), free(want), free(want_r);
            continue;
        }
        /* backward from the saved rrms: grad_beta 0 writes dw over NaN, 0.5 scales it;
         * dx accumulates onto what it held */
        float *rrms = malloc((size_t)rows * sizeof *rrms);
        ot_read(c, br, rrms);
        float *g = random_in(n, -1, 1, dt), *dx0 = random_in(n, -0.3f, 0.3f, dt);
        float *dw0 = random_in((size_t)C, -1, 1, dt);
        ot_buf bg = ot_make(c, dt, n, off, g);
        for (int b = 0; b < 2; b++) {
            float beta = b ? 0.5f : 0.0f;
            double *dx = malloc(n * sizeof *dx), *dw = malloc((size_t)C * sizeof *dw);
            ref_rmsnorm_backward(dx0, dw0, g, x, w, rrms, rows, C, beta, dx, dw);
            float *want_dx = to_float(dx, n), *want_dw = to_float(dw, (size_t)C);
            ot_buf bdx = ot_make(c, dt, n, 2 * off, dx0), bdw = ot_make(c, dt, (size_t)C, off, b ? dw0 : NULL);
            CHECK_OK(o->rmsnorm_backward(c->d, bdx.view, bdw.view, bg.view, bx.view, bw.view, br.view, rows, C,
                                         beta));
            OT_EXPECT(c, bdx, want_dx, ot_tol(dt, NORM_TOL), "rmsnorm_backward %dx%d %s beta %g: dx", rows, C,
                      tern_dtype_name(dt), (double)beta);
            OT_EXPECT(c, bdw, want_dw, ot_tol(dt, NORM_TOL), "rmsnorm_backward %dx%d %s beta %g: dw", rows, C,
                      tern_dtype_name(dt), (double)beta);
            ot_free(c, &bdx), ot_free(c, &bdw);
            free(dx), free(dw), free(want_dx), free(want_dw);
        }
        ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bo), ot_free(c, &br), ot_free(c, &bo2), ot_free(c, &bg);
        free(x), free(w), free(y), free(rr), free(want), free(want_r), free(rrms), free(g), free(dx0), free(dw0);
    }
}

/* ==== rope ==== */

/* The rotation of the slice (rows of `heads` heads of hd channels, a row every `stride`)
 * from f32 angles float(pos) inv_freq[j], as the op computes them, in double; sign -1: the
 * backward. Elements outside the slice are base's. */
static void ref_rope(const float *x, const float *base, size_t len, const int32_t *pos, const float *f, int rows,
                     int heads, int hd, int stride, double sign, double *out) {
    for (size_t i = 0; i < len; i++) out[i] = base[i];
    int half = hd / 2;
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++)
            for (int j = 0; j < half; j++) {
                float a = (float)pos[r] * f[j];
                double cs = cos((double)a), sn = sign * sin((double)a);
                size_t lo = (size_t)r * stride + (size_t)h * hd + j, hi = lo + half;
                out[lo] = x[lo] * cs - x[hi] * sn;
                out[hi] = x[hi] * cs + x[lo] * sn;
            }
}

/* A fused qkv [rows, (NH + 2 KV) hd]. Case 0: q and k together (the view at 0, heads NH +
 * KV), hd 8 (width 4). Case 1: the k heads alone (a view at offset NH hd, heads KV), hd 6
 * (width 1). Out of place into a NaN-poisoned copy (outside the slice must stay NaN), then
 * in place on qkv itself (outside the slice unchanged: v and, in case 1, q). Case 0 in f32
 * and bf16, case 1 in bf16 (each is a kernel variant PoCL compiles). */
static void test_rope(ot_ctx *c) {
    const tern_ops *o = c->ops;
    const int cases[2][4] = {{6, 4, 2, 8}, {5, 2, 1, 6}}; /* rows, NH, KV, hd */
    ot_seed(222);
    for (int s = 0; s < 2; s++)
        for (int k = s; k < 2; k++) /* case 1: bf16 only */
            for (int back = 0; back < 2; back++) {
                int rows = cases[s][0], NH = cases[s][1], KV = cases[s][2], hd = cases[s][3];
                int stride = (NH + 2 * KV) * hd, heads = s == 0 ? NH + KV : KV;
                size_t first = s == 0 ? 0 : (size_t)NH * hd; /* the slice's first element */
                size_t len = (size_t)rows * stride, vlen = len - first;
                tern_dtype dt = ot_float2[k];
                float *qkv = random_in(len, -1, 1, dt), *nan = malloc(len * sizeof *nan);
                for (size_t i = 0; i < len; i++) nan[i] = NAN;
                int32_t *pos = malloc((size_t)rows * sizeof *pos);
                for (int r = 0; r < rows; r++) pos[r] = r == 2 ? 5003 : (r * 37) % 300; /* not monotone */
                float f[8];
                for (int j = 0; j < hd / 2; j++) f[j] = (float)pow(10000.0, -2.0 * j / hd);
                double *ref = malloc(len * sizeof *ref), *ref_in = malloc(len * sizeof *ref_in);
                double sign = back ? -1 : 1;
                ref_rope(qkv + first, nan + first, vlen, pos, f, rows, heads, hd, stride, sign, ref);
                ref_rope(qkv + first, qkv + first, vlen, pos, f, rows, heads, hd, stride, sign, ref_in);
                const char *op = back ? "rope_backward" : "rope";
                ot_buf bx = ot_make(c, dt, len, (size_t)s, qkv), bo = ot_make(c, dt, len, (size_t)(3 * s), NULL);
                ot_buf bp = ot_make_i32(c, pos, (size_t)rows, 0), bf = ot_make(c, TERN_F32, (size_t)hd / 2, 0, f);
                tern_buf xv = tern_view(bx.view, first, vlen), ov = tern_view(bo.view, first, vlen);
                tern_error *(*fn)(tern_dev *, tern_buf, tern_buf, tern_buf, tern_buf, int, int, int, int) =
                    back ? o->rope_backward : o->rope;
                CHECK_OK(fn(c->d, ov, xv, bp.view, bf.view, rows, heads, hd, stride));
                /* out of place: inside the slice against the reference (outside as 0), and
                 * every element outside the slice still NaN */
                float *got = malloc(len * sizeof *got);
                ot_read(c, bo, got);
                int untouched = 1;
                for (size_t i = 0; i < first; i++) untouched &= isnan(got[i]) != 0;
                float *inside = malloc(len * sizeof *inside), *want = malloc(len * sizeof *want);
                for (size_t i = 0; i < len; i++) {
                    int out_of_slice = i < first || isnan(ref[i - first]);
                    if (i >= first && out_of_slice) untouched &= isnan(got[i]) != 0;
                    inside[i] = out_of_slice ? 0.0f : got[i];
                    want[i] = out_of_slice ? 0.0f : (float)ref[i - first];
                }
                double e = check_rel_error(inside, want, len);
                CHECKF(e <= ot_tol(dt, ROPE_TOL), "%s: %s case %d %s: relative error %.3g", c->handler, op, s,
                       tern_dtype_name(dt), e);
                CHECKF(untouched, "%s: %s case %d %s: wrote outside its slice", c->handler, op, s, tern_dtype_name(dt));
                CHECKF(ot_guard_ok(c, bo), "%s: %s: wrote outside its view", c->handler, op);
                /* in place on qkv */
                CHECK_OK(fn(c->d, xv, xv, bp.view, bf.view, rows, heads, hd, stride));
                for (size_t i = 0; i < len; i++) want[i] = i < first ? qkv[i] : (float)ref_in[i - first];
                OT_EXPECT(c, bx, want, ot_tol(dt, ROPE_TOL), "%s in place case %d %s", op, s, tern_dtype_name(dt));
                ot_free(c, &bx), ot_free(c, &bo), ot_free(c, &bp), ot_free(c, &bf);
                free(qkv), free(nan), free(pos), free(ref), free(ref_in), free(got), free(inside), free(want);
            }
}

/* ==== swiglu ==== */

static double silu(double g) { return g / (1 + exp(-g)); }

/* Case 0: the halves of one fused [rows, 2I] (I 24: width 4); case 1: two buffers, I 13
 * (width 1), at odd offsets. The backward out of place into a fused gradient (case 0) or two
 * buffers, then in place (dgate = gate, dup = up). Case 0 in f32 and bf16, case 1 in f32. */
static void test_swiglu(ot_ctx *c) {
    const tern_ops *o = c->ops;
    const int cases[2][2] = {{5, 24}, {3, 13}}; /* rows, I */
    ot_seed(223);
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2 - s; k++) { /* case 1: f32 only */
            int rows = cases[s][0], I = cases[s][1], fused = s == 0, ld = fused ? 2 * I : I;
            size_t n = (size_t)rows * I, total = 2 * n; /* fused: rows * 2I; else gate then up */
            size_t off = fused ? 0 : 1, up_at = fused ? (size_t)I : n; /* fused: all aligned */
            tern_dtype dt = ot_float2[k];
            float *gu = random_in(total, -6, 6, dt), *dy = random_in(n, -1, 1, dt);
            gu[0] = -100.0f, gu[1] = 100.0f; /* the sigmoid saturated both ways */
            double *y = malloc(n * sizeof *y), *dg = malloc(n * sizeof *dg), *du = malloc(n * sizeof *du);
            for (int r = 0; r < rows; r++)
                for (int j = 0; j < I; j++) {
                    size_t at = (size_t)r * ld + j, d = (size_t)r * I + j;
                    double g = gu[at], u = gu[up_at + at], sg = 1 / (1 + exp(-g));
                    y[d] = silu(g) * u;
                    dg[d] = dy[d] * u * sg * (1 + g * (1 - sg));
                    du[d] = dy[d] * silu(g);
                }
            float *want = to_float(y, n);
            /* the gradients in gate's and up's layout (the same layout as gu) */
            float *want_g = malloc(total * sizeof *want_g);
            for (size_t i = 0; i < total; i++) want_g[i] = gu[i];
            for (int r = 0; r < rows; r++)
                for (int j = 0; j < I; j++) {
                    size_t at = (size_t)r * ld + j, d = (size_t)r * I + j;
                    want_g[at] = (float)dg[d], want_g[up_at + at] = (float)du[d];
                }
            size_t vlen = fused ? total - (size_t)I : n; /* (rows - 1) ld + I */
            ot_buf ball = ot_make(c, dt, total, off, gu), bout = ot_make(c, dt, n, 2 * off, NULL);
            ot_buf bdy = ot_make(c, dt, n, 3 * off, dy), bgrad = ot_make(c, dt, total, 5 * off, gu);
            tern_buf gate = tern_view(ball.view, 0, vlen), up = tern_view(ball.view, up_at, vlen);
            tern_buf dgate = tern_view(bgrad.view, 0, vlen), dup = tern_view(bgrad.view, up_at, vlen);
            const char *what = fused ? "fused" : "separate";
            CHECK_OK(o->swiglu(c->d, bout.view, gate, up, rows, I, ld));
            OT_EXPECT(c, bout, want, ot_tol(dt, EW_TOL), "swiglu %s %dx%d %s", what, rows, I, tern_dtype_name(dt));
            CHECK_OK(o->swiglu_backward(c->d, dgate, dup, bdy.view, gate, up, rows, I, ld));
            OT_EXPECT(c, bgrad, want_g, ot_tol(dt, EW_TOL), "swiglu_backward %s %dx%d %s", what, rows, I,
                      tern_dtype_name(dt));
            CHECK_OK(o->swiglu_backward(c->d, gate, up, bdy.view, gate, up, rows, I, ld));
            OT_EXPECT(c, ball, want_g, ot_tol(dt, EW_TOL), "swiglu_backward in place %s %dx%d %s", what, rows, I,
                      tern_dtype_name(dt));
            ot_free(c, &ball), ot_free(c, &bout), ot_free(c, &bdy), ot_free(c, &bgrad);
            free(gu), free(dy), free(y), free(dg), free(du), free(want), free(want_g);
        }
}

/* ==== attention with grouped key/value heads ==== */

/* out [B, T, NH hs] and, when g is given, dqkv [B, T, (NH + 2 KV) hs] of sum(g out), in
 * double: causal softmax attention, query head h on key/value head h / (NH / KV). */
static void ref_gqa(const float *qkv, const float *g, int B, int T, int NH, int KV, int hs, double *out,
                    double *dqkv) {
    int W = (NH + 2 * KV) * hs, group = NH / KV;
    double scale = 1 / sqrt((double)hs);
    double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    if (dqkv)
        for (size_t i = 0; i < (size_t)B * T * W; i++) dqkv[i] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)h * hs, ko = (size_t)(NH + h / group) * hs, vo = (size_t)(NH + KV + h / group) * hs;
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * W + qo;
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *kk = qkv + ((size_t)b * T + u) * W + ko;
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += (double)q[i] * kk[i];
                    p[u] = dot * scale;
                    mx = fmax(mx, p[u]);
                }
                for (int u = 0; u <= t; u++) sum += p[u] = exp(p[u] - mx);
                for (int u = 0; u <= t; u++) p[u] /= sum;
                double *ot = out + ((size_t)b * T + t) * NH * hs + qo;
                for (int i = 0; i < hs; i++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++) acc += p[u] * qkv[((size_t)b * T + u) * W + vo + i];
                    ot[i] = acc;
                }
                if (!dqkv) continue;
                const float *gt = g + ((size_t)b * T + t) * NH * hs + qo;
                double pdp = 0;
                for (int u = 0; u <= t; u++) {
                    double dot = 0;
                    for (int i = 0; i < hs; i++) dot += (double)gt[i] * qkv[((size_t)b * T + u) * W + vo + i];
                    dp[u] = dot;
                    pdp += p[u] * dot;
                }
                for (int u = 0; u <= t; u++) {
                    double dsw = p[u] * (dp[u] - pdp) * scale;
                    for (int i = 0; i < hs; i++) {
                        dqkv[((size_t)b * T + t) * W + qo + i] += dsw * qkv[((size_t)b * T + u) * W + ko + i];
                        dqkv[((size_t)b * T + u) * W + ko + i] += dsw * q[i];
                        dqkv[((size_t)b * T + u) * W + vo + i] += p[u] * gt[i];
                    }
                }
            }
        }
    free(p), free(dp);
}

/* NH 4 query heads on KV 2 key/value heads, hs 8: forward, backward and the cached form
 * (a prompt of 3, then one position at a time) against the reference, on every handler
 * (tests/gpu/test_gpu_gqa has the GPU core's wider matrix of shapes). */
static void test_gqa(ot_ctx *c) {
    const tern_ops *o = c->ops;
    const int B = 2, T = 5, NH = 4, KV = 2, hs = 8, W = (NH + 2 * KV) * hs, max_t = 7;
    ot_seed(224);
    size_t nq = (size_t)B * T * W, no = (size_t)B * T * NH * hs, ns = 0;
    CHECK_OK(o->attention_saved_len(c->d, B, T, NH, &ns));
    float *qkv = ot_random(nq, -1.5f, 1.5f), *g = ot_random(no, -1, 1);
    double *out = malloc(no * sizeof *out), *dq = malloc(nq * sizeof *dq);
    ref_gqa(qkv, g, B, T, NH, KV, hs, out, dq);
    float *want = to_float(out, no), *want_d = to_float(dq, nq);
    ot_buf bq = ot_make(c, TERN_F32, nq, 1, qkv), bo = ot_make(c, TERN_F32, no, 2, NULL);
    ot_buf bs = ot_make(c, TERN_F32, ns, 0, NULL), bg = ot_make(c, TERN_F32, no, 3, g);
    ot_buf bd = ot_make(c, TERN_F32, nq, 0, NULL);
    CHECK_OK(o->attention(c->d, bo.view, bs.view, bq.view, B, T, NH, KV, hs));
    OT_EXPECT(c, bo, want, 1e-5, "attention NH %d KV %d", NH, KV);
    CHECK_OK(o->attention_backward(c->d, bd.view, bg.view, bq.view, bo.view, bs.view, B, T, NH, KV, hs));
    OT_EXPECT(c, bd, want_d, 5e-5, "attention_backward NH %d KV %d", NH, KV);
    /* cached: the caches [B, KV, max_t, hs] */
    size_t nc = (size_t)B * KV * max_t * hs;
    ot_buf kc = ot_make(c, TERN_F32, nc, 0, NULL), vc = ot_make(c, TERN_F32, nc, 1, NULL);
    float *got = malloc(no * sizeof *got);
    for (int p0 = 0; p0 < T;) {
        int n = p0 == 0 ? 3 : 1;
        float *rows = malloc((size_t)B * n * W * sizeof *rows);
        for (int b = 0; b < B; b++)
            memcpy(rows + (size_t)b * n * W, qkv + ((size_t)b * T + p0) * W, (size_t)n * W * sizeof *rows);
        ot_buf br = ot_make(c, TERN_F32, (size_t)B * n * W, 0, rows), bco = ot_make(c, TERN_F32, (size_t)B * n * NH * hs, 1, NULL);
        ot_buf bp = ot_make_i32(c, &p0, 1, 0);
        CHECK_OK(o->attention_cached(c->d, bco.view, kc.view, vc.view, br.view, bp.view, B, n, NH, KV, hs, max_t));
        float *co = malloc((size_t)B * n * NH * hs * sizeof *co);
        ot_read(c, bco, co);
        for (int b = 0; b < B; b++)
            memcpy(got + ((size_t)b * T + p0) * NH * hs, co + (size_t)b * n * NH * hs, (size_t)n * NH * hs * sizeof *co);
        free(co);
        ot_free(c, &br), ot_free(c, &bco), ot_free(c, &bp);
        free(rows);
        p0 += n;
    }
    double e = check_rel_error(got, want, no);
    CHECKF(e <= 1e-5, "%s: attention_cached NH %d KV %d: relative error %.3g", c->handler, NH, KV, e);
    CHECKF(ot_guard_ok(c, kc) && ot_guard_ok(c, vc), "%s: attention_cached wrote outside the caches", c->handler);
    ot_free(c, &bq), ot_free(c, &bo), ot_free(c, &bs), ot_free(c, &bg), ot_free(c, &bd), ot_free(c, &kc), ot_free(c, &vc);
    free(qkv), free(g), free(out), free(dq), free(want), free(want_d), free(got);
}

/* ==== embed without a position table ==== */

static void test_embed_no_wpe(ot_ctx *c) {
    const tern_ops *o = c->ops;
    const int B = 2, T = 3, C = 8, V = 11;
    ot_seed(225);
    for (int k = 0; k < 2; k++) {
        tern_dtype dt = ot_float2[k];
        float *wte = random_in((size_t)V * C, -1, 1, dt);
        int32_t tok[6] = {3, 10, 0, 7, 7, 1}, p = 9; /* pos is unused without a table */
        float *want = malloc((size_t)B * T * C * sizeof *want);
        for (int i = 0; i < B * T; i++) memcpy(want + (size_t)i * C, wte + (size_t)tok[i] * C, C * sizeof *want);
        ot_buf bw = ot_make(c, dt, (size_t)V * C, 1, wte), bt = ot_make_i32(c, tok, 6, 0);
        ot_buf bp = ot_make_i32(c, &p, 1, 0), bo = ot_make(c, dt, (size_t)B * T * C, 2, NULL);
        CHECK_OK(o->embed(c->d, bo.view, bt.view, bw.view, tern_none(), bp.view, B, T, C));
        OT_EXPECT(c, bo, want, 0.0, "embed without wpe %s", tern_dtype_name(dt));
        CHECK_OK(o->embed(c->d, bo.view, bt.view, bw.view, tern_none(), tern_none(), B, T, C));
        OT_EXPECT(c, bo, want, 0.0, "embed without wpe or pos %s", tern_dtype_name(dt));
        ot_free(c, &bw), ot_free(c, &bt), ot_free(c, &bp), ot_free(c, &bo);
        free(wte), free(want);
    }
}

/* ==== the shared validation (the same line on every handler) ==== */

static void test_errors(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_buf a = ot_make(c, TERN_F32, 64, 0, NULL), w = ot_make(c, TERN_F32, 8, 0, NULL);
    ot_buf r = ot_make(c, TERN_F32, 8, 0, NULL), r16 = ot_make(c, TERN_BF16, 8, 0, NULL);
    ot_buf x = ot_make(c, TERN_F32, 64, 0, NULL), big = ot_make(c, TERN_F32, 256, 0, NULL);
    int32_t zeros[8] = {0};
    ot_buf pos = ot_make_i32(c, zeros, 8, 0), f = ot_make(c, TERN_F32, 2, 0, NULL);
    /* rmsnorm: rows 8, C 8 */
    CHECK_ERR(o->rmsnorm(c->d, a.view, r.view, a.view, w.view, 8, 8, 1e-5f), "rmsnorm: out and x overlap");
    CHECK_ERR(o->rmsnorm(c->d, a.view, r16.view, x.view, w.view, 8, 8, 1e-5f), "rmsnorm: rrms is bf16, needs f32");
    CHECK_ERR(o->rmsnorm(c->d, a.view, r.view, x.view, w.view, 8, 8, NAN), "rmsnorm: eps must be finite and >= 0");
    CHECK_ERR(o->rmsnorm(c->d, a.view, r.view, x.view, tern_view(w.view, 0, 7), 8, 8, 1e-5f), "rmsnorm: w has 7 elements");
    CHECK_ERR(o->rmsnorm_backward(c->d, a.view, w.view, x.view, x.view, w.view, r.view, 8, 8, 0.0f),
              "rmsnorm_backward: dw and w overlap");
    CHECK_ERR(o->rmsnorm_backward(c->d, a.view, r16.view, x.view, x.view, w.view, tern_none(), 8, 8, 0.0f),
              "rmsnorm_backward: rrms is absent");
    /* rope: rows 8, heads 2, head_dim 4 in rows of 8 */
    CHECK_ERR(o->rope(c->d, a.view, a.view, pos.view, f.view, 8, 2, 3, 8), "rope: head_dim must be even, got 3");
    CHECK_ERR(o->rope(c->d, a.view, a.view, pos.view, f.view, 8, 2, 4, 7), "rope: stride 7 is less than heads * head_dim (8)");
    CHECK_ERR(o->rope(c->d, tern_view(big.view, 3, 64), tern_view(big.view, 0, 64), pos.view, f.view, 8, 2, 4, 8),
              "rope: out and x overlap");
    CHECK_ERR(o->rope(c->d, a.view, x.view, pos.view, w.view, 8, 2, 4, 8), "rope: inv_freq has 8 elements, head_dim / 2 needs 2");
    CHECK_ERR(o->rope_backward(c->d, a.view, x.view, f.view, f.view, 8, 2, 4, 8), "rope_backward: pos is f32, needs i32");
    CHECK_ERR(o->rope(c->d, tern_view(a.view, 0, 60), x.view, pos.view, f.view, 8, 2, 4, 8),
              "rope: out has 60 elements, the rows need at least 64");
    /* swiglu: rows 4, I 8, ld 16 over big's halves */
    tern_buf g = tern_view(big.view, 0, 56), u = tern_view(big.view, 8, 56);
    CHECK_OK(o->swiglu(c->d, tern_view(a.view, 0, 32), g, u, 4, 8, 16));
    CHECK_ERR(o->swiglu(c->d, tern_view(a.view, 0, 32), g, u, 4, 8, 4), "swiglu: ld 4 is less than I (8)");
    CHECK_ERR(o->swiglu(c->d, a.view, g, u, 4, 8, 16), "swiglu: out has 64 elements, rows * I needs 32");
    CHECK_ERR(o->swiglu(c->d, tern_view(big.view, 0, 32), g, u, 4, 8, 16), "swiglu: out and gate overlap");
    CHECK_ERR(o->swiglu_backward(c->d, u, g, tern_view(a.view, 0, 32), g, u, 4, 8, 16),
              "swiglu_backward: dgate shares elements with up");
    CHECK_ERR(o->swiglu_backward(c->d, g, u, tern_view(big.view, 40, 32), g, u, 4, 8, 16),
              "swiglu_backward: dgate and dout overlap");
    /* attention with grouped heads: KV must divide NH */
    CHECK_ERR(o->attention(c->d, a.view, r.view, big.view, 1, 2, 4, 3, 8), "attention: KV = 3 key/value heads do not divide NH = 4");
    CHECK_ERR(o->attention_cached(c->d, a.view, big.view, big.view, big.view, pos.view, 1, 2, 4, 2, 8, 4),
              "attention_cached: k_cache has 256 elements, B * KV * max_T * hs needs 64");
    ot_free(c, &a), ot_free(c, &w), ot_free(c, &r), ot_free(c, &r16), ot_free(c, &x), ot_free(c, &big);
    ot_free(c, &pos), ot_free(c, &f);
}

static void test_all(ot_ctx *c) {
    test_rmsnorm(c);
    test_rope(c);
    test_swiglu(c);
    test_gqa(c);
    test_embed_no_wpe(c);
    test_errors(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_llama");
}
