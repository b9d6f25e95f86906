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
#define CUDA_FLASH_KV_SHARED false
#define CUDA_FLASH_Q_ROWS128 false
#define CUDA_FLASH_GROUPS_KV_SHARED 0
#define CUDA_FLASH_KV_HALVES_SHARED false

/* An on/off switch from the environment ("1" on, anything else off), or the default. */
static bool env_flag(const char *name, bool dflt) {
    const char *v = getenv(name);
    return v ? !strcmp(v, "1") : dflt;
}

/* Compile options per kernel. The defaults were measured on the H200 (bench/h200/NOTES.md,
 * run 22); TERN_CUDA_FLASH_GROUPS=f,kv,q (threadgroups of CUDA_FLASH_THREADS per SM the
 * compiler budgets registers for, 0 for no hint), TERN_CUDA_FLASH_KV_HALVES=0|1 and the
 * variants TERN_CUDA_FLASH_KV_SHARED=0|1 and TERN_CUDA_FLASH_Q_ROWS128=0|1 override them
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
    if (which == CUDA_FLASH_FORWARD) o.min_groups = groups[0], o.q_rows128 = rows128;
    if (which == CUDA_FLASH_BACKWARD_KV) o.min_groups = groups[1], o.kv_shared = kv_shared;
    if (which == CUDA_FLASH_BACKWARD_Q) o.min_groups = groups[2], o.q_rows128 = rows128;
    return o;
}

static tern_error *flash_kernel(tern_dev *d, cuda_flash_kernel which, int hs, const tern_kernel **out) {
    if (d->flash_hs != hs) {
        for (int i = 0; i < 4; i++) {
            tern_kernel_free(d->flash[i]);
            d->flash[i] = NULL;
        }
        d->flash_hs = hs;
    }
    if (!d->flash[which]) {
        cuda_flash_opts o = flash_opts(which);
        TERN_TRY(cuda_flash_kernel_build(which, hs, &o, &d->flash[which]));
    }
    *out = d->flash[which];
    return NULL;
}

/* Launches tiled kernel `which` over B sequences of T positions and NH heads: the rows per
 * group and the group's threads follow its options (q_rows128). */
static tern_error *flash_launch(tern_dev *d, const tern_kernel *k, cuda_flash_kernel which, int B, int T, int NH,
                                const tern_arg *args, size_t count) {
    cuda_flash_opts o = flash_opts(which);
    int rows = cuda_flash_rows(which, &o);
    tern_dims grid = tern_dims2((uint32_t)((T + rows - 1) / rows), (uint32_t)(B * NH));
    return tern_launch(d->rt, k, grid, tern_dims1((uint32_t)cuda_flash_threads(which, &o)), args, count);
}

tern_error *cuda_attention_flash(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                 int NH) {
    int hs = C / NH;
    const tern_kernel *k;
    TERN_TRY(flash_kernel(d, CUDA_FLASH_FORWARD, hs, &k));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(out), tern_arg_buf(saved), tern_arg_i32(B),
                       tern_arg_i32(T), tern_arg_i32(NH), tern_arg_f32(1.0f / sqrtf((float)hs))};
    return flash_launch(d, k, CUDA_FLASH_FORWARD, B, T, NH, args, 7);
}

tern_error *cuda_attention_backward_flash(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                          tern_buf saved, int B, int T, int C, int NH) {
    int hs = C / NH;
    size_t rows = (size_t)B * T * NH;
    tern_buf D;
    TERN_TRY(gpu_scratch_buf(&d->core, rows, &D)); /* f32 [B, NH, T] */
    const tern_kernel *delta, *kv, *q;
    TERN_TRY(flash_kernel(d, CUDA_FLASH_DELTA, hs, &delta));
    TERN_TRY(flash_kernel(d, CUDA_FLASH_BACKWARD_KV, hs, &kv));
    TERN_TRY(flash_kernel(d, CUDA_FLASH_BACKWARD_Q, hs, &q));
    tern_arg da[] = {tern_arg_buf(out), tern_arg_buf(dout), tern_arg_buf(D), tern_arg_i32(B), tern_arg_i32(T),
                     tern_arg_i32(NH)};
    TERN_TRY(tern_launch(d->rt, delta, tern_dims1((uint32_t)((rows + 127) / 128)), tern_dims1(128), da, 6));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(dout), tern_arg_buf(saved), tern_arg_buf(D),
                       tern_arg_buf(dqkv), tern_arg_i32(B), tern_arg_i32(T), tern_arg_i32(NH),
                       tern_arg_f32(1.0f / sqrtf((float)hs))};
    TERN_TRY(flash_launch(d, kv, CUDA_FLASH_BACKWARD_KV, B, T, NH, args, 9));
    return flash_launch(d, q, CUDA_FLASH_BACKWARD_Q, B, T, NH, args, 9);
}
