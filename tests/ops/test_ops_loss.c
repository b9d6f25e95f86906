/* cross_entropy and sample against double-precision references.
 *
 * cross_entropy: losses and the in-place gradient (padding columns zeroed, grad_scale 0
 * leaving the logits alone), GPT-2's V = 50257 padded to 50304, large logits, f32 and bf16;
 * the gradient against finite differences of the loss; bad targets and other errors.
 *
 * sample: greedy (ties to the lowest index, padding ignored), top-k with small and large k
 * and several temperatures against the contract's exact recipe, the draw index
 * counter * rows + r, the empirical distribution of many draws, and errors. Other handlers
 * sum the weights in f32, so the threshold u * total is known only to about 1e-5 of the
 * total (50,257 terms summed in a different order); a pick is accepted when its cumulative
 * interval (cum[i - 1], cum[i]] comes within 1e-5 * total of the threshold. With GPT-2's
 * vocabulary that band holds several candidates: each weighs well under 1e-5 of the total. */
#include "ops_test.h"
#include "tern/rng.h"

static void ce_ref(const float *l, int V, int target, double gs, double *loss, double *grad) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) mx = fmax(mx, l[j]);
    for (int j = 0; j < V; j++) sum += exp(l[j] - mx);
    *loss = log(sum) + mx - l[target];
    if (grad)
        for (int j = 0; j < V; j++) grad[j] = (exp(l[j] - mx) / sum - (j == target)) * gs;
}

