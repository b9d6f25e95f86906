/* The GPU core's attention ops with grouped key/value heads (the DSL kernels of
 * src/kernels/attention.c and attention_cached.c, through the op entries) against a float64
 * reference computed here (the one of tests/llama/test_llama_attention.c, whose gradient
 * that test checks against finite differences), on each runtime. (KV = NH traces GPT-2's
 * kernels unchanged; test_gpu_attention compares those with the cpu handler.)
 *
 * qkv [B, T, (NH + 2 KV) hs]: query head h at h hs, key/value head g's key at NH hs + g hs,
 * value at (NH + KV) hs + g hs; query head h reads key/value head h / (NH / KV).
 * Shapes: groups of 2 (NH 4, KV 2), 4 (MQA: KV 1) and 1 (KV = NH), odd T, T past one query
 * tile of 64 (the dk/dv kernel's loop over the group's heads runs over several query tiles),
 * head sizes 8, 16 and 64 (64: rows split across threads).
 * The cached form (decoding) with and without its split of the positions, on the same shapes.
 * Tolerances, norm-wise relative to the reference: f32 out 1e-5 and gradient 1e-4 (as
 * test_gpu_attention: online softmax, another summation order, and the gradient's terms
 * cancel in dS = P (dP - delta)); bf16 (inputs rounded to bf16 before the reference sees
 * them, outputs rounded once) 1e-2. */
#include "gpu_test.h"

#include "gqa_reference.h"

/* ||got - want|| / ||want||. */
static double rel_error(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - want[i];
        num += e * e;
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* n values rounded to dt (what the device holds). */
static float *rounded(float *x, size_t n, tern_dtype dt) {
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        gt_encode(b, dt, x[i]);
        x[i] = gt_decode(b, dt);
    }
    return x;
}

static void test_case(shape s, tern_dtype dt) {
    tern_dev *d = gt_gpu.d;
    size_t nq = (size_t)s.B * s.T * width(s), no = (size_t)s.B * s.T * s.NH * s.hs;
    float *qkv = rounded(gt_random(nq, -2, 2), nq, dt), *g = rounded(gt_random(no, -1, 1), no, dt);
    double *ref_out = malloc(no * sizeof *ref_out), *ref_dq = malloc(nq * sizeof *ref_dq);
    ref_attention(s, qkv, g, ref_out, ref_dq);
    char what[96];
    snprintf(what, sizeof what, "B %d T %d NH %d KV %d hs %d %s", s.B, s.T, s.NH, s.KV, s.hs, tern_dtype_name(dt));

    /* views at an offset: the kernels' widths come from the views' alignment */
    gt_pair pq = gt_make(dt, nq, 4, qkv), po = gt_make(dt, no, 0, NULL), pg = gt_make(dt, no, 0, g);
    gt_pair pd = gt_make(dt, nq, 0, NULL);
    size_t ns = 0;
    CHECK_OK(gt_gpu.ops->attention_saved_len(d, s.B, s.T, s.NH, &ns));
    gt_pair ps = gt_make(TERN_F32, ns, 0, NULL);
    CHECK_OK(gt_gpu.ops->attention(d, po.view[1], ps.view[1], pq.view[1], s.B, s.T, s.NH, s.KV, s.hs));
    CHECK_OK(gt_gpu.ops->attention_backward(d, pd.view[1], pg.view[1], pq.view[1], po.view[1], ps.view[1], s.B, s.T,
                                            s.NH, s.KV, s.hs));
    float *out = gt_read(po, 1), *dq = gt_read(pd, 1);
    double tol_out = dt == TERN_BF16 ? 1e-2 : 1e-5, tol_grad = dt == TERN_BF16 ? 1e-2 : 1e-4;
    double e = rel_error(out, ref_out, no);
    CHECKF(e <= tol_out, "[%s] gqa attention %s: relative error %.3g > %.3g", gt_runtime, what, e, tol_out);
    e = rel_error(dq, ref_dq, nq);
    CHECKF(e <= tol_grad, "[%s] gqa attention_backward %s: relative error %.3g > %.3g", gt_runtime, what, e, tol_grad);
    CHECKF(gt_guard_ok(po) && gt_guard_ok(pd), "[%s] gqa attention %s: wrote outside its views", gt_runtime, what);

    gt_free(&pq), gt_free(&po), gt_free(&pg), gt_free(&pd), gt_free(&ps);
    free(qkv), free(g), free(ref_out), free(ref_dq), free(out), free(dq);
}

/* The cached form: a prompt of up to 3 rows, then one row at a time (decoding), each step's
 * rows against the reference forward's; then the caches [B, KV, max_T, hs] hold exactly
 * qkv's keys and values. splits 1: one group per row (no split); 0: the core's choice
 * (decoding splits the positions and merges the parts). */
