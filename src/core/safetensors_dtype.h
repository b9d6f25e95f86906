/* The dtype names of the safetensors format and their sizes (private to src/core). */
#ifndef TERN_CORE_SAFETENSORS_DTYPE_H
#define TERN_CORE_SAFETENSORS_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "tern/effect.h"

typedef struct tern_st_dtype {
    const char *name; /* as written in headers: "F32" */
    size_t size;      /* bytes per element */
    bool supported;   /* maps to a tern_dtype */
    tern_dtype dtype; /* meaningful when supported */
} tern_st_dtype;

/* The entry for a header's dtype string, or NULL when the format has no such dtype (or it
 * is one of the sub-byte types, F4 and F6, whose sizes are not whole bytes). */
const tern_st_dtype *tern_st_dtype_lookup(const char *name);

/* The header name of a tern dtype ("F32", "BF16", "F16", "I32", "U16"). */
const char *tern_st_dtype_name(tern_dtype dtype);

#endif
