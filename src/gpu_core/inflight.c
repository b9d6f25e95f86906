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
 * The core keeps the allocations written by the kernels it launched since the last barrier
 * (an upload, a download or a sync: each returns only when the device has finished all work
 * before it) from their parameters' intents. Work it did not launch (a handler's vendor GEMM,
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

void gpu_inflight_note(gpu_core *g, const tern_kernel *k, const tern_arg *args, size_t count) {
    for (size_t p = 0; p < count && !g->inflight_unknown; p++) {
        tern_param_info info = tern_kernel_param(k, (int)p);
        if (!info.is_buffer || !(info.intent & TERN_WRITE) || args[p].kind != TERN_ARG_DEVICE || !args[p].mem)
            continue;
        bool seen = false;
        for (int i = 0; i < g->inflight_len && !seen; i++) seen = g->inflight[i] == args[p].mem;
        if (seen) continue;
        if (g->inflight_len == GPU_INFLIGHT_MAX) g->inflight_unknown = true;
        else g->inflight[g->inflight_len++] = args[p].mem;
    }
}

bool gpu_inflight_clear(const gpu_core *g, tern_buf b) {
    if (g->inflight_unknown) return false;
    for (int i = 0; i < g->inflight_len; i++)
        if (g->inflight[i] == b.mem) return false;
    return true;
}
