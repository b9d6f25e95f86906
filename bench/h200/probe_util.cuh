// Shared by the standalone CUDA probes of bench/h200 (sync_probe.cu, lmhead_probe.cu): a
// runtime call's failure as one line and exit, and a captured graph's replay time.
#ifndef TERN_BENCH_PROBE_UTIL_CUH
#define TERN_BENCH_PROBE_UTIL_CUH

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s: %s: %s (line %d)\n", PROBE_NAME, #call, cudaGetErrorString(e_), \
                    __LINE__);                                                                   \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

// The median of reps replays of a captured graph, in microseconds, after warmup replays.
static float time_graph(cudaGraphExec_t exec, cudaStream_t s, int reps, int warmup) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < warmup; i++) CK(cudaGraphLaunch(exec, s));
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(exec, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.0f);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

#endif