static void test_cached(shape s, tern_dtype dt, int splits) {
    tern_dev *d = gt_gpu.d;
    size_t W = width(s), nq = (size_t)s.B * s.T * W, no = (size_t)s.B * s.T * s.NH * s.hs;
    float *qkv = rounded(gt_random(nq, -2, 2), nq, dt);
    double *ref_out = malloc(no * sizeof *ref_out);
    ref_attention(s, qkv, NULL, ref_out, NULL);
    char what[112];
    snprintf(what, sizeof what, "B %d T %d NH %d KV %d hs %d %s splits %d", s.B, s.T, s.NH, s.KV, s.hs,
             tern_dtype_name(dt), splits);
    gpu_tune saved = gt_gpu.d->core.tune;
    gt_gpu.d->core.tune.ac_splits = splits;
    gt_gpu.d->core.tune.ac_split_min = 32; /* short caches split too (the default is 256) */
    int max_T = s.T + 2, first = s.T < 3 ? s.T : 3;
    size_t nc = (size_t)s.B * s.KV * max_T * s.hs;
    gt_pair kc = gt_make(dt, nc, 0, NULL), vc = gt_make(dt, nc, 0, NULL);
    float *got = malloc(no * sizeof *got);
    for (int p0 = 0; p0 < s.T;) {
        int n = p0 == 0 ? first : 1;
        /* rows p0 .. p0 + n - 1 of every sequence, packed [B, n, width] */
        float *rows = malloc((size_t)s.B * n * W * sizeof *rows);
        for (int b = 0; b < s.B; b++)
            memcpy(rows + (size_t)b * n * W, qkv + ((size_t)b * s.T + p0) * W, (size_t)n * W * sizeof *rows);
        size_t nr = (size_t)s.B * n * s.NH * s.hs;
        gt_pair pr = gt_make(dt, (size_t)s.B * n * W, 0, rows), po = gt_make(dt, nr, 0, NULL);
        gt_pair pp = gt_make_i32(&p0, 1, 0);
        CHECK_OK(gt_gpu.ops->attention_cached(d, po.view[1], kc.view[1], vc.view[1], pr.view[1], pp.view[1], s.B, n,
                                              s.NH, s.KV, s.hs, max_T));
        float *o = gt_read(po, 1);
        for (int b = 0; b < s.B; b++)
            memcpy(got + ((size_t)b * s.T + p0) * s.NH * s.hs, o + (size_t)b * n * s.NH * s.hs,
                   (size_t)n * s.NH * s.hs * sizeof *o);
        free(o), free(rows);
        gt_free(&pr), gt_free(&po), gt_free(&pp);
        p0 += n;
    }
    double e = rel_error(got, ref_out, no), tol = dt == TERN_BF16 ? 1e-2 : 1e-5;
    CHECKF(e <= tol, "[%s] gqa attention_cached %s: relative error %.3g > %.3g", gt_runtime, what, e, tol);
    /* cache [b, g, p, :] = qkv[b, p, (NH + g) hs + :] (keys), [(NH + KV + g) hs + :] (values) */
    float *k = gt_read(kc, 1), *v = gt_read(vc, 1);
    int wrong = 0;
    for (int b = 0; b < s.B; b++)
        for (int g = 0; g < s.KV; g++)
            for (int p = 0; p < s.T; p++)
                for (int i = 0; i < s.hs; i++) {
                    size_t at = (((size_t)b * s.KV + g) * max_T + p) * s.hs + i;
                    const float *row = qkv + ((size_t)b * s.T + p) * W;
                    wrong += k[at] != row[(size_t)(s.NH + g) * s.hs + i];
                    wrong += v[at] != row[(size_t)(s.NH + s.KV + g) * s.hs + i];
                }
    CHECKF(wrong == 0, "[%s] gqa attention_cached %s: %d cache entries differ from qkv", gt_runtime, what, wrong);
    gt_gpu.d->core.tune = saved;
    gt_free(&kc), gt_free(&vc);
    free(qkv), free(ref_out), free(got), free(k), free(v);
}

/* The core's own checks (the op entries validate first). */
static void test_errors(void) {
    tern_dev *d = gt_gpu.d;
    gt_pair q = gt_make(TERN_F32, 64, 0, NULL), o = gt_make(TERN_F32, 32, 0, NULL), sv = gt_make(TERN_F32, 8, 0, NULL);
    CHECK_ERR(gpu_attention_dsl(d, o.view[1], sv.view[1], q.view[1], 1, 2, 4, 3, 4),
              "attention: KV = 3 key/value heads do not divide NH = 4");
    CHECK_ERR(gpu_attention_dsl(d, o.view[1], sv.view[1], q.view[1], 1, 2, 4, 2, 0), "attention: hs");
    gt_free(&q), gt_free(&o), gt_free(&sv);
}

static void all(void) {
    static const shape shapes[] = {
        {2, 19, 4, 2, 8}, {1, 70, 4, 1, 16}, {2, 33, 4, 4, 8}, {1, 37, 6, 3, 64},
    };
    static const tern_dtype floats[2] = {TERN_F32, TERN_BF16};
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < 2; t++) {
            /* reduced (OpenCL): a group of 2 in f32, MQA in bf16 */
            if (!gt_full() && !((i == 0 && t == 0) || (i == 1 && t == 1))) continue;
            test_case(shapes[i], floats[t]);
            test_cached(shapes[i], floats[t], (i + t) % 2);
        }
    test_errors();
}

int main(void) {
    gt_run(all);
    return check_summary("test_gpu_gqa");
}
