/* Causal multi-head attention, forward and backward, one (batch, head) pair per unit of
 * work. Each unit gathers its head's q, k, v into contiguous f32 [T, hs] arrays in the
 * thread's scratch (converting bf16), so the inner loops are dense. `saved` holds the
 * softmax probabilities P [B, NH, T, T] (zero above the diagonal). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

/* The softmax probabilities P [B, NH, T, T]. */
static tern_error *saved_len(int B, int T, int NH, size_t *out) {
    size_t bh = (size_t)B * (size_t)NH, tt;
    if (!tern_mul_size((size_t)T, (size_t)T, &tt) || !tern_mul_size(bh, tt, out))
        return tern_errorf("attention_saved_len: B * NH * T * T overflows");
    return NULL;
}

tern_error *cpu_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *out) {
    (void)d;
    return saved_len(B, T, NH, out);
}

/* Copies head h of rows t = 0..T-1 of a [B, T, width] tensor (channels base + h * hs ..)
 * into dst [T, hs] as f32. */
static void gather_head(float *dst, tern_buf src, size_t b, size_t T, size_t width,
                        size_t base, size_t hs) {
    for (size_t t = 0; t < T; t++)
        cpu_to_f32(dst + t * hs, cpu_at(src, (b * T + t) * width + base), src.dtype, hs);
}

/* The inverse of gather_head. */
static void scatter_head(tern_buf dst, const float *src, size_t b, size_t T, size_t width,
                         size_t base, size_t hs) {
    for (size_t t = 0; t < T; t++)
        cpu_from_f32(cpu_at(dst, (b * T + t) * width + base), dst.dtype, src + t * hs, hs);
}

/* p[0..n) = softmax(s[0..n)) in place. */
static void softmax(float *p, size_t n) {
    float mx = p[0];
    for (size_t i = 1; i < n; i++) mx = p[i] > mx ? p[i] : mx;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (size_t i = 0; i < n; i++) {
        p[i] = cpu_expf(p[i] - mx);
        sum += p[i];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (size_t i = 0; i < n; i++) p[i] *= inv;
}

tern_error *cpu_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B,
                               int T, int C, int NH) {
    size_t ns = 0;
    TERN_TRY(tern_error_wrap(saved_len(B, T, NH, &ns), "attention"));
    TERN_TRY(tern_check_saved("attention", saved, ns));
    size_t t_n = (size_t)T, c = (size_t)C, hs = c / (size_t)NH, units = (size_t)B * (size_t)NH;
    size_t head = cpu_round64(t_n * hs * sizeof(float));
    size_t per_thread = 4 * head; /* q, k, v, out */
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)d->threads, (void **)&s), "attention"));
    float scale = 1.0f / sqrtf((float)hs);
    float *saved32 = cpu_ptr(saved);
#pragma omp parallel num_threads(d->threads) if (units > 1)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *q = (float *)mine, *k = (float *)(mine + head), *v = (float *)(mine + 2 * head);
        float *o = (float *)(mine + 3 * head);
#pragma omp for schedule(dynamic)
        for (size_t u = 0; u < units; u++) {
            size_t b = u / (size_t)NH, h = u % (size_t)NH;
            gather_head(q, qkv, b, t_n, 3 * c, h * hs, hs);
            gather_head(k, qkv, b, t_n, 3 * c, c + h * hs, hs);
            gather_head(v, qkv, b, t_n, 3 * c, 2 * c + h * hs, hs);
            float *p_head = saved32 + u * t_n * t_n;
            for (size_t t = 0; t < t_n; t++) {
                float *p = p_head + t * t_n;
                for (size_t t2 = 0; t2 <= t; t2++) p[t2] = cpu_dot(q + t * hs, k + t2 * hs, hs) * scale;
                softmax(p, t + 1);
                memset(p + t + 1, 0, (t_n - t - 1) * sizeof(float));
                float *ot = o + t * hs;
                memset(ot, 0, hs * sizeof(float));
                for (size_t t2 = 0; t2 <= t; t2++) {
                    const float *vt = v + t2 * hs;
                    float pw = p[t2];
#pragma omp simd
                    for (size_t i = 0; i < hs; i++) ot[i] = fmaf(pw, vt[i], ot[i]);
                }
            }
            scatter_head(out, o, b, t_n, c, h * hs, hs);
        }
    }
    return NULL;
}

