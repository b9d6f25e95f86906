/* Grouped-query attention on the cpu handler (its attention ops), against a float64
 * reference computed here; the reference's gradient against finite differences; the cached
 * form, filled by a prompt and then one token at a time, against the full forward. Odd
 * sizes, MQA (KV = 1), f32 and bf16. (These bodies are the cpu's only attention: with KV = NH
 * they were bit for bit the multi-head loops they replaced, checked here before those were
 * deleted; GPT-2's tests now run them.)
 *
 * Tolerances (lt_error, elementwise relative with a floor of 1% of the tensor's largest):
 * f32 2e-5 (dot products over hs <= 16 and softmax sums over T <= 9, in f32 with the cpu's
 * fast exp of ~1 ulp), bf16 8e-3 (inputs are bf16 already; one rounding of the output). */
#include "llama_ops_test.h"

#define F32_TOL 2e-5
#define BF16_TOL 8e-3

#include "gqa_reference.h"

static void test_reference_gradient(void) {
    shape s = {1, 4, 4, 2, 3};
    size_t nq = (size_t)s.B * s.T * width(s), no = (size_t)s.B * s.T * s.NH * s.hs;
    float *qkv = lt_random(nq, 1.0, 0, TERN_F32), *g = lt_random(no, 1.0, 0, TERN_F32);
    double *out = malloc(no * sizeof *out), *dq = malloc(nq * sizeof *dq), *o2 = malloc(no * sizeof *o2);
    ref_attention(s, qkv, g, out, dq);
    double worst = 0, h = 1e-3;
    for (size_t i = 0; i < nq; i++) {
        double L[2];
        float keep = qkv[i];
        for (int sgn = 0; sgn < 2; sgn++) {
            /* a perturbation that float holds exactly, so the forward sees it as given */
            qkv[i] = keep + (float)(sgn ? h : -h);
            ref_attention(s, qkv, NULL, o2, NULL);
            L[sgn] = 0;
            for (size_t j = 0; j < no; j++) L[sgn] += g[j] * o2[j];
        }
        double step = (double)(keep + (float)h) - (double)(keep - (float)h);
        qkv[i] = keep;
        double fd = (L[1] - L[0]) / step;
        worst = fmax(worst, fabs(fd - dq[i]) / fmax(fabs(dq[i]), 1e-2));
    }
    /* the central difference's O(h^2) error with h = 1e-3 */
    CHECKF(worst < 1e-5, "attention reference gradient vs finite differences: %.3g", worst);
    free(qkv), free(g), free(out), free(dq), free(o2);
}

