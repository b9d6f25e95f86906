/* Unicode Normalization Form C (UAX #15): canonical decomposition, canonical ordering, then
 * canonical composition, with Hangul done arithmetically. The tokenizer.json normalizer
 * "NFC" (Qwen2 has it). Bytes that are not well-formed UTF-8 pass through unchanged and
 * block composition across them. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/hf_pipeline.h"
#include "tokenizer/nfc_tables.h"
#include "tokenizer/utf8.h"

#define ILL_FORMED 0x80000000u /* | the byte: a unit that is not a character */

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19,
       V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static int ccc_of(uint32_t cp) {
    if (cp < 0x300 || cp & ILL_FORMED) return 0;
    size_t lo = 0, hi = tern_nfc_ccc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tern_nfc_ccc[mid][0])
            hi = mid;
        else if (cp > tern_nfc_ccc[mid][1])
            lo = mid + 1;
        else
            return (int)tern_nfc_ccc[mid][2];
    }
    return 0;
}

/* Appends the full canonical decomposition of cp to out; returns how many. */
static size_t decompose(uint32_t cp, uint32_t *out) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE;
        out[0] = L_BASE + s / N_COUNT;
        out[1] = V_BASE + (s % N_COUNT) / T_COUNT;
        if (s % T_COUNT == 0) return 2;
        out[2] = T_BASE + s % T_COUNT;
        return 3;
    }
    if (cp >= 0xC0 && !(cp & ILL_FORMED)) {
        size_t lo = 0, hi = tern_nfc_decomp_count;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cp < tern_nfc_decomp[mid][0])
                hi = mid;
            else if (cp > tern_nfc_decomp[mid][0])
                lo = mid + 1;
            else {
                size_t n = tern_nfc_decomp[mid][2];
                memcpy(out, tern_nfc_pool + tern_nfc_decomp[mid][1], n * sizeof *out);
                return n;
            }
        }
    }
    out[0] = cp;
    return 1;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
        b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    if ((a | b) & ILL_FORMED) return 0;
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = tern_nfc_compose_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k = (uint64_t)tern_nfc_compose[mid][0] << 21 | tern_nfc_compose[mid][1];
        if (key < k)
            hi = mid;
        else if (key > k)
            lo = mid + 1;
        else
            return tern_nfc_compose[mid][2];
    }
    return 0;
}

static size_t utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp & ILL_FORMED) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

tern_error *tern_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    /* Below U+0300 (lead bytes under 0xCC) nothing decomposes, combines or composes. */
    size_t i = 0;
    while (i < n && s[i] < 0xCC) i++;
    if (i == n) return NULL;
    if (n > SIZE_MAX / 16) return tern_errorf("a text of %zu bytes is too long to normalize", n);
    /* A character decomposes into at most 4 (Hangul 3), each at least one byte of input;
     * the output is no longer than the input's decomposition, 4 bytes a code point. */
    uint32_t *cps = malloc(4 * n * sizeof *cps);
    uint8_t *bytes = malloc(16 * n);
    if (!cps || !bytes) {
        free(cps);
        free(bytes);
        return tern_errorf("out of memory normalizing %zu bytes", n);
    }
    size_t m = 0;
    for (i = 0; i < n;) {
        uint32_t cp;
        size_t l = tern_utf8_decode(s + i, n - i, &cp);
        if (!l) {
            cp = ILL_FORMED | s[i];
            l = 1;
        }
        i += l;
        size_t first = m;
        m += decompose(cp, cps + m);
        /* canonical ordering: insertion sort of each new mark into the run before it */
        for (size_t k = first; k < m; k++) {
            int c = ccc_of(cps[k]);
            if (!c) continue;
            for (size_t j = k; j > 0 && ccc_of(cps[j - 1]) > c; j--) {
                uint32_t t = cps[j];
                cps[j] = cps[j - 1];
                cps[j - 1] = t;
            }
        }
    }
    if (m == 0) { /* not reached (a byte at or past 0xCC was seen), but said for the compiler */
        free(cps);
        free(bytes);
        return NULL;
    }
    /* canonical composition (UAX #15's sample algorithm) */
    size_t kept = 1, starter = 0;
    int last_class = ccc_of(cps[0]) ? 256 : 0;
    for (size_t k = 1; k < m; k++) {
        uint32_t ch = cps[k];
        int c = ccc_of(ch);
        uint32_t composite = compose(cps[starter], ch);
        if (composite && (last_class < c || last_class == 0) && ccc_of(cps[starter]) == 0) {
            cps[starter] = composite;
            continue;
        }
        if (c == 0) starter = kept;
        last_class = c;
        cps[kept++] = ch;
    }
    size_t len = 0;
    for (size_t k = 0; k < kept; k++) len += utf8_encode(cps[k], bytes + len);
    free(cps);
    if (len == n && !memcmp(bytes, s, n)) {
        free(bytes);
        return NULL;
    }
    *out = bytes;
    *out_len = len;
    return NULL;
}
