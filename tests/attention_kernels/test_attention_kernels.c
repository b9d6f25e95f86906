/* The DSL kernels of the cuda handler's tensor-core attention, run on the host interpreter
 * against plain C in double precision (the cuBLASLt products around them run only on a GPU;
 * the GPT-2 fixture test checks the whole on the H200). Tolerances: f32 1e-5 (f32 exp and
 * sums over at most 64 terms); bf16 storage 8e-3 (one rounding of the output). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "nvrtc_check.h"
#include "kernels/attention_gemm.h"
#include "tern/half.h"

static tern_rt *rt;

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
}

static tern_kernel *build_form(gk_att_gemm_kernel which, tern_type act, bool to_heads, int resident) {
    gk_att_gemm_spec spec = {.act = act, .to_heads = to_heads, .resident = resident};
    tern_kernel *k = NULL;
    CHECK_OK(gk_att_gemm_kernel_build(which, &spec, &k));
    return k;
}

static tern_kernel *build(gk_att_gemm_kernel which, tern_type act, bool to_heads) {
    return build_form(which, act, to_heads, 0);
}

/* Token-major to head-major and back: one element per thread (vec false, hs = 6) or
 * 16-byte runs (vec true, hs = 8: two runs of four floats per head row; hs = 6 has no
 * such runs). */
static void test_permute(bool vec) {
    int B = 2, T = 5, G = 3, NH = 2, hs = vec ? 8 : 6, n = B * T * G * NH * hs;
    float *src = malloc(n * sizeof *src), *heads = malloc(n * sizeof *heads), *back = malloc(n * sizeof *back);
    for (int i = 0; i < n; i++) src[i] = (float)i, heads[i] = back[i] = NAN;
    gk_att_gemm_spec st = {.act = TERN_T_F32, .to_heads = true, .vec = vec}, sf = st;
    sf.to_heads = false;
    tern_kernel *to = NULL, *from = NULL;
    CHECK_OK(gk_att_gemm_kernel_build(GK_ATT_GEMM_PERMUTE, &st, &to));
    CHECK_OK(gk_att_gemm_kernel_build(GK_ATT_GEMM_PERMUTE, &sf, &from));
    CHECKF(gk_att_gemm_permute_vec_fits(TERN_T_F32, hs, 0, 0) == vec, "vector form fits hs = %d", hs);
    tern_arg a1[] = {tern_arg_host_in(TERN_T_F32, src, n), tern_arg_host(TERN_T_F32, heads, n), tern_arg_i32(B),
                     tern_arg_i32(T), tern_arg_i32(G), tern_arg_i32(NH), tern_arg_i32(hs)};
    int threads = vec ? n / 4 : n;
    CHECK_OK(tern_launch(rt, to, tern_dims1((threads + 63) / 64), tern_dims1(64), a1, 7));
    tern_arg a2[] = {tern_arg_host_in(TERN_T_F32, heads, n), tern_arg_host(TERN_T_F32, back, n), tern_arg_i32(B),
                     tern_arg_i32(T), tern_arg_i32(G), tern_arg_i32(NH), tern_arg_i32(hs)};
    CHECK_OK(tern_launch(rt, from, tern_dims1((threads + 63) / 64), tern_dims1(64), a2, 7));
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int g = 0; g < G; g++)
                for (int h = 0; h < NH; h++)
                    for (int e = 0; e < hs; e++) {
                        int i = (((b * T + t) * G + g) * NH + h) * hs + e;
                        int j = (((g * B + b) * NH + h) * T + t) * hs + e;
                        bad += heads[j] != src[i];
                    }
    CHECKF(bad == 0, "%d elements of the head-major layout are misplaced", bad);
    bad = 0;
    for (int i = 0; i < n; i++) bad += back[i] != src[i];
    CHECKF(bad == 0, "to heads and back differs in %d elements", bad);
    tern_kernel_free(to), tern_kernel_free(from);
    free(src), free(heads), free(back);
}

/* The causal softmax of row r (query position r % T) in double. */
static void reference_softmax(const float *S, int r, int T, float scale, double *p, double *lse) {
    int t = r % T;
    double m = -INFINITY, sum = 0;
    for (int s = 0; s <= t; s++) m = fmax(m, (double)S[(size_t)r * T + s] * scale);
    for (int s = 0; s <= t; s++) sum += exp((double)S[(size_t)r * T + s] * scale - m);
    for (int s = 0; s < T; s++) p[s] = s <= t ? exp((double)S[(size_t)r * T + s] * scale - m) / sum : 0;
    *lse = m + log(sum);
}

