#include "tern/effect.h"

size_t tern_dtype_size(tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return 4;
    case TERN_BF16: return 2;
    case TERN_F16: return 2;
    case TERN_I32: return 4;
    case TERN_U16: return 2;
    }
    return 0;
}

const char *tern_dtype_name(tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return "f32";
    case TERN_BF16: return "bf16";
    case TERN_F16: return "f16";
    case TERN_I32: return "i32";
    case TERN_U16: return "u16";
    }
    return "invalid dtype";
}

bool tern_dtype_is_float(tern_dtype dtype) {
    return dtype == TERN_F32 || dtype == TERN_BF16 || dtype == TERN_F16;
}
