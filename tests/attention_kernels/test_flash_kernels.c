/* The flash attention kernels (src/kernels/flash.c) on the host interpreter,
 * whose warp-matrix operation follows the tensor cores' fragment layout, against causal
 * attention in double precision from the same bf16 inputs (tests/gqa_reference.h; the H200
 * runs the same kernels through the GPT-2 and Llama fixtures and the cross-handler tests:
 * scripts/h200/), with KV = NH (GPT-2) and grouped key/value heads (KV < NH).
 *
 * Tolerance: 3e-2 of each output's largest magnitude. The kernels round P and dS to bf16
 * as the tensor cores take them (8 bits of mantissa: 0.4% each), and store every output in
 * bf16; the gradients go two such products deep. An indexing or masking mistake moves
 * whole rows and is far outside this. lse is computed in f32 from exact products: 1e-4. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gqa_reference.h"
#include "nvrtc_check.h"
#include "kernels/flash.h"
#include "tern/half.h"

static tern_rt *rt;

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
}

/* A bf16 buffer of n random values in [-amp, amp), and its values as floats. */
static uint16_t *random_bf16(size_t n, float amp, uint32_t *seed, float **values) {
    uint16_t *b = malloc(n * sizeof *b);
    *values = malloc(n * sizeof **values);
    for (size_t i = 0; i < n; i++) {
        b[i] = tern_f32_to_bf16(frand(seed) * amp / 2);
        (*values)[i] = tern_bf16_to_f32(b[i]);
    }
    return b;
}

/* Worst |got - want| over n bf16 outputs, relative to the largest |want|. */
static double rel_error(const uint16_t *got, const double *want, size_t n) {
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(tern_bf16_to_f32(got[i]) - want[i]));
    return worst / scale;
}

static tern_kernel *build(gk_flash_kernel which, int hs, const gk_flash_opts *opts) {
    tern_kernel *k = NULL;
    CHECK_OK(gk_flash_kernel_build(which, hs, opts, &k));
    return k;
}

/* The launch of tiled kernel `which`: its grid and group size follow the options. */
static tern_error *launch(tern_kernel *k, gk_flash_kernel which, const gk_flash_opts *opts, const shape *s,
                          const tern_arg *args, int count) {
    int rows = gk_flash_rows(which, opts);
    tern_dims grid = tern_dims2((uint32_t)((s->T + rows - 1) / rows),
                                (uint32_t)(s->B * gk_flash_heads(which, opts, s->NH)));
    return tern_launch(rt, k, grid, tern_dims1((uint32_t)gk_flash_threads(which, opts)), args, count);
}

/* The options, for the report. */
static const char *opts_name(const gk_flash_opts *o, char *buf, size_t size) {
    if (!o) return "";
    snprintf(buf, size, " (groups %d%s%s%s, %d stages%s)", o->min_groups, o->kv_halves ? ", dK dV in halves" : "",
             o->ds_saved ? ", dS saved" : "", o->pipelined ? ", pipelined" : "", o->stages ? o->stages : 2,
             o->wgmma ? ", wgmma" : "");
    return buf;
}

/* The natural logsumexp of each query row's scaled causal scores in double, lse [B, NH, T]
 * (ref_attention gives out and dqkv). */
static void reference_lse(shape s, const float *qkv, double *lse) {
    int T = s.T, hs = s.hs, group = s.NH / s.KV;
    size_t W = width(s);
    double scale = 1.0 / sqrt((double)hs);
    double *x = malloc((size_t)T * sizeof *x);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++) {
            const float *q = qkv + (size_t)b * T * W + (size_t)h * hs;
            const float *k = qkv + (size_t)b * T * W + (size_t)(s.NH + h / group) * hs;
            for (int i = 0; i < T; i++) {
                double m = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double d = 0;
                    for (int e = 0; e < hs; e++) d += (double)q[(size_t)i * W + e] * k[(size_t)j * W + e];
                    x[j] = d * scale;
                    m = fmax(m, x[j]);
                }
                for (int j = 0; j <= i; j++) sum += exp(x[j] - m);
                lse[((size_t)b * s.NH + h) * T + i] = m + log(sum);
            }
        }
    free(x);
}

