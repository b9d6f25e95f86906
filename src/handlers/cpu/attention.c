/* Causal attention with grouped key/value heads (Llama's grouped-query attention), forward,
 * backward and over a KV cache. NH query heads share KV key/value heads, query head h using
 * key/value head h / (NH / KV); KV = NH is GPT-2's multi-head attention, KV = 1 multi-query
 * attention.
 *
 * Layout: qkv [B, T, (NH + 2 KV) hs]: query head h in channels h hs, key/value head g's key at
 * NH hs + g hs and value at (NH + KV) hs + g hs; out, dout [B, T, NH hs]; saved: the softmax
 * probabilities P [B, NH, T, T] (zero above the diagonal), this handler's record, whose
 * length the bodies check (the entry checks the rest); caches [B, KV, max_T, hs].
 *
 * One unit of work per (batch, key/value head): its keys and values are gathered once into
 * contiguous f32 [T, hs] arrays and serve the group's query heads in turn; the backward adds
 * the group's dk and dv there, so units never share an output. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

/* attention_cached: queries taken QUERY_BLOCK at a time through the GEMM kernel when a call
 * has at least QUERY_BLOCK_MIN of them (a prompt; decoding's one query keeps the loop). */
#define QUERY_BLOCK 64
#define QUERY_BLOCK_MIN 16

tern_error *cpu_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *out) {
    (void)d;
    size_t bh = (size_t)B * (size_t)NH, tt;
    if (!tern_mul_size((size_t)T, (size_t)T, &tt) || !tern_mul_size(bh, tt, out))
        return tern_errorf("attention_saved_len: B * NH * T * T overflows");
    return NULL;
}

/* Copies `hs` channels from `base` of rows t = 0..T-1 of batch b of a [B, T, width] tensor
 * into dst [T, hs] as f32. */
static void gather(float *dst, tern_buf src, size_t b, size_t T, size_t width, size_t base, size_t hs) {
    for (size_t t = 0; t < T; t++) cpu_to_f32(dst + t * hs, cpu_at(src, (b * T + t) * width + base), src.dtype, hs);
}

/* The inverse of gather. */
static void scatter(tern_buf dst, const float *src, size_t b, size_t T, size_t width, size_t base, size_t hs) {
    for (size_t t = 0; t < T; t++) cpu_from_f32(cpu_at(dst, (b * T + t) * width + base), dst.dtype, src + t * hs, hs);
}

/* p[0..n) = softmax(p[0..n)) in place. */
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

tern_error *cpu_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH,
                              int KV, int hs) {
    size_t t_n = (size_t)T, h_n = (size_t)hs, nh = (size_t)NH, kv = (size_t)KV, group = nh / kv;
    size_t width = (nh + 2 * kv) * h_n, units = (size_t)B * kv;
    size_t head = cpu_round64(t_n * h_n * sizeof(float)), per_thread = 4 * head; /* q, k, v, out */
    size_t ns = 0;
    TERN_TRY(cpu_attention_saved_len(d, B, T, NH, &ns));
    TERN_TRY(tern_check_saved("attention", saved, ns));
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
            size_t b = u / kv, g = u % kv;
            gather(k, qkv, b, t_n, width, (nh + g) * h_n, h_n);
            gather(v, qkv, b, t_n, width, (nh + kv + g) * h_n, h_n);
            for (size_t h = g * group; h < (g + 1) * group; h++) {
                gather(q, qkv, b, t_n, width, h * h_n, h_n);
                float *p_head = saved32 + (b * nh + h) * t_n * t_n;
                for (size_t t = 0; t < t_n; t++) {
                    float *p = p_head + t * t_n;
                    for (size_t t2 = 0; t2 <= t; t2++) p[t2] = cpu_dot(q + t * h_n, k + t2 * h_n, h_n) * scale;
                    softmax(p, t + 1);
                    memset(p + t + 1, 0, (t_n - t - 1) * sizeof(float));
                    float *ot = o + t * h_n;
                    memset(ot, 0, h_n * sizeof(float));
                    for (size_t t2 = 0; t2 <= t; t2++) {
                        const float *vt = v + t2 * h_n;
                        float pw = p[t2];
#pragma omp simd
                        for (size_t i = 0; i < h_n; i++) ot[i] = fmaf(pw, vt[i], ot[i]);
                    }
                }
                scatter(out, o, b, t_n, nh * h_n, h * h_n, h_n);
            }
        }
    }
    return NULL;
}

