/* The GPU core: the body of every effect operation for the GPU handlers (cuda, opencl,
 * host), implemented once over a DSL runtime (tern_rt) with the kernels of src/kernels/.
 * A GPU handler's entries (generated: src/handlers/seam.h) call gpu_<op> directly; what
 * differs between the handlers (a vendor GEMM, vendor attention, graphs, collectives) the
 * core asks the handler for through hooks (gpu_hooks). Its device structure begins with
 * its gpu_core (the core reaches it from the tern_dev * it is given: gpu_core_of).
 *
 * Buffers are runtime allocations: tern_buf.mem is the runtime's handle (a cl_mem, a
 * CUdeviceptr, a host pointer for the "host" runtime), passed to kernels with
 * tern_arg_buf. The arguments were validated by the entry (src/handlers/validate.h); the
 * core checks only its own limits (kernels index with i32).
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

#include "handlers/options.h"
#include "handlers/validate.h"
#include "kernels/kernels.h"
#include "tern/effect.h"
#include "tern/kernel.h"

#define GPU_INFLIGHT_MAX 32

/* Bytes [lo, hi) of allocation mem that a kernel in flight may write (inflight.c). */
typedef struct gpu_written {
    void *mem;
    size_t lo, hi;
} gpu_written;

/* What a GPU handler answers itself; NULL where the core's own implementation is used. Each
 * takes the validated arguments of its op. */
typedef struct gpu_hooks {
    /* replayable sections (CUDA graphs); NULL: none, the caller runs the section directly */
    tern_error *(*capture_begin)(tern_dev *d, uint64_t key, bool *replay);
    tern_error *(*capture_end)(tern_dev *d, uint64_t key);
    /* a vendor GEMM; NULL: the core's DSL matmul (gpu_matmul_dsl) */
    tern_error *(*matmul)(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm);
    /* vendor or handler-specific attention; NULL: the core's kernels (gpu_attention_dsl). It
     * must save what gpu_attention_saved_len says (each row's logsumexp). */
    tern_error *(*attention)(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH,
                             int KV, int hs);
    tern_error *(*attention_backward)(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                      tern_buf saved, int B, int T, int NH, int KV, int hs);
    /* a device-side collective engine (NCCL); NULL: through host memory and MPI */
    tern_error *(*allreduce)(tern_dev *d, tern_buf buf, tern_dist *comm);
    tern_error *(*allgather)(tern_dev *d, tern_buf buf, tern_dist *comm);
} gpu_hooks;

/* The core's tuning, a value filled once when a handler opens (src/handlers/options.h: the
 * handler's options and environment variable, keys below) and kept in the core. The
 * defaults are the choices measured on the H200 (bench/h200/NOTES.md); the rest exist to
 * measure the alternatives again. */
typedef struct gpu_tune {
    int gemv_tc;       /* gemv_tc: GEMV threads across B's columns; 0 the rule (8, run 18) */
    bool gemv_narrow;  /* gemv_narrow: fewer column threads where every row then loads early */
    bool gemv_early;   /* gemv_early: B loaded before the wait where nothing in flight writes it */
    bool gemv_smem;    /* gemv_smem: the early rows of B [k, n] into threadgroup memory, not registers */
    int gemv_ks;       /* gemv_ks: GEMV_T's SIMD groups along k (1, 2, 4, 8); 0 the rule */
    int gemv_groups;   /* gemv_groups: the grid below which GEMV_T's rule splits k (512) */
    int ac_splits;     /* ac_splits: most parts of attention_cached's split rows; 0 the rule */
    int ac_split_min;  /* ac_split_min: positions of max_T a split takes at least (GK_AC_SPLIT_MIN) */
    bool ac_early;     /* ac_early: decoding's split attention loads its first cached keys and
                        * values before the wait where nothing in flight writes them */
    bool ac_defer;     /* ac_defer: matmul's ATTENTION prologue on the GEMV kernels merges a
                        * decoding step's split parts as it stages A (else the attention does) */
    bool ac_join;      /* ac_join: the ATTENTION prologue's q|k|v product computed in the split
                        * attention's groups, within the rule (else a GEMV before it) */
    int lnb_rows;      /* lnb_rows: layernorm_backward's rows per team (16, run 51) */
    bool ln_merge;     /* ln_merge: a layer norm's dw|db and dsum sums in one launch */
    int ce_group;      /* ce_group: cross-entropy threads a row; 0 the runtime's (cuda 1,024: run 42) */
    bool argmax_parts; /* argmax_parts: greedy sampling of few rows shared among groups */
    bool ln_fit_group; /* ln_fit_group: a layernorm/rmsnorm forward of fewer rows than GK_LN_ROWS
                        * launched with just their SIMD groups (decoding's one row: 32 threads);
                        * off, always GK_LN_ROWS SIMD groups: one local size, so one work-group
                        * build where the runtime compiles one per local size (PoCL) */
    int replay_steps;  /* replay_steps: decoding steps a replayable section holds (the
                        * replay_steps op's answer): 1, cuda 8 (its graphs: run 104) */
} gpu_tune;

gpu_tune gpu_tune_defaults(void);
/* The keys of gpu_tune, for a handler's tern_option_set. */
extern const tern_option gpu_tune_keys[];
extern const size_t gpu_tune_key_count;

typedef struct gpu_kernel_slot gpu_kernel_slot; /* the kernel table (core.c) */
typedef struct gpu_alloc_slot gpu_alloc_slot;   /* live allocations (memory.c) */

