// What a dependency level between all of a GPU's groups costs, measured four ways, before
// any decoding kernel is built on it (issue 24 item 4: "consider one persistent kernel a
// layer"). Each level does what a decoding GEMV does after its wait, shrunk to its latency:
// every group reads the whole previous level's vector (N floats, from L2), reduces it in the
// group, and writes its own slice of the next vector, so each level depends on every group of
// the one before. L levels run as:
//   alone      one kernel, each group running its L levels on its own data (no dependency
//              between groups): the work's own latency, the floor;
//   chain      one kernel a level, captured in a CUDA graph (plain launches);
//   chain_pdl  the same with programmatic dependent launch (each kernel launched early,
//              griddepcontrol.wait before it reads, launch_dependents at its start), as tern's
//              decoding kernels run;
//   barrier    one persistent kernel, a grid-wide barrier between levels: a release add on one
//              counter, then an acquire poll until every group of the level has arrived;
//   flags      the same with one flag a group (each group polls all groups' flags: no
//              contended atomic).
// The persistent forms need every group resident at once: G <= the multiprocessors (checked
// with the occupancy API). Reports microseconds a level (the median of REPS graph replays,
// each of L levels) and checks the persistent forms' results against the chain's.
//   nvcc -O3 -arch=sm_90a -o /tmp/sync_probe bench/h200/sync_probe.cu && /tmp/sync_probe
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#define PROBE_NAME "sync_probe"
#include "probe_util.cuh"

constexpr int THREADS = 512;
constexpr int MAXN = 8192;

__device__ __forceinline__ float block_sum(float v, float *red) {
    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) red[w] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < THREADS / 32; i++) s += red[i];
    return s;
}

// One level: out[slice of group g] = in[j] * 0.5 + mean(in) * 1e-3 (a dependency on all of in).
__device__ __forceinline__ void level(const float *in, float *out, int n, int g, int G, float *red) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += THREADS) s += in[i];
    float mean = block_sum(s, red) / (float)n;
    int per = (n + G - 1) / G, lo = g * per, hi = min(n, lo + per);
    for (int j = lo + threadIdx.x; j < hi; j += THREADS) out[j] = in[j] * 0.5f + mean * 1e-3f + 1.0f;
}

__global__ void __launch_bounds__(THREADS) k_alone(float *buf, int n, int L) {
    __shared__ float red[THREADS / 32];
    // each group ping-pongs between two private vectors of its own
    float *a = buf + (size_t)blockIdx.x * 2 * n, *b = a + n;
    for (int l = 0; l < L; l++) {
        level(a, b, n, 0, 1, red);
        __syncthreads();
        float *t = a; a = b; b = t;
    }
}

__global__ void __launch_bounds__(THREADS) k_level(const float *in, float *out, int n) {
    __shared__ float red[THREADS / 32];
    level(in, out, n, blockIdx.x, gridDim.x, red);
}