/* The shape's kernels with the given options (NULL: none), built for its group NH / KV. */
static void test_shape(shape s, const gk_flash_opts *given) {
    gk_flash_opts grouped = given ? *given : (gk_flash_opts){0};
    grouped.group = s.NH / s.KV;
    /* KV = NH: the options as given (NULL stays NULL, as the handler's calls are) */
    const gk_flash_opts *opts = s.KV == s.NH ? given : &grouped;
    uint32_t seed = 11 + (uint32_t)(s.T * 7 + s.hs);
    /* qkv, dqkv [B, T, (NH + 2 KV) hs]; out, dout [B, T, NH hs] */
    size_t n3 = (size_t)s.B * s.T * width(s), n1 = (size_t)s.B * s.T * s.NH * s.hs, rows = (size_t)s.B * s.NH * s.T;
    float *qkv_f, *dout_f;
    uint16_t *qkv = random_bf16(n3, 2.0f, &seed, &qkv_f), *dout = random_bf16(n1, 1.0f, &seed, &dout_f);
    uint16_t *out = calloc(n1, sizeof *out), *dqkv = calloc(n3, sizeof *dqkv);
    float *lse = malloc(rows * sizeof *lse), *D = malloc(rows * sizeof *D);
    double *out_r = malloc(n1 * sizeof *out_r), *lse_r = malloc(rows * sizeof *lse_r), *dqkv_r = malloc(n3 * sizeof *dqkv_r);
    ref_attention(s, qkv_f, dout_f, out_r, dqkv_r);
    reference_lse(s, qkv_f, lse_r);

    tern_kernel *fwd = build(GK_FLASH_FORWARD, s.hs, opts), *delta = build(GK_FLASH_DELTA, s.hs, opts);
    tern_kernel *kv = build(GK_FLASH_BACKWARD_KV, s.hs, opts), *q = build(GK_FLASH_BACKWARD_Q, s.hs, opts);
    float scale = 1.0f / sqrtf((float)s.hs);
    tern_arg af[] = {tern_arg_host_in(TERN_T_BF16, qkv, n3), tern_arg_host(TERN_T_BF16, out, n1),
                     tern_arg_host(TERN_T_F32, lse, rows), tern_arg_i32(s.B), tern_arg_i32(s.T), tern_arg_i32(s.NH),
                     tern_arg_f32(scale)};
    CHECK_OK(launch(fwd, GK_FLASH_FORWARD, opts, &s, af, 7));
    double worst_lse = 0;
    for (size_t i = 0; i < rows; i++) worst_lse = fmax(worst_lse, fabs(lse[i] - lse_r[i]));
    double e_out = rel_error(out, out_r, n1);
    CHECKF(e_out <= 3e-2, "forward: out off by %.3g of its largest value", e_out);
    CHECKF(worst_lse <= 1e-4, "forward: lse off by %.3g", worst_lse);

    /* the backward pass from the reference output rounded to bf16, as the model holds it */
    for (size_t i = 0; i < n1; i++) out[i] = tern_f32_to_bf16((float)out_r[i]);
    for (size_t i = 0; i < rows; i++) lse[i] = (float)lse_r[i];
    tern_arg ad[] = {tern_arg_host_in(TERN_T_BF16, out, n1), tern_arg_host_in(TERN_T_BF16, dout, n1),
                     tern_arg_host(TERN_T_F32, D, rows), tern_arg_i32(s.B), tern_arg_i32(s.T), tern_arg_i32(s.NH)};
    CHECK_OK(tern_launch(rt, delta, tern_dims1(gk_flash_delta_groups(s.B, s.T, s.NH, s.hs)),
                         tern_dims1(GK_FLASH_THREADS), ad, 6));
    tern_arg ab[] = {tern_arg_host_in(TERN_T_BF16, qkv, n3), tern_arg_host_in(TERN_T_BF16, dout, n1),
                     tern_arg_host_in(TERN_T_F32, lse, rows), tern_arg_host_in(TERN_T_F32, D, rows),
                     tern_arg_host(TERN_T_BF16, dqkv, n3), tern_arg_i32(s.B), tern_arg_i32(s.T), tern_arg_i32(s.NH),
                     tern_arg_f32(scale), tern_arg_i32(0)};
    /* ds_saved: the dS^T the two kernels hand over (its causal part), poisoned with NaN
     * (bf16 0x7fc0) so that a tile the dQ pass reads but the dK, dV pass did not write shows */
    size_t nds = gk_flash_ds_len(s.B, s.T, s.NH);
    uint16_t *ds = NULL;
    bool saved = opts && opts->ds_saved;
    if (saved) {
        ds = malloc(nds * sizeof *ds);
        for (size_t i = 0; i < nds; i++) ds[i] = 0x7fc0;
        ab[9] = tern_arg_host(TERN_T_BF16, ds, nds);
    }
    CHECK_OK(launch(kv, GK_FLASH_BACKWARD_KV, opts, &s, ab, saved ? 10 : 9));
    CHECK_OK(launch(q, GK_FLASH_BACKWARD_Q, opts, &s, ab, saved ? 10 : 9));
    free(ds);
    /* each part of dqkv against its reference: channels [0, NH hs) dQ, then KV hs of dK and
     * of dV */
    double e_part[3];
    size_t W = width(s), starts[4] = {0, (size_t)s.NH * s.hs, (size_t)(s.NH + s.KV) * s.hs, W};
    for (int part = 0; part < 3; part++) {
        size_t cols = starts[part + 1] - starts[part], n = (size_t)s.B * s.T * cols, k = 0;
        uint16_t *got = malloc(n * sizeof *got);
        double *want = malloc(n * sizeof *want);
        for (size_t row = 0; row < (size_t)s.B * s.T; row++)
            for (size_t c = starts[part]; c < starts[part + 1]; c++, k++) {
                got[k] = dqkv[row * W + c];
                want[k] = dqkv_r[row * W + c];
            }
        e_part[part] = rel_error(got, want, n);
        CHECKF(e_part[part] <= 3e-2, "backward: d%c off by %.3g of its largest value", "QKV"[part], e_part[part]);
        free(got), free(want);
    }
    char name[96];
    printf("  B=%d T=%d NH=%d KV=%d hs=%d%s: out %.2g, lse %.2g, dQ %.2g, dK %.2g, dV %.2g\n", s.B, s.T, s.NH, s.KV, s.hs,
           opts_name(opts, name, sizeof name), e_out, worst_lse, e_part[0], e_part[1], e_part[2]);
    tern_kernel_free(fwd), tern_kernel_free(delta), tern_kernel_free(kv), tern_kernel_free(q);
    free(qkv), free(dout), free(out), free(dqkv), free(lse), free(D), free(qkv_f), free(dout_f);
    free(out_r), free(lse_r), free(dqkv_r);
}

