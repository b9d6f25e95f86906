/* The GPU core's memory, elementwise and reduction operations against the cpu handler, on
 * random inputs, on each runtime (the host interpreter, OpenCL).
 *
 * Tolerances: elementwise f32 results 1e-6 norm-wise (the same f32 formula; libm's and the
 * device's exp/tanh differ by an ulp or two); bf16 outputs 1e-2 (one rounding to 8 bits
 * can land on either side when the f32 values differ in the last bits); reductions 1e-5
 * (different summation orders over up to a few thousand terms); norm2 1e-10 (float-float
 * accumulation on the GPU, double on the cpu); conversions exact. */
#include "gpu_test.h"

static const tern_dtype floats[2] = {TERN_F32, TERN_BF16};

static void test_fill_copy(void) {
    /* every dtype pair, at aligned and odd offsets (vector and scalar paths) */
    const tern_dtype all[5] = {TERN_F32, TERN_BF16, TERN_F16, TERN_I32, TERN_U16};
    size_t n = 1037;
    float *x = gt_random(n, -300.0f, 60000.0f); /* finite in f16 */
    for (size_t i = 0; i < n; i += 97) x[i] = -65000.0f; /* u16 saturates */
    for (int a = 0; a < 5; a++) {
        for (int b = 0; b < 5; b++) {
            /* reduced: the model's conversions (f32 <-> bf16, both widths) and int <-> f32 */
            bool model = (a == 0 && b == 1) || (a == 1 && b == 0);
            if (!gt_full() && !model && !((a == 0) != (b == 0) && (a >= 3 || b >= 3))) continue;
            for (size_t off = 0; off < 2; off++) {
                if (!gt_full() && !model && off == 0) continue;
                gt_pair src = gt_make(all[b], n, off * 3, x), dst = gt_make(all[a], n, off * 5, NULL);
                GT_BOTH(copy, V(dst), V(src));
                GT_EXPECT(dst, 0.0, "copy %s <- %s off %zu", tern_dtype_name(all[a]), tern_dtype_name(all[b]), off);
                gt_free(&src);
                gt_free(&dst);
            }
        }
        if (!gt_full() && all[a] == TERN_F16) continue;
        gt_pair d = gt_make(all[a], n, 1, NULL);
        GT_BOTH(fill, V(d), 3.0);
        GT_EXPECT(d, 0.0, "fill %s", tern_dtype_name(all[a]));
        if (all[a] != TERN_U16) {
            GT_BOTH(fill, V(d), -0.3);
            GT_EXPECT(d, 0.0, "fill %s -0.3", tern_dtype_name(all[a]));
        }
        gt_free(&d);
    }
    free(x);
}

static void test_get_from_list(void) {
    double values[5] = {1.0, 250.0, 65504.0, 3.0, 7.0}; /* representable in every dtype */
    for (int dt = 0; dt < 5; dt++) {
        tern_buf b;
        CHECK_OK(gpu_from_list(gt_gpu.d, (tern_dtype)dt, values, 5, &b));
        for (size_t i = 0; i < 5; i++) {
            double g = 0, c = 0;
            tern_buf cb;
            CHECK_OK(gt_cpu.ops->from_list(gt_cpu.d, (tern_dtype)dt, values, 5, &cb));
            CHECK_OK(gt_cpu.ops->get(gt_cpu.d, cb, i, &c));
            CHECK_OK(gt_gpu.ops->get(gt_gpu.d, b, i, &g));
            CHECKF(g == c, "[%s] from_list/get %s[%zu]: %g vs cpu %g", gt_runtime, tern_dtype_name((tern_dtype)dt), i, g, c);
            CHECK_OK(gt_cpu.ops->free(gt_cpu.d, &cb));
        }
        tern_buf view = tern_view(b, 1, 2);
        CHECK_ERR(gt_gpu.ops->free(gt_gpu.d, &view), "free the whole allocation");
        CHECK_OK(gt_gpu.ops->free(gt_gpu.d, &b));
        CHECK(b.len == 0);
    }
}

