/* Attention over a KV cache for decoding. Per (batch, head): store the T new keys and values
 * at positions p0 .. p0+T-1 of the cache [B, NH, max_T, hs], then attend from each new
 * position over positions 0 .. itself. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

tern_error *cpu_attention_cached(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache,
                                      tern_buf qkv, tern_buf pos, int B, int T, int C, int NH,
                                      int max_T) {
    long p0 = *(const int32_t *)cpu_ptr(pos);
    if (p0 < 0 || p0 + (long)T > (long)max_T)
        return tern_errorf("attention_cached: positions %ld .. %ld are out of range of the cache's %d",
                           p0, p0 + T - 1, max_T);
    size_t t_n = (size_t)T, c = (size_t)C, hs = c / (size_t)NH, mt = (size_t)max_T;
    size_t units = (size_t)B * (size_t)NH, len = (size_t)p0 + t_n; /* positions attended */
    size_t hs_bytes = cpu_round64(hs * sizeof(float));
    /* per thread: scores [len], q, out, k, v rows [hs] */
    size_t per_thread = cpu_round64(len * sizeof(float)) + 4 * hs_bytes;
    unsigned char *s;
    TERN_TRY(tern_error_wrap(cpu_scratch(d, per_thread * (size_t)d->threads, (void **)&s),
                             "attention_cached"));
    float scale = 1.0f / sqrtf((float)hs);
    bool k32 = k_cache.dtype == TERN_F32, v32 = v_cache.dtype == TERN_F32;
#pragma omp parallel num_threads(d->threads) if (units * len * hs > 32768)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *score = (float *)mine;
        float *q = (float *)(mine + cpu_round64(len * sizeof(float)));
        float *o = (float *)((unsigned char *)q + hs_bytes);
        float *kr = (float *)((unsigned char *)o + hs_bytes);
        float *vr = (float *)((unsigned char *)kr + hs_bytes);
#pragma omp for schedule(static)
        for (size_t u = 0; u < units; u++) {
            size_t b = u / (size_t)NH, h = u % (size_t)NH;
            size_t cache0 = u * mt * hs; /* [b, h, 0, 0] */
            for (size_t t = 0; t < t_n; t++) {
                size_t row = (b * t_n + t) * 3 * c, at = cache0 + ((size_t)p0 + t) * hs;
                cpu_to_f32(kr, cpu_at(qkv, row + c + h * hs), qkv.dtype, hs);
                cpu_from_f32(cpu_at(k_cache, at), k_cache.dtype, kr, hs);
                cpu_to_f32(vr, cpu_at(qkv, row + 2 * c + h * hs), qkv.dtype, hs);
                cpu_from_f32(cpu_at(v_cache, at), v_cache.dtype, vr, hs);
            }
            for (size_t t = 0; t < t_n; t++) {
                size_t n = (size_t)p0 + t + 1;
                cpu_to_f32(q, cpu_at(qkv, (b * t_n + t) * 3 * c + h * hs), qkv.dtype, hs);
                float mx = -INFINITY;
                for (size_t j = 0; j < n; j++) {
                    const float *kj = k32 ? (const float *)cpu_ptr(k_cache) + cache0 + j * hs
                                          : (cpu_to_f32(kr, cpu_at(k_cache, cache0 + j * hs), k_cache.dtype, hs), kr);
                    score[j] = cpu_dot(q, kj, hs) * scale;
                    mx = score[j] > mx ? score[j] : mx;
                }
                float sum = 0;
#pragma omp simd reduction(+ : sum)
                for (size_t j = 0; j < n; j++) {
                    score[j] = cpu_expf(score[j] - mx);
                    sum += score[j];
                }
                float inv = 1.0f / sum;
                memset(o, 0, hs * sizeof(float));
                for (size_t j = 0; j < n; j++) {
                    const float *vj = v32 ? (const float *)cpu_ptr(v_cache) + cache0 + j * hs
                                          : (cpu_to_f32(vr, cpu_at(v_cache, cache0 + j * hs), v_cache.dtype, hs), vr);
                    float pw = score[j] * inv;
#pragma omp simd
                    for (size_t i = 0; i < hs; i++) o[i] = fmaf(pw, vj[i], o[i]);
                }
                cpu_from_f32(cpu_at(out, (b * t_n + t) * c + h * hs), out.dtype, o, hs);
            }
        }
    }
    return NULL;
}