/* Rounds through the storage type, as the kernels' loads see the data. */
static float stored(float x, tern_type act) {
    return act == TERN_T_BF16 ? tern_bf16_to_f32(tern_f32_to_bf16(x)) : x;
}

static void *to_storage(const float *x, size_t n, tern_type act) {
    if (act == TERN_T_F32) {
        float *out = malloc(n * sizeof *out);
        for (size_t i = 0; i < n; i++) out[i] = x[i];
        return out;
    }
    uint16_t *out = malloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = tern_f32_to_bf16(x[i]);
    return out;
}

static float from_storage(const void *x, size_t i, tern_type act) {
    return act == TERN_T_F32 ? ((const float *)x)[i] : tern_bf16_to_f32(((const uint16_t *)x)[i]);
}

/* The end of row r's causal block: the kernels touch columns [0, end) only. */
static int block_end(int r, int T, int block) {
    int t = r % T, end = (t / block + 1) * block;
    return end < T ? end : T;
}

/* Both softmax kernels on `rows` rows of T scores with causal blocks of `block` columns, in
 * the looping form (resident 0) or the register-resident one. Past each row's block end
 * the kernels must leave the scores untouched. */
static void test_softmax(tern_type act, int rows, int T, int block, int resident) {
    uint32_t seed = 7 + (uint32_t)rows;
    size_t n = (size_t)rows * T;
    float scale = 0.125f, tol = act == TERN_T_F32 ? 1e-5f : 8e-3f;
    float *S = malloc(n * sizeof *S), *dP = malloc(n * sizeof *dP), *lse = malloc(rows * sizeof *lse);
    for (size_t i = 0; i < n; i++) S[i] = stored(frand(&seed) * 8, act), dP[i] = stored(frand(&seed), act);
    for (int r = 0; r < rows; r++) lse[r] = NAN;
    void *Sd = to_storage(S, n, act), *dPd = to_storage(dP, n, act);
    tern_kernel *fwd = build_form(GK_ATT_GEMM_SOFTMAX_FORWARD, act, false, resident);
    tern_kernel *bwd = build_form(GK_ATT_GEMM_SOFTMAX_BACKWARD, act, false, resident);
    uint32_t groups = (uint32_t)((rows + GK_ATT_GEMM_ROWS - 1) / GK_ATT_GEMM_ROWS);
    tern_arg af[] = {tern_arg_host(act, Sd, n), tern_arg_host(TERN_T_F32, lse, rows), tern_arg_i32(T),
                     tern_arg_i32(rows), tern_arg_f32(scale), tern_arg_i32(block)};
    CHECK_OK(tern_launch(rt, fwd, tern_dims1(groups), tern_dims1(32 * GK_ATT_GEMM_ROWS), af, 6));
    double *p = malloc(T * sizeof *p), worst = 0, worst_lse = 0;
    int touched = 0;
    for (int r = 0; r < rows; r++) {
        double l;
        int end = block_end(r, T, block);
        reference_softmax(S, r, T, scale, p, &l);
        worst_lse = fmax(worst_lse, fabs(lse[r] - l) / fmax(1, fabs(l)));
        for (int s = 0; s < end; s++) worst = fmax(worst, fabs(from_storage(Sd, (size_t)r * T + s, act) - p[s]));
        for (int s = end; s < T; s++) touched += from_storage(Sd, (size_t)r * T + s, act) != S[(size_t)r * T + s];
    }
    CHECKF(worst <= tol, "%s softmax forward off by %.3g", tern_type_name(act), worst);
    CHECKF(worst_lse <= 1e-5, "%s logsumexp off by %.3g", tern_type_name(act), worst_lse);
    CHECKF(touched == 0, "%s softmax forward wrote %d scores past the causal blocks", tern_type_name(act), touched);

    /* backward from the original scores again */
    free(Sd);
    Sd = to_storage(S, n, act);
    tern_arg ab[] = {tern_arg_host(act, Sd, n), tern_arg_host(act, dPd, n), tern_arg_host_in(TERN_T_F32, lse, rows),
                     tern_arg_i32(T), tern_arg_i32(rows), tern_arg_f32(scale), tern_arg_i32(block)};
    CHECK_OK(tern_launch(rt, bwd, tern_dims1(groups), tern_dims1(32 * GK_ATT_GEMM_ROWS), ab, 7));
    double worst_p = 0, worst_g = 0;
    touched = 0;
    for (int r = 0; r < rows; r++) {
        double l, D = 0;
        int end = block_end(r, T, block);
        reference_softmax(S, r, T, scale, p, &l);
        for (int s = 0; s < T; s++) D += p[s] * dP[(size_t)r * T + s];
        for (int s = 0; s < end; s++) {
            double g = p[s] * (dP[(size_t)r * T + s] - D) * scale;
            worst_p = fmax(worst_p, fabs(from_storage(Sd, (size_t)r * T + s, act) - p[s]));
            worst_g = fmax(worst_g, fabs(from_storage(dPd, (size_t)r * T + s, act) - g));
        }
        for (int s = end; s < T; s++)
            touched += (from_storage(Sd, (size_t)r * T + s, act) != S[(size_t)r * T + s]) +
                       (from_storage(dPd, (size_t)r * T + s, act) != dP[(size_t)r * T + s]);
    }
    CHECKF(worst_p <= tol, "%s softmax backward: probabilities off by %.3g", tern_type_name(act), worst_p);
    CHECKF(worst_g <= tol, "%s softmax backward: gradient off by %.3g", tern_type_name(act), worst_g);
    CHECKF(touched == 0, "%s softmax backward wrote %d scores past the causal blocks", tern_type_name(act), touched);
    printf("  %s, %d rows of %d, blocks of %d, %s: forward %.2g, lse %.2g, backward %.2g / %.2g\n",
           tern_type_name(act), rows, T, block, resident ? "resident" : "looping", worst, worst_lse, worst_p,
           worst_g);
    tern_kernel_free(fwd), tern_kernel_free(bwd);
    free(S), free(dP), free(lse), free(Sd), free(dPd), free(p);
}

