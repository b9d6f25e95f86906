/* The GPU core: every effect operation except matmul, implemented once over a DSL runtime
 * (tern_rt) with the kernels of src/kernels/. A GPU handler (opencl, cuda, ...) holds a
 * gpu_core in its device and answers each operation with one call, e.g.
 *
 *     tern_error *tern_opencl_layernorm(tern_dev *d, ...) { return gpu_layernorm(&d->core, ...); }
 *
 * Buffers are runtime allocations: tern_buf.mem is the runtime's handle (a cl_mem, a
 * CUdeviceptr, a host pointer for the "host" runtime), passed to kernels with
 * tern_arg_buf. Every operation validates its arguments with src/handlers/validate.h
 * first, so a bad call gives the same error on every handler.
 *
 * Kernels are traced and built once per (family, specialisation) and kept in a table, so
 * an operation's host cost is a table lookup and a launch. Faults that kernels detect in
 * device-resident indices (tokens, targets, positions, NaN logits) are reported by the next
 * synchronising operation (sync, download, get, norm2).
 *
 * Scratch device memory (partial sums, attention's row terms, the token order of
 * embed_backward) grows on demand and is reused; a handler recording replayable sections
 * (CUDA graphs) must not record an operation that grows it: the decode step's operations
 * (embed, layernorm, attention_cached, add, gelu, sample) use none.
 *
 * A gpu_core is used by one host thread at a time. */
#ifndef TERN_HANDLERS_GPU_CORE_H
#define TERN_HANDLERS_GPU_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handlers/validate.h"
#include "kernels/kernels.h"
#include "tern/effect.h"
#include "tern/kernel.h"

#define GPU_INFLIGHT_MAX 32

typedef struct gpu_kernel_slot gpu_kernel_slot; /* the kernel table (core.c) */
typedef struct gpu_alloc_slot gpu_alloc_slot;   /* live allocations (memory.c) */

typedef struct gpu_core {
    tern_rt *rt;
    bool host;               /* the "host" interpreter runtime */
    int sample_group;        /* threads per sample group */
    int ce_group;            /* threads per cross-entropy group */
    gpu_kernel_slot *kernels;
    size_t kernels_cap, kernels_len;
    gpu_alloc_slot *allocs;  /* open addressing on mem */
    size_t allocs_cap, allocs_len;
    tern_dbuf fault;         /* i32 [GK_FAULT_LEN], zero while no fault is pending */
    tern_dbuf scratch;       /* f32, grown on demand */
    size_t scratch_len;
    tern_dbuf scratch_i;     /* i32, grown on demand */
    size_t scratch_i_len;
    unsigned long scratch_epoch; /* counts the scratch reallocations (recorded graphs name it) */
    tern_dbuf argmax_v, argmax_i; /* greedy sampling's parts (argmax.c): allocated once */
    tern_dbuf att_partial;   /* f32, attention_cached's split partials: allocated once, never
                              * moved (the decode step's graphs hold its address) */
    /* the allocations that kernels launched since the last barrier may still be writing
     * (inflight.c); unknown after work the core did not launch */
    void *inflight[GPU_INFLIGHT_MAX];
    int inflight_len;
    bool inflight_unknown;
} gpu_core;

/* Sets up a core over rt (which stays the caller's: close it after gpu_core_free). */
tern_error *gpu_core_init(gpu_core *g, tern_rt *rt) TERN_MUST_USE;
void gpu_core_free(gpu_core *g);

/* Reports (and clears) a fault recorded by a kernel since the last check. Synchronising. */
tern_error *gpu_check_faults(gpu_core *g) TERN_MUST_USE;

/* ---- the operations (arguments as in TERN_OPS, less the device) ---- */

tern_error *gpu_sync(gpu_core *g) TERN_MUST_USE;
tern_error *gpu_alloc(gpu_core *g, tern_dtype dtype, size_t len, tern_buf *out) TERN_MUST_USE;
tern_error *gpu_free(gpu_core *g, tern_buf *buf) TERN_MUST_USE;
tern_error *gpu_upload(gpu_core *g, tern_buf dst, const void *src) TERN_MUST_USE;
tern_error *gpu_download(gpu_core *g, void *dst, tern_buf src) TERN_MUST_USE;
tern_error *gpu_copy(gpu_core *g, tern_buf dst, tern_buf src) TERN_MUST_USE;
tern_error *gpu_fill(gpu_core *g, tern_buf dst, double value) TERN_MUST_USE;
tern_error *gpu_get(gpu_core *g, tern_buf a, size_t index, double *out) TERN_MUST_USE;
tern_error *gpu_length(gpu_core *g, tern_buf a, size_t *out) TERN_MUST_USE;
tern_error *gpu_from_list(gpu_core *g, tern_dtype dtype, const double *values, size_t count,
                          tern_buf *out) TERN_MUST_USE;
tern_error *gpu_load(gpu_core *g, const char *path, const char *name, tern_dtype dtype,
                     tern_buf *out) TERN_MUST_USE;
/* ---- work outside the core (inflight.c) ---- */

/* The device has finished all work so far (a handler's capture of a replayable section
 * begins). */
void gpu_inflight_barrier(gpu_core *g);
/* The handler queued work of its own (a vendor GEMM, its kernels, a collective), which may
 * write anything until the next barrier: no kernel reads before its wait until then. */