static void test_cross_entropy(ot_ctx *c) {
    const tern_ops *o = c->ops;
    ot_seed(61);
    const int cfg[][3] = {{1, 1, 1}, {7, 10, 16}, {5, 50257, 50304}, {33, 1000, 1000}, {64, 300, 301}}; /* rows, V, Vp */
    const float scales[] = {0.0f, 1.0f, 0.125f};
    for (int s = 0; s < 5; s++)
        for (int t = 0; t < 2; t++)
            for (int gi = 0; gi < 3; gi++) {
                int rows = cfg[s][0], V = cfg[s][1], Vp = cfg[s][2];
                float gs = scales[gi];
                tern_dtype dl = ot_float2[t];
                size_t n = (size_t)rows * Vp;
                float *l = ot_random(n, -8, 8);
                if (s == 3)
                    for (size_t i = 0; i < n; i++) l[i] *= 10; /* logits up to 80: needs the max shift */
                ot_round(l, n, dl);
                int32_t *tg = malloc(rows * sizeof *tg);
                for (int r = 0; r < rows; r++) tg[r] = ot_randint(0, V);
                float *want_loss = malloc(rows * sizeof(float)), *want_l = malloc(n * sizeof(float));
                double *grad = malloc((size_t)V * sizeof(double));
                for (int r = 0; r < rows; r++) {
                    double loss;
                    ce_ref(l + (size_t)r * Vp, V, tg[r], gs, &loss, grad);
                    want_loss[r] = (float)loss;
                    for (int j = 0; j < Vp; j++)
                        want_l[(size_t)r * Vp + j] = gs == 0 ? l[(size_t)r * Vp + j] : j < V ? (float)grad[j] : 0.0f;
                }
                ot_buf bl = ot_make(c, dl, n, 1, l), bt = ot_make_i32(c, tg, rows, 2), bloss = ot_make(c, TERN_F32, rows, 3, NULL);
                CHECK_OK(o->cross_entropy(c->d, bloss.view, bl.view, bt.view, rows, V, Vp, gs));
                /* log of a sum of up to 50257 exps (f32 terms, double total): ~1e-6 */
                OT_EXPECT(c, bloss, want_loss, 1e-5, "cross_entropy losses rows %d V %d %s gs %g", rows, V,
                          tern_dtype_name(dl), (double)gs);
                if (V == 1) { /* the loss is exactly 0 */
                    float z;
                    ot_read(c, bloss, &z);
                    CHECK(z == 0);
                }
                OT_EXPECT(c, bl, want_l, ot_tol(dl, gs == 0 ? 0.0 : 1e-5), "cross_entropy gradient rows %d V %d %s gs %g",
                          rows, V, tern_dtype_name(dl), (double)gs);
                ot_free(c, &bl), ot_free(c, &bt), ot_free(c, &bloss);
                free(l), free(tg), free(want_loss), free(want_l), free(grad);
            }
    /* the gradient against finite differences of the handler's loss along a direction
     * (f32 losses: noise ~1e-7 * sum over rows / h with h = 1e-2; truncation ~h^2) */
    int rows = 6, V = 40, Vp = 48;
    size_t n = (size_t)rows * Vp;
    float *l = ot_random(n, -3, 3), *dir = ot_random(n, -1, 1);
    int32_t tg[6] = {0, 39, 5, 5, 17, 22};
    ot_buf bt = ot_make_i32(c, tg, rows, 0);
    double lsum[2];
    for (int sgn = 0; sgn < 2; sgn++) {
        float *lp = malloc(n * sizeof(float)), loss[6];
        for (size_t i = 0; i < n; i++) lp[i] = (float)(l[i] + (sgn ? -1e-2 : 1e-2) * dir[i]);
        ot_buf bl = ot_make(c, TERN_F32, n, 0, lp), bloss = ot_make(c, TERN_F32, rows, 0, NULL);
        CHECK_OK(o->cross_entropy(c->d, bloss.view, bl.view, bt.view, rows, V, Vp, 0));
        ot_read(c, bloss, loss);
        lsum[sgn] = 0;
        for (int r = 0; r < rows; r++) lsum[sgn] += loss[r];
        ot_free(c, &bl), ot_free(c, &bloss);
        free(lp);
    }
    ot_buf bl = ot_make(c, TERN_F32, n, 0, l), bloss = ot_make(c, TERN_F32, rows, 0, NULL);
    CHECK_OK(o->cross_entropy(c->d, bloss.view, bl.view, bt.view, rows, V, Vp, 1.0f));
    float *g = malloc(n * sizeof(float));
    ot_read(c, bl, g);
    double an = 0, fd = (lsum[0] - lsum[1]) / 2e-2;
    for (size_t i = 0; i < n; i++) an += (double)g[i] * dir[i];
    CHECKF(fabs(fd - an) <= 1e-3 * fabs(an), "%s: cross_entropy gradient vs finite differences: %.9g vs %.9g", c->handler, an, fd);
    ot_free(c, &bl), ot_free(c, &bloss), ot_free(c, &bt);
    free(l), free(dir), free(g);
    /* errors */
    int32_t bad[3] = {0, 9, 10}, neg[3] = {0, -2, 0};
    ot_buf lg = ot_make(c, TERN_F32, 48, 0, NULL), ls = ot_make(c, TERN_F32, 3, 0, NULL), ls16 = ot_make(c, TERN_BF16, 3, 0, NULL);
    ot_buf tb = ot_make_i32(c, bad, 3, 0), tn = ot_make_i32(c, neg, 3, 0);
    CHECK_ERR(ot_or_sync(c, o->cross_entropy(c->d, ls.view, lg.view, tb.view, 3, 10, 16, 1)), "cross_entropy: targets[2] = 10 is out of range [0, 10)");
    CHECK_ERR(ot_or_sync(c, o->cross_entropy(c->d, ls.view, lg.view, tn.view, 3, 10, 16, 1)), "cross_entropy: targets[1] = -2 is out of range");
    CHECK_ERR(o->cross_entropy(c->d, ls.view, lg.view, tb.view, 3, 17, 16, 1), "cross_entropy: Vp = 16 is less than V = 17");
    CHECK_ERR(o->cross_entropy(c->d, ls16.view, lg.view, tb.view, 3, 11, 16, 1), "cross_entropy: losses is bf16, needs f32");
    CHECK_ERR(o->cross_entropy(c->d, ls.view, lg.view, tb.view, 3, 11, 15, 1), "cross_entropy: logits has 48 elements, rows * Vp needs 45");
    CHECK_ERR(o->cross_entropy(c->d, ls.view, lg.view, tb.view, 3, 11, 16, INFINITY), "cross_entropy: grad_scale must be finite");
    CHECK_ERR(o->cross_entropy(c->d, tern_view(lg.all, 0, 3), lg.view, tb.view, 3, 11, 16, 1), "cross_entropy: losses and logits overlap");
    ot_free(c, &lg), ot_free(c, &ls), ot_free(c, &ls16), ot_free(c, &tb), ot_free(c, &tn);
}

