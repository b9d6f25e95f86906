/* q8_0 blocks (include/tern/effect.h): 32 weights share an f16 scale d, weight i = d q[i].
 *
 * Quantizing: d = max |x| / 127, rounded to f16; q = x / d rounded to nearest (ties away from
 * zero), clamped to [-127, 127] (f16 rounding may make |x| / d a little above 127). Dividing
 * by the stored d (not by the exact max / 127) keeps each weight within d / 2 of d q, the
 * bound the tests hold. A block of zeros has d = 0 and q = 0. Non-finite weights are not
 * representable: they quantize as if 0 (q8_0 is for trained weights, which are finite).
 * Runs once per weight at load; the products are the kernel tables' (kernels_simd.h: int8
 * dot products on activations quantized per block for decoding, q8_to_f32 rows for sgemm). */
#include <math.h>
#include <string.h>

#include "cpu.h"

void cpu_q8_quantize(void *dst, const float *src, size_t n) {
    unsigned char *out = dst;
    for (size_t b = 0; b < n / TERN_Q8_BLOCK; b++) {
        const float *x = src + b * TERN_Q8_BLOCK;
        unsigned char *blk = out + b * TERN_Q8_BLOCK_BYTES;
        float amax = 0;
        for (int i = 0; i < TERN_Q8_BLOCK; i++) {
            float v = fabsf(x[i]);
            if (v > amax && isfinite(v)) amax = v;
        }
        uint16_t dh = tern_f32_to_f16(amax / 127.0f);
        float d = tern_f16_to_f32(dh);
        memcpy(blk, &dh, 2);
        for (int i = 0; i < TERN_Q8_BLOCK; i++) {
            float v = d > 0 && isfinite(x[i]) ? roundf(x[i] / d) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            blk[2 + i] = (unsigned char)(int8_t)v;
        }
    }
}
