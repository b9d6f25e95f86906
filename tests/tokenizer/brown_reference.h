/* The committed reference ids of the Brown corpus (brown_reference.txt by tiktoken,
 * brown_llama_reference.txt by Hugging Face tokenizers): the id count and an FNV-1a 64
 * hash of each block of ids, as bench/tokenizer/tiktoken_ref.py and hf_ref.py write them. */
#ifndef TERN_TESTS_BROWN_REFERENCE_H
#define TERN_TESTS_BROWN_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_BLOCKS 4096

typedef struct {
    size_t count, block, blocks;
    uint64_t hash[MAX_BLOCKS];
} reference;

static inline bool read_reference(const char *path, reference *ref) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[256];
    ref->count = ref->block = ref->blocks = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "count %llu", &v) == 1)
            ref->count = (size_t)v;
        else if (sscanf(line, "block %llu", &v) == 1)
            ref->block = (size_t)v;
        else if (sscanf(line, "%16llx", &v) == 1 && ref->blocks < MAX_BLOCKS)
            ref->hash[ref->blocks++] = v;
        else
            ok = false;
    }
    fclose(f);
    return ok && ref->count && ref->block &&
           ref->blocks == (ref->count + ref->block - 1) / ref->block;
}

/* FNV-1a 64 over the ids as little-endian uint32, as the scripts compute it. */
static inline uint64_t fnv1a64(const int32_t *ids, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xFF;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}

#endif
