/* Attention through the flash kernels on the tensor cores (src/kernels/flash.c, bf16 only):
 * the kernels built once per head size and group (NH / KV query heads per key/value head),
 * then one launch forward and three backward (D = rowsum(dO O), then dK and dV per key tile
 * of each key/value head, then dQ per query tile). attention.c picks this path (the default
 * for bf16) and checks the arguments first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_handler.h"
#include "kernels/flash.h"

#define CUDA_FLASH_DS_MAX_BYTES ((size_t)1 << 30)

/* Compile options per kernel, from the handler's tuning (cuda_tune's flash_* keys), whose
 * defaults were measured on the H200 (bench/h200/NOTES.md): register budgets for 4, 2 and
 * 4 groups a multiprocessor (run 22); dK dV in halves of each query tile (run 22); the
 * forward and dQ tiles staged one ahead by asynchronous copies, dK dV not (run 40: forward
 * 1.89 -> 1.60 ms a step, dQ 1.37 -> 1.28, but dK dV 3.55 -> 3.64, its fragments already
 * fill the registers); the dQ pass from the stored dS^T with 3 tiles in flight (run 54: L2
 * bound, 104.7 -> 99.5 us a layer); warpgroup products (flash_wgmma) on Hopper (its products
 * twice mma.sync's rate: a 124M step 3% faster on an H100, the twenty-fourth session), with
 * their own register budgets and staging (flash_wg_*: their dK dV, K and V in shared memory,
 * fits three groups a multiprocessor and takes whole query tiles staged ahead). `saved`: the
 * backward pair that hands dS^T over. */
static gk_flash_opts flash_opts(const tern_dev *d, gk_flash_kernel which, bool saved, int group) {
    const cuda_tune *t = &d->tune;
    gk_flash_opts o = {.ds_saved = saved, .group = group};
    if (which != GK_FLASH_DELTA) {
        int k = which == GK_FLASH_FORWARD ? 0 : which == GK_FLASH_BACKWARD_KV ? 1 : 2;
        o.wgmma = d->hopper && t->flash_wgmma[k] != 0;
        o.min_groups = o.wgmma ? t->flash_wg_groups[k] : t->flash_groups[k];
        o.pipelined = (o.wgmma ? t->flash_wg_pipelined[k] : t->flash_pipelined[k]) != 0;
        o.kv_halves = o.wgmma ? t->flash_wg_kv_halves : t->flash_kv_halves;
    }
    if (which == GK_FLASH_BACKWARD_Q) o.stages = t->flash_stages;
    return o;
}

/* d->flash's slot of a kernel: by kind, the ds_saved pair after them. */
static int flash_slot(gk_flash_kernel which, bool saved) {
    return saved ? 4 + (which == GK_FLASH_BACKWARD_Q) : (int)which;
}

/* The kernel for head size hs and `group` query heads per key/value head (1: KV = NH); a
 * model has one of each, so the kernels of another are dropped, not kept (and the graphs
 * recorded with them: they would launch freed kernels). */
static tern_error *flash_kernel(tern_dev *d, gk_flash_kernel which, bool saved, int hs, int group,
                                const tern_kernel **out) {
    if (d->flash_hs != hs || d->flash_group != group) {
        bool dropped = false;
        for (int i = 0; i < 6; i++) {
            dropped |= d->flash[i] != NULL;
            tern_kernel_free(d->flash[i]);
            d->flash[i] = NULL;
        }
        if (dropped) d->core.scratch_epoch++; /* the graphs are recorded anew */
        d->flash_hs = hs;
        d->flash_group = group;
    }
    int slot = flash_slot(which, saved);
    if (!d->flash[slot]) {
        d->flash_opts[slot] = flash_opts(d, which, saved, group);
        TERN_TRY(gk_flash_kernel_build(which, hs, &d->flash_opts[slot], &d->flash[slot]));
    }
    *out = d->flash[slot];
    return NULL;
}

/* Launches tiled kernel `which` over B sequences of T positions and NH query heads: the rows
 * per group, the group's threads and the heads its grid covers: gk_flash_rows,
 * gk_flash_threads and gk_flash_heads. */
static tern_error *flash_launch(tern_dev *d, const tern_kernel *k, gk_flash_kernel which, bool saved, int B, int T,
                                int NH, const tern_arg *args, size_t count) {
    const gk_flash_opts *o = &d->flash_opts[flash_slot(which, saved)];
    int rows = gk_flash_rows(which, o);
    tern_dims grid = tern_dims2((uint32_t)((T + rows - 1) / rows), (uint32_t)(B * gk_flash_heads(which, o, NH)));
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    return tern_launch(d->rt, k, grid, tern_dims1((uint32_t)gk_flash_threads(which, o)), args, count);
}

