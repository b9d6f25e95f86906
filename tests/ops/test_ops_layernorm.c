/* layernorm and layernorm_backward against double-precision references, over shapes
 * (C = 1, odd C, GPT-2's 768), mixed f32/bf16 buffers, views at offsets, present and absent
 * mean/rstd and dsum; layernorm_backward's dsum against the column sums of the dx it
 * updated, its out (the forward's output written again) bit for bit against the handler's
 * own forward, and its grad_beta (0 overwrites NaN, 1 accumulates, 0.5 scales); the backward
 * from the forward's output (mean absent); the reference
 * backward against finite differences of the reference forward,
 * and the handler's backward against finite differences of its own forward; then errors. */
#include "ops_test.h"

typedef struct ln_ref {
    double *out, *mean, *rstd;
} ln_ref;

static void ln_forward(const float *x, const float *w, const float *b, int rows, int C, double eps,
                       double *out, double *mean, double *rstd) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C;
        double mu = 0, var = 0;
        for (int j = 0; j < C; j++) mu += xr[j];
        mu /= C;
        for (int j = 0; j < C; j++) var += (xr[j] - mu) * (xr[j] - mu);
        var /= C;
        double rs = 1 / sqrt(var + eps);
        for (int j = 0; j < C; j++) out[(size_t)r * C + j] = (xr[j] - mu) * rs * w[j] + b[j];
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}

/* The backward from xhat [rows, C] and rstd [rows]: gradients of sum(g * out) with respect
 * to x, w, b, in double. */
static void ln_backward_xhat(const float *g, const double *xhat_all, const double *rstd, const float *w, int rows,
                             int C, double *dx, double *dw, double *db) {
    for (int j = 0; j < C; j++) dw[j] = db[j] = 0;
    for (int r = 0; r < rows; r++) {
        const float *gr = g + (size_t)r * C;
        const double *xh = xhat_all + (size_t)r * C;
        double dmean = 0, dnorm_mean = 0;
        for (int j = 0; j < C; j++) {
            double xhat = xh[j];
            dmean += w[j] * (double)gr[j];
            dnorm_mean += w[j] * (double)gr[j] * xhat;
            dw[j] += gr[j] * xhat;
            db[j] += gr[j];
        }
        dmean /= C;
        dnorm_mean /= C;
        for (int j = 0; j < C; j++)
            dx[(size_t)r * C + j] = (w[j] * (double)gr[j] - dmean - xh[j] * dnorm_mean) * rstd[r];
    }
}

/* Gradients of sum(g * out) with respect to x, w, b, in double. */
static void ln_backward(const float *g, const float *x, const float *w, int rows, int C, double eps,
                        double *dx, double *dw, double *db) {
    size_t n = (size_t)rows * C;
    double *out = malloc(n * sizeof(double)), *mean = malloc(rows * sizeof(double)),
           *rstd = malloc(rows * sizeof(double)), *xhat = malloc(n * sizeof(double));
    ln_forward(x, w, w, rows, C, eps, out, mean, rstd); /* for mean and rstd only */
    for (size_t i = 0; i < n; i++) xhat[i] = (x[i] - mean[i / C]) * rstd[i / C];
    ln_backward_xhat(g, xhat, rstd, w, rows, C, dx, dw, db);
    free(out), free(mean), free(rstd), free(xhat);
}

static float *to_float(const double *x, size_t n) {
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}

