/* A float64 reference of causal attention with grouped key/value heads, shared by the cpu
 * handler's test (tests/llama/test_llama_attention.c, which also checks its gradient against
 * finite differences) and the GPU core's (tests/gpu/test_gpu_gqa.c).
 * qkv [B, T, (NH + 2 KV) hs]: query head h at h hs, key/value head g's key at NH hs + g hs,
 * value at (NH + KV) hs + g hs; query head h reads key/value head h / (NH / KV). out and
 * dout [B, T, NH hs]. */
#ifndef TERN_TESTS_GQA_REFERENCE_H
#define TERN_TESTS_GQA_REFERENCE_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape {
    int B, T, NH, KV, hs;
} shape;

static size_t width(shape s) { return (size_t)(s.NH + 2 * s.KV) * s.hs; }

/* float64 forward and (dout given) backward. */
static void ref_attention(shape s, const float *qkv, const float *dout, double *out, double *dqkv) {
    int T = s.T, hs = s.hs, group = s.NH / s.KV;
    size_t W = width(s);
    double scale = 1 / sqrt((double)hs);
    double *p = malloc((size_t)T * T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    if (dqkv) memset(dqkv, 0, (size_t)s.B * T * W * sizeof *dqkv);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++) {
            int g = h / group;
            size_t qo = (size_t)h * hs, ko = (size_t)(s.NH + g) * hs, vo = (size_t)(s.NH + s.KV + g) * hs;
#define REF_Q(t, i) qkv[((size_t)b * T + (t)) * W + qo + (i)]
#define REF_K(t, i) qkv[((size_t)b * T + (t)) * W + ko + (i)]
#define REF_V(t, i) qkv[((size_t)b * T + (t)) * W + vo + (i)]
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += (double)REF_Q(t, i) * REF_K(u, i);
                    p[t * T + u] = d * scale;
                    mx = fmax(mx, d * scale);
                }
                for (int u = 0; u <= t; u++) sum += p[t * T + u] = exp(p[t * T + u] - mx);
                for (int u = 0; u <= t; u++) p[t * T + u] /= sum;
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++) o += p[t * T + u] * REF_V(u, i);
                    out[((size_t)b * T + t) * s.NH * hs + qo + i] = o;
                }
            }
            if (!dqkv) continue;
            for (int t = 0; t < T; t++) {
                const float *g_t = dout + ((size_t)b * T + t) * s.NH * hs + qo;
                double pdp = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += (double)g_t[i] * REF_V(u, i);
                    dp[u] = d;
                    pdp += p[t * T + u] * d;
                }
                for (int u = 0; u <= t; u++) {
                    double pw = p[t * T + u], dsw = pw * (dp[u] - pdp) * scale;
                    for (int i = 0; i < hs; i++) {
                        dqkv[((size_t)b * T + t) * W + qo + i] += dsw * REF_K(u, i);
                        dqkv[((size_t)b * T + u) * W + ko + i] += dsw * REF_Q(t, i);
                        dqkv[((size_t)b * T + u) * W + vo + i] += pw * g_t[i];
                    }
                }
            }
#undef REF_Q
#undef REF_K
#undef REF_V
        }
    free(p), free(dp);
}

#endif