/* Every kernel compiles with NVRTC for the H200 (sm_90), where the toolkit is built in. */
static void test_nvrtc(void) {
    int compiled = 0;
    for (int t = 0; t < 2; t++) {
        tern_type act = t ? TERN_T_BF16 : TERN_T_F32;
        gk_att_gemm_spec vt = {.act = act, .to_heads = true, .vec = true}, vf = {.act = act, .vec = true};
        tern_kernel *k[8] = {build(GK_ATT_GEMM_PERMUTE, act, true), build(GK_ATT_GEMM_PERMUTE, act, false),
                             build(GK_ATT_GEMM_SOFTMAX_FORWARD, act, false),
                             build(GK_ATT_GEMM_SOFTMAX_BACKWARD, act, false),
                             build_form(GK_ATT_GEMM_SOFTMAX_FORWARD, act, false, GK_ATT_GEMM_MAX_RESIDENT),
                             build_form(GK_ATT_GEMM_SOFTMAX_BACKWARD, act, false, GK_ATT_GEMM_MAX_RESIDENT),
                             NULL, NULL};
        CHECK_OK(gk_att_gemm_kernel_build(GK_ATT_GEMM_PERMUTE, &vt, &k[6]));
        CHECK_OK(gk_att_gemm_kernel_build(GK_ATT_GEMM_PERMUTE, &vf, &k[7]));
        for (int i = 0; i < 8; i++) {
            int r = nvrtc_check_compile(k[i]);
            if (r < 0) {
                for (int j = 0; j < 8; j++) tern_kernel_free(k[j]);
                return;
            }
            compiled += r;
        }
        for (int i = 0; i < 8; i++) tern_kernel_free(k[i]);
    }
    printf("  nvrtc: %d kernels compiled for sm_90\n", compiled);
}

int main(void) {
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return check_summary("attention kernels");
    test_permute(false);
    test_permute(true);
    test_softmax(TERN_T_F32, 3 * 37, 37, 37, 0); /* rows not a multiple of the group's 8 */
    test_softmax(TERN_T_F32, 3 * 37, 37, 16, 0); /* causal blocks, the last one short */
    test_softmax(TERN_T_F32, 2 * 64, 64, 64, 0);
    test_softmax(TERN_T_BF16, 2 * 40, 40, 40, 0);
    /* the resident form: whole rows, blocks, a short last block, both element types */
    test_softmax(TERN_T_F32, 2 * 64, 64, 64, 256);
    test_softmax(TERN_T_F32, 3 * 36, 36, 16, 128);
    test_softmax(TERN_T_BF16, 2 * 40, 40, 16, 256);
    test_softmax(TERN_T_BF16, 2 * 96, 96, 32, GK_ATT_GEMM_MAX_RESIDENT);
    test_softmax(TERN_T_F32, 2 * 128, 128, 128, GK_ATT_GEMM_MAX_RESIDENT);
    test_nvrtc();
    tern_rt_close(rt);
    return check_summary("attention kernels");
}
