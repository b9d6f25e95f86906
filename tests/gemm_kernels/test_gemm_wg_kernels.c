/* The warpgroup GEMM (src/kernels/gemm_wg.c) on the host interpreter, whose warpgroup
 * products, tile copies and pipe follow the CUDA target's semantics, against the product in
 * double precision from the same bf16 inputs: every epilogue, B either way round, and one
 * group walking two tiles, so that the producer stores the first tile's epilogue while the
 * consumers multiply the second (the hand-off) and the last tile is stored after the pipe.
 * With TERN_GPU (cuda on the H200: scripts/h200/) the same cases and GPT-2 124M's shapes
 * run there too, on 32 groups of several tiles each.
 *
 * Tolerance: |got - want| <= 1e-2 (1 + |want|), every element. The kernel rounds the
 * accumulated value (plus bias) to bf16 once in its staging and the result once more, each
 * 2^-9 of the value rounded; the staged value is under 4 in magnitude here, so the two give
 * at most 2^-9 (4 + |want|) < 8e-3 (1 + |want|) even where an addend cancels it. Its tanh
 * (tern_tanh_approx: 2^-10 on CUDA) enters GELU and its derivative with factors under 1.2
 * at the inputs here (|x| <= 4). A wrong tile, row, column or slice moves whole values, far
 * outside it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nvrtc_check.h"
#include "kernels/gemm_wg.h"
#include "tern/half.h"

static tern_rt *rt;

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
}

/* n bf16 values in [-amp, amp), and the same as floats. */
static uint16_t *random_bf16(size_t n, float amp, uint32_t *seed, float **values) {
    uint16_t *b = malloc(n * sizeof *b);
    *values = malloc(n * sizeof **values);
    for (size_t i = 0; b && *values && i < n; i++) {
        b[i] = tern_f32_to_bf16(frand(seed) * amp);
        (*values)[i] = tern_bf16_to_f32(b[i]);
    }
    return b;
}

