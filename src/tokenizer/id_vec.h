/* A growable array of token ids. */
#ifndef TERN_TOKENIZER_ID_VEC_H
#define TERN_TOKENIZER_ID_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tern/error.h"

typedef struct {
    int32_t *data;
    size_t count, cap;
} tern_id_vec;

/* Makes room for `more` ids past count. */
static inline tern_error *tern_id_vec_reserve(tern_id_vec *v, size_t more) {
    if (more <= v->cap - v->count) return NULL;
    size_t cap = v->cap ? v->cap : 64;
    while (cap - v->count < more) {
        if (cap > SIZE_MAX / 2 / sizeof *v->data) return tern_errorf("too many token ids");
        cap *= 2;
    }
    int32_t *grown = realloc(v->data, cap * sizeof *grown);
    if (!grown) return tern_errorf("out of memory for %zu token ids", cap);
    v->data = grown;
    v->cap = cap;
    return NULL;
}

static inline tern_error *tern_id_vec_push(tern_id_vec *v, int32_t id) {
    if (v->count == v->cap) TERN_TRY(tern_id_vec_reserve(v, 1));
    v->data[v->count++] = id;
    return NULL;
}

#endif
