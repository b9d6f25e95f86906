/* libFuzzer target: the safetensors reader over arbitrary bytes. Whatever it accepts must be
 * self-consistent: every tensor inside the input, found by its name, convertible when its
 * dtype is supported. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_safetensors *f = NULL;
    tern_error *e = tern_safetensors_open_memory(data, size, "fuzz", &f);
    if (e) {
        if (f) __builtin_trap(); /* *out must stay NULL on error */
        if (!tern_error_message(e)[0]) __builtin_trap();
        tern_error_free(e);
        return 0;
    }
    size_t n = tern_safetensors_count(f), covered = 0;
    for (size_t i = 0; i < n; i++) {
        const tern_tensor_info *t = tern_safetensors_at(f, i);
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size) __builtin_trap();
        if (t->nbytes != t->count * t->elem_size) __builtin_trap();
        if (tern_safetensors_find(f, t->name) != t) __builtin_trap();
        covered += t->nbytes;
        if (!t->supported) continue;
        /* count <= size here, so these allocations stay small */
        float *out = malloc(t->count ? t->count * sizeof *out : 1);
        uint16_t *half = malloc(t->count ? t->count * sizeof *half : 1);
        if (out && half) {
            tern_error *ce = tern_tensor_convert(t, TERN_F32, out);
            if (ce) __builtin_trap(); /* every supported dtype converts to f32 */
            tern_error_free(tern_tensor_convert(t, TERN_BF16, half));
        }
        free(out);
        free(half);
    }
    if (covered > size) __builtin_trap();
    tern_safetensors_metadata(f, "format");
    tern_safetensors_close(f);
    return 0;
}
