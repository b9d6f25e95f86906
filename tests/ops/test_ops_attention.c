/* attention, attention_backward and attention_cached against double-precision references:
 * several (B, T, NH, NH, C / NH) incl. T = 1 and hs = 1, mixed f32/bf16; the reference backward
 * against finite differences of the reference forward, the handler's backward against its
 * own forward; decoding with a KV cache (a prompt, then single tokens and a chunk) against
 * full causal attention, with the cache layout [B, NH, max_T, hs] checked and the unused
 * cache left as NaN (it must not be read); then validation errors. `saved` is the
 * handler's own record: only its length is part of the contract, so it is not inspected. */
#include <limits.h>

#include "ops_test.h"

/* out [B, T, C] of causal attention over qkv [B, T, 3C], in double. */
static void attn_ref(const float *qkv, int B, int T, int C, int NH, double *out) {
    int hs = C / NH;
    double scale = 1 / sqrt((double)hs);
    double *p = malloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    double s = 0;
                    for (int i = 0; i < hs; i++) s += (double)q[i] * k[i];
                    p[t2] = s * scale;
                    mx = fmax(mx, p[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (p[t2] = exp(p[t2] - mx));
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) o[i] += p[t2] / sum * v[i];
                }
            }
    free(p);
}

/* dqkv of sum(g * attention(qkv)), in double. */
static void attn_backward_ref(const float *qkv, const float *g, int B, int T, int C, int NH, double *dqkv) {
    int hs = C / NH;
    double scale = 1 / sqrt((double)hs);
    double *p = malloc((size_t)T * sizeof(double)), *dp = malloc((size_t)T * sizeof(double));
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t row = ((size_t)b * T + t) * 3 * C;
                const float *q = qkv + row + h * hs;
                const float *gt = g + ((size_t)b * T + t) * C + h * hs;
                double mx = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    double s = 0;
                    for (int i = 0; i < hs; i++) s += (double)q[i] * k[i];
                    p[t2] = s * scale;
                    mx = fmax(mx, p[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (p[t2] = exp(p[t2] - mx));
                double pdp = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    p[t2] /= sum;
                    const float *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    double s = 0;
                    for (int i = 0; i < hs; i++) s += (double)gt[i] * v[i];
                    dp[t2] = s;
                    pdp += p[t2] * s;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    size_t row2 = ((size_t)b * T + t2) * 3 * C;
                    double ds = p[t2] * (dp[t2] - pdp) * scale;
                    for (int i = 0; i < hs; i++) {
                        dqkv[row + h * hs + i] += ds * qkv[row2 + C + h * hs + i];
                        dqkv[row2 + C + h * hs + i] += ds * q[i];
                        dqkv[row2 + 2 * C + h * hs + i] += p[t2] * gt[i];
                    }
                }
            }
    free(p);
    free(dp);
}

static float *to_float(const double *x, size_t n) {
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}

static const int shapes[][4] = {{1, 1, 4, 2}, {2, 5, 12, 3}, {1, 7, 3, 3}, {4, 64, 768, 12}, {2, 33, 64, 4}};
#define N_SHAPES 5
#define SHAPE_HS16 4 /* shapes[SHAPE_HS16]: T = 33, hs = 16 */

/* The share of the suite a process runs (TERN_TEST_PART; see test_all). */
typedef struct part {
    bool train, train_hs16, cached, cached_split;
} part;

/* Advances the random numbers past n draws (a case another part runs), so that each case
 * gets the data it gets when the whole suite runs in one process. */
static void skip_draws(size_t n) {
    for (size_t i = 0; i < n; i++) (void)ot_next();
}

