/* Greedy and top-k / temperature sampling, exactly as the contract orders it: candidates in
 * descending logit order (ties: lower index first), weights exp((l - max) / temperature)
 * in double, u = tern_uniform(seed, counter * rows + r), and the first candidate whose
 * cumulative weight exceeds u * total (the last one otherwise).
 *
 * Ordering: a small top_k keeps a sorted list by insertion (one compare per logit for most
 * of them); otherwise a stable LSD radix sort on 32-bit keys (three 11-bit passes) orders
 * all V candidates. Rows are spread over the threads. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"
#include "tern/rng.h"

/* top_k at most this uses the insertion list */
#define INSERTION_MAX 128

/* A key whose ascending unsigned order is the descending order of the float. */
static uint32_t descending_key(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u); /* ascending order of f */
    return ~b;
}

/* Sorts items (key << 32 | index) by key, stably; tmp holds n items. */
static void radix_sort(uint64_t *items, uint64_t *tmp, size_t n) {
    size_t count[2048];
    for (int pass = 0; pass < 3; pass++) {
        int shift = 32 + 11 * pass;
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) count[(items[i] >> shift) & 2047u]++;
        size_t total = 0;
        for (size_t b = 0; b < 2048; b++) {
            size_t c = count[b];
            count[b] = total;
            total += c;
        }
        for (size_t i = 0; i < n; i++) tmp[count[(items[i] >> shift) & 2047u]++] = items[i];
        uint64_t *swap = items;
        items = tmp;
        tmp = swap;
    }
    /* after an odd number of passes the sorted items sit in the caller's tmp: copy back */
    memcpy(tmp, items, n * sizeof *items);
}

/* The indices of the k largest of l[0..v) in descending order (ties: lower index first),
 * into idx. Returns k. */
static size_t top_candidates(const float *l, size_t v, size_t k, uint64_t *idx, uint64_t *tmp) {
    if (k <= INSERTION_MAX) {
        size_t count = 0;
        for (size_t i = 0; i < v; i++) {
            /* a later index never beats an equal value: compare strictly */
            if (count == k && !(l[i] > l[idx[count - 1]])) continue;
            size_t at = count < k ? count++ : k - 1;
            while (at > 0 && l[i] > l[idx[at - 1]]) {
                idx[at] = idx[at - 1];
                at--;
            }
            idx[at] = i;
        }
        return count;
    }
    for (size_t i = 0; i < v; i++) idx[i] = (uint64_t)descending_key(l[i]) << 32 | i;
    radix_sort(idx, tmp, v);
    for (size_t i = 0; i < k; i++) idx[i] &= 0xffffffffu;
    return k;
}

tern_error *cpu_sample(tern_dev *d, tern_buf out, tern_buf logits, int rows, int V, int Vp,
                            float temperature, int top_k, uint64_t seed, tern_buf counter) {
    size_t v = (size_t)V, vp = (size_t)Vp;
    size_t k = top_k <= 0 || top_k >= V ? v : (size_t)top_k;
    uint32_t draw0 = tern_present(counter) ? (uint32_t)*(const int32_t *)cpu_ptr(counter) * (uint32_t)rows : 0;
    size_t row_bytes = cpu_round64(vp * sizeof(float)), idx_bytes = cpu_round64(v * sizeof(uint64_t));
    size_t per_thread = row_bytes + 2 * idx_bytes;
    unsigned char *s;
    size_t res_bytes = cpu_round64((size_t)rows * sizeof(int32_t));
    TERN_TRY(tern_error_wrap(cpu_scratch(d, res_bytes + per_thread * (size_t)d->threads, (void **)&s), "sample"));
    /* picks go to scratch first: a NaN found in a later row must leave out untouched */
    int32_t *res = (int32_t *)s;
    s += res_bytes;
    int bad_row = -1;
    size_t bad_col = 0;
#pragma omp parallel num_threads(d->threads) if (rows > 1)
    {
        unsigned char *mine = s + per_thread * (size_t)omp_get_thread_num();
        float *tmp = (float *)mine;
        uint64_t *idx = (uint64_t *)(mine + row_bytes), *idx_tmp = (uint64_t *)(mine + row_bytes + idx_bytes);
#pragma omp for schedule(dynamic)
        for (int r = 0; r < rows; r++) {
            const float *l = cpu_row_in(logits, (size_t)r * vp, v, tmp);
            size_t nan_at = v;
            for (size_t j = 0; j < v && nan_at == v; j++)
                if (l[j] != l[j]) nan_at = j;
            if (nan_at < v) {
#pragma omp critical(tern_cpu_sample_error)
                if (bad_row < 0 || r < bad_row) {
                    bad_row = r;
                    bad_col = nan_at;
                }
                res[r] = 0;
                continue;
            }
            if (temperature <= 0) {
                size_t best = 0;
                for (size_t j = 1; j < v; j++)
                    if (l[j] > l[best]) best = j;
                res[r] = (int32_t)best;
                continue;
            }
            size_t n = top_candidates(l, v, k, idx, idx_tmp);
            double mx = l[idx[0]], total = 0;
            double *w = (double *)idx_tmp; /* free again once the candidates are in idx */
            for (size_t i = 0; i < n; i++) {
                double li = l[idx[i]];
                w[i] = li == mx ? 1.0 : exp((li - mx) / (double)temperature);
                total += w[i];
            }
            double threshold = (double)tern_uniform(seed, draw0 + (uint32_t)r) * total;
            size_t pick = n - 1;
            double cum = 0;
            for (size_t i = 0; i < n; i++) {
                cum += w[i];
                if (cum > threshold) {
                    pick = i;
                    break;
                }
            }
            res[r] = (int32_t)idx[pick];
        }
    }
    if (bad_row >= 0)
        return tern_errorf("sample: logits row %d has NaN at column %zu", bad_row, bad_col);
    memcpy(cpu_ptr(out), res, (size_t)rows * sizeof(int32_t));
    return NULL;
}
