/* The GPU core's attention (flash-style forward and backward, and the KV-cached decode)
 * against the cpu handler on random inputs, on each runtime. `saved` differs by design
 * (the core keeps a logsumexp per row, the cpu handler the probabilities), so each side
 * gets its own of its own length; out and dqkv are compared.
 *
 * Dtypes: all f32, all bf16, and bf16 out with f32 qkv and gradient (the backward then
 * recomputes dO . O exactly instead of reading the rounded out).
 * Shapes: T not a multiple of the tiles (query tiles of 64, key tiles of 32 or 16), more
 * than one query tile, head sizes 8, 16 and 64, and both dtypes.
 * Tolerances: f32 1e-5 norm-wise (online softmax and a different summation order); the
 * gradient 1e-4 (its terms cancel: dS = P (dP - delta)); bf16 outputs 1e-2. */
#include "gpu_test.h"

static const tern_dtype floats[2] = {TERN_F32, TERN_BF16};

static void test_attention(void) {
    int shapes[4][4] = {{2, 19, 32, 2}, {1, 70, 24, 3}, {1, 130, 64, 1}, {2, 33, 128, 2}};
    for (int s = 0; s < 4; s++) {
        int B = shapes[s][0], T = shapes[s][1], C = shapes[s][2], NH = shapes[s][3];
        size_t n = (size_t)B * T * C, n3 = 3 * n;
        float *qkv = gt_random(n3, -2, 2), *g = gt_random(n, -1, 1);
        for (int i = 0; i < 3; i++) { /* all f32, all bf16, bf16 out with an f32 gradient */
            /* reduced: hs 16 in f32, hs 64 in bf16, hs 8 mixed */
            if (!gt_full() && !((s == 0 && i == 0) || (s == 3 && i == 1) || (s == 1 && i == 2))) continue;
            tern_dtype dt = floats[i == 1], dto = floats[i != 0];
            gt_pair pq = gt_make(dt, n3, (size_t)i, qkv), po = gt_make(dto, n, 0, NULL), pg = gt_make(dt, n, 0, g);
            gt_pair pd = gt_make(dt, n3, 0, NULL);
            size_t sl[2];
            CHECK_OK(gt_cpu.ops->attention_saved_len(gt_cpu.d, B, T, NH, &sl[0]));
            CHECK_OK(gt_gpu.ops->attention_saved_len(gt_gpu.d, B, T, NH, &sl[1]));
            CHECK(sl[1] == (size_t)B * NH * T);
            tern_buf saved[2];
            CHECK_OK(gt_cpu.ops->alloc(gt_cpu.d, TERN_F32, sl[0], &saved[0]));
            CHECK_OK(gt_gpu.ops->alloc(gt_gpu.d, TERN_F32, sl[1], &saved[1]));
            for (int gt_s_ = 0; gt_s_ < 2; gt_s_++) {
                gt_side *sd = gt_s_ ? &gt_gpu : &gt_cpu;
                CHECK_OK(sd->ops->attention(sd->d, V(po), saved[gt_s_], V(pq), B, T, NH, NH, C / NH));
                CHECK_OK(sd->ops->attention_backward(sd->d, V(pd), V(pg), V(pq), V(po), saved[gt_s_], B, T, NH, NH, C / NH));
            }
            GT_EXPECT(po, gt_tol(dto, 1e-5), "attention B%d T%d C%d NH%d mode %d", B, T, C, NH, i);
            GT_EXPECT(pd, gt_tol(dt, 1e-4), "attention_backward B%d T%d C%d NH%d mode %d", B, T, C, NH, i);
            CHECK_OK(gt_cpu.ops->free(gt_cpu.d, &saved[0]));
            CHECK_OK(gt_gpu.ops->free(gt_gpu.d, &saved[1]));
            gt_free(&pq), gt_free(&po), gt_free(&pg), gt_free(&pd);
        }
        free(qkv), free(g);
    }
    /* the saved length is the core's own; a wrong one is an error */
    size_t sl;
    CHECK_OK(gt_gpu.ops->attention_saved_len(gt_gpu.d, 2, 3, 2, &sl));
    tern_buf q, o, sv;
    CHECK_OK(gt_gpu.ops->alloc(gt_gpu.d, TERN_F32, 2 * 3 * 12, &q));
    CHECK_OK(gt_gpu.ops->alloc(gt_gpu.d, TERN_F32, 2 * 3 * 4, &o));
    CHECK_OK(gt_gpu.ops->alloc(gt_gpu.d, TERN_F32, sl + 1, &sv));
    CHECK_ERR(gt_gpu.ops->attention(gt_gpu.d, o, sv, q, 2, 3, 2, 2, 2), "attention: saved has 13 elements");
    CHECK_OK(gt_gpu.ops->free(gt_gpu.d, &q));
    CHECK_OK(gt_gpu.ops->free(gt_gpu.d, &o));
    CHECK_OK(gt_gpu.ops->free(gt_gpu.d, &sv));
}