typedef struct gpu_core {
    tern_rt *rt;
    const gpu_hooks *hooks;  /* never NULL (a table of NULLs: none) */
    const char *name;        /* device_name's answer (the handler's, or the runtime's) */
    gpu_tune tune;
    bool host;               /* the "host" interpreter runtime */
    bool download_pending;   /* a download_async not yet waited for */
    bool cuda;               /* the "cuda" runtime */
    int sample_group;        /* threads per sample group */
    int ce_group;            /* threads per cross-entropy group */
    gpu_kernel_slot *kernels;
    size_t kernels_cap, kernels_len;
    gpu_alloc_slot *allocs;  /* open addressing on mem */
    size_t allocs_cap, allocs_len;
    tern_dbuf fault;         /* i32 [GK_FAULT_LEN], zero while no fault is pending */
    tern_dbuf zero_counter;  /* i32 [1] = 0: sample's counter when the caller passes none */
    tern_dbuf scratch;       /* f32, grown on demand */
    size_t scratch_len;
    tern_dbuf scratch_i;     /* i32, grown on demand */
    size_t scratch_i_len;
    tern_dbuf temp[2];       /* f32, grown on demand: gpu_temp's slots, apart from the scratch */
    size_t temp_len[2];
    unsigned long scratch_epoch; /* counts the scratch reallocations (recorded graphs name it) */
    tern_dbuf argmax_v, argmax_i; /* greedy sampling's parts (argmax.c): allocated once */
    tern_dbuf att_partial;   /* f32, attention_cached's split partials: allocated once, never
                              * moved (the decode step's graphs hold its address) */
    tern_dbuf att_count;     /* i32 [GK_AC_SPLIT_ROWS], each row's splits done so far: zero
                              * between launches (the last split resets it) */
    /* the byte ranges that kernels launched since the last barrier may still be writing
     * (inflight.c; overlapping or touching ranges of one allocation joined); unknown after
     * work the core did not launch */
    gpu_written inflight[GPU_INFLIGHT_MAX];
    int inflight_len;
    bool inflight_unknown;
    unsigned long launches; /* kernels launched (the tests count a step's) */
} gpu_core;

/* Sets up a core over rt (which stays the caller's: close it after gpu_core_free) with a
 * handler's hooks (NULL: none), device name (NULL: the runtime's) and tuning (NULL: the
 * defaults). */
tern_error *gpu_core_init(gpu_core *g, tern_rt *rt, const gpu_hooks *hooks, const char *name,
                          const gpu_tune *tune) TERN_MUST_USE;
void gpu_core_free(gpu_core *g);

/* The core of a GPU handler's device (whose structure begins with it), and back. */
static inline gpu_core *gpu_core_of(tern_dev *d) { return (gpu_core *)(void *)d; }
static inline tern_dev *gpu_dev(gpu_core *g) { return (tern_dev *)(void *)g; }

/* Reports (and clears) a fault recorded by a kernel since the last check. Synchronising. */
tern_error *gpu_check_faults(gpu_core *g) TERN_MUST_USE;

/* ---- the bodies: gpu_<op>, with the op list's signatures ---- */

#define GPU_DECLARE_BODY_(name, params, args) tern_error *gpu_##name params TERN_MUST_USE;
TERN_OPS_SEAM(GPU_DECLARE_BODY_)
#undef GPU_DECLARE_BODY_

/* The core's own matmul (a tiled DSL kernel; products that gpu_gemv_applies to go to the
 * GEMV kernels) and attention (flash-style f32 kernels), for hooks that take only some
 * calls. */
tern_error *gpu_matmul_dsl(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) TERN_MUST_USE;
tern_error *gpu_attention_dsl(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH,
                              int KV, int hs) TERN_MUST_USE;
tern_error *gpu_attention_backward_dsl(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                       tern_buf saved, int B, int T, int NH, int KV, int hs) TERN_MUST_USE;

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

/* A buffer of len elements of dtype (a float or i32) in device memory of its own, apart from
 * the scratch that operations take, valid until the next gpu_temp of the same slot
 * (tern_temp_slot: the product under matmul's SWIGLU epilogue, the prologue's normalised A;
 * tern_matmul_compose). Growing it reallocates. */
tern_error *gpu_temp(tern_dev *d, int slot, tern_dtype dtype, size_t len, tern_buf *out) TERN_MUST_USE;

/* The parts of a product a GEMM library may lack, as one pass over C: x = src + bias;
 * aux = x (GELU epilogue with aux); c = gelu(x) or x. src is the f32 product laid out like
 * C (row stride src_ld, entries src_stride apart), or absent: then C itself (f32) is read
 * and updated in place. d as tern_validate_matmul filled it. */
tern_error *gpu_matmul_epilogue(gpu_core *g, tern_buf c, tern_buf src, size_t src_ld, size_t src_stride,
                                const tern_matmul *mm, const tern_matmul_dims *d) TERN_MUST_USE;

/* The small-m products (src/kernels/gemv.c, gemv.c here): m <= GK_GEMV_MAX_M, batch 1, A not
 * transposed; the rest of the contract (B either way, strides, alpha, beta, bias, GELU, aux)
 * is met. They stream B once at memory speed (decoding), in a fixed order. gpu_gemv takes
 * the arguments of a validated product (d as tern_validate_matmul filled it). */
bool gpu_gemv_applies(const tern_matmul_dims *d);
/* Whether they also take the paired epilogues (SWIGLU, ROPE): GK_GEMV_T's (B [n, k]), whose
 * row groups hold each gate row beside its up row, or a head's column j beside j + hd/2. */
bool gpu_gemv_paired(const tern_matmul_dims *d);
tern_error *gpu_gemv(gpu_core *g, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                     const tern_matmul_dims *d) TERN_MUST_USE;

#endif