tern_error *cpu_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                       tern_buf saved, int B, int T, int NH, int KV, int hs) {
    (void)out; /* the saved probabilities stand in for it */
    size_t t_n = (size_t)T, h_n = (size_t)hs, nh = (size_t)NH, kv = (size_t)KV, group = nh / kv;
    size_t width = (nh + 2 * kv) * h_n, units = (size_t)B * kv;
    size_t head = cpu_round64(t_n * h_n * sizeof(float)), row = cpu_round64(t_n * sizeof(float));
    size_t per_thread = 7 * head + row; /* q, k, v, dout, dq, dk, dv; one row of dS */
    size_t ns = 0;
    TERN_TRY(cpu_attention_saved_len(d, B, T, NH, &ns));
    TERN_TRY(tern_check_saved("attention_backward", saved, ns));
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)d->threads, (void **)&s), "attention_backward"));
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
            size_t b = u / kv, g = u % kv;
            gather(k, qkv, b, t_n, width, (nh + g) * h_n, h_n);
            gather(v, qkv, b, t_n, width, (nh + kv + g) * h_n, h_n);
            memset(dk, 0, t_n * h_n * sizeof(float));
            memset(dv, 0, t_n * h_n * sizeof(float));
            for (size_t h = g * group; h < (g + 1) * group; h++) {
                gather(q, qkv, b, t_n, width, h * h_n, h_n);
                gather(go, dout, b, t_n, nh * h_n, h * h_n, h_n);
                const float *p_head = saved32 + (b * nh + h) * t_n * t_n;
                for (size_t t = 0; t < t_n; t++) {
                    const float *p = p_head + t * t_n, *gt = go + t * h_n;
                    /* dP[t2] = dout_t . v_t2; dS = P (dP - sum P dP) */
                    float dot_pdp = 0;
                    for (size_t t2 = 0; t2 <= t; t2++) {
                        ds[t2] = cpu_dot(gt, v + t2 * h_n, h_n);
                        dot_pdp += p[t2] * ds[t2];
                    }
                    float *dqt = dq + t * h_n;
                    memset(dqt, 0, h_n * sizeof(float));
                    for (size_t t2 = 0; t2 <= t; t2++) {
                        float pw = p[t2], dsw = pw * (ds[t2] - dot_pdp) * scale;
                        const float *kt = k + t2 * h_n, *qt = q + t * h_n;
                        float *dkt = dk + t2 * h_n, *dvt = dv + t2 * h_n;
#pragma omp simd
                        for (size_t i = 0; i < h_n; i++) {
                            dvt[i] = fmaf(pw, gt[i], dvt[i]);
                            dqt[i] = fmaf(dsw, kt[i], dqt[i]);
                            dkt[i] = fmaf(dsw, qt[i], dkt[i]);
                        }
                    }
                }
                scatter(dqkv, dq, b, t_n, width, h * h_n, h_n);
            }
            scatter(dqkv, dk, b, t_n, width, (nh + g) * h_n, h_n);
            scatter(dqkv, dv, b, t_n, width, (nh + kv + g) * h_n, h_n);
        }
    }
    return NULL;
}

tern_error *cpu_attention_cached(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                     tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T) {
    long p0 = *(const int32_t *)cpu_ptr(pos);
    if (p0 < 0 || p0 + (long)T > (long)max_T)
        return tern_errorf("attention_cached: positions %ld .. %ld are out of range of the cache's %d", p0,
                           p0 + T - 1, max_T);
    size_t t_n = (size_t)T, h_n = (size_t)hs, nh = (size_t)NH, kv = (size_t)KV, group = nh / kv;
    size_t width = (nh + 2 * kv) * h_n, mt = (size_t)max_T, units = (size_t)B * kv;
    size_t len = (size_t)p0 + t_n; /* positions attended */
    size_t hs_bytes = cpu_round64(h_n * sizeof(float));
    /* a prompt's queries in blocks of QUERY_BLOCK through the GEMM kernel where there is one
     * (attention_block.c): q and out blocks [QB, hs], scores [QB, len], the kernel's packing */
    bool blocks = d->kern->gemm_f32 && t_n >= QUERY_BLOCK_MIN;
    /* The blocks read a cache in another dtype as f32 copies of the unit's len keys and values,
     * made once per unit ([len, hs] each). Without the blocks (decoding's query; a prompt on a
     * table without gemm_f32) the cache is read as it is, by the table's attn_scores and
     * attn_values, which convert in registers: a copy would write and read back twice the
     * cache's bytes for one pass over them. */
    bool k_as_is = k_cache.dtype == TERN_F32 || !blocks, v_as_is = v_cache.dtype == TERN_F32 || !blocks;
    size_t kv_bytes = cpu_round64(len * h_n * sizeof(float));
    size_t per_thread = cpu_round64(len * sizeof(float)) + 4 * hs_bytes + (k_as_is ? 0 : kv_bytes) +
                        (v_as_is ? 0 : kv_bytes); /* scores; q, out, k, v rows; k, v as f32 */
    size_t qb_bytes = cpu_round64(QUERY_BLOCK * h_n * sizeof(float));
    size_t s_bytes = cpu_round64(QUERY_BLOCK * len * sizeof(float));
    if (blocks) per_thread += 2 * qb_bytes + s_bytes + cpu_round64(CPU_GEMM_F32_SCRATCH(QUERY_BLOCK));
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)d->threads, (void **)&s), "attention_cached"));
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel num_threads(d->threads) if (units * group * len * h_n > 32768)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *score = (float *)mine;
        float *q = (float *)(mine + cpu_round64(len * sizeof(float)));
        float *o = (float *)((unsigned char *)q + hs_bytes);
        float *kr = (float *)((unsigned char *)o + hs_bytes);
        float *vr = (float *)((unsigned char *)kr + hs_bytes);
        float *k_f32 = (float *)((unsigned char *)vr + hs_bytes);        /* [len, hs] */
        float *v_f32 = (float *)((unsigned char *)k_f32 + (k_as_is ? 0 : kv_bytes)); /* [len, hs] */
        unsigned char *blk = (unsigned char *)v_f32 + (v_as_is ? 0 : kv_bytes);
        float *q_blk = (float *)blk, *o_blk = (float *)(blk + qb_bytes); /* [QB, hs] each */
        float *s_blk = (float *)(blk + 2 * qb_bytes);                   /* [QB, len] */
        void *pack = blk + 2 * qb_bytes + s_bytes;
