/* The GPU core's row operations (layernorm, embed, cross_entropy, sample) against the cpu
 * handler on random inputs, on each runtime; and the faults kernels report for bad
 * device-side indices.
 *
 * Tolerances: f32 results 1e-5 norm-wise (different reduction orders over rows of up to
 * 50304 elements; f32 sums carry ~1e-7 relative error per term in the worst case, far less
 * on average); bf16 outputs 1e-2 (8-bit mantissas). Sampling must pick the same token as
 * the cpu handler (random logits have no near-ties at the sampled boundary at these sizes:
 * the chance that u * total falls within f32 rounding of a boundary is below 1e-5). */
#include "gpu_test.h"
#include "gpu_core/gpu_internal.h"
#include "tern/rng.h"

static const tern_dtype floats[2] = {TERN_F32, TERN_BF16};

static void test_layernorm(void) {
    /* C = 64: the register path (vector widths per dtype); C = 40 and 100: generic;
     * C = 256: four chunks per lane; C = 1600 (GPT-2 1.5B) and 1280: the backward's rows
     * shared by two SIMD groups (gk_lnb_team), 2048 by four; several rows a team (37, 70,
     * 45 rows), the group's tree of partial sums (1,600, 1,280, 2,048) and without it (1,056:
     * 33 values a lane, one SIMD group a row as 1056 % 64 != 0) */
    int shapes[9][2] = {{7, 64}, {13, 40}, {3, 100}, {21, 256}, {5, 1600}, {37, 1600}, {70, 1280}, {45, 2048}, {9, 1056}};
    for (int s = 0; s < 9; s++) {
        int rows = shapes[s][0], C = shapes[s][1];
        size_t n = (size_t)rows * C;
        float *x = gt_random(n, -2, 3), *w = gt_random((size_t)C, 0.5f, 1.5f), *b = gt_random((size_t)C, -1, 1);
        float *g = gt_random(n, -1, 1), *dx0 = gt_random(n, -1, 1);
        float *dw0 = gt_random((size_t)C, -1, 1), *db0 = gt_random((size_t)C, -1, 1);
        for (int i = 0; i < 2; i++) {
            tern_dtype dt = floats[i];
            for (size_t off = 0; off < 2; off++) {
                if (!gt_full() && ((size_t)i ^ off ^ (size_t)(s & 1)) != 0) continue;
                gt_pair px = gt_make(dt, n, off, x), pw = gt_make(dt, (size_t)C, 0, w), pb = gt_make(dt, (size_t)C, 8, b);
                gt_pair po = gt_make(dt, n, 0, NULL), pm = gt_make(TERN_F32, (size_t)rows, 1, NULL);
                gt_pair pr = gt_make(TERN_F32, (size_t)rows, 0, NULL);
                GT_BOTH(layernorm, V(po), V(pm), V(pr), V(px), V(pw), V(pb), rows, C, 1e-5f);
                GT_EXPECT(po, gt_tol(dt, 1e-5), "layernorm %dx%d %s off %zu", rows, C, tern_dtype_name(dt), off);
                GT_EXPECT(pm, 1e-5, "layernorm mean %dx%d", rows, C);
                GT_EXPECT(pr, 1e-5, "layernorm rstd %dx%d", rows, C);
                GT_BOTH(layernorm, V(po), tern_none(), tern_none(), V(px), V(pw), V(pb), rows, C, 1e-5f);
                GT_EXPECT(po, gt_tol(dt, 1e-5), "layernorm without stats %dx%d", rows, C);
                /* backward accumulates into dx, dw, db and dsum (grad_beta 1; dsum: the column
                 * sums of the updated dx) and writes the forward's output again (py) */
                gt_pair pg = gt_make(dt, n, 0, g), pdx = gt_make(dt, n, off * 3, dx0);
                gt_pair pdw = gt_make(dt, (size_t)C, 0, dw0), pdb = gt_make(dt, (size_t)C, 1, db0);
                gt_pair pds = gt_make(dt, (size_t)C, 2 + off, dw0), py = gt_make(dt, n, 1 + off, NULL);
                GT_BOTH(layernorm_backward, V(pdx), V(pdw), V(pdb), V(pds), V(py), V(pg), V(px), V(pw), V(pb), V(pm),
                        V(pr), rows, C, 1.0f);
                GT_EXPECT(py, gt_tol(dt, 1e-5), "layernorm_backward out %dx%d %s", rows, C, tern_dtype_name(dt));
                GT_EXPECT(pdx, gt_tol(dt, 1e-5), "layernorm_backward dx %dx%d %s", rows, C, tern_dtype_name(dt));
                GT_EXPECT(pdw, gt_tol(dt, 1e-5), "layernorm_backward dw %dx%d", rows, C);
                GT_EXPECT(pdb, gt_tol(dt, 1e-5), "layernorm_backward db %dx%d", rows, C);
                GT_EXPECT(pds, gt_tol(dt, 1e-5), "layernorm_backward dsum %dx%d", rows, C);
                /* grad_beta 0: dw, db, dsum hold NaN and are written, not read */
                gt_pair nw = gt_make(dt, (size_t)C, 0, NULL), nb = gt_make(dt, (size_t)C, 3, NULL);
                gt_pair nds = gt_make(dt, (size_t)C, 1, NULL);
                GT_BOTH(layernorm_backward, V(pdx), V(nw), V(nb), V(nds), tern_none(), V(pg), V(px), V(pw),
                        tern_none(), V(pm), V(pr), rows, C, 0.0f);
                GT_EXPECT(pdx, gt_tol(dt, 1e-5), "layernorm_backward grad_beta 0 dx %dx%d", rows, C);
                GT_EXPECT(nw, gt_tol(dt, 1e-5), "layernorm_backward grad_beta 0 dw %dx%d", rows, C);
                GT_EXPECT(nb, gt_tol(dt, 1e-5), "layernorm_backward grad_beta 0 db %dx%d", rows, C);
                GT_EXPECT(nds, gt_tol(dt, 1e-5), "layernorm_backward grad_beta 0 dsum %dx%d", rows, C);
                gt_pair *all[] = {&px, &pw, &pb, &po, &pm, &pr, &pg, &pdx, &pdw, &pdb, &pds, &py, &nw, &nb, &nds};
                for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) gt_free(all[k]);
            }
        }
        free(x), free(w), free(b), free(g), free(dx0), free(dw0), free(db0);
    }
}