/* Few rows (every single-row step here, and the first shape's prefill) split their positions
 * across groups and merge the parts: with a split's least share of max_T lowered to 32
 * positions (the ac_split_min tune; the default is 256) S = 2 to 16 for these max_T. The
 * third shape's prefill (1120 rows) is not split and runs past one group's 512 positions.
 * Steps of `chunk` rows between the single ones (T > 1 at p0 > 0) split too, with some
 * splits reading both the cache and the new rows. Head sizes 8, 16, 32, 64, 128 and 256;
 * the last shape runs with at most 2 splits (ac_splits), so a split's group (8 threads per
 * position, at most GK_AC_SPLIT_GROUP) takes up to 5 passes; early positions leave late
 * splits empty. Single-row steps load their first pass of the cache before the kernel's wait
 * (the upload before each step leaves nothing in flight), two in three of them (ac_early). */
static void test_attention_cached(void) {
    int shapes[6][7] = {{2, 16, 2, 40, 7, 3, 0},   {1, 64, 1, 300, 260, 0, 0}, {1, 32, 2, 600, 560, 0, 0},
                        {1, 64, 2, 150, 20, 4, 0}, {1, 256, 2, 200, 5, 3, 0},  {1, 256, 1, 300, 200, 3, 2}};
    /* B, C, NH, max_T, T0, chunk, most splits (0: the core's choice) */
    gpu_tune saved = gt_gpu.d->core.tune;
    gt_gpu.d->core.tune.ac_split_min = 32;
    for (int s = 0; s < 6; s++) {
        int B = shapes[s][0], C = shapes[s][1], NH = shapes[s][2], maxT = shapes[s][3], chunk = shapes[s][5];
        gt_gpu.d->core.tune.ac_splits = shapes[s][6];
        size_t cache = (size_t)B * maxT * C;
        for (int i = 0; i < 2; i++) {
            if (!gt_full() && i != s % 2) continue;
            tern_dtype dt = floats[i];
            gt_pair kc = gt_make(dt, cache, 0, NULL), vc = gt_make(dt, cache, 1, NULL), pp = gt_make(TERN_I32, 1, 0, NULL);
            /* a prefill of T0 rows, then single rows (and chunks), up past one group of positions */
            int p = 0, T0 = shapes[s][4], step = 0;
            while (p < maxT) {
                int T = p == 0 ? T0 : chunk && step % 2 ? chunk : 1;
                step++;
                if (p + T > maxT) T = 1;
                size_t n = (size_t)B * T * C;
                float *qkv = gt_random(3 * n, -2, 2);
                gt_pair pq = gt_make(dt, 3 * n, 0, qkv), po = gt_make(dt, n, 0, NULL);
                int32_t p0 = p;
                CHECK_OK(gt_cpu.ops->upload(gt_cpu.d, pp.view[0], &p0));
                CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pp.view[1], &p0));
                /* decoding's first cached positions loaded before the kernel's wait, or after */
                gt_gpu.d->core.tune.ac_early = step % 3 != 1;
                GT_BOTH(attention_cached, V(po), V(kc), V(vc), V(pq), V(pp), B, T, NH, NH, C / NH, maxT);
                if (p < 12 || p + T >= maxT - 2 || p % 37 == 0 || T > 1)
                    GT_EXPECT(po, gt_tol(dt, 1e-5), "attention_cached C%d NH%d p0 %d T %d %s", C, NH, p, T,
                              tern_dtype_name(dt));
                gt_free(&pq), gt_free(&po);
                free(qkv);
                p += T;
            }
            GT_EXPECT(kc, 0.0, "attention_cached k_cache C%d %s", C, tern_dtype_name(dt));
            GT_EXPECT(vc, 0.0, "attention_cached v_cache C%d %s", C, tern_dtype_name(dt));
            /* positions past the cache: reported at the next sync */
            int32_t bad = maxT;
            size_t n = (size_t)B * C;
            gt_pair pq = gt_make(dt, 3 * n, 0, NULL), po = gt_make(dt, n, 0, NULL);
            CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pp.view[1], &bad));
            CHECK_OK(gt_gpu.ops->attention_cached(gt_gpu.d, po.view[1], kc.view[1], vc.view[1], pq.view[1], pp.view[1], B,
                                                  1, NH, NH, C / NH, maxT));
            CHECK_ERR(gt_gpu.ops->sync(gt_gpu.d), "are out of range of the cache");
            gt_free(&pq), gt_free(&po), gt_free(&kc), gt_free(&vc), gt_free(&pp);
        }
    }
    gt_gpu.d->core.tune = saved;
}