static void test_forward_backward(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(31);
    /* {300, 64}: several groups of the GPU's backward, each adding its SIMD groups' partial
     * sums before writing them */
    const int shapes[][2] = {{1, 1}, {3, 7}, {64, 768}, {17, 1000}, {5, 16}, {300, 64}};
    const float eps = 1e-5f;
    /* The representative set (ot_full; opencl in make test), since each dtype combination
     * at each C is a kernel variant: every shape; at 3 x 7 four of the 256 combinations (all
     * f32, all bf16, and the two alternating mixes, so each buffer is f32 and bf16 beside
     * either dtype of its neighbours, with and without the saved statistics and dsum); at
     * the other shapes all f32 (statistics saved) and the second random mix (statistics
     * recomputed). dsum at every kernel path: test_backward_dsum_beta, which runs whole. */
    bool full = ot_full(c);
    for (int s = 0; s < 6; s++)
        for (int combo = 0; combo < (s == 1 ? 256 : 10); combo++) {
            int rows = shapes[s][0], C = shapes[s][1];
            if (!full && (s == 1 ? combo != 0 && combo != 255 && combo != 0x55 && combo != 0xAA : combo != 0 && combo != 2)) continue;
            size_t n = (size_t)rows * C;
            /* shape 1 (3 x 7): every f32/bf16 combination of the eight float buffers; the
             * others: all f32, then random combinations */
            tern_dtype dt[8];
            for (int i = 0; i < 8; i++)
                dt[i] = s == 1 ? ot_float2[(combo >> i) & 1] : combo == 0 ? TERN_F32 : ot_float2[ot_randint(0, 2)];
            tern_dtype d_out = dt[0], d_x = dt[1], d_w = dt[2], d_b = dt[3], d_dx = dt[4], d_dw = dt[5],
                       d_db = dt[6], d_g = dt[7];
            bool stats = combo % 3 != 2;
            float *x = ot_random(n, -2, 2), *w = ot_random((size_t)C, 0.5f, 1.5f), *b = ot_random((size_t)C, -1, 1);
            for (size_t i = 0; i < n; i++) x[i] += 3; /* an offset mean: variance in two passes */
            float *g = ot_random(n, -1, 1), *dx0 = ot_random(n, -1, 1), *dw0 = ot_random((size_t)C, -1, 1),
                  *db0 = ot_random((size_t)C, -1, 1);
            ot_round(x, n, d_x), ot_round(w, (size_t)C, d_w), ot_round(b, (size_t)C, d_b), ot_round(g, n, d_g);
            ot_round(dx0, n, d_dx), ot_round(dw0, (size_t)C, d_dw), ot_round(db0, (size_t)C, d_db);
            double *out = malloc(n * sizeof(double)), *mean = malloc(rows * sizeof(double)),
                   *rstd = malloc(rows * sizeof(double));
            ln_forward(x, w, b, rows, C, eps, out, mean, rstd);
            double *gx = malloc(n * sizeof(double)), *gw = malloc(C * sizeof(double)), *gb = malloc(C * sizeof(double));
            ln_backward(g, x, w, rows, C, eps, gx, gw, gb);
            for (size_t i = 0; i < n; i++) gx[i] += dx0[i];
            for (int j = 0; j < C; j++) gw[j] += dw0[j], gb[j] += db0[j];
            float *want = to_float(out, n), *want_mean = to_float(mean, rows), *want_rstd = to_float(rstd, rows);
            float *want_dx = to_float(gx, n), *want_dw = to_float(gw, C), *want_db = to_float(gb, C);

            ot_buf bx = ot_make(c, d_x, n, 1, x), bw = ot_make(c, d_w, C, 2, w), bb = ot_make(c, d_b, C, 3, b);
            ot_buf bo = ot_make(c, d_out, n, 4, NULL), bm = ot_make(c, TERN_F32, rows, 5, NULL),
                   br = ot_make(c, TERN_F32, rows, 6, NULL);
            CHECK_OK(o->layernorm(c->d, bo.view, stats ? bm.view : tern_none(), stats ? br.view : tern_none(),
                                  bx.view, bw.view, bb.view, rows, C, eps));
            /* rstd up to 1/sqrt(eps) for C = 1 (zero variance): f32 still within 1e-5 */
            OT_EXPECT(c, bo, want, ot_tol(d_out, 1e-5), "layernorm %dx%d combo %d", rows, C, combo);
            if (!stats) {
                CHECK_OK(o->layernorm(c->d, bo.view, bm.view, br.view, bx.view, bw.view, bb.view, rows, C, eps));
            } else {
                OT_EXPECT(c, bm, want_mean, 1e-6, "layernorm mean %dx%d", rows, C);
                OT_EXPECT(c, br, want_rstd, 1e-5, "layernorm rstd %dx%d", rows, C);
            }
            /* dsum [C] on odd combos (accumulated onto dw0's values, in dw's dtype): the column
             * sums of the updated dx, here the reference's gx */
            bool with_dsum = combo & 1;
            float *want_ds = malloc((size_t)C * sizeof(float));
            for (int j = 0; j < C; j++) {
                double sum = dw0[j];
                for (int r = 0; r < rows; r++) sum += gx[(size_t)r * C + j];
                want_ds[j] = (float)sum;
            }
            ot_buf bg = ot_make(c, d_g, n, 7, g), bdx = ot_make(c, d_dx, n, 8, dx0),
                   bdw = ot_make(c, d_dw, C, 9, dw0), bdb = ot_make(c, d_db, C, 10, db0),
                   bds = ot_make(c, d_dw, C, 11, dw0);
            /* out on combos 0 and 1 mod 4 (so with and without dsum), in out's dtype: the
             * same expression on the same values as the forward, so its very bits */
            bool with_out = combo % 4 < 2;
            ot_buf by = ot_make(c, d_out, n, 12, NULL);
            CHECK_OK(o->layernorm_backward(c->d, bdx.view, bdw.view, bdb.view, with_dsum ? bds.view : tern_none(),
                                           with_out ? by.view : tern_none(), bg.view, bx.view, bw.view,
                                           with_out ? bb.view : tern_none(), bm.view, br.view, rows, C, 1.0f));
            if (with_out) {
                float *fwd = malloc(n * sizeof(float)), *again = malloc(n * sizeof(float));
                ot_read(c, bo, fwd), ot_read(c, by, again);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++) bad += memcmp(&fwd[i], &again[i], sizeof(float)) != 0;
                CHECKF(bad == 0, "%s: layernorm_backward out %dx%d combo %d: %zu of %zu values differ from the forward's",
                       c->handler, rows, C, combo, bad, n);
                free(fwd), free(again);
            }
            /* dx has cancellations (dnorm minus its means), still ~1e-6 norm-wise in f32 */
            OT_EXPECT(c, bdx, want_dx, ot_tol(d_dx, 2e-5), "layernorm_backward dx %dx%d combo %d", rows, C, combo);
            OT_EXPECT(c, bdw, want_dw, ot_tol(d_dw, 2e-5), "layernorm_backward dw %dx%d combo %d", rows, C, combo);
            OT_EXPECT(c, bdb, want_db, ot_tol(d_db, 2e-5), "layernorm_backward db %dx%d combo %d", rows, C, combo);
            /* a bf16 dx: its values are summed before they are rounded, the reference is exact */
            if (with_dsum)
                OT_EXPECT(c, bds, want_ds, fmax(ot_tol(d_dw, 2e-5), ot_tol(d_dx, 2e-5)),
                          "layernorm_backward dsum %dx%d combo %d", rows, C, combo);
            ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bb), ot_free(c, &bo), ot_free(c, &bm), ot_free(c, &br);
            ot_free(c, &bg), ot_free(c, &bdx), ot_free(c, &bdw), ot_free(c, &bdb), ot_free(c, &bds);
            ot_free(c, &by);
            free(want_ds);
            free(x), free(w), free(b), free(g), free(dx0), free(dw0), free(db0);
            free(out), free(mean), free(rstd), free(gx), free(gw), free(gb);
            free(want), free(want_mean), free(want_rstd), free(want_dx), free(want_dw), free(want_db);
        }
}