static void test_embed(void) {
    int B = 3, T = 5, C = 64, V = 11, maxT = 9;
    size_t bt = (size_t)B * T, n = bt * C;
    int32_t tokens[15];
    for (size_t i = 0; i < bt; i++) tokens[i] = (int32_t)(gt_next() % 4) * 3; /* many repeats */
    float *wte = gt_random((size_t)V * C, -1, 1), *wpe = gt_random((size_t)maxT * C, -1, 1);
    float *g = gt_random(n, -1, 1), *dwte0 = gt_random((size_t)V * C, -1, 1), *dwpe0 = gt_random((size_t)maxT * C, -1, 1);
    for (int i = 0; i < 2; i++) {
        tern_dtype dt = floats[i];
        gt_pair pt = gt_make_i32(tokens, bt, 1), pe = gt_make(dt, (size_t)V * C, 0, wte);
        gt_pair pp = gt_make(dt, (size_t)maxT * C, 2, wpe), po = gt_make(dt, n, 0, NULL);
        int32_t p0 = 3;
        gt_pair ppos = gt_make_i32(&p0, 1, 0);
        GT_BOTH(embed, V(po), V(pt), V(pe), V(pp), V(ppos), B, T, C);
        GT_EXPECT(po, gt_tol(dt, 0.0), "embed %s pos 3", tern_dtype_name(dt));
        GT_BOTH(embed, V(po), V(pt), V(pe), V(pp), tern_none(), B, T, C);
        GT_EXPECT(po, gt_tol(dt, 0.0), "embed %s", tern_dtype_name(dt));
        gt_pair pg = gt_make(dt, n, 0, g), pdwte = gt_make(dt, (size_t)V * C, 0, dwte0);
        gt_pair pdwpe = gt_make(dt, (size_t)maxT * C, 0, dwpe0);
        GT_BOTH(embed_backward, V(pdwte), tern_view(V(pdwpe), 0, (size_t)T * C), V(pg), V(pt), B, T, C);
        GT_EXPECT(pdwte, gt_tol(dt, 1e-6), "embed_backward dwte %s", tern_dtype_name(dt));
        GT_EXPECT(pdwpe, gt_tol(dt, 1e-6), "embed_backward dwpe %s", tern_dtype_name(dt));
        /* a bad token: reported at the next synchronising call, nothing written */
        int32_t bad[15];
        memcpy(bad, tokens, sizeof bad);
        bad[7] = V + 2;
        CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pt.view[1], bad));
        CHECK_OK(gt_gpu.ops->embed(gt_gpu.d, po.view[1], pt.view[1], pe.view[1], pp.view[1], tern_none(), B, T, C));
        CHECK_ERR(gt_gpu.ops->sync(gt_gpu.d), "embed: tokens[7] = 13 is out of range [0, 11)");
        CHECK_OK(gt_gpu.ops->sync(gt_gpu.d)); /* reported once */
        CHECK_OK(gt_gpu.ops->embed_backward(gt_gpu.d, pdwte.view[1], tern_none(), pg.view[1], pt.view[1], B, T, C));
        CHECK_ERR(gt_gpu.ops->sync(gt_gpu.d), "embed_backward: tokens[7] = 13 is out of range [0, 11)");
        p0 = 5; /* 5 + T > maxT */
        CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, ppos.view[1], &p0));
        CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pt.view[1], tokens));
        CHECK_OK(gt_gpu.ops->embed(gt_gpu.d, po.view[1], pt.view[1], pe.view[1], pp.view[1], ppos.view[1], B, T, C));
        float one;
        CHECK_ERR(gt_gpu.ops->download(gt_gpu.d, &one, tern_view(ppos.view[1], 0, 1)), "embed: positions 5 .. 9 are out of range of wpe's 9 rows");
        gt_pair *all[] = {&pt, &pe, &pp, &po, &ppos, &pg, &pdwte, &pdwpe};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) gt_free(all[k]);
    }
    free(wte), free(wpe), free(g), free(dwte0), free(dwpe0);
}

