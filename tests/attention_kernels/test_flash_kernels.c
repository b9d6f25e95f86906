/* The flash attention kernels (src/kernels/flash.c) on the host interpreter,
 * whose warp-matrix operation follows the tensor cores' fragment layout, against causal
 * attention in double precision from the same bf16 inputs (the H200 runs the same kernels
 * through the GPT-2 fixture and the 124M cross-handler test: scripts/h200/).
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

typedef struct shape {
    int B, T, NH, hs;
} shape;

/* The launch of tiled kernel `which`: its grid and group size follow the options. */
static tern_error *launch(tern_kernel *k, gk_flash_kernel which, const gk_flash_opts *opts, const shape *s,
                          const tern_arg *args, int count) {
    int rows = gk_flash_rows(which, opts);
    tern_dims grid = tern_dims2((uint32_t)((s->T + rows - 1) / rows), (uint32_t)(s->B * s->NH));
    return tern_launch(rt, k, grid, tern_dims1((uint32_t)gk_flash_threads(which, opts)), args, count);
}

/* The options, for the report. */
static const char *opts_name(const gk_flash_opts *o, char *buf, size_t size) {
    if (!o) return "";
    snprintf(buf, size, " (groups %d%s%s%s, %d stages)", o->min_groups, o->kv_halves ? ", dK dV in halves" : "",
             o->ds_saved ? ", dS saved" : "", o->pipelined ? ", pipelined" : "", o->stages ? o->stages : 2);
    return buf;
}

/* Element (b, t, part, h, e) of qkv-like [B, T, parts, NH, hs] data. */
static size_t at(const shape *s, int parts, int b, int t, int part, int h, int e) {
    return ((((size_t)b * s->T + t) * parts + part) * s->NH + h) * s->hs + e;
}

/* Causal attention and its gradients in double: out, lse; dqkv from dout. */
static void reference(const shape *s, const float *qkv, const float *dout, double *out, double *lse,
                      double *dqkv) {
    int T = s->T, hs = s->hs;
    double scale = 1.0 / sqrt((double)hs);
    double *P = malloc((size_t)T * T * sizeof *P), *dP = malloc((size_t)T * T * sizeof *dP);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++) {
            for (int i = 0; i < T; i++) {
                double m = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double x = 0;
                    for (int e = 0; e < hs; e++) x += (double)qkv[at(s, 3, b, i, 0, h, e)] * qkv[at(s, 3, b, j, 1, h, e)];
                    P[(size_t)i * T + j] = x * scale;
                    m = fmax(m, x * scale);
                }
                for (int j = 0; j <= i; j++) sum += exp(P[(size_t)i * T + j] - m);
                for (int j = 0; j < T; j++) P[(size_t)i * T + j] = j <= i ? exp(P[(size_t)i * T + j] - m) / sum : 0;
                lse[((size_t)b * s->NH + h) * T + i] = m + log(sum);
                for (int e = 0; e < hs; e++) {
                    double y = 0;
                    for (int j = 0; j <= i; j++) y += P[(size_t)i * T + j] * qkv[at(s, 3, b, j, 2, h, e)];
                    out[at(s, 1, b, i, 0, h, e)] = y;
                }
            }
            /* dP = dO V^T, dS = P (dP - rowsum(P dP)) scale; dQ = dS K, dK = dS^T Q, dV = P^T dO */
            for (int i = 0; i < T; i++) {
                double D = 0;
                for (int j = 0; j <= i; j++) {
                    double x = 0;
                    for (int e = 0; e < hs; e++) x += (double)dout[at(s, 1, b, i, 0, h, e)] * qkv[at(s, 3, b, j, 2, h, e)];
                    dP[(size_t)i * T + j] = x;
                    D += P[(size_t)i * T + j] * x;
                }
                for (int j = 0; j < T; j++)
                    dP[(size_t)i * T + j] = j <= i ? P[(size_t)i * T + j] * (dP[(size_t)i * T + j] - D) * scale : 0;
            }
            for (int i = 0; i < T; i++)
                for (int e = 0; e < hs; e++) {
                    double dq = 0, dk = 0, dv = 0;
                    for (int j = 0; j < T; j++) {
                        dq += dP[(size_t)i * T + j] * qkv[at(s, 3, b, j, 1, h, e)];
                        dk += dP[(size_t)j * T + i] * qkv[at(s, 3, b, j, 0, h, e)];
                        dv += P[(size_t)j * T + i] * dout[at(s, 1, b, j, 0, h, e)];
                    }
                    dqkv[at(s, 3, b, i, 0, h, e)] = dq;
                    dqkv[at(s, 3, b, i, 1, h, e)] = dk;
                    dqkv[at(s, 3, b, i, 2, h, e)] = dv;
                }
        }
    free(P), free(dP);
}