/* dw and db adjacent in one buffer, as a model's flat gradients hold a layer norm's gain and
 * bias (a GPU handler adds both partial sums in one pass then): the same results, and
 * nothing written outside the pair. */
static void test_backward_adjacent_grads(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(37);
    const int shapes[][2] = {{3, 7}, {64, 768}};
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++) {
            int rows = shapes[s][0], C = shapes[s][1];
            size_t n = (size_t)rows * C;
            tern_dtype dt = ot_float2[t];
            float *x = ot_random(n, -2, 2), *w = ot_random((size_t)C, 0.5f, 1.5f), *g = ot_random(n, -1, 1);
            float *dwb0 = ot_random(2 * (size_t)C, -1, 1);
            ot_round(x, n, dt), ot_round(w, (size_t)C, dt), ot_round(g, n, dt), ot_round(dwb0, 2 * (size_t)C, dt);
            double *gx = malloc(n * sizeof(double)), *gw = malloc(C * sizeof(double)), *gb = malloc(C * sizeof(double));
            double *out = malloc(n * sizeof(double)), *mean = malloc(rows * sizeof(double)),
                   *rstd = malloc(rows * sizeof(double));
            ln_forward(x, w, w, rows, C, 1e-5, out, mean, rstd);
            ln_backward(g, x, w, rows, C, 1e-5, gx, gw, gb);
            float *want = malloc(2 * (size_t)C * sizeof(float));
            for (int j = 0; j < C; j++) want[j] = (float)(gw[j] + dwb0[j]), want[C + j] = (float)(gb[j] + dwb0[C + j]);
            float *fm = to_float(mean, rows), *fr = to_float(rstd, rows);
            ot_buf bx = ot_make(c, dt, n, 1, x), bw = ot_make(c, dt, C, 2, w), bg = ot_make(c, dt, n, 3, g);
            ot_buf bdx = ot_make(c, dt, n, 4, NULL), bwb = ot_make(c, dt, 2 * (size_t)C, 5, dwb0);
            ot_buf bm = ot_make(c, TERN_F32, rows, 6, fm), br = ot_make(c, TERN_F32, rows, 7, fr);
            CHECK_OK(o->fill(c->d, bdx.view, 0.0));
            CHECK_OK(o->layernorm_backward(c->d, bdx.view, tern_view(bwb.view, 0, C), tern_view(bwb.view, C, C),
                                           tern_none(), tern_none(), bg.view, bx.view, bw.view, tern_none(), bm.view, br.view, rows, C, 1.0f));
            OT_EXPECT(c, bwb, want, ot_tol(dt, 2e-5), "layernorm_backward dw|db adjacent %dx%d %s", rows, C,
                      tern_dtype_name(dt));
            ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bg), ot_free(c, &bdx), ot_free(c, &bwb);
            ot_free(c, &bm), ot_free(c, &br);
            free(x), free(w), free(g), free(dwb0), free(gx), free(gw), free(gb), free(out), free(mean), free(rstd);
            free(want), free(fm), free(fr);
        }
}

/* layernorm_backward's dsum and grad_beta. dsum must equal the column sums of the dx it
 * updated (read back, summed on the host in double); dw and db the reference's sums. For
 * grad_beta 0 the gradients start as NaN (not read: overwritten), 1 adds to old values, 0.5
 * scales them. Shapes take both of a GPU kernel's paths (C % 32 == 0: the row in registers;
 * otherwise a loop) with one and several rows per SIMD group; the outputs lie in separate
 * buffers, as [dw | db] and dsum apart (a model's layer norm gain and bias, and a projection
 * bias elsewhere), all three adjacent in one buffer, or without dsum. */