static void test_cross_entropy(void) {
    int shapes[3][3] = {{3, 50, 64}, {2, 1003, 1003}, {4, 50257, 50304}};
    for (int s = 0; s < 3; s++) {
        int rows = shapes[s][0], V = shapes[s][1], Vp = shapes[s][2];
        size_t n = (size_t)rows * Vp;
        float *l = gt_random(n, -8, 8);
        int32_t targets[4];
        for (int r = 0; r < rows; r++) targets[r] = (int32_t)(gt_next() % (uint64_t)V);
        targets[0] = V - 1;
        for (int i = 0; i < 2; i++) {
            tern_dtype dt = floats[i];
            for (int grad = 0; grad < 2; grad++) {
                gt_pair pl = gt_make(dt, n, (size_t)i, l), pt = gt_make_i32(targets, (size_t)rows, 0);
                gt_pair ploss = gt_make(TERN_F32, (size_t)rows, 1, NULL);
                GT_BOTH(cross_entropy, V(ploss), V(pl), V(pt), rows, V, Vp, grad ? 0.25f : 0.0f);
                GT_EXPECT(ploss, 1e-5, "cross_entropy losses %dx%d %s grad %d", rows, V, tern_dtype_name(dt), grad);
                GT_EXPECT(pl, gt_tol(dt, 1e-5), "cross_entropy logits/gradient %dx%d %s grad %d", rows, V,
                          tern_dtype_name(dt), grad);
                if (grad && s == 0) {
                    int32_t bad[4] = {0, V, 1, 2};
                    CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pt.view[1], bad));
                    CHECK_OK(gt_gpu.ops->cross_entropy(gt_gpu.d, ploss.view[1], pl.view[1], pt.view[1], rows, V, Vp, 1));
                    CHECK_ERR(gt_gpu.ops->sync(gt_gpu.d), "cross_entropy: targets[1] = 50 is out of range [0, 50)");
                }
                gt_free(&pl), gt_free(&pt), gt_free(&ploss);
            }
        }
        free(l);
    }
}