/* matmul's ATTENTION prologue (a decoding step's attention and the projection after it):
 * against the cpu handler's composition (attention_cached, then the product), C += A W (+
 * bias) with A the attention's output, A and the caches compared too. Single-row steps split
 * (ac_split_min lowered), so the GEMV merges the parts as it stages A; every third step with
 * ac_defer off, the attention merging them itself. GPT-2's shape (B [k, n], a bias, KV = NH)
 * and a grouped one with B [n, k] and no bias (Llama's). */
static void test_attention_projection(void) {
    int shapes[2][6] = {{64, 2, 2, 150, 0, 1}, {64, 4, 2, 100, 1, 0}}; /* C, NH, KV, max_T, trans_b, bias */
    gpu_tune saved = gt_gpu.d->core.tune;
    gt_gpu.d->core.tune.ac_split_min = 32;
    for (int sh = 0; sh < 2; sh++) {
        int C = shapes[sh][0], NH = shapes[sh][1], KV = shapes[sh][2], maxT = shapes[sh][3], hs = C / NH;
        bool trans_b = shapes[sh][4], has_bias = shapes[sh][5];
        int width = (NH + 2 * KV) * hs, N = 48;
        for (int i = 0; i < 2; i++) {
            tern_dtype dt = floats[i];
            size_t cache = (size_t)KV * maxT * hs;
            float *w = gt_random((size_t)C * N, -0.2f, 0.2f), *bias = gt_random((size_t)N, -0.5f, 0.5f);
            float *x0 = gt_random((size_t)8 * N, -1, 1), *zero = calloc(cache, sizeof *zero);
            /* zeros past the positions the steps write, so that the caches compare whole */
            gt_pair kc = gt_make(dt, cache, 0, zero), vc = gt_make(dt, cache, 1, zero), pp = gt_make(TERN_I32, 1, 0, NULL);
            gt_pair pw = gt_make(dt, (size_t)C * N, 0, w), pb = gt_make(dt, (size_t)N, 0, bias);
            int p = 0, step = 0;
            while (p < 60) {
                int T = p == 0 ? 5 : 1;
                float *qkv = gt_random((size_t)T * width, -2, 2);
                gt_pair pq = gt_make(dt, (size_t)T * width, 0, qkv), pa = gt_make(dt, (size_t)T * C, 0, NULL);
                gt_pair pc = gt_make(dt, (size_t)T * N, 0, x0);
                int32_t p0 = p;
                CHECK_OK(gt_cpu.ops->upload(gt_cpu.d, pp.view[0], &p0));
                CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pp.view[1], &p0));
                gt_gpu.d->core.tune.ac_defer = step % 3 != 2;
                for (int side = 0; side < 2; side++) {
                    gt_side *sd = side ? &gt_gpu : &gt_cpu;
                    tern_matmul mm = {.m = T, .n = N, .k = C, .trans_b = trans_b, .alpha = 1, .beta = 1,
                                      .bias = has_bias ? pb.view[side] : tern_none(),
                                      .prologue = TERN_PROLOGUE_ATTENTION,
                                      .att = {kc.view[side], vc.view[side], pq.view[side], pp.view[side], 1, T, NH, KV,
                                              hs, maxT}};
                    CHECK_OK(sd->ops->matmul(sd->d, pc.view[side], pa.view[side], pw.view[side], &mm));
                }
                GT_EXPECT(pa, gt_tol(dt, 1e-5), "attention prologue: A, NH %d KV %d p0 %d T %d %s", NH, KV, p, T,
                          tern_dtype_name(dt));
                GT_EXPECT(pc, gt_tol(dt, 1e-5), "attention prologue: C, NH %d KV %d p0 %d T %d %s", NH, KV, p, T,
                          tern_dtype_name(dt));
                gt_free(&pq), gt_free(&pa), gt_free(&pc);
                free(qkv);
                p += T, step++;
            }
            GT_EXPECT(kc, 0.0, "attention prologue: k_cache NH %d %s", NH, tern_dtype_name(dt));
            GT_EXPECT(vc, 0.0, "attention prologue: v_cache NH %d %s", NH, tern_dtype_name(dt));
            gt_free(&kc), gt_free(&vc), gt_free(&pp), gt_free(&pw), gt_free(&pb);
            free(w), free(bias), free(x0), free(zero);
        }
    }
    gt_gpu.d->core.tune = saved;
}

