/* Which allocations kernels still running may write: the early reads of programmatic
 * dependent launch.
 *
 * On the cuda runtime every kernel lets the next one launch before it finishes, and a kernel
 * that waits (tern_wait_previous) may run code before its wait: kernels launched since the
 * last point where the device was idle can all be in flight at once, each held at its wait.
 * A kernel may therefore read a buffer before its wait (rather than only prefetch it) only
 * if none of those kernels writes it: decoding's GEMVs load their weights that way while
 * the kernel before them still runs.
 *
 * The core keeps the byte ranges written by the kernels it launched since the last barrier
 * (an upload, a download or a sync: each returns only when the device has finished all work
 * before it), from their parameters' intents and views: a model's buffers are views of a
 * few pools, so one allocation holds both what the kernel just before writes and what a
 * kernel may read early (decoding's key/value caches: each layer's is its own view). Work it did not launch (a handler's vendor GEMM,
 * its own kernels, collectives) makes the set unknown until the next barrier; so does
 * overflowing it. A handler that records a replayable section starts it with a barrier: a
 * recorded graph runs only after all work before its launch has finished.
 *
 * Only the cuda handler reports its own work: on the host interpreter and OpenCL (an in-order
 * queue) no kernel starts before the one before it has finished, so an early read never
 * races there. A kernel queued on a wrapped CUDA stream by the program itself starts ours
 * early only if it issues griddepcontrol.launch_dependents (without it, a kernel lets the
 * next one start when it completes); such a program syncs before tern reads what its kernel
 * wrote (docs/gpu.md). */
#include "gpu_core/gpu_internal.h"

void gpu_inflight_barrier(gpu_core *g) {
    g->inflight_len = 0;
    g->inflight_unknown = false;
}

void gpu_inflight_unknown(gpu_core *g) { g->inflight_unknown = true; }

/* Joins [lo, hi) of mem to the set: into a range of the same allocation that it overlaps or
 * touches (a pool's views are written one after another), else as a range of its own. */
static void note_range(gpu_core *g, void *mem, size_t lo, size_t hi) {
    for (int i = 0; i < g->inflight_len; i++) {
        gpu_written *w = &g->inflight[i];
        if (w->mem != mem || lo > w->hi || hi < w->lo) continue;
        if (lo < w->lo) w->lo = lo;
        if (hi > w->hi) w->hi = hi;
        return;
    }
    if (g->inflight_len == GPU_INFLIGHT_MAX) g->inflight_unknown = true;
    else g->inflight[g->inflight_len++] = (gpu_written){mem, lo, hi};
}

void gpu_inflight_note(gpu_core *g, const tern_kernel *k, const tern_arg *args, size_t count) {
    for (size_t p = 0; p < count && !g->inflight_unknown; p++) {
        tern_param_info info = tern_kernel_param(k, (int)p);
        if (!info.is_buffer || !(info.intent & TERN_WRITE) || args[p].kind != TERN_ARG_DEVICE || !args[p].mem ||
            !args[p].len)
            continue;
        size_t size = tern_type_size(args[p].type);
        note_range(g, args[p].mem, args[p].offset * size, (args[p].offset + args[p].len) * size);
    }
}

bool gpu_inflight_clear(const gpu_core *g, tern_buf b) {
    if (g->inflight_unknown) return false;
    size_t size = tern_type_size(tern_type_of_dtype(b.dtype));
    size_t lo = b.offset * size, hi = (b.offset + b.len) * size;
    for (int i = 0; i < g->inflight_len; i++) {
        const gpu_written *w = &g->inflight[i];
        if (w->mem == b.mem && lo < w->hi && w->lo < hi) return false;
    }
    return true;
}