static void test_attention(ot_ctx *c, part p) {
    const tern_ops *o = c->ops;
    ot_seed(51);
    /* The representative set (ot_full; opencl in make test), since each dtype combination
     * at each head size is a kernel variant: T = 1 and hs = 2 in f32, hs = 1 in bf16, and
     * the odd shapes (T = 5 with hs 4, T = 33 with hs 16) all f32, all bf16 and one
     * alternating mix each (qkv and g bf16, out and dqkv f32; and the reverse), so each
     * buffer meets the other dtype in each kernel. GPT-2's size (hs = 64) is the slow
     * suite's (test_ops_attention_opencl_full): the same kernels with a larger head size
     * compiled in, which PoCL takes a minute of CPU to compile each (measured). In make
     * test the set is two OpenCL tests (test_all): T = 33 is test_ops_attention_opencl_train_hs16
     * (all f32, all bf16, the second mix), the rest test_ops_attention_opencl (hs 4 with all
     * f32, all bf16 and the first mix, T = 1, hs 1 and 2), so each test alone still runs
     * every kernel (forward, delta, dk/dv, dq) with each buffer in each dtype. */
    static const int reduced[N_SHAPES][3] = {{0, -1, -1}, {0, 15, 5}, {15, -1, -1}, {-1, -1, -1}, {0, 15, 10}};
    bool full = ot_full(c);
    for (int s = 0; s < N_SHAPES; s++)
        for (int combo = 0; combo < 16; combo++) { /* every f32/bf16 combination */
            int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
            if (s == 3 && combo % 5 != 0) continue; /* GPT-2's size: four of them */
            if (!full && combo != reduced[s][0] && combo != reduced[s][1] && combo != reduced[s][2]) continue;
            tern_dtype d_qkv = ot_float2[combo & 1], d_out = ot_float2[(combo >> 1) & 1];
            tern_dtype d_g = ot_float2[(combo >> 2) & 1], d_dqkv = ot_float2[combo >> 3];
            size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C, saved_len = 0;
            if (!(s == SHAPE_HS16 ? p.train_hs16 : p.train)) { /* the other part's case */
                skip_draws(n3 + n);
                continue;
            }
            CHECK_OK(o->attention_saved_len(c->d, B, T, NH, &saved_len));
            /* the handler's own record: only cpu's length (the probabilities) is known */
            CHECK(saved_len > 0 && (!ot_is_cpu(c) || saved_len == (size_t)B * NH * T * T));
            float *qkv = ot_random(n3, -2, 2), *g = ot_random(n, -1, 1);
            ot_round(qkv, n3, d_qkv);
            ot_round(g, n, d_g);
            double *out = malloc(n * sizeof(double)), *dqkv = malloc(n3 * sizeof(double));
            attn_ref(qkv, B, T, C, NH, out);
            attn_backward_ref(qkv, g, B, T, C, NH, dqkv);
            float *want = to_float(out, n), *want_d = to_float(dqkv, n3);
            ot_buf bq = ot_make(c, d_qkv, n3, 1, qkv), bo = ot_make(c, d_out, n, 2, NULL);
            ot_buf bs = ot_make(c, TERN_F32, saved_len, 3, NULL);
            CHECK_OK(o->attention(c->d, bo.view, bs.view, bq.view, B, T, NH, NH, C / NH));
            /* softmax and dot products of hs terms in f32 */
            OT_EXPECT(c, bo, want, ot_tol(d_out, 1e-5), "attention B%d T%d C%d NH%d combo %d", B, T, C, NH, combo);
            ot_buf bg = ot_make(c, d_g, n, 4, g), bd = ot_make(c, d_dqkv, n3, 5, NULL);
            CHECK_OK(o->attention_backward(c->d, bd.view, bg.view, bq.view, bo.view, bs.view, B, T, NH, NH, C / NH));
            /* the gradient subtracts sum P dP from dP: f32 cancellation, 5e-5 norm-wise. It is
             * no more precise than the forward's record it reads: a bf16 forward (out bf16) may
             * round its scores to bf16 (the cuda handler's tensor-core path does), so then the
             * tolerance is bf16's whatever dqkv's dtype. */
            tern_dtype coarser = d_out == TERN_BF16 ? TERN_BF16 : d_dqkv;
            OT_EXPECT(c, bd, want_d, ot_tol(coarser, 5e-5), "attention_backward B%d T%d C%d NH%d combo %d", B, T, C, NH, combo);
            ot_free(c, &bq), ot_free(c, &bo), ot_free(c, &bs), ot_free(c, &bg), ot_free(c, &bd);
            free(qkv), free(g), free(out), free(dqkv), free(want), free(want_d);
        }
}

static double attn_loss(const float *qkv, const float *g, int B, int T, int C, int NH) {
    size_t n = (size_t)B * T * C;
    double *out = malloc(n * sizeof(double)), l = 0;
    attn_ref(qkv, B, T, C, NH, out);
    for (size_t i = 0; i < n; i++) l += g[i] * out[i];
    free(out);
    return l;
}

