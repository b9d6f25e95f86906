/* kernel 'row_stats', emitted by tern for metal */
#include <metal_stdlib>
using namespace metal;
/* butterfly, the order every tern target uses */
inline float tern_simd_sum_f32(float v) {
    for (ushort m = 16; m > 0; m >>= 1) {
        float o = simd_shuffle_xor(v, m);
        v = v + o;
    }
    return v;
}
[[max_total_threads_per_threadgroup(64)]] kernel void row_stats(device const ushort *x [[buffer(0)]], device float *out [[buffer(1)]], device int *negatives [[buffer(2)]], constant float &scale [[buffer(3)]], uint3 tern_tpitg [[thread_position_in_threadgroup]], uint3 tern_tgpig [[threadgroup_position_in_grid]], uint tern_tiisg [[thread_index_in_simdgroup]], uint tern_sgitg [[simdgroup_index_in_threadgroup]]) {
    threadgroup float partial[2];
    const int group_x = (int)tern_tgpig.x;
    const int local_x = (int)tern_tpitg.x;
    const int simd_lane = (int)tern_tiisg;
    const int simd_group = (int)tern_sgitg;
    const uint v8 = *(device const uint *)(x + group_x * 128 + local_x * 2);
    float t11 = tern_simd_sum_f32(as_type<float>(v8 << 16) + as_type<float>(v8 & 0xffff0000u));
    if (simd_lane == 0) {
        partial[simd_group] = t11;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
    if (local_x == 0) {
        float total = 0.0f;
        for (int g = 0; g < 2; g++) {
            total = total + partial[g];
        }
        if (total < 0.0f) {
            atomic_fetch_add_explicit((device atomic_int *)&negatives[0], 1, memory_order_relaxed);
        } else {
            total = fmax(total, 0.001f);
        }
        out[group_x] = total * scale;
    }
}
