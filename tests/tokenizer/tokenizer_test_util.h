/* Helpers shared by the tokenizer tests: finding GPT-2's tokenizer files and reading files. */
#ifndef TERN_TESTS_TOKENIZER_UTIL_H
#define TERN_TESTS_TOKENIZER_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tokenizer.h"

/* $TERN_SHARED_DIR/<rest> (the shared fixtures and data), in buf. */
static inline const char *shared_path(const char *rest, char *buf, size_t cap) {
    const char *dir = getenv("TERN_SHARED_DIR");
    snprintf(buf, cap, "%s/%s", dir ? dir : "../shared", rest);
    return buf;
}

/* GPT-2's tokenizer, from the shared data folder. */
static inline tern_error *load_gpt2_tokenizer(tern_tokenizer **tok) {
    char dir[4096];
    return tern_tokenizer_load_dir(shared_path("data/gpt2-tokenizer", dir, sizeof dir), tok);
}

/* A whole file, or NULL (with a message on stderr). */
static inline char *read_whole_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *grown = realloc(buf, cap *= 2);
        if (!grown) free(buf);
        buf = grown;
    }
    fclose(f);
    if (!buf) return NULL;
    *len = n;
    return buf;
}

#endif