#pragma omp for schedule(static)
        for (size_t u = 0; u < units; u++) {
            size_t b = u / kv, g = u % kv, cache0 = u * mt * h_n; /* [b, g, 0, 0] */
            for (size_t t = 0; t < t_n; t++) {
                size_t row = (b * t_n + t) * width, at = cache0 + ((size_t)p0 + t) * h_n;
                cpu_to_f32(kr, cpu_at(qkv, row + (nh + g) * h_n), qkv.dtype, h_n);
                cpu_from_f32(cpu_at(k_cache, at), k_cache.dtype, kr, h_n);
                cpu_to_f32(vr, cpu_at(qkv, row + (nh + kv + g) * h_n), qkv.dtype, h_n);
                cpu_from_f32(cpu_at(v_cache, at), v_cache.dtype, vr, h_n);
            }
            /* keys and values [len, hs] of this unit: f32 for the blocks, else as stored */
            const void *keys = k_as_is ? cpu_at(k_cache, cache0) : (void *)k_f32;
            const void *values = v_as_is ? cpu_at(v_cache, cache0) : (void *)v_f32;
            if (!k_as_is) cpu_to_f32(k_f32, cpu_at(k_cache, cache0), k_cache.dtype, len * h_n);
            if (!v_as_is) cpu_to_f32(v_f32, cpu_at(v_cache, cache0), v_cache.dtype, len * h_n);
            for (size_t h = g * group; h < (g + 1) * group; h++) {
                for (size_t t0 = 0; blocks && t0 < t_n; t0 += QUERY_BLOCK) {
                    size_t qb = t_n - t0 < QUERY_BLOCK ? t_n - t0 : QUERY_BLOCK;
                    for (size_t r = 0; r < qb; r++)
                        cpu_to_f32(q_blk + r * h_n, cpu_at(qkv, (b * t_n + t0 + r) * width + h * h_n), qkv.dtype, h_n);
                    cpu_attention_block(d->kern, q_blk, qb, (size_t)p0 + t0, (const float *)keys,
                                        (const float *)values, h_n, scale, s_blk, o_blk, pack);
                    for (size_t r = 0; r < qb; r++)
                        cpu_from_f32(cpu_at(out, (b * t_n + t0 + r) * nh * h_n + h * h_n), out.dtype, o_blk + r * h_n,
                                     h_n);
                }
                for (size_t t = 0; !blocks && t < t_n; t++) {
                    size_t n = (size_t)p0 + t + 1;
                    cpu_to_f32(q, cpu_at(qkv, (b * t_n + t) * width + h * h_n), qkv.dtype, h_n);
                    d->kern->attn_scores(k_cache.dtype, q, keys, n, h_n, scale, score);
                    float mx = -INFINITY;
                    for (size_t j = 0; j < n; j++) mx = score[j] > mx ? score[j] : mx;
                    float sum = 0;
#pragma omp simd reduction(+ : sum)
                    for (size_t j = 0; j < n; j++) {
                        score[j] = cpu_expf(score[j] - mx);
                        sum += score[j];
                    }
                    d->kern->attn_values(v_cache.dtype, score, values, n, h_n, o);
                    float inv = 1.0f / sum;
                    for (size_t i = 0; i < h_n; i++) o[i] *= inv;
                    cpu_from_f32(cpu_at(out, (b * t_n + t) * nh * h_n + h * h_n), out.dtype, o, h_n);
                }
            }
        }
    }
    return NULL;
}
