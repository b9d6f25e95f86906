/* Attention through the flash kernels on the tensor cores (flash_kernels.c, bf16 only):
 * the kernels built once per head size, then one launch forward and three backward (D =
 * rowsum(dO O), then dK and dV per key tile, then dQ per query tile). attention.c picks this
 * path (the default for bf16) and checks the arguments first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_handler.h"
#include "flash_kernels.h"

#define CUDA_FLASH_GROUPS_FORWARD 4
#define CUDA_FLASH_GROUPS_KV 2
#define CUDA_FLASH_GROUPS_Q 4
#define CUDA_FLASH_KV_HALVES true
/* The variants, off until measured on the H200. ptxas (CUDA 13.0, sm_90, hs 64) registers
 * per thread and spill bytes of BACKWARD_KV with K and V in shared memory (today's kernel:
 * 243 / 244 registers, or 168 with 132 / 48 bytes spilled under groups 3):
 *   groups 0: 166, no spills (halves: 183)   groups 2: 205 (halves: 206)
 *   groups 3: 168 with 16 bytes spilled (halves: 12), 4 / 2 reloads per query tile
 * so with kv_shared the kernel defaults to no hint and whole tiles: 166 registers, three
 * groups of 128 threads per SM without spills. FORWARD and BACKWARD_Q with 128 query rows
 * (groups of 256 threads): 138 and 173 registers without a hint; under groups 4 (two of
 * theirs) 128, spilling 24 and 60 bytes, all outside the loop over key tiles (today's
 * kernels: 128 with 4 bytes). */
#define CUDA_FLASH_DS_SAVED true
#define CUDA_FLASH_DS_MAX_BYTES ((size_t)1 << 30)
#define CUDA_FLASH_KV_SHARED false
#define CUDA_FLASH_Q_ROWS128 false
/* Tiles staged one ahead by asynchronous copies (forward, dK dV, dQ), measured on the H200
 * (bench/h200/NOTES.md, run 40, ncu): forward 1.89 -> 1.60 ms a step, dQ 1.37 -> 1.28, but
 * dK dV 3.55 -> 3.64 (its K, V, dK and dV fragments already fill the registers) */
static const bool CUDA_FLASH_PIPELINED[3] = {true, false, true};
#define CUDA_FLASH_GROUPS_KV_SHARED 0
/* The dQ pass's pipeline depth (cuda_flash_opts.stages). On the H200 (bench/h200/NOTES.md,
 * run 54) the pass reading the stored dS^T is bound by L2 (82% busy, 62% hits: every query
 * block reads each key tile again) and waits on its loads: three tiles in flight rather than
 * one took it from 104.7 to 99.5 us a layer, the step 29.80 / 29.77 -> 29.69 / 29.62 ms. */
#define CUDA_FLASH_Q_STAGES 4
/* The dQ pass from the stored dS^T with 128 query rows a group (cuda_flash_opts.q_rows128) */
#define CUDA_FLASH_Q_SAVED_ROWS128 false
#define CUDA_FLASH_KV_HALVES_SHARED false

/* An on/off switch from the environment ("1" on, anything else off), or the default. */
static bool env_flag(const char *name, bool dflt) {
    const char *v = getenv(name);
    return v ? !strcmp(v, "1") : dflt;
}

/* Compile options per kernel. The defaults were measured on the H200 (bench/h200/NOTES.md,
 * run 22); TERN_CUDA_FLASH_GROUPS=f,kv,q (threadgroups of CUDA_FLASH_THREADS per SM the
 * compiler budgets registers for, 0 for no hint), TERN_CUDA_FLASH_KV_HALVES=0|1 and the
 * variants TERN_CUDA_FLASH_KV_SHARED=0|1, TERN_CUDA_FLASH_Q_ROWS128=0|1 and
 * TERN_CUDA_FLASH_PIPELINED=0|1|f,kv,q override them
 * for measurements. With kv_shared the dK, dV kernel's own defaults apply (above) unless
 * the groups or halves are given. */