/* Every kernel compiles with NVRTC for the H200 (sm_90), where the toolkit is built in, with
 * and without the options, and (group > 1) for grouped heads: all but DELTA, whose source
 * the group does not change (each compile takes about 0.8 s here). */
static void test_nvrtc(const gk_flash_opts *given, int group) {
    char name[96];
    int compiled = 0;
    gk_flash_opts grouped = given ? *given : (gk_flash_opts){0};
    grouped.group = group;
    const gk_flash_opts *opts = group > 1 ? &grouped : given;
    const char *arch = given && given->wgmma ? "sm_90a" : "sm_90"; /* wgmma.mma_async there */
    for (int w = 0; w < 4; w++) {
        if (group > 1 && w == GK_FLASH_DELTA) continue;
        tern_kernel *k = build((gk_flash_kernel)w, 64, opts);
        int r = nvrtc_check_compile_for(k, arch);
        tern_kernel_free(k);
        if (r < 0) return;
        compiled += r;
    }
    printf("  nvrtc%s, group %d: %d kernels compiled for %s\n", opts_name(opts, name, sizeof name), group > 1 ? group : 1,
           compiled, arch);
}

/* On a GPU runtime (TERN_GPU=cuda on the H200: scripts/h200/merge_check.sh) the same kernels
 * at the Llama family's shapes, T not a multiple of the tile: SmolLM2-135M's heads (NH 9, KV
 * 3) and Llama-3.2-1B's (NH 32, KV 8), and GPT-2's, with no options and the handler's two
 * option sets (variants[2]: its dK dV; variants[6]: its forward and dQ), [6] with
 * warpgroup products (variants[9]: wgmma.mma_async on the H200), and the handler's set for
 * those (variants[10]). */