static const float *sort_logits;

/* Descending value, then ascending index. */
static int by_value_desc(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    float la = sort_logits[a], lb = sort_logits[b];
    if (la != lb) return la > lb ? -1 : 1;
    return (a > b) - (a < b);
}

/* The contract's recipe in double. Returns the pick and sets [*lo, *hi] to the range of
 * ranks (positions in descending order) whose cumulative interval comes within 1e-5 of the
 * total of the threshold; idx (V ints) receives the order. */
static int sample_ref(const float *l, int V, float temperature, int top_k, float u, int *idx, int *lo, int *hi) {
    for (int j = 0; j < V; j++) idx[j] = j;
    if (temperature <= 0) {
        int best = 0;
        for (int j = 1; j < V; j++)
            if (l[j] > l[best]) best = j;
        idx[0] = best;
        *lo = *hi = 0;
        return best;
    }
    int K = top_k <= 0 || top_k >= V ? V : top_k;
    sort_logits = l;
    qsort(idx, (size_t)V, sizeof *idx, by_value_desc);
    double mx = l[idx[0]], total = 0;
    double *cum = malloc((size_t)K * sizeof(double));
    for (int i = 0; i < K; i++) {
        total += exp((l[idx[i]] - mx) / temperature);
        cum[i] = total;
    }
    double thr = u * total, band = 1e-5 * total;
    int pick = K - 1;
    for (int i = 0; i < K; i++)
        if (cum[i] > thr) {
            pick = i;
            break;
        }
    *lo = *hi = pick;
    while (*lo > 0 && cum[*lo - 1] > thr - band) (*lo)--;
    while (*hi + 1 < K && cum[*hi] < thr + band) (*hi)++;
    int r = idx[pick];
    free(cum);
    return r;
}

/* Whether token `got` has a rank in [lo, hi] of the order idx. */
static bool in_band(const int *idx, int lo, int hi, int got) {
    for (int i = lo; i <= hi; i++)
        if (idx[i] == got) return true;
    return false;
}

static void test_sample_frequencies(ot_ctx *c);
static void test_sample_errors(ot_ctx *c);

/* want_dtype[t]: the draws with logits in ot_float2[t]; the frequency check goes with bf16
 * (TERN_TEST_PART=bf16), the errors with f32 (see test_all). */