tern_error *cpu_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv,
                                        tern_buf out, tern_buf saved, int B, int T, int C, int NH) {
    size_t ns = 0;
    TERN_TRY(tern_error_wrap(saved_len(B, T, NH, &ns), "attention_backward"));
    TERN_TRY(tern_check_saved("attention_backward", saved, ns));
    size_t t_n = (size_t)T, c = (size_t)C, hs = c / (size_t)NH, units = (size_t)B * (size_t)NH;
    size_t head = cpu_round64(t_n * hs * sizeof(float)), row = cpu_round64(t_n * sizeof(float));
    size_t per_thread = 7 * head + row; /* q, k, v, dout, dq, dk, dv; one row of dS */
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)d->threads, (void **)&s),
                             "attention_backward"));
    float scale = 1.0f / sqrtf((float)hs);
    const float *saved32 = cpu_ptr(saved);
#pragma omp parallel num_threads(d->threads) if (units > 1)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *q = (float *)mine, *k = (float *)(mine + head), *v = (float *)(mine + 2 * head);
        float *go = (float *)(mine + 3 * head), *dq = (float *)(mine + 4 * head);
        float *dk = (float *)(mine + 5 * head), *dv = (float *)(mine + 6 * head);
        float *ds = (float *)(mine + 7 * head);
#pragma omp for schedule(dynamic)
        for (size_t u = 0; u < units; u++) {
            size_t b = u / (size_t)NH, h = u % (size_t)NH;
            gather_head(q, qkv, b, t_n, 3 * c, h * hs, hs);
            gather_head(k, qkv, b, t_n, 3 * c, c + h * hs, hs);
            gather_head(v, qkv, b, t_n, 3 * c, 2 * c + h * hs, hs);
            gather_head(go, dout, b, t_n, c, h * hs, hs);
            memset(dk, 0, t_n * hs * sizeof(float));
            memset(dv, 0, t_n * hs * sizeof(float));
            const float *p_head = saved32 + u * t_n * t_n;
            for (size_t t = 0; t < t_n; t++) {
                const float *p = p_head + t * t_n;
                const float *g = go + t * hs;
                /* dP[t2] = dout_t . v_t2; dS = P (dP - sum P dP) */
                float dot_pdp = 0;
                for (size_t t2 = 0; t2 <= t; t2++) {
                    ds[t2] = cpu_dot(g, v + t2 * hs, hs);
                    dot_pdp += p[t2] * ds[t2];
                }
                float *dqt = dq + t * hs;
                memset(dqt, 0, hs * sizeof(float));
                for (size_t t2 = 0; t2 <= t; t2++) {
                    float pw = p[t2], dsw = pw * (ds[t2] - dot_pdp) * scale;
                    const float *kt = k + t2 * hs, *qt = q + t * hs;
                    float *dkt = dk + t2 * hs, *dvt = dv + t2 * hs;
#pragma omp simd
                    for (size_t i = 0; i < hs; i++) {
                        dvt[i] = fmaf(pw, g[i], dvt[i]);
                        dqt[i] = fmaf(dsw, kt[i], dqt[i]);
                        dkt[i] = fmaf(dsw, qt[i], dkt[i]);
                    }
                }
            }
            scatter_head(dqkv, dq, b, t_n, 3 * c, h * hs, hs);
            scatter_head(dqkv, dk, b, t_n, 3 * c, c + h * hs, hs);
            scatter_head(dqkv, dv, b, t_n, 3 * c, 2 * c + h * hs, hs);
        }
    }
    return NULL;
}