__global__ void __launch_bounds__(THREADS) k_level_pdl(const float *in, float *out, int n) {
    __shared__ float red[THREADS / 32];
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    level(in, out, n, blockIdx.x, gridDim.x, red);
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void red_release_add(unsigned *p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The levels in one persistent kernel, the groups meeting after each: FLAGS false, one
// counter every group adds to and polls; true, a flag for each group, which every group polls.
// sync: the counter (or the flags) start at 0 in each replay (a memset node before).
template <bool FLAGS>
__global__ void __launch_bounds__(THREADS) k_persistent(float *v0, float *v1, int n, int L, unsigned *sync) {
    __shared__ float red[THREADS / 32];
    float *a = v0, *b = v1;
    for (int l = 0; l < L; l++) {
        level(a, b, n, blockIdx.x, gridDim.x, red);
        __syncthreads();
        if (!FLAGS && threadIdx.x == 0) {
            red_release_add(sync, 1u);
            unsigned target = (unsigned)(l + 1) * gridDim.x;
            while (ld_acquire(sync) < target) {}
        }
        if (FLAGS) {
            if (threadIdx.x == 0) st_release(sync + blockIdx.x, (unsigned)(l + 1));
            if (threadIdx.x < gridDim.x)
                while (ld_acquire(sync + threadIdx.x) < (unsigned)(l + 1)) {}
        }
        __syncthreads();
        float *t = a; a = b; b = t;
    }
}

int main(int argc, char **argv) {
    int L = argc > 1 ? atoi(argv[1]) : 48;
    int reps = argc > 2 ? atoi(argv[2]) : 200;
    int dev = 0, sms = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_persistent<false>, THREADS, 0));
    printf("sync_probe: %s, %d multiprocessors, %d groups of %d a multiprocessor resident, %d levels\n",
           prop.name, sms, per_sm, THREADS, L);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *buf, *v[2];
    unsigned *sync;
    size_t alone_floats = (size_t)sms * 2 * MAXN;
    CK(cudaMalloc(&buf, alone_floats * sizeof(float)));
    CK(cudaMalloc(&v[0], MAXN * sizeof(float)));
    CK(cudaMalloc(&v[1], MAXN * sizeof(float)));
    CK(cudaMalloc(&sync, 1024 * sizeof(unsigned)));
    std::vector<float> init(MAXN);
    for (int i = 0; i < MAXN; i++) init[i] = (float)(i % 97) * 0.01f;

    int ns[] = {768, 3072};
    int gs[] = {32, 96, sms};
    for (int n : ns) {
        for (int G : gs) {
            if (G > sms * per_sm) continue;
            float res[5] = {0};
            std::vector<float> out_ref(n), out(n);
            for (int variant = 0; variant < 5; variant++) {
                cudaGraph_t graph;
                cudaGraphExec_t exec;
                CK(cudaMemcpy(v[0], init.data(), n * sizeof(float), cudaMemcpyHostToDevice));
                CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
                if (variant == 0) {
                    k_alone<<<G, THREADS, 0, s>>>(buf, n, L);
                } else if (variant == 1 || variant == 2) {
                    // the chain restarts from v[0] each replay: level 0 reads v[0]; later levels
                    // ping-pong between v[1] and buf (so v[0] keeps the input)
                    for (int l = 0; l < L; l++) {
                        const float *in = l == 0 ? v[0] : (l % 2 ? v[1] : buf);
                        float *o = l % 2 ? buf : v[1];
                        if (variant == 1) {
                            k_level<<<G, THREADS, 0, s>>>(in, o, n);
                        } else {
                            cudaLaunchConfig_t cfg = {};
                            cfg.gridDim = G;
                            cfg.blockDim = THREADS;
                            cfg.stream = s;
                            cudaLaunchAttribute at[1];
                            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                            at[0].val.programmaticStreamSerializationAllowed = 1;
                            cfg.attrs = at;
                            cfg.numAttrs = 1;
                            CK(cudaLaunchKernelEx(&cfg, k_level_pdl, in, o, n));
                        }
                    }
                } else {
                    CK(cudaMemsetAsync(sync, 0, 1024 * sizeof(unsigned), s));
                    // v[0] is the input; the levels alternate buf / v[1] as the chain's
                    if (variant == 3) k_persistent<false><<<G, THREADS, 0, s>>>(v[0], v[1], n, L, sync);
                    else k_persistent<true><<<G, THREADS, 0, s>>>(v[0], v[1], n, L, sync);
                }
                CK(cudaGetLastError());
                CK(cudaStreamEndCapture(s, &graph));
                CK(cudaGraphInstantiate(&exec, graph, 0));
                if (variant >= 3) {
                    // the persistent forms overwrite v[0] at even levels; one replay from the
                    // input, checked against the chain's result, before the timed ones
                    CK(cudaMemcpy(v[0], init.data(), n * sizeof(float), cudaMemcpyHostToDevice));
                    CK(cudaGraphLaunch(exec, s));
                    CK(cudaStreamSynchronize(s));
                    CK(cudaMemcpy(out.data(), L % 2 ? v[1] : v[0], n * sizeof(float), cudaMemcpyDeviceToHost));
                    double worst = 0;
                    for (int i = 0; i < n; i++)
                        worst = std::max(worst, (double)fabsf(out[i] - out_ref[i]) / (fabsf(out_ref[i]) + 1e-6));
                    if (worst > 1e-5) {
                        fprintf(stderr, "sync_probe: variant %d, n %d, G %d: off the chain by %.3g\n", variant, n, G, worst);
                        return 1;
                    }
                }
                res[variant] = time_graph(exec, s, reps, 20) / (float)L;
                if (variant == 1) {
                    CK(cudaMemcpy(v[0], init.data(), n * sizeof(float), cudaMemcpyHostToDevice));
                    CK(cudaGraphLaunch(exec, s));
                    CK(cudaStreamSynchronize(s));
                    CK(cudaMemcpy(out_ref.data(), L % 2 ? v[1] : buf, n * sizeof(float), cudaMemcpyDeviceToHost));
                }
                CK(cudaGraphExecDestroy(exec));
                CK(cudaGraphDestroy(graph));
            }
            printf("n %5d  groups %3d  us a level: alone %.3f  chain %.3f  chain_pdl %.3f  barrier %.3f  flags %.3f\n",
                   n, G, res[0], res[1], res[2], res[3], res[4]);
        }
    }
    return 0;
}