static void test_backward_dsum_beta(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(38);
    const int shapes[][2] = {{5, 7}, {9, 64}, {130, 100}, {300, 768}};
    const float betas[] = {0.0f, 1.0f, 0.5f};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 2; t++) {
            int rows = shapes[s][0], C = shapes[s][1];
            size_t n = (size_t)rows * C, c3 = 3 * (size_t)C;
            tern_dtype dt = ot_float2[t];
            float *x = ot_random(n, -2, 2), *w = ot_random((size_t)C, 0.5f, 1.5f), *g = ot_random(n, -1, 1);
            float *dx0 = ot_random(n, -1, 1), *old3 = ot_random(c3, -1, 1); /* old dw, db, dsum */
            ot_round(x, n, dt), ot_round(w, (size_t)C, dt), ot_round(g, n, dt), ot_round(dx0, n, dt);
            ot_round(old3, c3, dt);
            double *gx = malloc(n * sizeof(double)), *gw = malloc(C * sizeof(double)), *gb = malloc(C * sizeof(double));
            double *out = malloc(n * sizeof(double)), *mean = malloc(rows * sizeof(double)),
                   *rstd = malloc(rows * sizeof(double));
            ln_forward(x, w, w, rows, C, 1e-5, out, mean, rstd);
            ln_backward(g, x, w, rows, C, 1e-5, gx, gw, gb);
            float *fm = to_float(mean, rows), *fr = to_float(rstd, rows);
            float *dxh = malloc(n * sizeof(float)), *want3 = malloc(c3 * sizeof(float));
            ot_buf bx = ot_make(c, dt, n, 1, x), bw = ot_make(c, dt, C, 2, w), bg = ot_make(c, dt, n, 3, g);
            ot_buf bm = ot_make(c, TERN_F32, rows, 6, fm), br = ot_make(c, TERN_F32, rows, 7, fr);
            for (int layout = 0; layout < 4; layout++)
                for (int bi = 0; bi < 3; bi++) {
                    float beta = betas[bi];
                    bool with_dsum = layout != 3;
                    /* output k (dw, db, dsum) lies in buffer home[k] (-1: absent) from its
                     * element at[k]; each buffer holds outputs first[b] .. first[b] + count[b] - 1 */
                    static const int homes[4][3] = {{0, 1, 2}, {0, 0, 2}, {0, 0, 0}, {0, 1, -1}};
                    const int *home = homes[layout];
                    int first[3] = {-1, -1, -1}, count[3] = {0, 0, 0};
                    for (int k = 0; k < 3; k++) {
                        if (home[k] < 0) continue;
                        if (first[home[k]] < 0) first[home[k]] = k;
                        count[home[k]]++;
                    }
                    ot_buf bo[3];
                    tern_buf view[3];
                    for (int b = 0; b < 3; b++) {
                        bo[b] = count[b] ? ot_make(c, dt, (size_t)count[b] * C, (size_t)(5 + b),
                                                   beta != 0.0f ? old3 + (size_t)first[b] * C : NULL)
                                         : (ot_buf){tern_none(), tern_none(), 0};
                    }
                    for (int k = 0; k < 3; k++)
                        view[k] = home[k] < 0 ? tern_none()
                                              : tern_view(bo[home[k]].view, (size_t)(k - first[home[k]]) * C, C);
                    ot_buf bdx = ot_make(c, dt, n, 4, dx0);
                    CHECK_OK(o->layernorm_backward(c->d, bdx.view, view[0], view[1], view[2], tern_none(), bg.view, bx.view,
                                                   bw.view, tern_none(), bm.view, br.view, rows, C, beta));
                    ot_read(c, bdx, dxh);
                    for (int j = 0; j < C; j++) {
                        double sum = 0;
                        for (int r = 0; r < rows; r++) sum += dxh[(size_t)r * C + j];
                        want3[j] = (float)(beta * (double)old3[j] + gw[j]);
                        want3[C + j] = (float)(beta * (double)old3[C + j] + gb[j]);
                        want3[2 * C + j] = (float)(beta * (double)old3[2 * C + j] + sum);
                    }
                    for (int b = 0; b < 3; b++) {
                        if (!count[b]) continue;
                        OT_EXPECT(c, bo[b], want3 + (size_t)first[b] * C, ot_tol(dt, 2e-5),
                                  "layernorm_backward %dx%d %s grad_beta %g, layout %d, outputs %d..%d%s", rows, C,
                                  tern_dtype_name(dt), beta, layout, first[b], first[b] + count[b] - 1,
                                  with_dsum ? "" : " (no dsum)");
                        ot_free(c, &bo[b]);
                    }
                    ot_free(c, &bdx);
                }
            ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bg), ot_free(c, &bm), ot_free(c, &br);
            free(x), free(w), free(g), free(dx0), free(old3), free(gx), free(gw), free(gb), free(out), free(mean);
            free(rstd), free(fm), free(fr), free(dxh), free(want3);
        }
}

/* sum(g * layernorm(x, w, b)) with the reference forward. */
static double ln_loss(const float *g, const float *x, const float *w, const float *b, int rows, int C) {
    double *out = malloc((size_t)rows * C * sizeof(double)), l = 0;
    ln_forward(x, w, b, rows, C, 1e-5, out, NULL, NULL);
    for (size_t i = 0; i < (size_t)rows * C; i++) l += g[i] * out[i];
    free(out);
    return l;
}