static void test_shape(shape s, const gk_flash_opts *opts) {
    uint32_t seed = 11 + (uint32_t)(s.T * 7 + s.hs);
    size_t n3 = (size_t)s.B * s.T * 3 * s.NH * s.hs, n1 = n3 / 3, rows = (size_t)s.B * s.NH * s.T;
    float *qkv_f, *dout_f;
    uint16_t *qkv = random_bf16(n3, 2.0f, &seed, &qkv_f), *dout = random_bf16(n1, 1.0f, &seed, &dout_f);
    uint16_t *out = calloc(n1, sizeof *out), *dqkv = calloc(n3, sizeof *dqkv);
    float *lse = malloc(rows * sizeof *lse), *D = malloc(rows * sizeof *D);
    double *out_r = malloc(n1 * sizeof *out_r), *lse_r = malloc(rows * sizeof *lse_r), *dqkv_r = malloc(n3 * sizeof *dqkv_r);
    reference(&s, qkv_f, dout_f, out_r, lse_r, dqkv_r);

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
    /* ds_saved: the [B NH, T, T] dS^T the two kernels hand over, poisoned with NaN (bf16
     * 0x7fc0) so that a tile the dQ pass reads but the dK, dV pass did not write shows */
    size_t nds = (size_t)s.B * s.NH * s.T * s.T + GK_FLASH_TILE;
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
    /* each part of dqkv against its reference */
    double e_part[3];
    for (int part = 0; part < 3; part++) {
        uint16_t *got = malloc(n1 * sizeof *got);
        double *want = malloc(n1 * sizeof *want);
        size_t k = 0;
        for (int b = 0; b < s.B; b++)
            for (int t = 0; t < s.T; t++)
                for (int h = 0; h < s.NH; h++)
                    for (int e = 0; e < s.hs; e++, k++) {
                        got[k] = dqkv[at(&s, 3, b, t, part, h, e)];
                        want[k] = dqkv_r[at(&s, 3, b, t, part, h, e)];
                    }
        e_part[part] = rel_error(got, want, n1);
        CHECKF(e_part[part] <= 3e-2, "backward: d%c off by %.3g of its largest value", "QKV"[part], e_part[part]);
        free(got), free(want);
    }
    char name[96];
    printf("  B=%d T=%d NH=%d hs=%d%s: out %.2g, lse %.2g, dQ %.2g, dK %.2g, dV %.2g\n", s.B, s.T, s.NH, s.hs,
           opts_name(opts, name, sizeof name), e_out, worst_lse, e_part[0], e_part[1], e_part[2]);
    tern_kernel_free(fwd), tern_kernel_free(delta), tern_kernel_free(kv), tern_kernel_free(q);
    free(qkv), free(dout), free(out), free(dqkv), free(lse), free(D), free(qkv_f), free(dout_f);
    free(out_r), free(lse_r), free(dqkv_r);
}

/* Every kernel compiles with NVRTC for the H200 (sm_90), where the toolkit is built in, with
 * and without the options. */
static void test_nvrtc(const gk_flash_opts *opts) {
    char name[96];
    int compiled = 0;
    for (int w = 0; w < 4; w++) {
        tern_kernel *k = build((gk_flash_kernel)w, 64, opts);
        int r = nvrtc_check_compile(k);
        tern_kernel_free(k);
        if (r < 0) return;
        compiled += r;
    }
    printf("  nvrtc%s: %d kernels compiled for sm_90\n", opts_name(opts, name, sizeof name), compiled);
}

int main(void) {
    CHECK_OK(tern_rt_open("host", &rt));
    if (!rt) return check_summary("flash kernels");
    const shape shapes[] = {
        {1, 70, 2, 16},  /* two tiles, the second short */
        {2, 64, 1, 32},  /* one whole tile, two sequences */
        {1, 130, 1, 64}, /* GPT-2's head size, three tiles; a second block with 2 rows */
        {1, 200, 3, 32}, /* several heads, four tiles, the last short */
        {1, 136, 2, 64}, /* GPT-2's head size with T a multiple of 8 (ds_saved) */
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
    };
    int n_shapes = (int)(sizeof shapes / sizeof *shapes), n_variants = (int)(sizeof variants / sizeof *variants);
    for (int i = 0; i < n_shapes; i++) test_shape(shapes[i], NULL);
    for (int v = 0; v < n_variants; v++)
        for (int i = 0; i < n_shapes; i++)
            if (!variants[v].ds_saved || shapes[i].T % 8 == 0) /* its 16-byte rows of dS^T */
                test_shape(shapes[i], &variants[v]);
    test_nvrtc(NULL);
    for (int v = 0; v < n_variants; v++) test_nvrtc(&variants[v]);
    tern_rt_close(rt);
    return check_summary("flash kernels");
}