static void test_add_gelu(void) {
    size_t n = 3001;
    float *a = gt_random(n, -4, 4), *b = gt_random(n, -4, 4);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            for (size_t off = 0; off < 2; off++) {
                if (!gt_full() && (i != j) != (off == 1)) continue; /* same dtypes aligned, mixed unaligned */
                gt_pair pa = gt_make(floats[i], n, off * 8, a), pb = gt_make(floats[j], n, off, b);
                gt_pair po = gt_make(floats[i], n, 0, NULL);
                GT_BOTH(add, V(po), V(pa), V(pb));
                GT_EXPECT(po, gt_tol(floats[i], 1e-7), "add %d%d off %zu", i, j, off);
                GT_BOTH(add, V(pa), V(pa), V(pb)); /* in place */
                GT_EXPECT(pa, gt_tol(floats[i], 1e-7), "add in place %d%d", i, j);
                GT_BOTH(gelu, V(po), V(pb));
                GT_EXPECT(po, gt_tol(floats[i], 1e-6), "gelu %d%d off %zu", i, j, off);
                GT_BOTH(gelu_backward, V(po), V(pa), V(pb));
                GT_EXPECT(po, gt_tol(floats[i], 1e-6), "gelu_backward %d%d off %zu", i, j, off);
                GT_BOTH(gelu_backward, V(pa), V(pa), V(pb)); /* dx is dout */
                GT_EXPECT(pa, gt_tol(floats[i], 1e-6), "gelu_backward in place %d%d", i, j);
                GT_BOTH(gelu, V(pb), V(pb));
                GT_EXPECT(pb, gt_tol(floats[j], 1e-6), "gelu in place %d%d", i, j);
                gt_free(&pa);
                gt_free(&pb);
                gt_free(&po);
            }
        }
    }
    free(a);
    free(b);
}

static void test_adamw(void) {
    size_t n = 2053;
    float *p = gt_random(n, -1, 1), *g = gt_random(n, -0.1f, 0.1f), *m = gt_random(n, -0.01f, 0.01f);
    float *v = gt_random(n, 0, 0.001f);
    for (int i = 0; i < 2; i++) {
        for (int with_shadow = 0; with_shadow < 2; with_shadow++) {
            if (!gt_full() && i != with_shadow) continue;
            gt_pair pp = gt_make(TERN_F32, n, 4, p), pg = gt_make(floats[i], n, 1, g);
            gt_pair pm = gt_make(TERN_F32, n, 0, m), pv = gt_make(TERN_F32, n, 2, v);
            gt_pair ps = gt_make(TERN_BF16, n, 3, NULL);
            tern_adamw h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                            .step = 3, .grad_scale = 0.5f};
            int gt_s_ = 0;
            for (gt_s_ = 0; gt_s_ < 2; gt_s_++) {
                gt_side *sd = gt_s_ ? &gt_gpu : &gt_cpu;
                CHECK_OK(sd->ops->adamw(sd->d, V(pp), with_shadow ? V(ps) : tern_none(), V(pg), V(pm), V(pv), &h));
            }
            GT_EXPECT(pp, 1e-6, "adamw param grad %d shadow %d", i, with_shadow);
            GT_EXPECT(pm, 1e-6, "adamw m");
            GT_EXPECT(pv, 1e-6, "adamw v");
            if (with_shadow) GT_EXPECT(ps, 1e-2, "adamw shadow");
            gt_free(&pp);
            gt_free(&pg);
            gt_free(&pm);
            gt_free(&pv);
            gt_free(&ps);
        }
    }
    free(p);
    free(g);
    free(m);
    free(v);
}