static void test_finite_differences(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(32);
    /* 1. the reference backward is the gradient of the reference forward: central
     * differences in double on every input (inputs are floats: step h = 2^-12 is exact,
     * truncation ~h^2 = 6e-8 relative) */
    int rows = 3, C = 9;
    size_t n = (size_t)rows * C;
    float *x = ot_random(n, -2, 2), *w = ot_random(C, 0.5f, 1.5f), *b = ot_random(C, -1, 1), *g = ot_random(n, -1, 1);
    double gx[27], gw[9], gb[9];
    ln_backward(g, x, w, rows, C, 1e-5, gx, gw, gb);
    const float h = 1.0f / 4096;
    double worst = 0;
    for (int which = 0; which < 3; which++) {
        float *p = which == 0 ? x : which == 1 ? w : b;
        double *grad = which == 0 ? gx : which == 1 ? gw : gb;
        size_t count = which == 0 ? n : (size_t)C;
        for (size_t i = 0; i < count; i++) {
            float keep = p[i];
            p[i] = keep + h;
            double lp = ln_loss(g, x, w, b, rows, C);
            p[i] = keep - h;
            double lm = ln_loss(g, x, w, b, rows, C);
            p[i] = keep;
            double fd = (lp - lm) / (2.0 * h);
            worst = fmax(worst, fabs(fd - grad[i]) / fmax(1.0, fabs(grad[i])));
        }
    }
    /* the loss is evaluated in double but from f32-perturbed inputs: ~1e-6 is the floor */
    CHECKF(worst < 1e-5, "layernorm reference backward vs finite differences: %.3g", worst);

    /* 2. the handler's backward against its own forward along one random direction
     * (f32 forward: noise ~1e-7 |L| / h with h = 1e-2, truncation ~h^2) */
    rows = 8;
    C = 64;
    n = (size_t)rows * C;
    float *X = ot_random(n, -2, 2), *W = ot_random(C, 0.5f, 1.5f), *Bv = ot_random(C, -1, 1), *G = ot_random(n, -1, 1);
    float *dX = ot_random(n, -1, 1), *dW = ot_random(C, -1, 1), *dB = ot_random(C, -1, 1);
    const double hd = 1e-2;
    double l[2];
    for (int sgn = 0; sgn < 2; sgn++) {
        double s = sgn ? -hd : hd;
        float *xp = malloc(n * sizeof(float)), *wp = malloc(C * sizeof(float)), *bp = malloc(C * sizeof(float));
        for (size_t i = 0; i < n; i++) xp[i] = (float)(X[i] + s * dX[i]);
        for (int j = 0; j < C; j++) wp[j] = (float)(W[j] + s * dW[j]), bp[j] = (float)(Bv[j] + s * dB[j]);
        ot_buf bx = ot_make(c, TERN_F32, n, 0, xp), bw = ot_make(c, TERN_F32, C, 0, wp), bb = ot_make(c, TERN_F32, C, 0, bp);
        ot_buf bo = ot_make(c, TERN_F32, n, 0, NULL);
        CHECK_OK(o->layernorm(c->d, bo.view, tern_none(), tern_none(), bx.view, bw.view, bb.view, rows, C, 1e-5f));
        float *out = malloc(n * sizeof(float));
        ot_read(c, bo, out);
        l[sgn] = 0;
        for (size_t i = 0; i < n; i++) l[sgn] += (double)G[i] * out[i];
        ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bb), ot_free(c, &bo);
        free(xp), free(wp), free(bp), free(out);
    }
    double fd = (l[0] - l[1]) / (2 * hd);
    float zeros_n[512] = {0}, zeros_c[64] = {0};
    ot_buf bx = ot_make(c, TERN_F32, n, 0, X), bw = ot_make(c, TERN_F32, C, 0, W), bb = ot_make(c, TERN_F32, C, 0, Bv);
    ot_buf bo = ot_make(c, TERN_F32, n, 0, NULL), bm = ot_make(c, TERN_F32, rows, 0, NULL), br = ot_make(c, TERN_F32, rows, 0, NULL);
    ot_buf bg = ot_make(c, TERN_F32, n, 0, G), bdx = ot_make(c, TERN_F32, n, 0, zeros_n);
    ot_buf bdw = ot_make(c, TERN_F32, C, 0, zeros_c), bdb = ot_make(c, TERN_F32, C, 0, zeros_c);
    CHECK_OK(o->layernorm(c->d, bo.view, bm.view, br.view, bx.view, bw.view, bb.view, rows, C, 1e-5f));
    CHECK_OK(o->layernorm_backward(c->d, bdx.view, bdw.view, bdb.view, tern_none(), tern_none(), bg.view, bx.view, bw.view, tern_none(), bm.view,
                                   br.view, rows, C, 1.0f));
    float gx2[512], gw2[64], gb2[64];
    ot_read(c, bdx, gx2), ot_read(c, bdw, gw2), ot_read(c, bdb, gb2);
    double an = 0;
    for (size_t i = 0; i < n; i++) an += (double)gx2[i] * dX[i];
    for (int j = 0; j < C; j++) an += (double)gw2[j] * dW[j] + (double)gb2[j] * dB[j];
    CHECKF(fabs(fd - an) <= 1e-3 * fabs(an), "%s: layernorm_backward vs finite differences: %.9g vs %.9g",
           c->handler, an, fd);
    ot_free(c, &bx), ot_free(c, &bw), ot_free(c, &bb), ot_free(c, &bo), ot_free(c, &bm), ot_free(c, &br);
    ot_free(c, &bg), ot_free(c, &bdx), ot_free(c, &bdw), ot_free(c, &bdb);
    free(x), free(w), free(b), free(g), free(X), free(W), free(Bv), free(G), free(dX), free(dW), free(dB);
}