static void test_finite_differences(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(52);
    /* 1. reference backward vs central differences of the reference forward, every input
     * (step 2^-12 exact in float; truncation ~h^2) */
    int B = 2, T = 4, C = 6, NH = 2;
    size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C;
    float *qkv = ot_random(n3, -1, 1), *g = ot_random(n, -1, 1);
    double *grad = malloc(n3 * sizeof(double));
    attn_backward_ref(qkv, g, B, T, C, NH, grad);
    const float h = 1.0f / 4096;
    double worst = 0;
    for (size_t i = 0; i < n3; i++) {
        float keep = qkv[i];
        qkv[i] = keep + h;
        double lp = attn_loss(qkv, g, B, T, C, NH);
        qkv[i] = keep - h;
        double lm = attn_loss(qkv, g, B, T, C, NH);
        qkv[i] = keep;
        worst = fmax(worst, fabs((lp - lm) / (2.0 * h) - grad[i]) / fmax(1.0, fabs(grad[i])));
    }
    CHECKF(worst < 1e-5, "attention reference backward vs finite differences: %.3g", worst);
    free(qkv), free(g), free(grad);

    /* 2. the handler's backward against its own f32 forward along a random direction
     * (h = 1e-2: f32 noise ~1e-7 |L| / h, truncation ~h^2) */
    B = 2, T = 9, C = 16, NH = 2;
    n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C;
    float *x = ot_random(n3, -1, 1), *gg = ot_random(n, -1, 1), *dir = ot_random(n3, -1, 1);
    size_t saved_len;
    CHECK_OK(o->attention_saved_len(c->d, B, T, NH, &saved_len));
    double l[2];
    const double hd = 1e-2;
    float *out = malloc(n * sizeof(float));
    for (int sgn = 0; sgn < 2; sgn++) {
        float *xp = malloc(n3 * sizeof(float));
        for (size_t i = 0; i < n3; i++) xp[i] = (float)(x[i] + (sgn ? -hd : hd) * dir[i]);
        ot_buf bq = ot_make(c, TERN_F32, n3, 0, xp), bo = ot_make(c, TERN_F32, n, 0, NULL), bs = ot_make(c, TERN_F32, saved_len, 0, NULL);
        CHECK_OK(o->attention(c->d, bo.view, bs.view, bq.view, B, T, NH, NH, C / NH));
        ot_read(c, bo, out);
        l[sgn] = 0;
        for (size_t i = 0; i < n; i++) l[sgn] += (double)gg[i] * out[i];
        ot_free(c, &bq), ot_free(c, &bo), ot_free(c, &bs);
        free(xp);
    }
    ot_buf bq = ot_make(c, TERN_F32, n3, 0, x), bo = ot_make(c, TERN_F32, n, 0, NULL), bs = ot_make(c, TERN_F32, saved_len, 0, NULL);
    ot_buf bg = ot_make(c, TERN_F32, n, 0, gg), bd = ot_make(c, TERN_F32, n3, 0, NULL);
    CHECK_OK(o->attention(c->d, bo.view, bs.view, bq.view, B, T, NH, NH, C / NH));
    CHECK_OK(o->attention_backward(c->d, bd.view, bg.view, bq.view, bo.view, bs.view, B, T, NH, NH, C / NH));
    float *dx = malloc(n3 * sizeof(float));
    ot_read(c, bd, dx);
    double an = 0, fd = (l[0] - l[1]) / (2 * hd);
    for (size_t i = 0; i < n3; i++) an += (double)dx[i] * dir[i];
    CHECKF(fabs(fd - an) <= 1e-3 * fabs(an), "%s: attention_backward vs finite differences: %.9g vs %.9g", c->handler, an, fd);
    ot_free(c, &bq), ot_free(c, &bo), ot_free(c, &bs), ot_free(c, &bg), ot_free(c, &bd);
    free(x), free(gg), free(dir), free(out), free(dx);
}

/* Decoding: the whole sequence's qkv is known; feed it as a prompt of T0 positions, then
 * single positions, then a chunk of 3, and compare each call's out with the rows of full
 * causal attention. The last configuration has few rows and a cache long enough that the GPU
 * handlers split every step's positions across groups (prompt, single rows and the chunk). */
