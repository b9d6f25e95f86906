/* The cuda handler's device: the GPU core (src/gpu_core/: the body of every operation,
 * with the DSL's kernels launched on this device's stream), a CUDA context and stream, and
 * what the core asks this handler for through its hooks: cuBLASLt's products (matmul.c),
 * attention on the tensor cores (attention*.c), graphs of replayable sections (device.c)
 * and NCCL's collectives (allreduce.c). */
#ifndef TERN_HANDLERS_CUDA_H
#define TERN_HANDLERS_CUDA_H

#include <cublasLt.h>
#include <cuda.h>

#include <stddef.h>

#include "gpu_core/gpu_core.h"
#include "handlers/handler.h"
#include "kernels/flash.h"
#include "dsl/cuda_api.h"

typedef struct cuda_matmul_plan cuda_matmul_plan;

/* The cuda handler's tuning (with the GPU core's, gpu_tune): filled once at open from
 * TERN_CUDA_TUNE and then open's options ("key=value,..."; keys in device.c), kept in the
 * device. The defaults are the measured choices (bench/h200/NOTES.md); the rest are there
 * to measure them again. */
typedef struct cuda_tune {
    int device;           /* device: the GPU's index (0) */
    bool profile;         /* profile: each operation timed, printed at close (profile.c) */
    bool graphs;          /* graphs: replayable sections recorded as CUDA graphs (on) */
    bool graph_timing;    /* graph_timing: each replay's time on the GPU printed */
    bool pdl;             /* pdl: programmatic dependent launch where the GPU has it (on) */
    bool gemm_tune;       /* gemm_tune: cuBLASLt's candidates timed on a shape's first use (on) */
    int gemm_candidates;  /* gemm_candidates: how many the heuristic is asked for (8) */
    int gemv;             /* gemv: products with at most this many rows of A (m) to the GEMV
                           * kernels, 0 .. GK_GEMV_MAX_M (2: cuBLASLt was faster from m = 4
                           * at GPT-2's shapes, bench/h200/NOTES.md run 80; 0: none) */
    /* the flash kernels on warp-level products (tern_mma_bf16: every GPU but Hopper, or
     * flash_wgmma=0), measured on the H200 with them: */
    int flash_groups[3];  /* flash_groups: f/kv/q groups a multiprocessor's registers are
                           * budgeted for (4/2/4; 0: no hint; run 22) */
    bool flash_kv_halves; /* flash_kv_halves: dK dV walks each query tile in halves (on) */
    int flash_pipelined[3]; /* flash_pipelined: f/kv/q tiles staged ahead (1/0/1; run 40) */
    /* the same for the kernels on warpgroup products (Hopper), whose dK dV holds K and V in
     * shared memory, not registers: 4/3/4, off, 1/1/1 (runs 120-121: its kernel 3.08 ->
     * 2.71 ms a 124M step on an H200, which with 4/2/4, halves and 1/0/1 took 3.23) */
    int flash_wg_groups[3];
    bool flash_wg_kv_halves;
    int flash_wg_pipelined[3];
    int flash_stages;     /* flash_stages: the dQ pass's pipeline depth (4; run 54) */
    bool flash_ds_saved;  /* flash_ds_saved: dS^T handed from dK dV to dQ (on; runs 27-28) */
    int flash_wgmma[3];   /* flash_wgmma: f/kv/q products as warpgroup products where the device
                           * has them (compute capability 9; 1/1/1: GPT-2 124M's step 31.3 ->
                           * 30.2 ms, 1.5B's 326 -> 318 on an H100, bench/h200/NOTES.md runs
                           * 110-111) */
} cuda_tune;

/* A replayable section: seen once (run directly, so that kernels compile and scratch grows
 * outside any capture), then captured, then replayed. */
typedef struct cuda_graph {
    uint64_t key;
    int seen;           /* 0: free slot, 1: run once, 2: captured */
    CUgraphExec exec;
    unsigned long last_use;
} cuda_graph;

#define CUDA_GRAPH_SLOTS 8
/* attention_gemm.c's kernels per dtype: (kind, direction, form) */
#define CUDA_ATT_KERNEL_SLOTS 12