static cuda_flash_opts flash_opts(cuda_flash_kernel which) {
    bool kv_shared = env_flag("TERN_CUDA_FLASH_KV_SHARED", CUDA_FLASH_KV_SHARED);
    int groups[3] = {CUDA_FLASH_GROUPS_FORWARD, kv_shared ? CUDA_FLASH_GROUPS_KV_SHARED : CUDA_FLASH_GROUPS_KV,
                     CUDA_FLASH_GROUPS_Q};
    const char *env = getenv("TERN_CUDA_FLASH_GROUPS");
    int f, kv, q;
    if (env && sscanf(env, "%d,%d,%d", &f, &kv, &q) == 3 && f >= 0 && f <= 32 && kv >= 0 && kv <= 32 && q >= 0 &&
        q <= 32)
        groups[0] = f, groups[1] = kv, groups[2] = q;
    cuda_flash_opts o = {
        .kv_halves = env_flag("TERN_CUDA_FLASH_KV_HALVES", kv_shared ? CUDA_FLASH_KV_HALVES_SHARED : CUDA_FLASH_KV_HALVES)};
    bool rows128 = env_flag("TERN_CUDA_FLASH_Q_ROWS128", CUDA_FLASH_Q_ROWS128);
    /* TERN_CUDA_FLASH_PIPELINED: "0" or "1" for all three kernels, or "f,kv,q" */
    bool pipelined[3] = {CUDA_FLASH_PIPELINED[0], CUDA_FLASH_PIPELINED[1], CUDA_FLASH_PIPELINED[2]};
    const char *pe = getenv("TERN_CUDA_FLASH_PIPELINED");
    int pf, pkv, pq;
    if (pe && sscanf(pe, "%d,%d,%d", &pf, &pkv, &pq) == 3)
        pipelined[0] = pf == 1, pipelined[1] = pkv == 1, pipelined[2] = pq == 1;
    else if (pe)
        pipelined[0] = pipelined[1] = pipelined[2] = !strcmp(pe, "1");
    if (which == CUDA_FLASH_FORWARD) o.min_groups = groups[0], o.q_rows128 = rows128, o.pipelined = pipelined[0];
    if (which == CUDA_FLASH_BACKWARD_KV) o.min_groups = groups[1], o.kv_shared = kv_shared, o.pipelined = pipelined[1];
    if (which == CUDA_FLASH_BACKWARD_Q) o.min_groups = groups[2], o.q_rows128 = rows128, o.pipelined = pipelined[2];
    /* TERN_CUDA_FLASH_Q_STAGES: the dQ pass's pipeline depth (2 to CUDA_FLASH_MAX_STAGES) */
    const char *qs = getenv("TERN_CUDA_FLASH_Q_STAGES");
    int stages = qs ? atoi(qs) : CUDA_FLASH_Q_STAGES;
    if (which == CUDA_FLASH_BACKWARD_Q && stages >= 2 && stages <= CUDA_FLASH_MAX_STAGES) o.stages = stages;
    return o;
}

/* The options of a backward kernel that hands dS^T over (ds_saved); the dQ pass takes 64 or
 * (TERN_CUDA_FLASH_Q_SAVED_ROWS128=1) 128 query rows a group. */
static cuda_flash_opts saved_opts(cuda_flash_kernel which) {
    cuda_flash_opts o = flash_opts(which);
    o.ds_saved = true;
    o.q_rows128 = which == CUDA_FLASH_BACKWARD_Q && env_flag("TERN_CUDA_FLASH_Q_SAVED_ROWS128", CUDA_FLASH_Q_SAVED_ROWS128);
    return o;
}

/* d->flash's slot of a kernel: by kind, the ds_saved pair after them. */
static int flash_slot(cuda_flash_kernel which, bool saved) {
    return saved ? 4 + (which == CUDA_FLASH_BACKWARD_Q) : (int)which;
}

static tern_error *flash_kernel(tern_dev *d, cuda_flash_kernel which, bool saved, int hs, const tern_kernel **out) {
    if (d->flash_hs != hs) {
        for (int i = 0; i < 6; i++) {
            tern_kernel_free(d->flash[i]);
            d->flash[i] = NULL;
        }
        d->flash_hs = hs;
    }
    int slot = flash_slot(which, saved);
    if (!d->flash[slot]) {
        /* the environment is read here, once per kernel, not at every launch */
        d->flash_opts[slot] = saved ? saved_opts(which) : flash_opts(which);
        TERN_TRY(cuda_flash_kernel_build(which, hs, &d->flash_opts[slot], &d->flash[slot]));
    }
    *out = d->flash[slot];
    return NULL;
}

/* Launches tiled kernel `which` over B sequences of T positions and NH heads: the rows per
 * group and the group's threads follow the options it was built with (q_rows128). */