static void test_cached(ot_ctx *c, part p) {
    const tern_ops *o = c->ops;
    ot_seed(53);
    /* B, C, NH, total T; the last: a long prompt (three blocks of the cpu handler's query
     * blocks of 64) and a second prompt of 20 at p0 > 0 */
    const int cfg[][4] = {{1, 768, 12, 20}, {2, 12, 3, 11}, {3, 4, 4, 9}, {1, 128, 2, 70}, {1, 128, 2, 150}};
    enum { CFG_SPLIT = 3 }; /* cfg[CFG_SPLIT]: few rows, a long cache: split across groups */
    /* the representative set (opencl in make test): hs 4 and hs 1 all f32, all bf16, and
     * the cache in the other dtype than qkv and out both ways; hs 64 split across groups
     * (the last configuration) in f32; GPT-2's size (the first) is the slow suite's, as
     * above. In make test the split configuration (its split and combine kernels: decoding
     * one row, a prompt and a chunk) is test_ops_attention_opencl_cached_split, the rest
     * test_ops_attention_opencl_cached (test_all). */
    bool whole = ot_full(c);
    for (int s = 0; s < 5; s++)
        for (int combo = 0; combo < 8; combo++) { /* every f32/bf16 combination */
            int B = cfg[s][0], C = cfg[s][1], NH = cfg[s][2], total = cfg[s][3], hs = C / NH;
            if (!whole && (s == 0 || (s == 3 && combo != 0) || (s == 4 && combo != 0 && combo != 1) ||
                           (s < 3 && combo != 0 && combo != 7 && combo != 1 && combo != 6)))
                continue;
            int max_t = total + 2;
            tern_dtype d_cache = ot_float2[combo & 1], d_qkv = ot_float2[(combo >> 1) & 1];
            tern_dtype d_out = ot_float2[combo >> 2];
            size_t n3 = (size_t)B * total * 3 * C, ncache = (size_t)B * NH * max_t * hs;
            if (!(s == CFG_SPLIT ? p.cached_split : p.cached)) { /* the other part's case */
                skip_draws(n3);
                continue;
            }
            float *qkv = ot_random(n3, -2, 2);
            ot_round(qkv, n3, d_qkv);
            double *full = malloc((size_t)B * total * C * sizeof(double));
            attn_ref(qkv, B, total, C, NH, full);
            ot_buf kc = ot_make(c, d_cache, ncache, 1, NULL), vc = ot_make(c, d_cache, ncache, 2, NULL);
            bool long_prompt = total >= 100;
            int T0 = total - (long_prompt ? 26 : 6), p0 = 0;
            int steps[8], nsteps = 0;
            steps[nsteps++] = T0;
            if (long_prompt) steps[nsteps++] = 20;
            steps[nsteps++] = 1;
            steps[nsteps++] = 1;
            steps[nsteps++] = 3;
            steps[nsteps++] = 1;
            for (int st = 0; st < nsteps; st++) {
                int T = steps[st];
                size_t m3 = (size_t)B * T * 3 * C, m = (size_t)B * T * C;
                float *chunk = malloc(m3 * sizeof(float)), *want = malloc(m * sizeof(float));
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < T; t++) {
                        memcpy(chunk + ((size_t)b * T + t) * 3 * C, qkv + ((size_t)b * total + p0 + t) * 3 * C, 3 * C * sizeof(float));
                        for (int j = 0; j < C; j++)
                            want[((size_t)b * T + t) * C + j] = (float)full[((size_t)b * total + p0 + t) * C + j];
                    }
                ot_buf bq = ot_make(c, d_qkv, m3, 3, chunk), bo = ot_make(c, d_out, m, 4, NULL);
                int32_t pv = p0;
                ot_buf bp = ot_make_i32(c, &pv, 1, 0);
                CHECK_OK(o->attention_cached(c->d, bo.view, kc.view, vc.view, bq.view, bp.view, B, T, NH, NH, C / NH, max_t));
                /* a bf16 cache rounds k and v (~2^-9 relative on the output), so does a
                 * bf16 out */
                OT_EXPECT(c, bo, want, ot_tol(d_cache == TERN_BF16 ? d_cache : d_out, 1e-5), "attention_cached B%d C%d NH%d p0 %d T %d combo %d", B, C, NH, p0, T, combo);
                ot_free(c, &bq), ot_free(c, &bo), ot_free(c, &bp);
                free(chunk), free(want);
                p0 += T;
            }
            /* the cache holds k and v of positions < p0 in [B, NH, max_T, hs], NaN after */
            float *kg = malloc(ncache * sizeof(float)), *vg = malloc(ncache * sizeof(float));
            ot_read(c, kc, kg), ot_read(c, vc, vg);
            int layout_ok = 1;
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++)
                    for (int t = 0; t < max_t; t++)
                        for (int i = 0; i < hs; i++) {
                            size_t at = (((size_t)b * NH + h) * max_t + t) * hs + i;
                            if (t >= p0) {
                                layout_ok &= isnan(kg[at]) && isnan(vg[at]);
                                continue;
                            }
                            size_t src = ((size_t)b * total + t) * 3 * C + (size_t)h * hs + i;
                            float kw = qkv[src + C], vw = qkv[src + 2 * C];
                            ot_round(&kw, 1, d_cache), ot_round(&vw, 1, d_cache);
                            layout_ok &= kg[at] == kw && vg[at] == vw;
                        }
            CHECKF(layout_ok, "%s: attention_cached cache contents/layout (B%d C%d NH%d combo %d)", c->handler, B, C, NH, combo);
            CHECKF(ot_guard_ok(c, kc) && ot_guard_ok(c, vc), "%s: attention_cached wrote outside the caches", c->handler);
            ot_free(c, &kc), ot_free(c, &vc);
            free(qkv), free(full), free(kg), free(vg);
        }
}