static double gelu(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad(double x) {
    double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

static tern_error *upload(const uint16_t *host, size_t n, tern_dbuf *out) {
    TERN_TRY(tern_rt_alloc(rt, TERN_T_BF16, n, out));
    return tern_rt_upload(rt, *out, host);
}

/* One product of m x n x k through the kernel built with o, on groups groups (0: one a
 * tile), checked element by element; residual: the addend is C itself (beta 1 in place). */
static void test_case(int m, const gk_gemm_wg_opts *o, uint32_t groups, bool residual) {
    int n = o->n, k = o->k;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    uint32_t seed = (uint32_t)(m * 31 + n * 7 + k + o->epilogue * 1000 + o->b_nk * 77);
    float *a, *b, *bias, *aux, *add;
    uint16_t *ha = random_bf16(na, 1.0f, &seed, &a), *hb = random_bf16(nb, 1.0f / 16, &seed, &b);
    uint16_t *hbias = random_bf16((size_t)n, 1.0f, &seed, &bias), *haux = random_bf16(nc, 4.0f, &seed, &aux);
    uint16_t *hadd = random_bf16(nc, 2.0f, &seed, &add);
    uint16_t *got = malloc(nc * sizeof *got), *got_aux = malloc(nc * sizeof *got_aux);
    if (!ha || !hb || !hbias || !haux || !hadd || !got || !got_aux) {
        CHECK(!"out of memory");
        return;
    }
    if (o->b_nk) { /* B given as [n, k]: the same matrix transposed */
        uint16_t *t = malloc(nb * sizeof *t);
        for (size_t r = 0; t && r < (size_t)k; r++)
            for (size_t c = 0; c < (size_t)n; c++) t[c * k + r] = hb[r * n + c];
        free(hb);
        hb = t;
    }
    bool has_bias = o->bias || o->epilogue == GK_GEMM_WG_GELU, has_aux = o->epilogue != GK_GEMM_WG_PLAIN;
    tern_dbuf A = {0}, B = {0}, C = {0}, Bias = {0}, Aux = {0}, Add = {0}, Sums = {0};
    size_t parts = (size_t)m / 16 * n;
    float *sums = calloc(parts, sizeof *sums);
    double *want_sums = calloc((size_t)n, sizeof *want_sums), *abs_sums = calloc((size_t)n, sizeof *abs_sums);
    tern_kernel *kern = NULL;
    CHECK_OK(gk_gemm_wg_build(o, &kern));
    CHECK_OK(upload(ha, na, &A));
    CHECK_OK(upload(hb, nb, &B));
    memset(got, 0, nc * sizeof *got);
    CHECK_OK(upload(o->addend && residual ? hadd : got, nc, &C)); /* zeros: a skipped element fails */
    CHECK_OK(upload(hbias, (size_t)n, &Bias));
    CHECK_OK(upload(o->epilogue == GK_GEMM_WG_DGELU ? haux : got, nc, &Aux));
    CHECK_OK(upload(hadd, nc, &Add));
    CHECK_OK(tern_rt_alloc(rt, TERN_T_F32, parts, &Sums));
    for (size_t i = 0; sums && i < parts; i++) sums[i] = NAN; /* a part not written fails */
    if (sums) CHECK_OK(tern_rt_upload(rt, Sums, sums));
    tern_arg args[8];
    int count = 0;
    args[count++] = tern_arg_dev(A);
    args[count++] = tern_arg_dev(B);
    args[count++] = tern_arg_dev(C);
    if (has_bias) args[count++] = tern_arg_dev(Bias);
    if (has_aux) args[count++] = tern_arg_dev(Aux);
    if (o->addend) args[count++] = tern_arg_dev(residual ? C : Add);
    if (o->col_sums) args[count++] = tern_arg_dev(Sums);
    args[count++] = tern_arg_i32(gk_gemm_wg_tiles(m, n));
    if (!groups) groups = (uint32_t)gk_gemm_wg_tiles(m, n);
    if (kern) CHECK_OK(tern_launch(rt, kern, tern_dims1(groups), tern_dims1(GK_GEMM_WG_THREADS), args, count));
    CHECK_OK(tern_rt_sync(rt));
    CHECK_OK(tern_rt_download(rt, got, C));
    if (o->epilogue == GK_GEMM_WG_GELU) CHECK_OK(tern_rt_download(rt, got_aux, Aux));
    if (o->col_sums && sums) CHECK_OK(tern_rt_download(rt, sums, Sums));
    double worst = 0;
    for (size_t r = 0; r < (size_t)m; r++)
        for (size_t c = 0; c < (size_t)n; c++) {
            double x = has_bias ? bias[c] : 0;
            for (size_t p = 0; p < (size_t)k; p++) x += (double)a[r * k + p] * b[p * n + c];
            size_t i = r * n + c;
            double want = x;
            if (o->epilogue == GK_GEMM_WG_GELU) {
                worst = fmax(worst, fabs(tern_bf16_to_f32(got_aux[i]) - x) / (1 + fabs(x)));
                want = gelu(x);
            }
            if (o->epilogue == GK_GEMM_WG_DGELU) want = x * gelu_grad(aux[i]);
            if (o->addend) want += add[i];
            worst = fmax(worst, fabs(tern_bf16_to_f32(got[i]) - want) / (1 + fabs(want)));
            if (want_sums) want_sums[c] += want, abs_sums[c] += fabs(want);
        }
    /* the column sums: each part's elements within the bound above, so the total within
     * 1e-2 of the sum of (1 + |want|) over the column */
    double worst_sum = 0;
    for (size_t c = 0; o->col_sums && sums && c < (size_t)n; c++) {
        double total = 0;
        for (size_t p = 0; p < (size_t)m / 16; p++) total += sums[p * n + c];
        double e = fabs(total - want_sums[c]) / ((double)m + abs_sums[c]);
        worst_sum = isnan(e) ? INFINITY : fmax(worst_sum, e);
    }
    static const char *const epi[] = {"plain", "gelu", "dgelu"};
    printf("  %s%s%s%s%s%s %dx%dx%d, groups %u, band %d: worst error %.2g", epi[o->epilogue], o->bias ? " +bias" : "",
           o->addend ? (residual ? " +C" : " +addend") : "", o->b_nk ? " Bt" : "", o->prefetch ? " prefetch" : "",
           o->col_sums ? " +sums" : "", m, n, k, groups, o->band, worst);
    if (o->col_sums) printf(", column sums %.2g", worst_sum);
    printf("\n");
    CHECKF(worst <= 1e-2, "%s %dx%dx%d: worst error %g", epi[o->epilogue], m, n, k, worst);
    CHECKF(worst_sum <= 1e-2, "%s %dx%dx%d: column sums' worst error %g", epi[o->epilogue], m, n, k, worst_sum);
    tern_kernel_free(kern);
    tern_dbuf *bufs[] = {&A, &B, &C, &Bias, &Aux, &Add, &Sums};
    for (int i = 0; i < 7; i++) tern_rt_free(rt, bufs[i]);
    free(sums), free(want_sums), free(abs_sums);
    free(ha), free(hb), free(hbias), free(haux), free(hadd), free(got), free(got_aux);
    free(a), free(b), free(bias), free(aux), free(add);
}

/* The cases: each epilogue, B either way round, one group over two tiles (m or n). */
static const struct {
    int m;
    gk_gemm_wg_opts o;
    bool residual;
} cases[] = {
    {256, {.n = 256, .k = 576, .epilogue = GK_GEMM_WG_PLAIN}, false},
    {256, {.n = 256, .k = 576, .epilogue = GK_GEMM_WG_PLAIN, .bias = true, .addend = true}, false},
    {128, {.n = 512, .k = 640, .epilogue = GK_GEMM_WG_PLAIN, .addend = true, .b_nk = true}, true},
    {256, {.n = 256, .k = 576, .epilogue = GK_GEMM_WG_GELU}, false},
    {256, {.n = 256, .k = 576, .epilogue = GK_GEMM_WG_DGELU, .b_nk = true, .prefetch = true}, false},
    /* the column sums: DGELU (a bias gradient, as GPT-2's step would take it) over two tiles
     * in m, and with GELU over two in n */
    {256, {.n = 256, .k = 576, .epilogue = GK_GEMM_WG_DGELU, .b_nk = true, .col_sums = true}, false},
    {128, {.n = 512, .k = 576, .epilogue = GK_GEMM_WG_GELU, .col_sums = true}, false},
    /* tiles in bands of 2 m blocks, the last band of 1: 3 x 2 tiles */
    {384, {.n = 512, .k = 576, .epilogue = GK_GEMM_WG_PLAIN, .bias = true, .band = 2}, false},
};

static void test_options(void) {
    tern_kernel *k = NULL;
    gk_gemm_wg_opts bad[] = {{.n = 200, .k = 576}, {.n = 256, .k = 512}, {.n = 256, .k = 600},
                             {.n = 256, .k = 576, .epilogue = GK_GEMM_WG_GELU, .bias = true},
                             {.n = 256, .k = 576, .prefetch = true}, {.n = 256, .k = 576, .band = -1},
                             {.n = 256, .k = 3136}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tern_error *err = gk_gemm_wg_build(&bad[i], &k);
        CHECK(err != NULL && k == NULL);
        tern_error_free(err);
    }
    CHECK(gk_gemm_wg_fits(16384, 3072, 768) && gk_gemm_wg_fits(16384, 768, 3072) &&
          !gk_gemm_wg_fits(16384, 50304, 768) && !gk_gemm_wg_fits(4096, 768, 50304) &&
          !gk_gemm_wg_fits(100, 256, 576) && !gk_gemm_wg_fits(128, 256, 512));
    CHECK(gk_gemm_wg_groups(16384, 3072, 132) == 132 && gk_gemm_wg_groups(256, 256, 132) == 2);
}

/* Every case compiles with NVRTC for Hopper (sm_90a: wgmma and the tile copies). */
static void test_nvrtc(void) {
    int compiled = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tern_kernel *k = NULL;
        CHECK_OK(gk_gemm_wg_build(&cases[i].o, &k));
        int r = k ? nvrtc_check_compile_for(k, "sm_90a") : 0;
        tern_kernel_free(k);
        if (r < 0) return;
        compiled += r;
    }
    printf("  nvrtc: %d kernels compiled for sm_90a\n", compiled);
}

/* On a GPU: the same cases, then GPT-2 124M's products (B = 16, T = 1,024) as a step has
 * them (1,024 rows), on 32 groups. */
static void test_gpu(const char *runtime) {
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err || !rt) {
        printf("  %s: skipped (%s)\n", runtime, err ? tern_error_message(err) : "not built");
        tern_error_free(err);
        return;
    }
    printf("  on %s:\n", runtime);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_case(cases[i].m, &cases[i].o, 1, cases[i].residual);
    const gk_gemm_wg_opts step[] = {
        {.n = 3072, .k = 768, .epilogue = GK_GEMM_WG_GELU},
        {.n = 3072, .k = 768, .epilogue = GK_GEMM_WG_DGELU, .b_nk = true, .col_sums = true},
        {.n = 768, .k = 3072, .epilogue = GK_GEMM_WG_PLAIN, .bias = true, .addend = true},
        {.n = 768, .k = 2304, .epilogue = GK_GEMM_WG_PLAIN, .b_nk = true},
    };
    for (size_t i = 0; i < sizeof step / sizeof *step; i++)
        test_case(1024, &step[i], 32, false); /* 24 to 96 tiles: groups of several, or none */
    tern_rt_close(rt);
    rt = NULL;
}

int main(void) {
    test_options();
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return check_summary("gemm_wg kernels");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_case(cases[i].m, &cases[i].o, 1, cases[i].residual);
    /* more groups than tiles: the second group has none, and stores nothing */
    test_case(128, &(gk_gemm_wg_opts){.n = 256, .k = 576, .epilogue = GK_GEMM_WG_PLAIN, .bias = true}, 2, false);
    tern_rt_close(rt);
    rt = NULL;
    test_nvrtc();
    const char *gpu = getenv("TERN_GPU");
    if (gpu && *gpu && strcmp(gpu, "host")) test_gpu(gpu);
    return check_summary("gemm_wg kernels");
}