struct tern_dev {
    gpu_core core; /* first: the core reaches the device through it (gpu_core_of) */
    cuda_tune tune;
    const tern_cuda_api *cu;
    CUdevice device;
    CUcontext ctx;
    CUstream stream;
    char name[256];
    bool hopper; /* compute capability 9 (sm_90a): the warpgroup products (wgmma) */
    int multiprocessors;
    cublasLtHandle_t lt;
    CUdeviceptr workspace;
    size_t workspace_size;
    cuda_matmul_plan *plans;
    tern_rt *rt;
    bool core_ready;
    cuda_graph graphs[CUDA_GRAPH_SLOTS];
    int capturing;      /* index of the graph being captured, or -1 */
    unsigned long graphs_epoch; /* core.scratch_epoch when the graphs were recorded */
    unsigned long uses;
    /* attention on the tensor cores (attention_gemm.c): kernels per dtype (f32, bf16) and
     * kind, and the scratch the score matrices live in */
    tern_kernel *att_kernels[2][CUDA_ATT_KERNEL_SLOTS];
    tern_buf att_scratch;
    /* flash attention on the tensor cores (src/kernels/flash.c), built for head size flash_hs
     * and flash_group query heads per key/value head */
    tern_kernel *flash[6]; /* by gk_flash_kernel; [4], [5]: BACKWARD_KV and _Q with ds_saved */
    gk_flash_opts flash_opts[6]; /* what each was built with (its launch shape follows them) */
    tern_buf flash_ds;     /* the dS^T those two hand over (bf16), grown on demand */
    int flash_hs, flash_group;
    struct cuda_profile_entry *profile; /* tune.profile: time per operation (profile.c) */
    int profile_len;
    /* allreduce and allgather (allreduce.c): NCCL's communicator (ncclComm_t), made on first
     * use for one tern communicator; after a failure it is aborted and both refuse */
    struct ncclComm *nccl;
    const tern_dist *nccl_dist;
    bool nccl_failed;
};

#define CUDA_PROFILE_SLOTS 128
typedef struct cuda_profile_entry {
    char name[64];
    double seconds; /* over every call but the first */
    double first;   /* the first call */
    long calls;
} cuda_profile_entry;

/* The per-operation profile (profile.c); no-ops unless tune.profile is set. Every entry
 * times its operation (TERN_SEAM_CALL below) but matmul, whose body times each path by
 * shape. */
double cuda_profile_begin(tern_dev *d);
void cuda_profile_end(tern_dev *d, const char *name, double t0);
void cuda_profile_report(tern_dev *d);

/* The attention implementations (attention.c picks one and checks the arguments first):
 * cuBLASLt products on causal blocks (attention_gemm.c) and the flash kernels on the
 * tensor cores (attention_flash.c, bf16). */
tern_error *cuda_attention_gemm(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                int NH) TERN_MUST_USE;
tern_error *cuda_attention_backward_gemm(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                         tern_buf saved, int B, int T, int C, int NH) TERN_MUST_USE;
tern_error *cuda_attention_flash(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                 int NH, int KV) TERN_MUST_USE;
tern_error *cuda_attention_backward_flash(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                          tern_buf saved, int B, int T, int C, int NH, int KV) TERN_MUST_USE;

/* Makes the device's context current on this thread. */
tern_error *cuda_make_current(tern_dev *d) TERN_MUST_USE;

/* The GPU core's hooks (gpu_hooks): graphs (device.c), cuBLASLt (matmul.c), the attention
 * paths (attention.c), NCCL (allreduce.c). */
extern const gpu_hooks cuda_hooks;
tern_error *cuda_capture_begin(tern_dev *d, uint64_t key, bool *replay) TERN_MUST_USE;
tern_error *cuda_capture_end(tern_dev *d, uint64_t key) TERN_MUST_USE;
tern_error *cuda_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) TERN_MUST_USE;
tern_error *cuda_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH,
                           int KV, int hs) TERN_MUST_USE;
tern_error *cuda_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                    tern_buf saved, int B, int T, int NH, int KV, int hs) TERN_MUST_USE;
tern_error *cuda_allreduce(tern_dev *d, tern_buf buf, tern_dist *comm) TERN_MUST_USE;
tern_error *cuda_allgather(tern_dev *d, tern_buf buf, tern_dist *comm) TERN_MUST_USE;

/* The entries' hook (src/handlers/seam.h): the device's context made current on this
 * thread first (a program may switch threads between calls), the operation timed when
 * profiling. */
#define TERN_SEAM_CALL(name, args)                                                        \
    TERN_TRY(cuda_make_current(d));                                                      \
    double t0_ = cuda_profile_begin(d);                                                  \
    tern_error *err_ = TERN_SEAM_BODY(name) args;                                        \
    cuda_profile_end(d, #name, t0_);                                                     \
    return err_;
void cuda_matmul_plans_free(tern_dev *d);
/* Releases the NCCL communicator, if any (allreduce.c). */
void cuda_nccl_close(tern_dev *d);

_Static_assert(offsetof(struct tern_dev, core) == 0, "the GPU core comes first in the device");

#endif