static void test_errors(ot_ctx *c) {
    const tern_ops *o = c->ops;
    int B = 2, T = 3, C = 6, NH = 2;
    size_t saved_len;
    CHECK_OK(o->attention_saved_len(c->d, B, T, NH, &saved_len));
    ot_buf q = ot_make(c, TERN_F32, 108, 0, NULL), out = ot_make(c, TERN_F32, 36, 0, NULL);
    ot_buf s = ot_make(c, TERN_F32, saved_len, 0, NULL), s16 = ot_make(c, TERN_BF16, saved_len, 0, NULL);
    ot_buf dq = ot_make(c, TERN_F32, 108, 0, NULL);
    CHECK_ERR(o->attention(c->d, out.view, s.view, q.view, B, T, NH, 4, C / NH), "attention: KV = 4 key/value heads do not divide NH = 2");
    CHECK_ERR(o->attention(c->d, out.view, tern_view(s.view, 0, saved_len - 1), q.view, B, T, NH, NH, C / NH),
              "attention: saved has");
    CHECK_ERR(o->attention(c->d, out.view, s16.view, q.view, B, T, NH, NH, C / NH), "attention: saved is bf16, needs f32");
    CHECK_ERR(o->attention(c->d, out.view, s.view, tern_view(q.view, 0, 100), B, T, NH, NH, C / NH),
              "attention: qkv has 100 elements, B * T * (NH + 2 KV) * hs needs 108");
    CHECK_ERR(o->attention(c->d, out.view, s.view, q.view, B, T, 0, 0, C / NH), "attention: NH must be positive");
    CHECK_ERR(o->attention(c->d, out.view, s.view, q.view, B, T, NH, 0, C / NH), "attention: KV must be positive");
    CHECK_ERR(o->attention(c->d, tern_view(q.all, 0, 36), s.view, q.view, B, T, NH, NH, C / NH), "attention: out and qkv overlap");
    CHECK_ERR(o->attention_backward(c->d, q.view, out.view, q.view, out.view, s.view, B, T, NH, NH, C / NH),
              "attention_backward: dqkv and qkv overlap");
    CHECK_ERR(o->attention_backward(c->d, dq.view, out.view, q.view, out.view, tern_none(), B, T, NH, NH, C / NH),
              "attention_backward: saved is absent");
    size_t len;
    CHECK_ERR(o->attention_saved_len(c->d, 0, T, NH, &len), "attention_saved_len: B must be positive");
    CHECK_ERR(o->attention_saved_len(c->d, INT_MAX, INT_MAX, INT_MAX, &len), "overflows");
    /* the cache */
    int max_t = 4;
    ot_buf kc = ot_make(c, TERN_F32, (size_t)B * max_t * C, 0, NULL), vc = ot_make(c, TERN_F32, (size_t)B * max_t * C, 0, NULL);
    int32_t p_ok = 1, p_bad = 2;
    ot_buf pok = ot_make_i32(c, &p_ok, 1, 0), pbad = ot_make_i32(c, &p_bad, 1, 0);
    CHECK_OK(o->attention_cached(c->d, out.view, kc.view, vc.view, q.view, pok.view, B, T, NH, NH, C / NH, max_t));
    CHECK_ERR(ot_or_sync(c, o->attention_cached(c->d, out.view, kc.view, vc.view, q.view, pbad.view, B, T, NH, NH, C / NH, max_t)),
              "attention_cached: positions 2 .. 4 are out of range of the cache's 4");
    CHECK_ERR(o->attention_cached(c->d, out.view, kc.view, vc.view, q.view, tern_none(), B, T, NH, NH, C / NH, max_t),
              "attention_cached: pos is absent");
    CHECK_ERR(o->attention_cached(c->d, out.view, kc.view, vc.view, q.view, pok.view, B, T, NH, NH, C / NH, 2),
              "attention_cached: T = 3 exceeds max_T = 2");
    CHECK_ERR(o->attention_cached(c->d, out.view, kc.view, vc.view, q.view, pok.view, B, T, NH, NH, C / NH, 5),
              "attention_cached: k_cache has 48 elements, B * KV * max_T * hs needs 60");
    CHECK_ERR(o->attention_cached(c->d, out.view, kc.view, kc.view, q.view, pok.view, B, T, NH, NH, C / NH, max_t),
              "attention_cached: k_cache and v_cache overlap");
    ot_free(c, &q), ot_free(c, &out), ot_free(c, &s), ot_free(c, &s16), ot_free(c, &dq);
    ot_free(c, &kc), ot_free(c, &vc), ot_free(c, &pok), ot_free(c, &pbad);
}