static void test_gpu(const char *runtime, const gk_flash_opts *variants) {
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err || !rt) {
        printf("  %s: skipped (%s)\n", runtime, err ? tern_error_message(err) : "not built");
        tern_error_free(err);
        return;
    }
    printf("  on %s:\n", runtime);
    const shape shapes[] = {{2, 520, 9, 3, 64}, {1, 264, 32, 8, 64}, {2, 520, 12, 12, 64}};
    for (int i = 0; i < 3; i++) {
        test_shape(shapes[i], NULL);
        test_shape(shapes[i], &variants[2]);
        test_shape(shapes[i], &variants[6]);
        test_shape(shapes[i], &variants[9]); /* [6] with warpgroup products */
        test_shape(shapes[i], &variants[10]); /* cuda's default on Hopper */
    }
    tern_rt_close(rt);
    rt = NULL;
}

int main(void) {
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return check_summary("flash kernels");
    const shape shapes[] = {
        /* B, T, NH, KV, hs */
        {1, 70, 2, 2, 16},  /* two tiles, the second short */
        {2, 64, 1, 1, 32},  /* one whole tile, two sequences */
        {1, 130, 1, 1, 64}, /* GPT-2's head size, three tiles; a second block with 2 rows */
        {1, 200, 3, 3, 32}, /* several heads, four tiles, the last short */
        {1, 136, 2, 2, 64}, /* GPT-2's head size with T a multiple of 8 (ds_saved) */
        /* grouped key/value heads at the Llama family's head size, T not a multiple of the
         * tile (but of 8, for ds_saved): groups of 2 over two sequences, and SmolLM2's 9 query
         * heads over 3 */
        {2, 72, 4, 2, 64},
        {1, 72, 9, 3, 64},
        /* the largest head size: two panels of 64 columns in the warpgroup products' tiles */
        {1, 72, 2, 2, 128},
    };
    /* the options: the register hint changes nothing here, the halves change the order */
    const gk_flash_opts variants[] = {
        {.min_groups = 3, .kv_halves = true},
        {.ds_saved = true},
        {.min_groups = 2, .kv_halves = true, .ds_saved = true},
        /* tiles staged one ahead by asynchronous copies (the host runs them at once: this
         * checks the double buffers' indexing and the tiles walked, not the overlap) */
        {.pipelined = true},
        {.min_groups = 2, .kv_halves = true, .ds_saved = true, .pipelined = true},
        {.ds_saved = true, .pipelined = true, .stages = 3},
        {.min_groups = 2, .kv_halves = true, .ds_saved = true, .pipelined = true, .stages = 4},
        /* warpgroup products from swizzled tiles (head size 64 here; 16 and 32 keep the
         * warp-level products): unstaged, and the handler's sets with wgmma */
        {.wgmma = true},
        {.min_groups = 2, .kv_halves = true, .ds_saved = true, .wgmma = true},
        {.min_groups = 2, .kv_halves = true, .ds_saved = true, .pipelined = true, .stages = 4, .wgmma = true},
        /* the cuda handler's warpgroup set (flash_wg_*): dK dV whole query tiles, staged ahead */
        {.min_groups = 3, .ds_saved = true, .pipelined = true, .stages = 4, .wgmma = true},
    };
    /* the variants grouped heads run with (the test's time: each grouped shape costs about
     * three of the others, each NVRTC compile as much): each way BACKWARD_KV walks its
     * group's query heads, unstaged (none, and 2: the handler's dK dV, dS^T saved) and
     * staged ahead (6: also the handler's forward and dQ), and both dQ passes */
    const bool grouped_variant[] = {false, false, true, false, false, false, true, false, false, true, true};
    int n_shapes = (int)(sizeof shapes / sizeof *shapes), n_variants = (int)(sizeof variants / sizeof *variants);
    for (int i = 0; i < n_shapes; i++) test_shape(shapes[i], NULL);
    for (int v = 0; v < n_variants; v++)
        for (int i = 0; i < n_shapes; i++)
            if ((!variants[v].ds_saved || shapes[i].T % 8 == 0) /* its 16-byte rows of dS^T */ &&
                (shapes[i].KV == shapes[i].NH || grouped_variant[v]))
                test_shape(shapes[i], &variants[v]);
    test_nvrtc(NULL, 1);
    test_nvrtc(NULL, 3); /* the dQ pass that recomputes P and dP (dS^T not saved) */
    for (int v = 0; v < n_variants; v++) {
        test_nvrtc(&variants[v], 1);
        if (grouped_variant[v]) test_nvrtc(&variants[v], 3);
    }
    tern_rt_close(rt);
    rt = NULL;
    const char *gpu = getenv("TERN_GPU");
    if (gpu && *gpu && strcmp(gpu, "host")) test_gpu(gpu, variants);
    return check_summary("flash kernels");
}
