// How fast GPT-2's logits product for one token can stream its weight (wte [50257, 768] bf16,
// 77 MB) on this card, before tern's GEMV_T is changed for it (issue 24 item 4: the lm head
// is ~21 us of a 195 us token). Three kernels, each timed alone in a CUDA graph (the median of
// REPS replays):
//   read      a plain streaming sum of the 77 MB (16-byte loads, a grid of resident groups
//             striding over it): the bandwidth this card gives a read;
//   rows      tern's layout: 256-thread groups, 4 rows a SIMD group, each lane 3 16-byte
//             words of each row (all 12 loads in flight), one grid of ceil(V / 32) groups;
//   persist   resident groups only (multiprocessors x per_sm), each SIMD group walking rows
//             R at a time with the next R rows' words loaded before this R's products.
// rows and persist are checked against a host product of the same bf16 values. Then rows
// again with an L2 access policy window on its graph nodes (the persisting L2 lines set
// aside: cudaLimitPersistingL2CacheSize at the device's most), alone and with a 170 MB
// streaming read between products (what decoding's layers read between two tokens' lm heads):
//   whole     the window over all 77 MB, hitRatio = the set-aside / 77 MB;
//   first P%  the window over wte's first P% of the set-aside's bytes, hitRatio 1.
//   nvcc -O3 -arch=sm_90a -o /tmp/lmhead_probe bench/h200/lmhead_probe.cu && /tmp/lmhead_probe
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define PROBE_NAME "lmhead_probe"
#include "probe_util.cuh"

constexpr int V = 50257, K = 768, WORDS = K / 8; // 96 16-byte words a row

__device__ __forceinline__ float dot8(uint4 w, const float *x) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&w);
    float s = 0.0f;
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        s = fmaf(f.x, x[2 * i], s);
        s = fmaf(f.y, x[2 * i + 1], s);
    }
    return s;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

__global__ void k_read(const uint4 *w, size_t words, float *out) {
    float s = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
        uint4 v = __ldcs(w + i);
        s += __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
    }
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0 && s == 12345.0f) out[0] = s; // keeps the loads
}

// tern's GEMV_T layout: 4 rows a SIMD group, lane l reads words l, l + 32, l + 64 of each.
__global__ void __launch_bounds__(256) k_rows(const uint4 *w, const float *x, float *out) {
    __shared__ float xs[K];
    for (int i = threadIdx.x; i < K; i += 256) xs[i] = x[i];
    int lane = threadIdx.x & 31, sg = threadIdx.x >> 5;
    int r0 = (blockIdx.x * 8 + sg) * 4;
    uint4 b[4][3];
    for (int i = 0; i < 4; i++)
        for (int u = 0; u < 3; u++) b[i][u] = w[(size_t)min(r0 + i, V - 1) * WORDS + lane + 32 * u];
    __syncthreads();
    for (int i = 0; i < 4; i++) {
        float s = 0.0f;
        for (int u = 0; u < 3; u++) s += dot8(b[i][u], xs + 8 * (lane + 32 * u));
        s = warp_sum(s);
        if (lane == 0 && r0 + i < V) out[r0 + i] = s;
    }
}

// Resident groups only; each SIMD group walks its rows R at a time, the next R loaded first.
template <int R>
__global__ void __launch_bounds__(256) k_persist(const uint4 *w, const float *x, float *out) {
    __shared__ float xs[K];
    for (int i = threadIdx.x; i < K; i += 256) xs[i] = x[i];
    int lane = threadIdx.x & 31;
    int warp = blockIdx.x * 8 + (threadIdx.x >> 5), warps = gridDim.x * 8;
    int groups = (V + R - 1) / R; // row groups of R
    uint4 cur[R][3], nxt[R][3];
    int g = warp;
    for (int i = 0; i < R; i++)
        for (int u = 0; u < 3; u++) cur[i][u] = w[(size_t)min(g * R + i, V - 1) * WORDS + lane + 32 * u];
    __syncthreads();
    for (; g < groups; g += warps) {
        int gn = g + warps;
        for (int i = 0; i < R; i++)
            for (int u = 0; u < 3; u++)
                nxt[i][u] = gn < groups ? w[(size_t)min(gn * R + i, V - 1) * WORDS + lane + 32 * u] : make_uint4(0, 0, 0, 0);
        for (int i = 0; i < R; i++) {
            float s = 0.0f;
            for (int u = 0; u < 3; u++) s += dot8(cur[i][u], xs + 8 * (lane + 32 * u));
            s = warp_sum(s);
            if (lane == 0 && g * R + i < V) out[g * R + i] = s;
        }
        for (int i = 0; i < R; i++)
            for (int u = 0; u < 3; u++) cur[i][u] = nxt[i][u];
    }
}