/* matmul's ATTENTION prologue: decoding steps of a grouped attention (NH 4, KV 2, hs 32) over
 * a cache long enough that the GPU handlers split each step (max_T 600: 3 parts), C = x +
 * attention W^T + bias by one call, against attention_cached and then the plain matmul on
 * the same handler with caches of their own: A, C and the caches the same (the GPU handlers
 * merge the parts where the GEMV stages A, with the attention's own operations: the same
 * bits), then the prologue's checks. */
static void test_prologue(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(59);
    const int NH = 4, KV = 2, hs = 32, C = NH * hs, N = 40, max_t = 600, width = (NH + 2 * KV) * hs;
    size_t ncache = (size_t)KV * max_t * hs;
    for (int i = 0; i < 2; i++) {
        tern_dtype dt = ot_float2[i];
        float *w = ot_random((size_t)N * C, -0.2f, 0.2f), *bias = ot_random((size_t)N, -0.5f, 0.5f);
        float *x = ot_random((size_t)3 * N, -1, 1), *zero = calloc(ncache, sizeof *zero);
        ot_buf kc[2], vc[2]; /* zeros past the positions written, so that they compare whole */
        for (int k = 0; k < 2; k++) kc[k] = ot_make(c, dt, ncache, 1, zero), vc[k] = ot_make(c, dt, ncache, 2, zero);
        ot_buf bw = ot_make(c, dt, (size_t)N * C, 3, w), bb = ot_make(c, dt, (size_t)N, 4, bias);
        int p0 = 0;
        for (int st = 0; st < 5; st++) {
            int T = st == 0 ? 3 : 1; /* a prompt (composed everywhere), then single rows */
            float *qkv = ot_random((size_t)T * width, -2, 2);
            int32_t pv = p0;
            ot_buf bq = ot_make(c, dt, (size_t)T * width, 5, qkv), bp = ot_make_i32(c, &pv, 1, 0);
            ot_buf ba[2], bc[2];
            for (int k = 0; k < 2; k++) {
                ba[k] = ot_make(c, dt, (size_t)T * C, 6, NULL);
                bc[k] = ot_make(c, dt, (size_t)T * N, 7, x);
            }
            tern_matmul mm = {.m = T, .n = N, .k = C, .trans_b = true, .alpha = 1, .beta = 1, .bias = bb.view,
                              .prologue = TERN_PROLOGUE_ATTENTION,
                              .att = {kc[0].view, vc[0].view, bq.view, bp.view, 1, T, NH, KV, hs, max_t}};
            CHECK_OK(o->matmul(c->d, bc[0].view, ba[0].view, bw.view, &mm));
            CHECK_OK(o->attention_cached(c->d, ba[1].view, kc[1].view, vc[1].view, bq.view, bp.view, 1, T, NH, KV, hs,
                                         max_t));
            tern_matmul plain = {.m = T, .n = N, .k = C, .trans_b = true, .alpha = 1, .beta = 1, .bias = bb.view};
            CHECK_OK(o->matmul(c->d, bc[1].view, ba[1].view, bw.view, &plain));
            ot_buf got[2][3] = {{ba[0], bc[0], kc[0]}, {ba[1], bc[1], kc[1]}};
            const char *what[3] = {"A", "C", "k_cache"};
            for (int k = 0; k < 3; k++) {
                float *want = malloc(got[1][k].view.len * sizeof(float));
                ot_read(c, got[1][k], want);
                OT_EXPECT(c, got[0][k], want, 1e-6, "ATTENTION prologue %s, p0 %d T %d %s", what[k], p0, T,
                          tern_dtype_name(dt));
                free(want);
            }
            for (int k = 0; k < 2; k++) ot_free(c, &ba[k]), ot_free(c, &bc[k]);
            ot_free(c, &bq), ot_free(c, &bp);
            free(qkv);
            p0 += T;
        }
        /* the checks: A's shape, and what the product writes apart from what the attention reads */
        int32_t pv = p0;
        ot_buf bq = ot_make(c, dt, (size_t)width, 5, NULL), bp = ot_make_i32(c, &pv, 1, 0);
        ot_buf ba = ot_make(c, dt, (size_t)2 * C, 6, NULL), bc = ot_make(c, dt, (size_t)2 * N, 7, NULL);
        tern_matmul mm = {.m = 2, .n = N, .k = C, .trans_b = true, .alpha = 1, .beta = 0,
                          .prologue = TERN_PROLOGUE_ATTENTION,
                          .att = {kc[0].view, vc[0].view, bq.view, bp.view, 1, 1, NH, KV, hs, max_t}};
        CHECK_ERR(o->matmul(c->d, bc.view, ba.view, bw.view, &mm), "matmul: the ATTENTION prologue needs A dense [B T, NH hs]");
        mm.m = 1;
        CHECK_ERR(o->matmul(c->d, tern_view(kc[0].view, 0, (size_t)N), tern_view(ba.view, 0, (size_t)C), bw.view, &mm),
                  "matmul: c and att.k_cache overlap");
        mm.att.KV = 3;
        CHECK_ERR(o->matmul(c->d, tern_view(bc.view, 0, (size_t)N), tern_view(ba.view, 0, (size_t)C), bw.view, &mm),
                  "key/value heads do not divide");
        ot_free(c, &bq), ot_free(c, &bp), ot_free(c, &ba), ot_free(c, &bc);
        for (int k = 0; k < 2; k++) ot_free(c, &kc[k]), ot_free(c, &vc[k]);
        ot_free(c, &bw), ot_free(c, &bb);
        free(w), free(bias), free(x), free(zero);
    }
}

