/* kernel 'row_stats', emitted by tern for cuda */
__device__ __forceinline__ int tern_local_index() {
    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}
/* butterfly: every lane ends with the same value */
__device__ __forceinline__ float tern_simd_sum_f32(float v) {
    for (int m = 16; m > 0; m >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, m);
        v = v + o;
    }
    return v;
}
extern "C" __global__ void __launch_bounds__(64) row_stats(const unsigned short *x, float *out, int *negatives, float scale) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    __shared__ float partial[2];
    const int group_x = (int)blockIdx.x;
    const int local_x = (int)threadIdx.x;
    const int simd_lane = (tern_local_index() & 31);
    const int simd_group = (tern_local_index() >> 5);
    const unsigned int v8 = *(const unsigned int *)(x + group_x * 128 + local_x * 2);
    float t11 = tern_simd_sum_f32(__uint_as_float(v8 << 16) + __uint_as_float(v8 & 0xffff0000u));
    if (simd_lane == 0) {
        partial[simd_group] = t11;
    }
    __syncthreads();
    if (local_x == 0) {
        float total = 0.0f;
        for (int g = 0; g < 2; g++) {
            total = total + partial[g];
        }
        if (total < 0.0f) {
            atomicAdd(&negatives[0], 1);
        } else {
            total = fmaxf(total, 0.001f);
        }
        out[group_x] = total * scale;
    }
}
