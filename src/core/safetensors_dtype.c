/* The safetensors dtypes tern recognises: its own five, plus the rest of the format's
 * whole-byte types so that files holding them still open. */
#include "core/safetensors_dtype.h"

#include <string.h>

static const tern_st_dtype dtypes[] = {
    {"F32", 4, true, TERN_F32},      {"BF16", 2, true, TERN_BF16},
    {"F16", 2, true, TERN_F16},      {"I32", 4, true, TERN_I32},
    {"U16", 2, true, TERN_U16},      {"F64", 8, false, TERN_F32},
    {"I64", 8, false, TERN_F32},     {"U64", 8, false, TERN_F32},
    {"U32", 4, false, TERN_F32},     {"I16", 2, false, TERN_F32},
    {"I8", 1, false, TERN_F32},      {"U8", 1, false, TERN_F32},
    {"BOOL", 1, false, TERN_F32},    {"F8_E4M3", 1, false, TERN_F32},
    {"F8_E5M2", 1, false, TERN_F32}, {"F8_E8M0", 1, false, TERN_F32},
    {"C64", 8, false, TERN_F32},
};

const tern_st_dtype *tern_st_dtype_lookup(const char *name) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
    return NULL;
}

const char *tern_st_dtype_name(tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return "F32";
    case TERN_BF16: return "BF16";
    case TERN_F16: return "F16";
    case TERN_I32: return "I32";
    case TERN_U16: return "U16";
    case TERN_Q8: break; /* not a safetensors dtype */
    }
    return NULL;
}