static void test_sample(ot_ctx *c, const bool want_dtype[2]) {
    const tern_ops *o = c->ops;
    ot_seed(62);
    const int cfg[][3] = {{1, 50257, 50304}, {4, 10, 16}, {3, 1000, 1003}, {1, 1, 1}}; /* rows, V, Vp */
    const float temps[] = {0, -1, 0.5f, 1, 2};
    const int ks[] = {0, 1, 5, 40, 200, 100000};
    /* The representative set (ot_full; opencl in make test). The GPU kernels differ by path
     * (greedy; top-k, always followed by the exact search of the rows it could not do; the
     * exact search alone for k > GK_SAMPLE_CAP, the same kernel as the one after top-k) and
     * by dtype; the counter is a runtime value (src/kernels/sample.c). So each path in each
     * dtype, and each (temperature, top_k) pair of each configuration in one of the two
     * dtypes, half of the matrix; f32 logits go without the counter, bf16 with it. The
     * frequency check below adds f32 with the counter, the errors f32 without. */
    bool full = ot_full(c);
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 2; t++)
            for (int ti = 0; ti < 5; ti++)
                for (int ki = 0; ki < 6; ki++) {
                    if (!want_dtype[t]) continue;
                    if (!full && (ti + ki + s + t) % 2) continue;
                    int rows = cfg[s][0], V = cfg[s][1], Vp = cfg[s][2];
                    float temp = temps[ti];
                    int k = ks[ki];
                    size_t n = (size_t)rows * Vp;
                    float *l = ot_random(n, -4, 4);
                    for (int r = 0; r < rows; r++)
                        for (int j = V; j < Vp; j++) l[(size_t)r * Vp + j] = 1e30f; /* padding: never picked */
                    if (V >= 10) l[3] = l[7] = 9; /* a tie at the top: index 3 wins */
                    ot_round(l, n, ot_float2[t]);
                    int32_t counter = ki + 3 * ti;
                    uint64_t seed = 0x1234567890ull + (uint64_t)s;
                    ot_buf bl = ot_make(c, ot_float2[t], n, 1, l), bo = ot_make(c, TERN_I32, rows, 2, NULL);
                    ot_buf bc = ot_make_i32(c, &counter, 1, 0);
                    bool use_counter = full ? ki % 2 == 0 : t == 1;
                    CHECK_OK(o->sample(c->d, bo.view, bl.view, rows, V, Vp, temp, k, seed, use_counter ? bc.view : tern_none()));
                    int32_t got[4];
                    CHECK_OK(o->download(c->d, got, bo.view));
                    int *order = malloc((size_t)V * sizeof(int));
                    for (int r = 0; r < rows; r++) {
                        uint32_t draw = (uint32_t)(use_counter ? counter : 0) * (uint32_t)rows + (uint32_t)r;
                        int lo, hi;
                        int want = sample_ref(l + (size_t)r * Vp, V, temp, k, tern_uniform(seed, draw), order, &lo, &hi);
                        CHECKF(got[r] == want || in_band(order, lo, hi, got[r]),
                               "%s: sample rows %d V %d %s temperature %g top_k %d row %d: got %d, want %d (ranks %d-%d accepted)",
                               c->handler, rows, V, tern_dtype_name(ot_float2[t]), (double)temp, k, r, got[r], want, lo, hi);
                    }
                    free(order);
                    CHECKF(ot_guard_ok(c, bo), "%s: sample wrote outside out", c->handler);
                    ot_free(c, &bl), ot_free(c, &bo), ot_free(c, &bc);
                    free(l);
                }
    if (want_dtype[1]) test_sample_frequencies(c);
    if (want_dtype[0]) test_sample_errors(c);
}

/* Many draws follow softmax(l / T): 20000 draws over 4 logits, frequencies within 0.015
 * of the probabilities (binomial sd <= 0.0036: more than 4 sd). */
static void test_sample_frequencies(ot_ctx *c) {
    const tern_ops *o = c->ops;
    float l4[4] = {0.5f, -1, 1.5f, 0};
    double p[4], total = 0;
    for (int j = 0; j < 4; j++) total += (p[j] = exp(l4[j] / 0.8));
    int counts[4] = {0};
    int rows = 200;
    float *many = malloc((size_t)rows * 4 * sizeof(float));
    for (int r = 0; r < rows; r++) memcpy(many + r * 4, l4, sizeof l4);
    ot_buf bl = ot_make(c, TERN_F32, (size_t)rows * 4, 0, many), bo = ot_make(c, TERN_I32, rows, 0, NULL);
    ot_buf bc = ot_make_i32(c, NULL, 1, 0);
    int32_t got[200];
    for (int32_t it = 0; it < 100; it++) {
        CHECK_OK(o->upload(c->d, bc.view, &it));
        CHECK_OK(o->sample(c->d, bo.view, bl.view, rows, 4, 4, 0.8f, 0, 99, bc.view));
        CHECK_OK(o->download(c->d, got, bo.view));
        for (int r = 0; r < rows; r++)
            if (got[r] >= 0 && got[r] < 4) counts[got[r]]++;
    }
    for (int j = 0; j < 4; j++)
        CHECKF(fabs(counts[j] / 20000.0 - p[j] / total) < 0.015, "%s: sample frequency of %d: %.4f vs %.4f", c->handler, j,
               counts[j] / 20000.0, p[j] / total);
    ot_free(c, &bl), ot_free(c, &bo), ot_free(c, &bc);
    free(many);
}