/* matmul's ATTENTION prologue with its q|k|v product (att.product: qkv = layernorm(x) W +
 * b, then the attention and the projection) against the cpu handler's composition: A, C,
 * qkv and the caches compared. With 16-bit weights a decoding step of one row is one
 * kernel where the split groups compute q, k and v themselves (the joined kernel, then the
 * projection's GEMV: two launches, counted; the host interpreter, and CUDA, never OpenCL),
 * head sizes 32 and 64 (J = 2 and 4 slices of the new position), C = 1,024 with rows of the
 * weights past the 24 a thread loads before the wait; every third step with
 * ac_join off (the product's GEMV, the attention, the GEMV: three); the prefill (T = 5)
 * and f32 weights are never joined. The caches now
 * differ by rounding too (the product's sums in another order), so they take the product's
 * tolerance. Early positions leave late splits empty (ac_split_min lowered to 32). */
static void test_attention_joined(void) {
    int shapes[3][3] = {{64, 2, 60}, {128, 2, 60}, {1024, 16, 12}}; /* C, NH, positions run */
    gpu_tune saved = gt_gpu.d->core.tune;
    gt_gpu.d->core.tune.ac_split_min = 32;
    for (int sh = 0; sh < 3; sh++) {
        int C = shapes[sh][0], NH = shapes[sh][1], hs = C / NH, maxT = 150, N = 48, width = 3 * C;
        gt_gpu.d->core.tune.ac_splits = sh == 2 ? 2 : 0; /* 1,024: few enough parts for the GEMV's merge */
        for (int i = 0; i < 2; i++) {
            tern_dtype dt = floats[i];
            if (!gt_full() && i != 1) continue;
            size_t cache = (size_t)NH * maxT * hs;
            float *w = gt_random((size_t)C * N, -0.2f, 0.2f), *bias = gt_random((size_t)N, -0.5f, 0.5f);
            float *wq = gt_random((size_t)C * width, -0.3f, 0.3f), *bq = gt_random((size_t)width, -0.5f, 0.5f);
            float *lw = gt_random((size_t)C, 0.5f, 1.5f), *lb = gt_random((size_t)C, -0.5f, 0.5f);
            float *zero = calloc(cache, sizeof *zero);
            gt_pair kc = gt_make(dt, cache, 0, zero), vc = gt_make(dt, cache, 1, zero), pp = gt_make(TERN_I32, 1, 0, NULL);
            gt_pair pw = gt_make(dt, (size_t)C * N, 0, w), pb = gt_make(dt, (size_t)N, 0, bias);
            gt_pair pwq = gt_make(dt, (size_t)C * width, 0, wq), pbq = gt_make(dt, (size_t)width, 0, bq);
            gt_pair plw = gt_make(dt, (size_t)C, 0, lw), plb = gt_make(dt, (size_t)C, 0, lb);
            int p = 0, step = 0;
            while (p < shapes[sh][2]) {
                int T = p == 0 ? 5 : 1;
                bool join = step % 3 != 2;
                float *x0 = gt_random((size_t)T * C, -2, 2), *c0 = gt_random((size_t)T * N, -1, 1);
                gt_pair px = gt_make(dt, (size_t)T * C, 0, x0), pq = gt_make(dt, (size_t)T * width, 0, NULL);
                gt_pair pa = gt_make(dt, (size_t)T * C, 0, NULL), pc = gt_make(dt, (size_t)T * N, 0, c0);
                int32_t p0 = p;
                CHECK_OK(gt_cpu.ops->upload(gt_cpu.d, pp.view[0], &p0));
                CHECK_OK(gt_gpu.ops->upload(gt_gpu.d, pp.view[1], &p0));
                gt_gpu.d->core.tune.ac_join = join;
                unsigned long launches = 0;
                for (int side = 0; side < 2; side++) {
                    gt_side *sd = side ? &gt_gpu : &gt_cpu;
                    tern_matmul prod = {.m = T, .n = width, .k = C, .alpha = 1, .bias = pbq.view[side],
                                        .prologue = TERN_PROLOGUE_LAYERNORM, .norm = {plw.view[side], plb.view[side], 1e-5f}};
                    tern_matmul mm = {.m = T, .n = N, .k = C, .alpha = 1, .beta = 1, .bias = pb.view[side],
                                      .prologue = TERN_PROLOGUE_ATTENTION,
                                      .att = {kc.view[side], vc.view[side], pq.view[side], pp.view[side], 1, T, NH, NH,
                                              hs, maxT, &prod, px.view[side], pwq.view[side]}};
                    if (side) launches = gt_gpu.d->core.launches;
                    CHECK_OK(sd->ops->matmul(sd->d, pc.view[side], pa.view[side], pw.view[side], &mm));
                    if (side) launches = gt_gpu.d->core.launches - launches;
                }
                bool joins = join && dt == TERN_BF16 && strcmp(gt_runtime, "opencl") != 0; /* attention.c */
                if (T == 1)
                    CHECKF(launches == (joins ? 2u : 3u), "[%s] joined step: %lu launches, C %d %s",
                           gt_runtime, launches, C, tern_dtype_name(dt));
                GT_EXPECT(pq, gt_tol(dt, 1e-5), "joined: qkv C %d p0 %d T %d %s", C, p, T, tern_dtype_name(dt));
                GT_EXPECT(pa, gt_tol(dt, 1e-5), "joined: A C %d p0 %d T %d %s", C, p, T, tern_dtype_name(dt));
                GT_EXPECT(pc, gt_tol(dt, 1e-5), "joined: C C %d p0 %d T %d %s", C, p, T, tern_dtype_name(dt));
                gt_free(&px), gt_free(&pq), gt_free(&pa), gt_free(&pc);
                free(x0), free(c0);
                p += T, step++;
            }
            GT_EXPECT(kc, gt_tol(dt, 1e-5), "joined: k_cache C %d %s", C, tern_dtype_name(dt));
            GT_EXPECT(vc, gt_tol(dt, 1e-5), "joined: v_cache C %d %s", C, tern_dtype_name(dt));
            gt_free(&kc), gt_free(&vc), gt_free(&pp), gt_free(&pw), gt_free(&pb), gt_free(&pwq), gt_free(&pbq);
            gt_free(&plw), gt_free(&plb);
            free(w), free(bias), free(wq), free(bq), free(lw), free(lb), free(zero);
        }
    }
    gt_gpu.d->core.tune = saved;
}

static void all(void) {
    test_attention();
    test_attention_cached();
    test_attention_projection();
    test_attention_joined();
}

int main(void) {
    gt_run(all);
    return check_summary("test_gpu_attention");
}