/* 0.5 x (1 + tanh u) as x / (1 + exp(-2u)) */
/* The backward from the layer norm's output (mean absent: x is y, xhat = (y - b) / w), with
 * weights of both signs and magnitudes 0.2 to 1.5: against the double-precision backward on
 * xhat made the same way from the very y given (so the operation's own semantics, at the
 * usual tolerances), and in f32 against the backward on the true x as well (y's rounding
 * divided by w: |y| / |w| below 20 here, 2^-24 x 20 relative, within 1e-4). Then a weight
 * of 0: every result finite. Shapes: the generic path (1000), one SIMD group a row (64,
 * 768), a team of two (1600, GPT-2 1.5B's width). */
static void test_backward_from_output(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(41);
    const int shapes[][2] = {{3, 7}, {64, 768}, {17, 1000}, {300, 64}, {9, 1600}};
    const double eps = 1e-5;
    for (int s = 0; s < 5; s++)
        for (int t = 0; t < 3; t++) {
            int rows = shapes[s][0], C = shapes[s][1];
            size_t n = (size_t)rows * C;
            /* t 0: all f32; 1: all bf16; 2: y bf16, the rest f32 */
            tern_dtype dt = t == 1 ? TERN_BF16 : TERN_F32, dy_t = t == 0 ? TERN_F32 : TERN_BF16;
            float *x = ot_random(n, -2, 2), *w = ot_random((size_t)C, 0.2f, 1.5f), *b = ot_random((size_t)C, -1, 1);
            for (int j = 0; j < C; j++)
                if (ot_randint(0, 2)) w[j] = -w[j];
            float *g = ot_random(n, -1, 1), *dx0 = ot_random(n, -1, 1);
            ot_round(x, n, dt), ot_round(w, (size_t)C, dt), ot_round(b, (size_t)C, dt), ot_round(g, n, dt);
            ot_round(dx0, n, dt);
            double *out = malloc(n * sizeof(double)), *mean = malloc(rows * sizeof(double)),
                   *rstd = malloc(rows * sizeof(double)), *xhat = malloc(n * sizeof(double));
            ln_forward(x, w, b, rows, C, eps, out, mean, rstd);
            /* y as the op receives it, and xhat from it as the op makes it */
            float *y = to_float(out, n), *rs = to_float(rstd, rows);
            ot_round(y, n, dy_t);
            for (size_t i = 0; i < n; i++) xhat[i] = ((double)y[i] - b[i % C]) / w[i % C];
            double *rs64 = malloc(rows * sizeof(double));
            for (int r = 0; r < rows; r++) rs64[r] = rs[r];
            double *gx = malloc(n * sizeof(double)), *gw = malloc(C * sizeof(double)), *gb = malloc(C * sizeof(double));
            ln_backward_xhat(g, xhat, rs64, w, rows, C, gx, gw, gb);
            for (size_t i = 0; i < n; i++) gx[i] += dx0[i];
            float *want_dx = to_float(gx, n), *want_dw = to_float(gw, C), *want_db = to_float(gb, C);
            ot_buf by = ot_make(c, dy_t, n, 1, y), bw = ot_make(c, dt, C, 2, w), bb = ot_make(c, dt, C, 3, b);
            ot_buf br = ot_make(c, TERN_F32, rows, 4, rs), bg = ot_make(c, dt, n, 5, g);
            ot_buf bdx = ot_make(c, dt, n, 6, dx0), bdw = ot_make(c, dt, C, 7, NULL), bdb = ot_make(c, dt, C, 8, NULL);
            /* dsum (the column sums of the updated dx): all bf16 (as GPT-2's layer norms but
             * ln_1 of layer 0), and every other all-f32 shape */
            bool with_dsum = t == 1 || (t == 0 && s % 2);
            ot_buf bds = ot_make(c, dt, C, 9, NULL);
            float *want_ds = malloc((size_t)C * sizeof(float));
            for (int j = 0; j < C; j++) {
                double sum = 0;
                for (int r = 0; r < rows; r++) sum += gx[(size_t)r * C + j];
                want_ds[j] = (float)sum;
            }
            CHECK_OK(o->layernorm_backward(c->d, bdx.view, bdw.view, bdb.view, with_dsum ? bds.view : tern_none(),
                                           tern_none(), bg.view, by.view, bw.view, bb.view, tern_none(), br.view, rows,
                                           C, 0.0f));
            if (with_dsum)
                OT_EXPECT(c, bds, want_ds, ot_tol(dt, 2e-5), "layernorm_backward from y: dsum %dx%d t %d", rows, C, t);
            OT_EXPECT(c, bdx, want_dx, ot_tol(dt, 2e-5), "layernorm_backward from y: dx %dx%d t %d", rows, C, t);
            OT_EXPECT(c, bdw, want_dw, ot_tol(dt, 2e-5), "layernorm_backward from y: dw %dx%d t %d", rows, C, t);
            OT_EXPECT(c, bdb, want_db, ot_tol(dt, 2e-5), "layernorm_backward from y: db %dx%d t %d", rows, C, t);
            if (t == 0) { /* the true gradient, from x */
                ln_backward(g, x, w, rows, C, eps, gx, gw, gb);
                for (size_t i = 0; i < n; i++) gx[i] += dx0[i];
                free(want_dx), free(want_dw);
                want_dx = to_float(gx, n), want_dw = to_float(gw, C);
                OT_EXPECT(c, bdx, want_dx, 1e-4, "layernorm_backward from y against x: dx %dx%d", rows, C);
                OT_EXPECT(c, bdw, want_dw, 1e-4, "layernorm_backward from y against x: dw %dx%d", rows, C);
                /* one weight 0: xhat of that column is lost, the results stay finite */
                w[C / 2] = 0;
                ot_buf bw0 = ot_make(c, dt, C, 2, w);
                CHECK_OK(o->layernorm_backward(c->d, bdx.view, bdw.view, bdb.view, tern_none(), tern_none(), bg.view,
                                               by.view, bw0.view, bb.view, tern_none(), br.view, rows, C, 0.0f));
                float *got = malloc(n * sizeof(float));
                ot_read(c, bdx, got);
                size_t bad = 0;
                for (size_t i = 0; i < n; i++) bad += !isfinite(got[i]);
                ot_read(c, bdw, got);
                for (int j = 0; j < C; j++) bad += !isfinite(got[j]);
                CHECKF(bad == 0, "%s: layernorm_backward from y with a weight 0, %dx%d: %zu values not finite",
                       c->handler, rows, C, bad);
                free(got);
                ot_free(c, &bw0);
            }
            ot_free(c, &by), ot_free(c, &bw), ot_free(c, &bb), ot_free(c, &br), ot_free(c, &bg);
            ot_free(c, &bdx), ot_free(c, &bdw), ot_free(c, &bdb), ot_free(c, &bds);
            free(want_ds);
            free(x), free(w), free(b), free(g), free(dx0), free(out), free(mean), free(rstd), free(xhat);
            free(y), free(rs), free(rs64), free(gx), free(gw), free(gb), free(want_dx), free(want_dw), free(want_db);
        }
}

