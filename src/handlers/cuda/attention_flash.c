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

/* Compile options per kernel. The defaults were measured on the H200 (bench/h200/NOTES.md,
 * run 22); TERN_CUDA_FLASH_GROUPS=f,kv,q (threadgroups per SM the compiler budgets registers
 * for, 0 for no hint) and TERN_CUDA_FLASH_KV_HALVES=0|1 override them for measurements. */
static cuda_flash_opts flash_opts(cuda_flash_kernel which) {
    int groups[3] = {CUDA_FLASH_GROUPS_FORWARD, CUDA_FLASH_GROUPS_KV, CUDA_FLASH_GROUPS_Q};
    const char *env = getenv("TERN_CUDA_FLASH_GROUPS");
    int f, kv, q;
    if (env && sscanf(env, "%d,%d,%d", &f, &kv, &q) == 3 && f >= 0 && f <= 32 && kv >= 0 && kv <= 32 && q >= 0 &&
        q <= 32)
        groups[0] = f, groups[1] = kv, groups[2] = q;
    const char *halves = getenv("TERN_CUDA_FLASH_KV_HALVES");
    cuda_flash_opts o = {.kv_halves = halves ? !strcmp(halves, "1") : CUDA_FLASH_KV_HALVES};
    if (which == CUDA_FLASH_FORWARD) o.min_groups = groups[0];
    if (which == CUDA_FLASH_BACKWARD_KV) o.min_groups = groups[1];
    if (which == CUDA_FLASH_BACKWARD_Q) o.min_groups = groups[2];
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

static tern_dims flash_grid(int B, int T, int NH) {
    return tern_dims2((uint32_t)((T + CUDA_FLASH_TILE - 1) / CUDA_FLASH_TILE), (uint32_t)(B * NH));
}

tern_error *cuda_attention_flash(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                 int NH) {
    int hs = C / NH;
    const tern_kernel *k;
    TERN_TRY(flash_kernel(d, CUDA_FLASH_FORWARD, hs, &k));
    tern_arg args[] = {tern_arg_buf(qkv), tern_arg_buf(out), tern_arg_buf(saved), tern_arg_i32(B),
                       tern_arg_i32(T), tern_arg_i32(NH), tern_arg_f32(1.0f / sqrtf((float)hs))};
    return tern_launch(d->rt, k, flash_grid(B, T, NH), tern_dims1(CUDA_FLASH_THREADS), args, 7);
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
    TERN_TRY(tern_launch(d->rt, kv, flash_grid(B, T, NH), tern_dims1(CUDA_FLASH_THREADS), args, 9));
    return tern_launch(d->rt, q, flash_grid(B, T, NH), tern_dims1(CUDA_FLASH_THREADS), args, 9);
}
