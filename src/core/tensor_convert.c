/* Converting a tensor read from a safetensors file into a tern dtype. The file's data need
 * not be aligned, so every element is read with memcpy (which compilers turn into plain
 * unaligned loads). */
#include <string.h>

#include "core/display.h"
#include "tern/half.h"
#include "tern/safetensors.h"

static float load_f32(const unsigned char *p, tern_dtype from) {
    switch (from) {
    case TERN_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case TERN_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return tern_bf16_to_f32(h);
    }
    case TERN_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return tern_f16_to_f32(h);
    }
    case TERN_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return (float)v;
    }
    case TERN_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return (float)v;
    }
    case TERN_Q8: break; /* no file dtype maps to it */
    }
    return 0.0f;
}

tern_error *tern_tensor_convert(const tern_tensor_info *t, tern_dtype to, void *dst) {
    if (!t) return tern_errorf("converting a tensor: no tensor given");
    if (!t->supported)
        return tern_errorf("tensor '%s' has dtype %s, which tern cannot convert",
                           tern_display_of(t->name).s, t->dtype_name);
    tern_dtype from = t->dtype;
    const unsigned char *src = t->data;
    size_t n = t->count, step = t->elem_size;
    if (n > 0 && (!src || !dst))
        return tern_errorf("converting tensor '%s': no data", tern_display_of(t->name).s);
    if (from == to) {
        if (n) memcpy(dst, src, t->nbytes);
        return NULL;
    }
    switch (to) {
    case TERN_F32: {
        float *out = dst;
        for (size_t i = 0; i < n; i++)
            out[i] = load_f32(src + i * step, from);
        return NULL;
    }
    case TERN_BF16: {
        uint16_t *out = dst;
        for (size_t i = 0; i < n; i++)
            out[i] = tern_f32_to_bf16(load_f32(src + i * step, from));
        return NULL;
    }
    case TERN_F16: {
        uint16_t *out = dst;
        for (size_t i = 0; i < n; i++)
            out[i] = tern_f32_to_f16(load_f32(src + i * step, from));
        return NULL;
    }
    case TERN_I32:
        if (from == TERN_U16) {
            int32_t *out = dst;
            for (size_t i = 0; i < n; i++) {
                uint16_t v;
                memcpy(&v, src + i * step, 2);
                out[i] = v;
            }
            return NULL;
        }
        break;
    case TERN_U16:
    case TERN_Q8: break;
    }
    return tern_errorf("tensor '%s': cannot convert %s to %s", tern_display_of(t->name).s,
                       t->dtype_name, tern_dtype_name(to));
}