static void test_errors(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_buf x = ot_make(c, TERN_F32, 100, 0, NULL), out = ot_make(c, TERN_F32, 128, 0, NULL);
    ot_buf w = ot_make(c, TERN_F32, 32, 0, NULL), b = ot_make(c, TERN_F32, 32, 0, NULL);
    ot_buf mean = ot_make(c, TERN_F32, 4, 0, NULL), m16 = ot_make(c, TERN_BF16, 4, 0, NULL);
    ot_buf x128 = ot_make(c, TERN_F32, 128, 0, NULL), i32 = ot_make(c, TERN_I32, 128, 0, NULL);
    tern_buf none = tern_none();
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, x.view, w.view, b.view, 4, 32, 1e-5f),
              "layernorm: x has 100 elements, rows * C needs 128");
    CHECK_ERR(o->layernorm(c->d, out.view, m16.view, none, x128.view, w.view, b.view, 4, 32, 1e-5f),
              "layernorm: mean is bf16, needs f32");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, i32.view, w.view, b.view, 4, 32, 1e-5f),
              "layernorm: x is i32, needs f32 or bf16");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, x128.view, w.view, b.view, 0, 32, 1e-5f),
              "layernorm: rows must be positive, got 0");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, x128.view, w.view, b.view, 4, 32, -1.0f),
              "layernorm: eps must be finite and >= 0");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, x128.view, tern_view(w.view, 0, 31), b.view, 4, 32, 1e-5f),
              "layernorm: w has 31 elements, C needs 32");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, x128.view, w.view, none, 4, 32, 1e-5f),
              "layernorm: b is absent");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, out.view, w.view, b.view, 4, 32, 1e-5f),
              "layernorm: out and x overlap");
    CHECK_ERR(o->layernorm(c->d, out.view, none, none, tern_view(x.view, 50, 128), w.view, b.view, 4, 32, 1e-5f),
              "layernorm: x is an invalid view");
    ot_buf dx = ot_make(c, TERN_F32, 128, 0, NULL), dw = ot_make(c, TERN_F32, 32, 0, NULL);
    ot_buf db = ot_make(c, TERN_F32, 32, 0, NULL), rstd = ot_make(c, TERN_F32, 4, 0, NULL);
    ot_buf ds = ot_make(c, TERN_F32, 32, 0, NULL), ds_i32 = ot_make(c, TERN_I32, 32, 0, NULL);
    ot_buf ds_out = ot_make(c, TERN_F32, 128, 0, NULL);
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, w.view, db.view, none, tern_none(), out.view, x128.view, w.view, tern_none(), mean.view,
                                    rstd.view, 4, 32, 1.0f),
              "layernorm_backward: dw and w overlap");
    CHECK_ERR(o->layernorm_backward(c->d, x128.view, dw.view, db.view, none, tern_none(), out.view, x128.view, w.view, tern_none(), mean.view,
                                    rstd.view, 4, 32, 1.0f),
              "layernorm_backward: dx and x overlap");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, tern_none(), out.view, x128.view, w.view, tern_none(), none,
                                    rstd.view, 4, 32, 1.0f),
              "layernorm_backward: b (x is the output: mean absent) is absent");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, dx.view, out.view, x128.view, w.view, b.view, none,
                                    rstd.view, 4, 32, 1.0f),
              "layernorm_backward: out is written only from the layer norm's input (mean given)");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, dw.view, none, tern_none(), out.view, x128.view, w.view, tern_none(), mean.view,
                                    rstd.view, 4, 32, 1.0f),
              "layernorm_backward: dw and db overlap");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, tern_none(), out.view, x128.view, w.view, tern_none(), mean.view,
                                    rstd.view, 4, 33, 1.0f),
              "layernorm_backward: dx has 128 elements, rows * C needs 132");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, tern_view(ds.view, 0, 31), tern_none(), out.view, x128.view,
                                    w.view, tern_none(), mean.view, rstd.view, 4, 32, 1.0f),
              "layernorm_backward: dsum has 31 elements, C needs 32");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, ds_i32.view, tern_none(), out.view, x128.view, w.view, tern_none(),
                                    mean.view, rstd.view, 4, 32, 1.0f),
              "layernorm_backward: dsum is i32, needs f32 or bf16");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, tern_view(dx.view, 0, 32), tern_none(), out.view, x128.view,
                                    w.view, tern_none(), mean.view, rstd.view, 4, 32, 1.0f),
              "layernorm_backward: dx and dsum overlap");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, db.view, tern_none(), out.view, x128.view, w.view, tern_none(), mean.view,
                                    rstd.view, 4, 32, 1.0f),
              "layernorm_backward: db and dsum overlap");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, ds.view, tern_none(), out.view, x128.view, w.view, tern_none(), mean.view,
                                    rstd.view, 4, 32, NAN),
              "layernorm_backward: grad_beta must be finite");
    /* out (the forward's output written again) needs b, and overlaps nothing */
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, ds_out.view, out.view, x128.view, w.view,
                                    none, mean.view, rstd.view, 4, 32, 1.0f),
              "layernorm_backward: b (out is written) is absent");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, x128.view, out.view, x128.view, w.view,
                                    b.view, mean.view, rstd.view, 4, 32, 1.0f),
              "layernorm_backward: out and x overlap");
    CHECK_ERR(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, tern_view(ds_out.view, 0, 127), out.view,
                                    x128.view, w.view, b.view, mean.view, rstd.view, 4, 32, 1.0f),
              "layernorm_backward: out has 127 elements, rows * C needs 128");
    CHECK_OK(o->layernorm_backward(c->d, dx.view, dw.view, db.view, none, ds_out.view, out.view, x128.view, w.view,
                                   b.view, mean.view, rstd.view, 4, 32, 1.0f));
    ot_free(c, &ds), ot_free(c, &ds_i32), ot_free(c, &ds_out);
    CHECK_OK(o->layernorm(c->d, out.view, mean.view, rstd.view, x128.view, w.view, b.view, 4, 32, 1e-5f));
    ot_free(c, &x), ot_free(c, &out), ot_free(c, &w), ot_free(c, &b), ot_free(c, &mean), ot_free(c, &m16);
    ot_free(c, &x128), ot_free(c, &i32), ot_free(c, &dx), ot_free(c, &dw), ot_free(c, &db), ot_free(c, &rstd);
}

/* TERN_TEST_PART splits the suite in two for a slow handler (OpenCL: two tests, each with
 * its share of PoCL's compiles): "matrix" the shapes x dtypes of forward and backward;
 * "grads" adjacent gradients, dsum and grad_beta, finite differences and the errors.
 * Unset: everything. */
static void test_all(ot_ctx *c) {
    const char *part = getenv("TERN_TEST_PART");
    bool all = !part || !*part, matrix = all || !strcmp(part, "matrix"), grads = all || !strcmp(part, "grads");
    CHECKF(matrix || grads, "TERN_TEST_PART is '%s', not matrix or grads", part);
    if (matrix) test_forward_backward(c);
    if (grads) {
        test_backward_adjacent_grads(c);
        test_backward_dsum_beta(c);
        test_backward_from_output(c);
        test_finite_differences(c);
        test_errors(c);
    }
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_layernorm");
}