/* The token sampled from each row on both sides must agree. */
static void expect_same_sample(gt_pair out, int rows, const char *what) {
    float *c = gt_read(out, 0), *g = gt_read(out, 1);
    for (int r = 0; r < rows; r++)
        CHECKF(c[r] == g[r], "[%s] %s row %d: %g vs cpu %g", gt_runtime, what, r, (double)g[r], (double)c[r]);
    free(c), free(g);
}

static void test_sample(void) {
    int shapes[3][3] = {{3, 40, 64}, {2, 5000, 5056}, {2, 50257, 50304}};
    for (int s = 0; s < 3; s++) {
        int rows = shapes[s][0], V = shapes[s][1], Vp = shapes[s][2];
        size_t n = (size_t)rows * Vp;
        float *l = gt_random(n, -6, 6);
        for (size_t i = 0; i < n; i += 7) l[i] = roundf(l[i]); /* ties in value */
        for (int i = 0; i < 2; i++) {
            tern_dtype dt = floats[i];
            gt_pair pl = gt_make(dt, n, 0, l), po = gt_make(TERN_I32, (size_t)rows, 0, NULL);
            int32_t counter = 17;
            gt_pair pc = gt_make_i32(&counter, 1, 0);
            /* greedy; top-k small, crowded and large; all; with and without the counter */
            float temps[] = {0.0f, 0.8f, 1.0f, 2.0f, 0.8f, 1.5f};
            int ks[] = {0, 40, 1, 2000, 0, 7};
            for (int c = 0; c < 6; c++) {
                for (int seed = 0; seed < 3; seed++) {
                    GT_BOTH(sample, V(po), V(pl), rows, V, Vp, temps[c], ks[c], 1000u + (uint64_t)seed * 77,
                            c % 2 ? V(pc) : tern_none());
                    char what[96];
                    snprintf(what, sizeof what, "sample V %d %s T %.1f k %d seed %d", V, tern_dtype_name(dt),
                             (double)temps[c], ks[c], seed);
                    expect_same_sample(po, rows, what);
                }
            }
            gt_free(&pl), gt_free(&po), gt_free(&pc);
        }
        free(l);
    }
    /* values too crowded for the histograms (most logits equal): top-k falls back to the
     * exact search */
    {
        int rows = 2, V = 3000, Vp = 3008;
        float *l = gt_random((size_t)rows * Vp, 0, 1);
        for (int i = 0; i < rows * Vp; i++)
            if (i % 97) l[i] = 2.0f;
        gt_pair pl = gt_make(TERN_F32, (size_t)rows * Vp, 0, l), po = gt_make(TERN_I32, (size_t)rows, 0, NULL);
        for (int seed = 0; seed < 4; seed++) {
            GT_BOTH(sample, V(po), V(pl), rows, V, Vp, 1.0f, 40, 7u + (uint64_t)seed, tern_none());
            expect_same_sample(po, rows, "sample crowded T 1 k 40");
        }
        gt_free(&pl), gt_free(&po);
        free(l);
    }
    /* a NaN logit is an error */
    float l[64];
    for (int i = 0; i < 64; i++) l[i] = (float)i;
    l[9] = NAN;
    gt_pair pl = gt_make(TERN_F32, 64, 0, l), po = gt_make(TERN_I32, 1, 0, NULL);
    CHECK_OK(gt_gpu.ops->sample(gt_gpu.d, po.view[1], pl.view[1], 1, 64, 64, 1.0f, 5, 1, tern_none()));
    CHECK_ERR(gt_gpu.ops->sync(gt_gpu.d), "sample: logits row 0 has NaN at column 9");
    gt_free(&pl), gt_free(&po);
}