void gpu_inflight_unknown(gpu_core *g);

/* ---- for handlers whose matmul is a vendor GEMM ---- */

/* `len` f32 of scratch device memory as a buffer of this core, valid until the next
 * operation (e.g. to stage bf16 operands of an f32-only GEMM). Growing it reallocates. */
tern_error *gpu_scratch_buf(gpu_core *g, size_t len, tern_buf *out) TERN_MUST_USE;

/* The parts of a product a GEMM library may lack, as one pass over C: x = src + bias;
 * aux = x (GELU epilogue with aux); c = gelu(x) or x. src is the f32 product laid out like
 * C (row stride src_ld, entries src_stride apart), or absent: then C itself (f32) is read
 * and updated in place. d as tern_validate_matmul filled it. */
tern_error *gpu_matmul_epilogue(gpu_core *g, tern_buf c, tern_buf src, size_t src_ld, size_t src_stride,
                                const tern_matmul *mm, const tern_matmul_dims *d) TERN_MUST_USE;

/* The DSL matmul (a tiled kernel; a handler may prefer a vendor library). Products that
 * gpu_gemv_applies to go to the GEMV kernels. */
tern_error *gpu_matmul(gpu_core *g, tern_buf c, tern_buf a, tern_buf b,
                       const tern_matmul *mm) TERN_MUST_USE;

/* The small-m products (src/kernels/gemv.c, gemv.c here): m <= GK_GEMV_MAX_M, batch 1, A not
 * transposed; the rest of the contract (B either way, strides, alpha, beta, bias, GELU, aux)
 * is met. They stream B once at memory speed (decoding), in a fixed order. gpu_gemv takes
 * the arguments of a validated product (d as tern_validate_matmul filled it). */
bool gpu_gemv_applies(const tern_matmul_dims *d);
tern_error *gpu_gemv(gpu_core *g, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                     const tern_matmul_dims *d) TERN_MUST_USE;
tern_error *gpu_sum_rows(gpu_core *g, tern_buf out, tern_buf x, int rows, int cols,
                         float beta) TERN_MUST_USE;
tern_error *gpu_add(gpu_core *g, tern_buf out, tern_buf a, tern_buf b) TERN_MUST_USE;
tern_error *gpu_norm2(gpu_core *g, tern_buf x, double *out) TERN_MUST_USE;
tern_error *gpu_embed(gpu_core *g, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe,
                      tern_buf pos, int B, int T, int C) TERN_MUST_USE;
tern_error *gpu_embed_backward(gpu_core *g, tern_buf dwte, tern_buf dwpe, tern_buf dout,
                               tern_buf tokens, int B, int T, int C) TERN_MUST_USE;
tern_error *gpu_layernorm(gpu_core *g, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x,
                          tern_buf w, tern_buf b, int rows, int C, float eps) TERN_MUST_USE;
tern_error *gpu_layernorm_backward(gpu_core *g, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum,
                                   tern_buf dout, tern_buf x, tern_buf w, tern_buf mean,
                                   tern_buf rstd, int rows, int C, float grad_beta) TERN_MUST_USE;
tern_error *gpu_gelu(gpu_core *g, tern_buf out, tern_buf x) TERN_MUST_USE;
tern_error *gpu_gelu_backward(gpu_core *g, tern_buf dx, tern_buf dout, tern_buf x) TERN_MUST_USE;
/* saved holds B * NH * T floats: each row's base-2 logsumexp of its scaled scores. */
tern_error *gpu_attention_saved_len(gpu_core *g, int B, int T, int NH, size_t *out) TERN_MUST_USE;
tern_error *gpu_attention(gpu_core *g, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T,
                          int C, int NH) TERN_MUST_USE;
tern_error *gpu_attention_backward(gpu_core *g, tern_buf dqkv, tern_buf dout, tern_buf qkv,
                                   tern_buf out, tern_buf saved, int B, int T, int C,
                                   int NH) TERN_MUST_USE;
tern_error *gpu_attention_cached(gpu_core *g, tern_buf out, tern_buf k_cache, tern_buf v_cache,
                                 tern_buf qkv, tern_buf pos, int B, int T, int C, int NH,
                                 int max_T) TERN_MUST_USE;
tern_error *gpu_cross_entropy(gpu_core *g, tern_buf losses, tern_buf logits, tern_buf targets,
                              int rows, int V, int Vp, float grad_scale) TERN_MUST_USE;
tern_error *gpu_sample(gpu_core *g, tern_buf out, tern_buf logits, int rows, int V, int Vp,
                       float temperature, int top_k, uint64_t seed,
                       tern_buf counter) TERN_MUST_USE;
tern_error *gpu_adamw(gpu_core *g, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m,
                      tern_buf v, const tern_adamw *h) TERN_MUST_USE;
/* allreduce by way of host memory and MPI (download, sum, upload): for handlers without a
 * device-side collective engine. */
tern_error *gpu_allreduce_via_host(gpu_core *g, tern_buf buf, tern_dist *comm) TERN_MUST_USE;
/* allgather the same way: this rank's segment down, MPI's gather, the whole buffer up. */
tern_error *gpu_allgather_via_host(gpu_core *g, tern_buf buf, tern_dist *comm) TERN_MUST_USE;

#endif