static tern_error *flash_launch(tern_dev *d, const tern_kernel *k, cuda_flash_kernel which, bool saved, int B, int T,
                                int NH, const tern_arg *args, size_t count) {
    const cuda_flash_opts *o = &d->flash_opts[flash_slot(which, saved)];
    int rows = cuda_flash_rows(which, o);
    tern_dims grid = tern_dims2((uint32_t)((T + rows - 1) / rows), (uint32_t)(B * NH));
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    return tern_launch(d->rt, k, grid, tern_dims1((uint32_t)cuda_flash_threads(which, o)), args, count);
}

tern_error *cuda_attention_flash(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                 int NH) {
    int hs = C / NH;
    const tern_kernel *k;
    TERN_TRY(flash_kernel(d, CUDA_FLASH_FORWARD, false, hs, &k));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(out), tern_arg_buf(saved), tern_arg_i32(B),
                       tern_arg_i32(T), tern_arg_i32(NH), tern_arg_f32(1.0f / sqrtf((float)hs))};
    return flash_launch(d, k, CUDA_FLASH_FORWARD, false, B, T, NH, args, 7);
}

/* Whether the backward pass hands dS^T from the dK, dV kernel to the dQ kernel (ds_saved:
 * one product per tile in the dQ pass instead of three, for a [B NH, T, T] bf16 buffer
 * written and read once). On the H200 (GPT-2 124M, B=16, T=1024; bench/h200/NOTES.md, runs
 * 27-28) the dQ pass went from 2.28 to 1.37 ms a step and the dK, dV pass, which stores
 * dS^T through shared memory in 16-byte rows, from 3.04 to 3.57 (4.07 with scattered
 * four-byte stores): flash attention 7.6 -> 7.1 ms, the step 31.99-32.35 -> 31.69-31.87 in
 * the same run. The default: TERN_CUDA_FLASH_DS_SAVED=0|1, T a
 * multiple of 8 (16-byte rows), the buffer at most CUDA_FLASH_DS_MAX_BYTES; *ds then views
 * the device's buffer, grown as needed (which moves the graphs' scratch: the epoch). */
static tern_error *ds_buffer(tern_dev *d, int B, int T, int NH, tern_buf *ds, bool *saved) {
    size_t len = (size_t)B * NH * (size_t)T * T + CUDA_FLASH_TILE;
    *saved = env_flag("TERN_CUDA_FLASH_DS_SAVED", CUDA_FLASH_DS_SAVED) && T % 8 == 0 &&
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
                                          tern_buf saved, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t rows = (size_t)B * T * NH;
    tern_buf D;
    TERN_TRY(gpu_scratch_buf(&d->core, rows, &D)); /* f32 [B, NH, T] */
    tern_buf ds = tern_none();
    bool ds_on = false;
    TERN_TRY(ds_buffer(d, B, T, NH, &ds, &ds_on));
    const tern_kernel *delta, *kv, *q;
    TERN_TRY(flash_kernel(d, CUDA_FLASH_DELTA, false, hs, &delta));
    TERN_TRY(flash_kernel(d, CUDA_FLASH_BACKWARD_KV, ds_on, hs, &kv));
    TERN_TRY(flash_kernel(d, CUDA_FLASH_BACKWARD_Q, ds_on, hs, &q));
    tern_arg da[] = {tern_arg_buf(out), tern_arg_buf(dout), tern_arg_buf(D), tern_arg_i32(B), tern_arg_i32(T),
                     tern_arg_i32(NH)};
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    TERN_TRY(tern_launch(d->rt, delta, tern_dims1(cuda_flash_delta_groups(B, T, NH, hs)), tern_dims1(CUDA_FLASH_THREADS),
                         da, 6));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(dout), tern_arg_buf(saved), tern_arg_buf(D),
                       tern_arg_buf(dqkv), tern_arg_i32(B), tern_arg_i32(T), tern_arg_i32(NH),
                       tern_arg_f32(1.0f / sqrtf((float)hs)), ds_on ? tern_arg_buf(ds) : tern_arg_i32(0)};
    size_t count = ds_on ? 10 : 9;
    TERN_TRY(flash_launch(d, kv, CUDA_FLASH_BACKWARD_KV, ds_on, B, T, NH, args, count));
    return flash_launch(d, q, CUDA_FLASH_BACKWARD_Q, ds_on, B, T, NH, args, count);
}
