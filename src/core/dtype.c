#include "tern/effect.h"

size_t tern_dtype_size(tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return 4;
    case TERN_BF16: return 2;
    case TERN_F16: return 2;
    case TERN_I32: return 4;
    case TERN_U16: return 2;
    case TERN_Q8: return 0; /* not whole bytes per element: tern_dtype_bytes */
    }
    return 0;
}

size_t tern_dtype_bytes(tern_dtype dtype, size_t n) {
    if (dtype == TERN_Q8) return (n / TERN_Q8_BLOCK + (n % TERN_Q8_BLOCK != 0)) * TERN_Q8_BLOCK_BYTES;
    return n * tern_dtype_size(dtype);
}

const char *tern_dtype_name(tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return "f32";
    case TERN_BF16: return "bf16";
    case TERN_F16: return "f16";
    case TERN_I32: return "i32";
    case TERN_U16: return "u16";
    case TERN_Q8: return "q8_0";
    }
    return "invalid dtype";
}

bool tern_dtype_is_float(tern_dtype dtype) {
    return dtype == TERN_F32 || dtype == TERN_BF16 || dtype == TERN_F16;
}