static void test_reductions(void) {
    int shapes[3][2] = {{1, 5}, {37, 300}, {700, 19}};
    for (int s = 0; s < 3; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *x = gt_random(n, -1, 1), *o = gt_random((size_t)cols, -1, 1);
        for (int i = 0; i < 2; i++) {
            gt_pair px = gt_make(floats[i], n, 1, x), po = gt_make(floats[i], (size_t)cols, 2, o);
            GT_BOTH(sum_rows, V(po), V(px), rows, cols, 1.0f);
            GT_EXPECT(po, gt_tol(floats[i], 1e-5), "sum_rows %dx%d beta 1 %s", rows, cols, tern_dtype_name(floats[i]));
            GT_BOTH(fill, V(po), NAN);
            GT_BOTH(sum_rows, V(po), V(px), rows, cols, 0.0f); /* out holds NaN: not read */
            GT_EXPECT(po, gt_tol(floats[i], 1e-5), "sum_rows %dx%d beta 0", rows, cols);
            double nc = 0, ng = 0;
            CHECK_OK(gt_cpu.ops->norm2(gt_cpu.d, px.view[0], &nc));
            CHECK_OK(gt_gpu.ops->norm2(gt_gpu.d, px.view[1], &ng));
            CHECKF(fabs(nc - ng) <= 1e-10 * nc, "[%s] norm2 %zu: %.9g vs cpu %.9g", gt_runtime, n, ng, nc);
            gt_free(&px);
            gt_free(&po);
        }
        free(x);
        free(o);
    }
}

static void test_matmul(void) {
    /* transposes, strides, batch, alpha/beta, bias, GELU with aux, bf16 operands */
    int cases[][7] = {
        /* m, n, k, trans_a, trans_b, batch, epilogue */
        {5, 7, 3, 0, 0, 1, 0}, {70, 65, 33, 1, 0, 1, 1}, {64, 130, 17, 0, 1, 2, 0}, {33, 20, 80, 1, 1, 3, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int m = cases[c][0], n = cases[c][1], k = cases[c][2], batch = cases[c][5];
        for (int dt = 0; dt < 2; dt++) {
            if (!gt_full() && dt != (int)(c / 2)) continue;
            tern_matmul mm = {.m = m, .n = n, .k = k, .trans_a = cases[c][3], .trans_b = cases[c][4],
                              .batch = batch, .alpha = 0.75f, .beta = c % 2 ? 0.5f : 0.0f,
                              .epilogue = cases[c][6] ? TERN_EPILOGUE_GELU : TERN_EPILOGUE_NONE};
            mm.lda = (mm.trans_a ? m : k) + 3;
            mm.ldc = n + 1;
            size_t a_rows = mm.trans_a ? (size_t)k : (size_t)m, b_len = (size_t)k * n;
            size_t a_stride = a_rows * (size_t)mm.lda, c_stride = (size_t)m * mm.ldc;
            mm.stride_a = (long)a_stride;
            mm.stride_c = (long)c_stride;
            size_t a_len = a_stride * batch, c_len = c_stride * batch;
            float *a = gt_random(a_len, -1, 1), *b = gt_random(b_len * batch, -1, 1), *cc = gt_random(c_len, -1, 1);
            float *bias = gt_random((size_t)n, -1, 1);
            gt_pair pa = gt_make(floats[dt], a_len, 0, a), pb = gt_make(floats[dt], b_len * batch, 4, b);
            gt_pair pc = gt_make(floats[dt], c_len, 0, cc), pbias = gt_make(floats[dt], (size_t)n, 1, bias);
            gt_pair paux = gt_make(floats[dt], (size_t)m * n * batch, 0, NULL);
            for (int gt_s_ = 0; gt_s_ < 2; gt_s_++) {
                gt_side *sd = gt_s_ ? &gt_gpu : &gt_cpu;
                tern_matmul x = mm;
                x.bias = V(pbias);
                if (cases[c][6]) x.aux = V(paux);
                CHECK_OK(sd->ops->matmul(sd->d, V(pc), V(pa), V(pb), &x));
            }
            GT_EXPECT(pc, gt_tol(floats[dt], 1e-5), "matmul case %zu %s", c, tern_dtype_name(floats[dt]));
            if (cases[c][6]) GT_EXPECT(paux, gt_tol(floats[dt], 1e-5), "matmul aux case %zu", c);
            gt_free(&pa);
            gt_free(&pb);
            gt_free(&pc);
            gt_free(&pbias);
            gt_free(&paux);
            free(a);
            free(b);
            free(cc);
            free(bias);
        }
    }
}

static void all(void) {
    test_fill_copy();
    test_get_from_list();
    test_add_gelu();
    test_adamw();
    test_reductions();
    test_matmul();
}

int main(void) {
    gt_run(all);
    return check_summary("test_gpu_elementwise");
}
