/* The operations a GPU handler may answer itself (gpu_hooks): its hook where it gives one,
 * else the core's own. And the device's name and the generic operations, the same on
 * every runtime. */
#include "gpu_core/gpu_internal.h"

tern_error *gpu_device_name(tern_dev *d, const char **out) {
    *out = gpu_core_of(d)->name;
    return NULL;
}

tern_error *gpu_capture_begin(tern_dev *d, uint64_t key, bool *replay) {
    gpu_core *g = gpu_core_of(d);
    if (g->hooks->capture_begin) return g->hooks->capture_begin(d, key, replay);
    *replay = false; /* no graphs: the caller runs the section */
    return NULL;
}

tern_error *gpu_capture_end(tern_dev *d, uint64_t key) {
    gpu_core *g = gpu_core_of(d);
    return g->hooks->capture_end ? g->hooks->capture_end(d, key) : NULL;
}

/* The runtime launches the next kernel plainly, after everything before it (cuda; the
 * others never overlap launches): nothing launched before is in flight from there on. */
tern_error *gpu_fence(tern_dev *d) {
    gpu_core *g = gpu_core_of(d);
    tern_rt_fence(g->rt);
    gpu_inflight_barrier(g);
    return NULL;
}

tern_error *gpu_replay_steps(tern_dev *d, int *out) {
    gpu_core *g = gpu_core_of(d);
    /* the tuning's count where sections are replayed; the host and OpenCL runtimes run each
     * section as it is queued, and take it too (tests run several steps a section there) */
    *out = g->tune.replay_steps;
    return NULL;
}

tern_error *gpu_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_refuse_q8("matmul", "b", b));
    if (g->hooks->matmul) return g->hooks->matmul(d, c, a, b, mm);
    return gpu_matmul_dsl(d, c, a, b, mm);
}

tern_error *gpu_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH, int KV,
                          int hs) {
    gpu_core *g = gpu_core_of(d);
    if (g->hooks->attention) return g->hooks->attention(d, out, saved, qkv, B, T, NH, KV, hs);
    return gpu_attention_dsl(d, out, saved, qkv, B, T, NH, KV, hs);
}

tern_error *gpu_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                   tern_buf saved, int B, int T, int NH, int KV, int hs) {
    gpu_core *g = gpu_core_of(d);
    if (g->hooks->attention_backward)
        return g->hooks->attention_backward(d, dqkv, dout, qkv, out, saved, B, T, NH, KV, hs);
    return gpu_attention_backward_dsl(d, dqkv, dout, qkv, out, saved, B, T, NH, KV, hs);
}

/* The generic operations: the DSL runtime's own, which check purity, trace a wrapper kernel
 * around the pure function and launch it on the core's queue. */
tern_error *gpu_build(tern_dev *d, tern_buf out, const tern_kernel *k) {
    return tern_rt_build(gpu_core_of(d)->rt, tern_arg_buf(out), k);
}

tern_error *gpu_zip_with(tern_dev *d, tern_buf out, tern_buf a, tern_buf b, const tern_kernel *combine) {
    return tern_rt_zip_with(gpu_core_of(d)->rt, tern_arg_buf(out), tern_arg_buf(a), tern_arg_buf(b), combine);
}

tern_error *gpu_reduce(tern_dev *d, tern_buf a, double init, const tern_kernel *combine, double *out) {
    return tern_rt_reduce(gpu_core_of(d)->rt, tern_arg_buf(a), init, combine, out);
}

tern_error *gpu_index_of(tern_dev *d, tern_buf a, double value, int64_t *out) {
    return tern_rt_index_of(gpu_core_of(d)->rt, tern_arg_buf(a), value, out);
}
