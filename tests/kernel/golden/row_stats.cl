/* kernel 'row_stats', emitted by tern for opencl */
#define TERN_FN
#define TERN_AS_FLOAT(x) as_float(x)
#define TERN_AS_UINT(x) as_uint(x)
TERN_FN float tern_bf16_to_f32(unsigned short h) { return TERN_AS_FLOAT((unsigned int)h << 16); }
/* round to nearest even; NaN stays NaN */
TERN_FN unsigned short tern_f32_to_bf16(float f) {
    unsigned int b = TERN_AS_UINT(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return (unsigned short)(b >> 16);
}
int tern_local_index(void) {
    return (int)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));
}
float tern_simd_sum_f32(float v, __local ulong *scratch) {
    const int lid = tern_local_index(), lane = lid & 31;
    __local float *s = (__local float *)scratch + (lid - lane);
    barrier(CLK_LOCAL_MEM_FENCE);
    s[lane] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    float a[32];
    for (int j = 0; j < 32; j++) a[j] = s[j];
    for (int m = 16; m > 0; m >>= 1)
        for (int j = 0; j < m; j++) a[j] = a[j] + a[j + m];
    return a[0];
}
__kernel void row_stats(__global const ushort *x, ulong x_off, __global float *out, ulong out_off, __global int *negatives, ulong negatives_off, float scale, __local ulong *tern_simd_scratch) {
    x += x_off;
    out += out_off;
    negatives += negatives_off;
    __local float partial[2];
    const int group_x = (int)get_group_id(0);
    const int local_x = (int)get_local_id(0);
    const int simd_lane = (tern_local_index() & 31);
    const int simd_group = (tern_local_index() >> 5);
    const ushort2 v8 = vload2(0, x + group_x * 128 + local_x * 2);
    float t11 = tern_simd_sum_f32(tern_bf16_to_f32(v8.s0) + tern_bf16_to_f32(v8.s1), tern_simd_scratch);
    if (simd_lane == 0) {
        partial[simd_group] = t11;
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (local_x == 0) {
        float total = 0.0f;
        for (int g = 0; g < 2; g++) {
            total = total + partial[g];
        }
        if (total < 0.0f) {
            atomic_add(&negatives[0], 1);
        } else {
            total = fmax(total, 0.001f);
        }
        out[group_x] = total * scale;
    }
}
