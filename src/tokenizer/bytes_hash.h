/* A fast, non-cryptographic hash of a short byte string (tokens, pieces of text). */
#ifndef TERN_TOKENIZER_BYTES_HASH_H
#define TERN_TOKENIZER_BYTES_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t tern_bytes_hash(const uint8_t *s, size_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    /* The last 0-7 bytes, without a variable-length copy: two overlapping loads. */
    uint64_t w = 0;
    if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, s + n - 4, 4);
        w = (uint64_t)hi << 32 | lo;
    } else if (n > 0) {
        w = (uint64_t)s[0] << 16 | (uint64_t)s[n / 2] << 8 | s[n - 1];
    }
    h = (h ^ w) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
}

#endif