/* TERN_TEST_PART splits the suite for a slow handler (OpenCL: four tests, one process each,
 * each with its share of PoCL's compiles: 12-19 s of CPU each with a cold cache, measured):
 *   "train"        attention and its backward at all shapes but T = 33 (hs 16), and the
 *                  finite differences (hs 8);
 *   "train_hs16"   attention and its backward at T = 33, hs 16 (a larger head size compiled
 *                  into each kernel, the costliest of the set to compile);
 *   "cached"       attention_cached at all configurations but the split one, and the errors;
 *   "cached_split" attention_cached with each row's positions split across groups (hs 64,
 *                  the split and combine kernels).
 * The parts are a partition: each case runs in exactly one of them, with the random data it
 * has when the suite runs whole (a case left to another part skips its draws), so the four
 * run the same checks as one process. Unset: everything. */
static void test_all(ot_ctx *c) {
    const char *name = getenv("TERN_TEST_PART");
    bool all = !name || !*name;
    part p = {all, all, all, all};
    if (!all) {
        p.train = !strcmp(name, "train");
        p.train_hs16 = !strcmp(name, "train_hs16");
        p.cached = !strcmp(name, "cached");
        p.cached_split = !strcmp(name, "cached_split");
    }
    CHECKF(p.train || p.train_hs16 || p.cached || p.cached_split,
           "TERN_TEST_PART is '%s', not train, train_hs16, cached or cached_split", name);
    if (p.train || p.train_hs16) test_attention(c, p);
    if (p.train) test_finite_differences(c);
    if (p.cached || p.cached_split) test_cached(c, p);
    if (p.cached) test_errors(c);
    if (p.cached) test_prologue(c);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_attention");
}