tern_error *cuda_attention_flash(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                 int NH, int KV) {
    int hs = C / NH;
    const tern_kernel *k;
    TERN_TRY(flash_kernel(d, GK_FLASH_FORWARD, false, hs, NH / KV, &k));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(out), tern_arg_buf(saved), tern_arg_i32(B),
                       tern_arg_i32(T), tern_arg_i32(NH), tern_arg_f32(1.0f / sqrtf((float)hs))};
    return flash_launch(d, k, GK_FLASH_FORWARD, false, B, T, NH, args, 7);
}

/* Whether the backward pass hands dS^T from the dK, dV kernel to the dQ kernel (ds_saved:
 * one product per tile in the dQ pass instead of three, for a bf16 buffer of the scores'
 * causal part, about B NH T T / 2, written and read once). On the H200 (GPT-2 124M, B=16,
 * T=1024; bench/h200/NOTES.md, runs 27-28) the dQ pass went from 2.28 to 1.37 ms a step and
 * the dK, dV pass, which stores dS^T through shared memory in 16-byte rows, from 3.04 to
 * 3.57 (4.07 with scattered four-byte stores): flash attention 7.6 -> 7.1 ms, the step
 * 31.99-32.35 -> 31.69-31.87 in the same run. The default (flash_ds_saved=0 turns it off),
 * T a multiple of 8 (16-byte rows), the buffer at most CUDA_FLASH_DS_MAX_BYTES; *ds then
 * views the device's buffer, grown as needed (which moves the graphs' scratch: the epoch). */
static tern_error *ds_buffer(tern_dev *d, int B, int T, int NH, tern_buf *ds, bool *saved) {
    size_t len = gk_flash_ds_len(B, T, NH); /* the causal part only: about B NH T T / 2 */
    *saved = d->tune.flash_ds_saved && T % 8 == 0 &&
             len * 2 <= CUDA_FLASH_DS_MAX_BYTES;
    if (!*saved) return NULL;
    if (d->flash_ds.len < len) {
        TERN_TRY(gpu_free(d, &d->flash_ds));
        TERN_TRY(gpu_alloc(d, TERN_BF16, len, &d->flash_ds));
        d->core.scratch_epoch++; /* recorded graphs named the old buffer */
    }
    *ds = tern_view(d->flash_ds, 0, len);
    return NULL;
}

tern_error *cuda_attention_backward_flash(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                          tern_buf saved, int B, int T, int C, int NH, int KV) {
    int hs = C / NH, group = NH / KV;
    size_t rows = (size_t)B * T * NH;
    tern_buf D;
    TERN_TRY(gpu_scratch_buf(&d->core, rows, &D)); /* f32 [B, NH, T] */
    tern_buf ds = tern_none();
    bool ds_on = false;
    TERN_TRY(ds_buffer(d, B, T, NH, &ds, &ds_on));
    const tern_kernel *delta, *kv, *q;
    TERN_TRY(flash_kernel(d, GK_FLASH_DELTA, false, hs, group, &delta));
    TERN_TRY(flash_kernel(d, GK_FLASH_BACKWARD_KV, ds_on, hs, group, &kv));
    TERN_TRY(flash_kernel(d, GK_FLASH_BACKWARD_Q, ds_on, hs, group, &q));
    tern_arg da[] = {tern_arg_buf(out), tern_arg_buf(dout), tern_arg_buf(D), tern_arg_i32(B), tern_arg_i32(T),
                     tern_arg_i32(NH)};
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    TERN_TRY(tern_launch(d->rt, delta, tern_dims1(gk_flash_delta_groups(B, T, NH, hs)), tern_dims1(GK_FLASH_THREADS),
                         da, 6));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(dout), tern_arg_buf(saved), tern_arg_buf(D),
                       tern_arg_buf(dqkv), tern_arg_i32(B), tern_arg_i32(T), tern_arg_i32(NH),
                       tern_arg_f32(1.0f / sqrtf((float)hs)), ds_on ? tern_arg_buf(ds) : tern_arg_i32(0)};
    size_t count = ds_on ? 10 : 9;
    TERN_TRY(flash_launch(d, kv, GK_FLASH_BACKWARD_KV, ds_on, B, T, NH, args, count));
    return flash_launch(d, q, GK_FLASH_BACKWARD_Q, ds_on, B, T, NH, args, count);
}