static void test_case(lt_cpu *cpu, shape s, tern_dtype dt) {
    size_t nq = (size_t)s.B * s.T * width(s), no = (size_t)s.B * s.T * s.NH * s.hs;
    double tol = dt == TERN_BF16 ? BF16_TOL : F32_TOL;
    float *qkv = lt_random(nq, 1.5, 0, dt), *g = lt_random(no, 1.0, 0, dt);
    double *out = malloc(no * sizeof *out), *dq = malloc(nq * sizeof *dq);
    ref_attention(s, qkv, g, out, dq);
    char what[96];
    snprintf(what, sizeof what, "B %d T %d NH %d KV %d hs %d %s", s.B, s.T, s.NH, s.KV, s.hs, tern_dtype_name(dt));

    size_t ns = 0;
    CHECK_OK(cpu->ops->attention_saved_len(cpu->d, s.B, s.T, s.NH, &ns));
    tern_buf qb = lt_buf(cpu, dt, qkv, nq), ob = lt_buf(cpu, dt, NULL, no), sb = lt_buf(cpu, TERN_F32, NULL, ns);
    CHECK_OK(tern_validate_attention(NULL, ob, sb, qb, s.B, s.T, s.NH, s.KV, s.hs));
    CHECK_OK(cpu->ops->attention(cpu->d, ob, sb, qb, s.B, s.T, s.NH, s.KV, s.hs));
    float *got = lt_get(cpu, ob);
    double e = lt_error(got, out, no, 0.01);
    CHECKF(e <= tol, "attention %s: error %.3g", what, e);
    tern_buf gb = lt_buf(cpu, dt, g, no), dqb = lt_buf(cpu, dt, NULL, nq);
    CHECK_OK(tern_validate_attention_backward(NULL, dqb, gb, qb, ob, sb, s.B, s.T, s.NH, s.KV, s.hs));
    CHECK_OK(cpu->ops->attention_backward(cpu->d, dqb, gb, qb, ob, sb, s.B, s.T, s.NH, s.KV, s.hs));
    float *gdq = lt_get(cpu, dqb);
    e = lt_error(gdq, dq, nq, 0.01);
    CHECKF(e <= tol, "attention_backward %s: error %.3g", what, e);

    /* a saved record shorter than the handler's: its body's one-line error */
    CHECK_ERR(cpu->ops->attention(cpu->d, ob, tern_view(sb, 0, ns - 1), qb, s.B, s.T, s.NH, s.KV, s.hs),
              "attention: saved has");

    /* cached: the first 3 positions at once, then one at a time; each row as the forward's */
    int max_T = s.T + 2, first = s.T < 3 ? s.T : 3;
    size_t nc = (size_t)s.B * s.KV * max_T * s.hs;
    tern_buf kc = lt_buf(cpu, dt, NULL, nc), vc = lt_buf(cpu, dt, NULL, nc);
    float *cached = malloc(no * sizeof *cached);
    for (int p0 = 0; p0 < s.T;) {
        int n = p0 == 0 ? first : 1;
        /* rows p0 .. p0 + n - 1 of every batch, packed [B, n, width] */
        float *rows = malloc((size_t)s.B * n * width(s) * sizeof *rows);
        for (int b = 0; b < s.B; b++)
            memcpy(rows + (size_t)b * n * width(s), qkv + ((size_t)b * s.T + p0) * width(s), (size_t)n * width(s) * sizeof *rows);
        tern_buf rb = lt_buf(cpu, dt, rows, (size_t)s.B * n * width(s));
        tern_buf cob = lt_buf(cpu, dt, NULL, (size_t)s.B * n * s.NH * s.hs), pb = lt_buf_i32(cpu, &p0, 1);
        CHECK_OK(tern_validate_attention_cached(NULL, cob, kc, vc, rb, pb, s.B, n, s.NH, s.KV, s.hs, max_T));
        CHECK_OK(cpu->ops->attention_cached(cpu->d, cob, kc, vc, rb, pb, s.B, n, s.NH, s.KV, s.hs, max_T));
        float *co = lt_get(cpu, cob);
        for (int b = 0; b < s.B; b++)
            memcpy(cached + ((size_t)b * s.T + p0) * s.NH * s.hs, co + (size_t)b * n * s.NH * s.hs,
                   (size_t)n * s.NH * s.hs * sizeof *co);
        free(co), free(rows);
        lt_free(cpu, &rb), lt_free(cpu, &cob), lt_free(cpu, &pb);
        p0 += n;
    }
    e = lt_error(cached, out, no, 0.01);
    CHECKF(e <= tol, "attention_cached %s: error %.3g", what, e);
    int p_bad = max_T - 1;
    tern_buf pb = lt_buf_i32(cpu, &p_bad, 1), rb = lt_buf(cpu, dt, NULL, (size_t)s.B * 2 * width(s));
    tern_buf cob = lt_buf(cpu, dt, NULL, (size_t)s.B * 2 * s.NH * s.hs);
    CHECK_ERR(cpu->ops->attention_cached(cpu->d, cob, kc, vc, rb, pb, s.B, 2, s.NH, s.KV, s.hs, max_T),
              "are out of range of the cache");
    lt_free(cpu, &pb), lt_free(cpu, &rb), lt_free(cpu, &cob);
    free(cached);
    tern_buf bufs[] = {qb, ob, sb, gb, dqb, kc, vc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lt_free(cpu, &bufs[i]);
    free(qkv), free(g), free(out), free(dq), free(got), free(gdq);
}

static void test_validation(lt_cpu *cpu) {
    tern_buf a = lt_buf(cpu, TERN_F32, NULL, 64), q = lt_buf(cpu, TERN_F32, NULL, 128), sv = lt_buf(cpu, TERN_F32, NULL, 16);
    /* B 1, T 2, NH 4, KV 2, hs 8: out 64, qkv 128, saved 16 */
    CHECK_OK(tern_validate_attention(NULL, a, sv, q, 1, 2, 4, 2, 8));
    CHECK_ERR(tern_validate_attention(NULL, a, sv, q, 1, 2, 4, 3, 8), "attention: KV = 3 key/value heads do not divide NH = 4");
    CHECK_ERR(tern_validate_attention(NULL, a, sv, a, 1, 2, 4, 2, 8), "attention: qkv has 64 elements");
    CHECK_ERR(tern_validate_attention(NULL, tern_view(q, 0, 64), sv, q, 1, 2, 4, 2, 8), "attention: out and qkv overlap");
    CHECK_ERR(tern_validate_attention_backward(NULL, q, a, q, a, sv, 1, 2, 4, 2, 8), "attention_backward: dqkv and qkv overlap");
    tern_buf c = lt_buf(cpu, TERN_F32, NULL, 2 * 4 * 8), pos = lt_buf_i32(cpu, (const int32_t[1]){0}, 1);
    CHECK_OK(tern_validate_attention_cached(NULL, a, tern_view(c, 0, 32), tern_view(c, 32, 32), q, pos, 1, 2, 4, 2, 8, 2));
    CHECK_ERR(tern_validate_attention_cached(NULL, a, c, c, q, pos, 1, 2, 4, 2, 8, 2), "k_cache has 64 elements");
    CHECK_ERR(tern_validate_attention_cached(NULL, a, tern_view(c, 0, 32), tern_view(c, 32, 32), q, pos, 1, 2, 4, 2, 8, 1),
              "attention_cached: T = 2 exceeds max_T = 1");
    tern_buf bufs[] = {a, q, sv, c, pos};
    for (int i = 0; i < 5; i++) lt_free(cpu, &bufs[i]);
}

int main(void) {
    lt_cpu cpu = {tern_handler_ops("cpu"), NULL};
    CHECK(cpu.ops != NULL);
    if (!cpu.ops) return check_summary("test_llama_attention");
    CHECK_OK(cpu.ops->open(NULL, &cpu.d));
    test_reference_gradient();
    shape shapes[] = {{2, 7, 6, 2, 6}, {1, 9, 4, 1, 16}, {2, 5, 4, 4, 8}, {1, 1, 2, 1, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        test_case(&cpu, shapes[i], TERN_F32);
        test_case(&cpu, shapes[i], TERN_BF16);
    }
    test_validation(&cpu);
    CHECK_OK(cpu.ops->close(cpu.d));
    return check_summary("test_llama_attention");
}
