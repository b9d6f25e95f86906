/* The cuda handler's device: a CUDA context and stream, cuBLASLt for matrix products, the
 * GPU core (src/gpu_core/: every other operation, with the DSL's kernels launched on
 * this stream) and the graphs of replayable sections. */
#ifndef TERN_HANDLERS_CUDA_H
#define TERN_HANDLERS_CUDA_H

#include <cublasLt.h>
#include <cuda.h>

#include "gpu_core/gpu_core.h"
#include "handlers/handler.h"
#include "flash_kernels.h"
#include "dsl/cuda_api.h"

typedef struct cuda_matmul_plan cuda_matmul_plan;

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
    const tern_cuda_api *cu;
    CUdevice device;
    CUcontext ctx;
    CUstream stream;
    char name[256];
    cublasLtHandle_t lt;
    CUdeviceptr workspace;
    size_t workspace_size;
    cuda_matmul_plan *plans;
    tern_rt *rt;
    gpu_core core;
    bool core_ready;
    cuda_graph graphs[CUDA_GRAPH_SLOTS];
    int capturing;      /* index of the graph being captured, or -1 */
    unsigned long graphs_epoch; /* core.scratch_epoch when the graphs were recorded */
    unsigned long uses;
    /* attention on the tensor cores (attention_gemm.c): kernels per dtype (f32, bf16) and
     * kind, and the scratch the score matrices live in */
    tern_kernel *att_kernels[2][CUDA_ATT_KERNEL_SLOTS];
    tern_buf att_scratch;
    /* flash attention on the tensor cores (flash_kernels.c), built for head size flash_hs */
    tern_kernel *flash[6]; /* by cuda_flash_kernel; [4], [5]: BACKWARD_KV and _Q with ds_saved */
    cuda_flash_opts flash_opts[6]; /* what each was built with (its launch shape follows them) */
    tern_buf flash_ds;     /* the dS^T those two hand over (bf16), grown on demand */
    int flash_hs;
    struct cuda_profile_entry *profile; /* TERN_CUDA_PROFILE: time per operation (profile.c) */
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

/* The per-operation profile (profile.c); no-ops unless TERN_CUDA_PROFILE is set. */
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
                                 int NH) TERN_MUST_USE;
tern_error *cuda_attention_backward_flash(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                          tern_buf saved, int B, int T, int C, int NH) TERN_MUST_USE;

/* Makes the device's context current on this thread. */
tern_error *cuda_make_current(tern_dev *d) TERN_MUST_USE;
void cuda_matmul_plans_free(tern_dev *d);
/* Releases the NCCL communicator, if any (allreduce.c). */
void cuda_nccl_close(tern_dev *d);

#endif
