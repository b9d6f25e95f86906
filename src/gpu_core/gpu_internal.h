/* Private to src/gpu_core/: the kernel table, scratch memory, launches and the small
 * decisions every operation shares (vector widths, i32 index limits). */
#ifndef TERN_HANDLERS_GPU_INTERNAL_H
#define TERN_HANDLERS_GPU_INTERNAL_H

#include <limits.h>
#include <string.h>

#include "gpu_core/gpu_core.h"
#include "handlers/validate.h"

/* The kernel of `family` specialised by `spec`, built on first use (core.c). */
tern_error *gpu_kernel(gpu_core *g, gk_family family, const gk_spec *spec,
                       const tern_kernel **out) TERN_MUST_USE;

/* Runs k; errors name operation `op`. */
tern_error *gpu_launch(gpu_core *g, const char *op, const tern_kernel *k, tern_dims grid,
                       tern_dims group, const tern_arg *args, size_t count) TERN_MUST_USE;

/* Records the views a launched kernel writes (its buffer parameters with WRITE), and
 * whether no kernel launched since the last barrier writes any byte of view b, so a kernel
 * may read b before its tern_wait_previous (inflight.c). */
void gpu_inflight_note(gpu_core *g, const tern_kernel *k, const tern_arg *args, size_t count);
bool gpu_inflight_clear(const gpu_core *g, tern_buf b);

/* attention_cached on validated arguments. left NULL: out written. Otherwise, when the
 * launch is a decoding step split S ways (and ac_defer is on), the parts are left unmerged in
 * g->att_partial ([B NH, S, hs + 2]: each part's sums, maximum and sum of weights, as the
 * split kernel writes them) for the caller to merge, out is not written and *left = S;
 * else out is written and *left = 0. */
tern_error *gpu_attention_cached_run(gpu_core *g, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                     tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T,
                                     int *left) TERN_MUST_USE;

/* matmul's ATTENTION prologue with its q|k|v product (at->product) as one kernel, where the
 * step is one it takes (a decoding step of one row, GPT-2's layout, within the rule:
 * attention.c): then the parts are left for the caller's GEMV as with gpu_attention_cached_run
 * (*left = S) and *joined = J, the new position's groups a head (the GEMV's MERGE n[15]);
 * else nothing runs and *joined = 0. */
tern_error *gpu_attention_joined_run(gpu_core *g, tern_buf out, const tern_matmul_attention *at, int *left,
                                     int *joined) TERN_MUST_USE;

/* Builds (first use) and runs the kernel of family/spec. */
tern_error *gpu_run(gpu_core *g, const char *op, gk_family family, const gk_spec *spec,
                    tern_dims grid, tern_dims group, const tern_arg *args,
                    size_t count) TERN_MUST_USE;

/* At least `len` f32 (i32) of scratch, valid until the next operation (core.c). */
tern_error *gpu_scratch(gpu_core *g, size_t len, tern_dbuf *out) TERN_MUST_USE;
tern_error *gpu_scratch_i32(gpu_core *g, size_t len, tern_dbuf *out) TERN_MUST_USE;

/* acc = beta acc + the sum of count partial rows of scratch (row p at p * stride + offset,
 * C columns), in a fixed order (reduce.c). */
tern_error *gpu_partial_add(gpu_core *g, const char *op, tern_buf acc, tern_dbuf scratch, size_t count, int C,
                            int stride, int offset, float beta) TERN_MUST_USE;
/* The same into two destinations in one launch: acc from columns offset .. offset + C of
 * each partial row, acc2 from offset2 .. offset2 + C2. */
tern_error *gpu_partial_add2(gpu_core *g, const char *op, tern_buf acc, tern_buf acc2, tern_dbuf scratch, size_t count,
                             int C, int C2, int stride, int offset, int offset2, float beta) TERN_MUST_USE;

/* A row kernel's path (layernorm.c; layer norm and RMS norm share it) for rows spread over
 * `lanes` lanes (32 a SIMD group): register-resident (returns C, sets *w to the widest
 * width with C % (lanes w) == 0 that the buffers allow) or generic (returns 0, *w = 1). */
int gpu_ln_row_path(const tern_buf *bufs, int count, int C, int lanes, int *w);

/* The fault buffer as a launch argument. */
static inline tern_arg gpu_fault_arg(gpu_core *g) { return tern_arg_dev(g->fault); }

/* A scratch view [offset, offset + len) as a launch argument. */
static inline tern_arg gpu_scratch_arg(tern_dbuf s, size_t offset, size_t len) {
    tern_dbuf v = s;
    v.offset += offset;
    v.len = len;
    return tern_arg_dev(v);
}

static inline uint8_t gpu_t(tern_buf b) { return (uint8_t)tern_type_of_dtype(b.dtype); }

/* q8_0 weights (effect.h) are not implemented by the GPU core yet: every body that could
 * meet one refuses it with one line (alloc refuses to make one; upload, download, copy and
 * matmul refuse a view retyped to it). */
static inline tern_error *gpu_refuse_q8(const char *op, const char *what, tern_buf b) {
    if (b.dtype != TERN_Q8) return NULL;
    return tern_errorf("%s: %s is q8_0, which the GPU handlers (cuda, opencl, interp) do not support yet",
                       op, what);
}

/* Kernels index with i32: every extent they touch must stay below 2^31. */
static inline tern_error *gpu_check_index(const char *op, const char *what, size_t n) {
    if (n > (size_t)INT32_MAX - 64)
        return tern_errorf("%s: %s (%zu elements) exceeds the GPU kernels' 2^31 index range",
                           op, what, n);
    return NULL;
}

/* The widest access of at most 16 bytes per buffer (given by dtype sizes) such that every
 * buffer's offset and `row` (a row length, or 0 for none) are multiples of it. */
static inline int gpu_width(const tern_buf *bufs, int count, size_t row) {
    int w = 8;
    for (int i = 0; i < count; i++) {
        size_t size = tern_dtype_size(bufs[i].dtype);
        int most = (int)(16 / size);
        if (most < w) w = most;
    }
    while (w > 1) {
        bool ok = row % (size_t)w == 0;
        for (int i = 0; i < count && ok; i++) ok = bufs[i].offset % (size_t)w == 0;
        if (ok) break;
        w /= 2;
    }
    return w;
}

static inline uint32_t gpu_groups(size_t threads, size_t group) {
    return (uint32_t)((threads + group - 1) / group);
}

/* The buffer arguments every matmul kernel (matmul.c, gemv.c) takes first: c, a, b, then
 * bias and aux when present. Returns how many it wrote into args. */
static inline size_t gpu_matmul_buffer_args(tern_arg *args, tern_buf c, tern_buf a, tern_buf b,
                                            const tern_matmul *mm) {
    size_t n = 0;
    args[n++] = tern_arg_buf(c);
    args[n++] = tern_arg_buf(a);
    args[n++] = tern_arg_buf(b);
    if (tern_present(mm->bias)) args[n++] = tern_arg_buf(mm->bias);
    if (tern_present(mm->aux)) args[n++] = tern_arg_buf(mm->aux);
    return n;
}

#endif