static void test_sample_errors(ot_ctx *c) {
    const tern_ops *o = c->ops;
    float nanrow[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    nanrow[7] = NAN;
    ot_buf ln = ot_make(c, TERN_F32, 8, 0, nanrow), out2 = ot_make(c, TERN_I32, 2, 0, NULL), outf = ot_make(c, TERN_F32, 2, 0, NULL);
    if (ot_is_cpu(c)) { /* beyond the contract: cpu reports NaN logits, writing nothing */
        int32_t before[2] = {-5, -6}, after[2] = {0, 0};
        CHECK_OK(o->upload(c->d, out2.view, before));
        CHECK_ERR(o->sample(c->d, out2.view, ln.view, 2, 4, 4, 0, 0, 1, tern_none()), "sample: logits row 1 has NaN at column 3");
        CHECK_ERR(o->sample(c->d, out2.view, ln.view, 2, 4, 4, 1, 0, 1, tern_none()), "sample: logits row 1 has NaN at column 3");
        CHECK_OK(o->download(c->d, after, out2.view));
        CHECK(after[0] == -5 && after[1] == -6);
    }
    CHECK_OK(o->sample(c->d, out2.view, ln.view, 2, 3, 4, 1, 0, 1, tern_none())); /* the NaN is padding */
    CHECK_ERR(o->sample(c->d, outf.view, ln.view, 2, 4, 4, 0, 0, 1, tern_none()), "sample: out is f32, needs i32");
    CHECK_ERR(o->sample(c->d, out2.view, ln.view, 2, 5, 4, 0, 0, 1, tern_none()), "sample: Vp = 4 is less than V = 5");
    CHECK_ERR(o->sample(c->d, out2.view, ln.view, 2, 4, 4, NAN, 0, 1, tern_none()), "sample: temperature is NaN");
    CHECK_ERR(o->sample(c->d, out2.view, ln.view, 2, 4, 4, 1, 0, 1, ln.view), "sample: counter is f32, needs i32");
    CHECK_ERR(o->sample(c->d, out2.view, ln.view, 3, 4, 4, 1, 0, 1, tern_none()), "sample: out has 2 elements, rows needs 3");
    ot_free(c, &ln), ot_free(c, &out2), ot_free(c, &outf);
}

/* TERN_TEST_PART splits the suite in two for a slow handler (OpenCL: two tests, each with
 * its share of PoCL's compiles): "f32" cross_entropy, sample with f32 logits and sample's
 * errors; "bf16" sample with bf16 logits and the frequency check. Unset: everything. */
static void test_all(ot_ctx *c) {
    const char *part = getenv("TERN_TEST_PART");
    bool all = !part || !*part;
    bool want_dtype[2] = {all || !strcmp(part, "f32"), all || !strcmp(part, "bf16")};
    CHECKF(want_dtype[0] || want_dtype[1], "TERN_TEST_PART is '%s', not f32 or bf16", part);
    if (want_dtype[0]) test_cross_entropy(c);
    test_sample(c, want_dtype);
}

int main(void) {
    ot_run(test_all);
    return check_summary("test_ops_loss");
}