// window (num_bytes 0: none) on every kernel node of the captured graph
template <typename F>
static float timed(cudaStream_t s, int reps, F launch, cudaAccessPolicyWindow window = {}) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 4; i++) launch(); // four products a replay (a replay's own overhead shared)
    CK(cudaGetLastError());
    CK(cudaStreamEndCapture(s, &graph));
    if (window.num_bytes) {
        size_t count = 0;
        CK(cudaGraphGetNodes(graph, nullptr, &count));
        std::vector<cudaGraphNode_t> nodes(count);
        CK(cudaGraphGetNodes(graph, nodes.data(), &count));
        cudaKernelNodeAttrValue v = {};
        v.accessPolicyWindow = window;
        for (cudaGraphNode_t node : nodes) {
            cudaGraphNodeType type;
            CK(cudaGraphNodeGetType(node, &type));
            if (type == cudaGraphNodeTypeKernel)
                CK(cudaGraphKernelNodeSetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow, &v));
        }
    }
    CK(cudaGraphInstantiate(&exec, graph, 0));
    float us = time_graph(exec, s, reps, 10) / 4.0f;
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    return us;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int sms = prop.multiProcessorCount;
    size_t n = (size_t)V * K;
    std::vector<__nv_bfloat16> hw(n);
    std::vector<float> hx(K);
    srand(1);
    for (size_t i = 0; i < n; i++) hw[i] = __float2bfloat16((float)(rand() % 2001 - 1000) * 1e-3f);
    for (int i = 0; i < K; i++) hx[i] = (float)(rand() % 2001 - 1000) * 1e-3f;
    uint4 *w;
    float *x, *out;
    CK(cudaMalloc(&w, n * 2));
    CK(cudaMalloc(&x, K * 4));
    CK(cudaMalloc(&out, V * 4));
    CK(cudaMemcpy(w, hw.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, hx.data(), K * 4, cudaMemcpyHostToDevice));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double mb = (double)n * 2 / 1e6;
    printf("lmhead_probe: %s, %d multiprocessors, wte %.1f MB\n", prop.name, sms, mb);

    std::vector<float> ref(V);
    for (int r = 0; r < V; r++) {
        double acc = 0;
        for (int k = 0; k < K; k++) acc += (double)__bfloat162float(hw[(size_t)r * K + k]) * hx[k];
        ref[r] = (float)acc;
    }

    // one product from a cleared output, against the host's (bf16 products summed in f32)
    auto matches = [&](auto launch, const char *what) {
        std::vector<float> got(V);
        CK(cudaMemset(out, 0, V * 4));
        launch();
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got.data(), out, V * 4, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < V; r++) worst = std::max(worst, (double)fabs(got[r] - ref[r]));
        if (worst > 1e-2) fprintf(stderr, "lmhead_probe: %s off the host product by %.3g\n", what, worst);
        return worst <= 1e-2;
    };
    auto report = [&](const char *what, float us) { printf("%-22s %8.2f us  %6.2f TB/s\n", what, us, mb / us); };

    for (int per_sm : {4, 8, 16}) {
        int grid = sms * per_sm;
        float us = timed(s, reps, [&] { k_read<<<grid, 256, 0, s>>>(w, n / 8, out); });
        char name[64];
        snprintf(name, sizeof name, "read, %d a sm", per_sm);
        report(name, us);
    }
    {
        auto launch = [&] { k_rows<<<(V + 31) / 32, 256, 0, s>>>(w, x, out); };
        if (!matches(launch, "rows")) return 1;
        report("rows (tern's layout)", timed(s, reps, launch));
    }
    for (int per_sm : {4, 8}) {
        for (int R : {2, 4}) {
            int grid = sms * per_sm;
            auto launch = [&] {
                if (R == 2) k_persist<2><<<grid, 256, 0, s>>>(w, x, out);
                else k_persist<4><<<grid, 256, 0, s>>>(w, x, out);
            };
            if (!matches(launch, "persist")) return 1;
            char name[64];
            snprintf(name, sizeof name, "persist R %d, %d a sm", R, per_sm);
            report(name, timed(s, reps, launch));
        }
    }
    // the persisting L2 lines, alone and with the layers' streaming between products
    size_t aside = (size_t)prop.persistingL2CacheMaxSize;
    printf("L2 %d bytes, persisting at most %zu, window at most %d\n", prop.l2CacheSize, aside,
           prop.accessPolicyMaxWindowSize);
    if (aside == 0) return 0;
    CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, aside));
    size_t other_words = 170000000 / 16; // 170 MB
    uint4 *other;
    CK(cudaMalloc(&other, other_words * 16));
    CK(cudaMemset(other, 0, other_words * 16));
    auto rows = [&] { k_rows<<<(V + 31) / 32, 256, 0, s>>>(w, x, out); };
    auto rows_after_layers = [&] {
        k_read<<<sms * 8, 256, 0, s>>>(other, other_words, out);
        k_rows<<<(V + 31) / 32, 256, 0, s>>>(w, x, out);
    };
    float layers = timed(s, reps, [&] { k_read<<<sms * 8, 256, 0, s>>>(other, other_words, out); });
    printf("170 MB read alone      %8.2f us\n", layers);
    size_t bytes = n * 2;
    struct mode {
        const char *name;
        size_t num;
        float ratio;
    } modes[] = {{"none", 0, 0.0f},
                 {"whole", std::min(bytes, (size_t)prop.accessPolicyMaxWindowSize), 0.0f},
                 {"first 50%", aside / 2, 1.0f},
                 {"first 75%", aside / 4 * 3, 1.0f},
                 {"first 100%", aside, 1.0f}};
    for (mode &m : modes) {
        cudaAccessPolicyWindow win = {};
        if (m.num) {
            win.base_ptr = w;
            win.num_bytes = m.num;
            win.hitRatio = m.ratio > 0 ? m.ratio : std::min(1.0f, (float)((double)aside / (double)m.num));
            win.hitProp = cudaAccessPropertyPersisting;
            win.missProp = cudaAccessPropertyStreaming;
        }
        CK(cudaCtxResetPersistingL2Cache());
        float alone = timed(s, reps, rows, win);
        CK(cudaCtxResetPersistingL2Cache());
        float mixed = timed(s, reps, rows_after_layers, win);
        printf("window %-10s %5.1f MB ratio %.2f: rows %8.2f us, rows after the 170 MB read %8.2f us (%.2f over it)\n",
               m.name, (double)m.num / 1e6, (double)win.hitRatio, alone, mixed, mixed - layers);
    }
    CK(cudaFree(other));
    return 0;
}
