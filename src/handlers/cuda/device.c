/* The cuda handler's device: opening, closing, synchronising, and replayable sections
 * recorded as CUDA graphs. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_handler.h"
#include "handlers/options.h"

#define CU(call, what) tern_cuda_check(d->cu, d->cu->call, what)

/* cuBLASLt's workspace: the size its Hopper kernels ask for at most. */
#define CUDA_WORKSPACE_BYTES (32u << 20)

tern_error *cuda_make_current(tern_dev *d) {
    if (!d) return tern_errorf("the device is NULL");
    return CU(cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
}

static tern_error *pick_device(const tern_cuda_api *cu, int index, CUdevice *out) {
    int count = 0;
    TERN_TRY(tern_cuda_check(cu, cu->cuDeviceGetCount(&count), "cuDeviceGetCount"));
    if (count == 0) return tern_errorf("no CUDA device");
    if (index >= count) return tern_errorf("device=%d: there are %d CUDA devices (0 .. %d)", index, count, count - 1);
    return tern_cuda_check(cu, cu->cuDeviceGet(out, index), "cuDeviceGet");
}

static const cuda_tune tune_defaults = {
    .graphs = true, .pdl = true, .gemm_tune = true, .gemm_candidates = 8, .gemv = 2,
    .flash_groups = {4, 2, 4}, .flash_kv_halves = true, .flash_pipelined = {1, 0, 1}, .flash_stages = 4,
    .flash_ds_saved = true, .flash_wgmma = {1, 1, 1},
    .flash_wg_groups = {4, 3, 4}, .flash_wg_kv_halves = false, .flash_wg_pipelined = {1, 1, 1},
};

#define KEY(name, kind, field, lo, hi) {name, kind, offsetof(cuda_tune, field), lo, hi}
static const tern_option tune_keys[] = {
    KEY("device", TERN_OPTION_INT, device, 0, 1023),
    KEY("profile", TERN_OPTION_BOOL, profile, 0, 1),
    KEY("graphs", TERN_OPTION_BOOL, graphs, 0, 1),
    KEY("graph_timing", TERN_OPTION_BOOL, graph_timing, 0, 1),
    KEY("pdl", TERN_OPTION_BOOL, pdl, 0, 1),
    KEY("gemm_tune", TERN_OPTION_BOOL, gemm_tune, 0, 1),
    KEY("gemm_candidates", TERN_OPTION_INT, gemm_candidates, 1, 64),
    KEY("gemv", TERN_OPTION_INT, gemv, 0, GK_GEMV_MAX_M),
    KEY("flash_groups", TERN_OPTION_INT3, flash_groups, 0, 32),
    KEY("flash_kv_halves", TERN_OPTION_BOOL, flash_kv_halves, 0, 1),
    KEY("flash_pipelined", TERN_OPTION_INT3, flash_pipelined, 0, 1),
    KEY("flash_stages", TERN_OPTION_INT, flash_stages, 2, GK_FLASH_MAX_STAGES),
    KEY("flash_ds_saved", TERN_OPTION_BOOL, flash_ds_saved, 0, 1),
    KEY("flash_wgmma", TERN_OPTION_INT3, flash_wgmma, 0, 1),
    KEY("flash_wg_groups", TERN_OPTION_INT3, flash_wg_groups, 0, 32),
    KEY("flash_wg_kv_halves", TERN_OPTION_BOOL, flash_wg_kv_halves, 0, 1),
    KEY("flash_wg_pipelined", TERN_OPTION_INT3, flash_wg_pipelined, 0, 1),
};
#undef KEY

tern_error *tern_cuda_close(tern_dev *d) {
    if (!d) return NULL;
    cuda_profile_report(d);
    free(d->profile);
    if (d->cu && d->ctx) {
        tern_error_free(cuda_make_current(d));
        cuda_nccl_close(d);
        if (d->stream) d->cu->cuStreamSynchronize(d->stream);
        for (int i = 0; i < CUDA_GRAPH_SLOTS; i++)
            if (d->graphs[i].exec) d->cu->cuGraphExecDestroy(d->graphs[i].exec);
        if (d->core_ready) tern_error_free(gpu_free(d, &d->att_scratch));
        for (int t = 0; t < 2; t++)
            for (int k = 0; k < CUDA_ATT_KERNEL_SLOTS; k++) tern_kernel_free(d->att_kernels[t][k]);
        for (int k = 0; k < 6; k++) tern_kernel_free(d->flash[k]);
        if (d->core_ready) tern_error_free(gpu_free(d, &d->flash_ds));
        if (d->core_ready) gpu_core_free(&d->core);
        if (d->rt) tern_rt_close(d->rt);
        cuda_matmul_plans_free(d);
        if (d->lt) cublasLtDestroy(d->lt);
        if (d->workspace) d->cu->cuMemFree(d->workspace);
        if (d->stream) d->cu->cuStreamDestroy(d->stream);
        d->cu->cuDevicePrimaryCtxRelease(d->device);
    }
    free(d);
    return NULL;
}

tern_error *tern_cuda_open(const char *options, tern_dev **out) {
    if (!out) return tern_errorf("open: out is NULL");
    *out = NULL;
    tern_dev *d = calloc(1, sizeof *d);
    if (!d) return tern_errorf("out of memory");
    d->capturing = -1;
    d->tune = tune_defaults;
    gpu_tune core_tune = gpu_tune_defaults();
    /* decoding's sections: 8 steps a graph (run 104 of bench/h200/NOTES.md: GPT-2 124M bf16
     * 0.215 -> 0.207 ms a token, Llama-3.2-1B 0.792 -> 0.782; 16: 0.206 on GPT-2) */
    core_tune.replay_steps = 8;
    const tern_option_set sets[] = {{tune_keys, sizeof tune_keys / sizeof tune_keys[0], &d->tune},
                                    {gpu_tune_keys, gpu_tune_key_count, &core_tune}};
    tern_error *err = tern_options_apply("cuda", "TERN_CUDA_TUNE", options, sets, 2);
    int major = 0; /* the device's compute capability */
    if (!err && d->tune.profile && !(d->profile = calloc(CUDA_PROFILE_SLOTS, sizeof *d->profile)))
        err = tern_errorf("out of memory");
    if (err) {
        free(d);
        return err;
    }
    err = tern_cuda_api_get(&d->cu);
    if (!err) err = pick_device(d->cu, d->tune.device, &d->device);
    if (!err) err = CU(cuDevicePrimaryCtxRetain(&d->ctx, d->device), "cuDevicePrimaryCtxRetain");
    if (err) {
        free(d->profile);
        free(d); /* nothing else to release yet */
        return err;
    }
    if (!(err = cuda_make_current(d)) &&
        !(err = CU(cuDeviceGetName(d->name, sizeof d->name, d->device), "cuDeviceGetName")) &&
        !(err = CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->device),
                   "cuDeviceGetAttribute")) &&
        !(err = CU(cuDeviceGetAttribute(&d->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->device),
                   "cuDeviceGetAttribute")) &&
        !(err = CU(cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")) &&
        !(err = CU(cuMemAlloc(&d->workspace, CUDA_WORKSPACE_BYTES), "cuMemAlloc (cuBLASLt workspace)"))) {
        d->workspace_size = CUDA_WORKSPACE_BYTES;
        cublasStatus_t s = cublasLtCreate(&d->lt);
        if (s != CUBLAS_STATUS_SUCCESS) err = tern_errorf("cublasLtCreate: %s", cublasLtGetStatusString(s));
    }
    d->hopper = major == 9;
    /* the early rows of decoding's weights in shared memory pay where kernels launch early
     * (programmatic dependent launch, sm_90+), whose 227 KiB hold them; older GPUs keep them
     * in registers */
    if (major < 9) core_tune.gemv_smem = false;
    if (!err) err = tern_rt_wrap_cuda(d->ctx, d->stream, &d->rt);
    if (!err && !d->tune.pdl) tern_rt_no_overlap(d->rt);
    if (!err && !(err = gpu_core_init(&d->core, d->rt, &cuda_hooks, d->name, &core_tune))) d->core_ready = true;
    if (err) {
        tern_cuda_close(d);
        return err;
    }
    *out = d;
    return NULL;
}

const gpu_hooks cuda_hooks = {
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .matmul = cuda_matmul,
    .attention = cuda_attention,
    .attention_backward = cuda_attention_backward,
    .allreduce = cuda_allreduce,
    .allgather = cuda_allgather,
};

/* ---- replayable sections ---- */

static int find_graph(tern_dev *d, uint64_t key) {
    for (int i = 0; i < CUDA_GRAPH_SLOTS; i++)
        if (d->graphs[i].seen && d->graphs[i].key == key) return i;
    return -1;
}

/* A free slot, or the least recently used one (its graph destroyed). */
static int claim_graph(tern_dev *d, uint64_t key) {
    int best = 0;
    for (int i = 0; i < CUDA_GRAPH_SLOTS; i++) {
        if (!d->graphs[i].seen) {
            best = i;
            break;
        }
        if (d->graphs[i].last_use < d->graphs[best].last_use) best = i;
    }
    if (d->graphs[best].exec) d->cu->cuGraphExecDestroy(d->graphs[best].exec);
    d->graphs[best] = (cuda_graph){.key = key};
    return best;
}

tern_error *cuda_capture_begin(tern_dev *d, uint64_t key, bool *replay) {
    *replay = false;
    if (d->capturing >= 0) return tern_errorf("capture_begin: a section is already being captured");
    if (!d->tune.graphs) return NULL; /* for measuring what graphs save */
    if (d->graphs_epoch != d->core.scratch_epoch) {
        /* the scratch the graphs recorded was reallocated: record every section anew */
        for (int j = 0; j < CUDA_GRAPH_SLOTS; j++) {
            if (d->graphs[j].exec) d->cu->cuGraphExecDestroy(d->graphs[j].exec);
            d->graphs[j] = (cuda_graph){0};
        }
        d->graphs_epoch = d->core.scratch_epoch;
    }
    int i = find_graph(d, key);
    if (i < 0) i = claim_graph(d, key);
    cuda_graph *g = &d->graphs[i];
    g->last_use = ++d->uses;
    if (g->seen == 0) { /* first time: run directly */
        g->seen = 1;
        return NULL;
    }
    if (g->seen == 2) {
        *replay = true;
        return NULL;
    }
    TERN_TRY(CU(cuStreamBeginCapture(d->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                "cuStreamBeginCapture"));
    d->capturing = i;
    /* the graph will start with the device idle: nothing recorded before it is in flight */
    gpu_inflight_barrier(&d->core);
    return NULL;
}

/* graph_timing=1 (for measurements): a replay bracketed by events and waited for,
 * its time on the GPU printed on stderr: what the device spends in the section, against the
 * sum of its kernels (Nsight Compute) and the wall time of the step around it. */
static tern_error *timed_launch(tern_dev *d, CUgraphExec exec) {
    CUevent ev[2] = {NULL, NULL};
    tern_error *err = CU(cuEventCreate(&ev[0], CU_EVENT_DEFAULT), "cuEventCreate");
    if (!err) err = CU(cuEventCreate(&ev[1], CU_EVENT_DEFAULT), "cuEventCreate");
    if (!err) err = CU(cuEventRecord(ev[0], d->stream), "cuEventRecord");
    if (!err) err = CU(cuGraphLaunch(exec, d->stream), "cuGraphLaunch");
    if (!err) err = CU(cuEventRecord(ev[1], d->stream), "cuEventRecord");
    if (!err) err = CU(cuEventSynchronize(ev[1]), "cuEventSynchronize");
    float ms = 0;
    if (!err) err = CU(cuEventElapsedTime(&ms, ev[0], ev[1]), "cuEventElapsedTime");
    if (!err) fprintf(stderr, "graph replay: %.3f ms on the GPU\n", ms);
    for (int k = 0; k < 2; k++)
        if (ev[k]) d->cu->cuEventDestroy(ev[k]);
    return err;
}

tern_error *cuda_capture_end(tern_dev *d, uint64_t key) {
    if (!d->tune.graphs) return NULL;
    int i = find_graph(d, key);
    if (d->capturing >= 0) {
        int c = d->capturing;
        d->capturing = -1;
        CUgraph graph = NULL;
        tern_error *err = CU(cuStreamEndCapture(d->stream, &graph), "cuStreamEndCapture");
        if (!err && c != i) err = tern_errorf("capture_end: key differs from capture_begin's");
        if (!err) err = CU(cuGraphInstantiate(&d->graphs[c].exec, graph, 0), "cuGraphInstantiate");
        if (graph) d->cu->cuGraphDestroy(graph);
        if (err) {
            d->graphs[c] = (cuda_graph){0};
            return err;
        }
        d->graphs[c].seen = 2;
    }
    if (i < 0) return tern_errorf("capture_end: no section begun with this key");
    if (d->graphs[i].seen != 2) return NULL; /* the first, direct run */
    /* A captured section has not run yet; a replayed one runs now, its writes in flight. */
    gpu_inflight_unknown(&d->core);
    if (d->tune.graph_timing) return timed_launch(d, d->graphs[i].exec);
    return CU(cuGraphLaunch(d->graphs[i].exec, d->stream), "cuGraphLaunch");
}