/* The top-k kernel alone (no exact fallback after it): -1 where it cannot decide. */
static int32_t topk_only(tern_buf logits, int V, int Vp, int k, float temperature) {
    gpu_core *g = &gt_gpu.d->core;
    tern_buf out;
    CHECK_OK(gpu_alloc(gt_gpu.d, TERN_I32, 1, &out));
    gk_spec s = {0};
    s.t[0] = gpu_t(logits);
    s.n[1] = g->sample_group;
    s.n[3] = 1;
    float tail = (float)((double)temperature * (log(0x1p-26) - log((double)V)));
    tern_arg args[] = {tern_arg_buf(out), tern_arg_buf(logits), tern_arg_dev(g->zero_counter), gpu_fault_arg(g),
                       tern_arg_i32(V), tern_arg_i32(Vp), tern_arg_i32(1), tern_arg_f32(temperature), tern_arg_i32(k),
                       tern_arg_f32(tail), tern_arg_u32(tern_hash32(tern_hash32(5))), tern_arg_i32(4),
                       tern_arg_i32(0)};
    CHECK_OK(gpu_run(g, "sample", GK_SAMPLE, &s, tern_dims1(1), tern_dims1((uint32_t)g->sample_group), args, 13));
    int32_t r = -2;
    CHECK_OK(gpu_download(gt_gpu.d, &r, out));
    CHECK_OK(gpu_free(gt_gpu.d, &out));
    return r;
}

/* The fast path is taken where it should be (the exact search would give the same token,
 * so the comparisons above cannot tell). */
static void test_sample_paths(void) {
    int V = 50257, Vp = 50304;
    float *l = gt_random((size_t)Vp, -5, 5);
    gt_pair pl = gt_make(TERN_BF16, (size_t)Vp, 0, l); /* bf16: many ties near the max */
    CHECKF(topk_only(pl.view[1], V, Vp, 40, 0.8f) >= 0, "[%s] top-k 40 fell back to the exact search", gt_runtime);
    for (int i = 0; i < Vp; i++) l[i] = i % 3 ? 1.0f : 0.5f; /* a third of the row at the max */
    gt_pair pc = gt_make(TERN_F32, (size_t)Vp, 0, l);
    CHECKF(topk_only(pc.view[1], V, Vp, 40, 0.8f) == -1, "[%s] top-k on crowded values did not fall back",
           gt_runtime);
    gt_free(&pl), gt_free(&pc);
    free(l);
}

/* Greedy sampling of few long rows goes through the parts (argmax.c): ties across parts
 * (the lowest index wins), the maximum in the last column, an all -inf row (index 0), and
 * the first NaN among several parts, each against the cpu handler or the error it gives. */
static void test_greedy_parts(void) {
    int rows = 3, V = 50257, Vp = 50304;
    size_t n = (size_t)rows * Vp;
    float *l = gt_random(n, -5, 5);
    l[30000] = 9.0f, l[2000] = 9.0f, l[45000] = 9.0f;  /* row 0: a tie across three parts */
    l[(size_t)Vp + V - 1] = 9.0f;                      /* row 1: the last column */
    for (int i = 0; i < Vp; i++) l[2 * (size_t)Vp + i] = -INFINITY; /* row 2 */
    gt_pair pl = gt_make(TERN_F32, n, 0, l), po = gt_make(TERN_I32, (size_t)rows, 0, NULL);
    GT_BOTH(sample, V(po), V(pl), rows, V, Vp, 0.0f, 0, 1, tern_none());
    expect_same_sample(po, rows, "greedy over parts: ties, last column, -inf row");
    int32_t got[3];
    CHECK_OK(gt_gpu.ops->download(gt_gpu.d, got, po.view[1]));
    CHECKF(got[0] == 2000 && got[1] == V - 1 && got[2] == 0, "[%s] greedy over parts: %d %d %d", gt_runtime, got[0],
           got[1], got[2]);
    float nan = NAN;
    CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, tern_view(pl.view[1], (size_t)Vp + 40000, 1), &nan));
    CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, tern_view(pl.view[1], (size_t)Vp + 7000, 1), &nan));
    CHECK_OK(gt_gpu.ops->sample(gt_gpu.d, po.view[1], pl.view[1], rows, V, Vp, 0.0f, 0, 1, tern_none()));
    CHECK_ERR(gt_gpu.ops->sync(gt_gpu.d), "sample: logits row 1 has NaN at column 7000");
    gt_free(&pl), gt_free(&po);
    free(l);
}

static void all(void) {
    test_greedy_parts();
    test_sample_paths();
    test_layernorm();
    test_embed();
    test_cross_entropy();
    test_sample();
}

int main(void) {
    gt_run(all);
    return check_summary("test_gpu_rows");
}
