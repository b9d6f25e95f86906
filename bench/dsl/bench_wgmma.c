/* The tensor-core throughput of the DSL's two products on the same work, one launch each:
 * every warpgroup multiplies A [64 x 64] (registers) by B [64 x 128] (threadgroup memory,
 * staged once) `reps` times into one accumulator, as the inner loop of a GEMM or of an
 * attention's S = Q K^T would. Variant "wgmma": tern_wgmma_bf16 from a tern_shared_tiles
 * tile; variant "mma": per SIMD group, tern_load_matrix fragments from a padded row-major
 * tile and tern_mma_bf16 (the flash kernels' way); variant "async": two products a step,
 * into two accumulators, both in flight (tern_wgmma_bf16_async) before one wait. Prints ms
 * and TFLOP/s of each, best of five timed launches after a warm-up.
 *
 *     bench_wgmma [runtime [groups [reps]]]        (default: cuda 528 256)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern/half.h"
#include "tern/kernel.h"

enum { N = 128, K = 64, THREADS = 256, PAD = K + 8 /* mma tile row: 144 bytes, no bank conflicts */ };

typedef enum mode { MMA, WGMMA, WGMMA_ASYNC } mode;

typedef struct variant {
    mode how;
    int reps;
} variant;

/* One step of the synchronous variants: acc += A B. */
static void step_sync(tern_kb *kb, const variant *v, tern_v tile, tern_v lane, tern_v *a, tern_v *acc) {
    tern_v c[N / 2], d[N / 2];
    for (int j = 0; j < N / 2; j++) c[j] = acc[j];
    if (v->how == WGMMA) {
        tern_wg_tile b = {tile, tern_int(0), N, false};
        tern_wgmma_bf16(kb, N, K, a, NULL, &b, c, d);
    } else {
        for (int j = 0; j < N / 2; j++) d[j] = c[j];
        for (int s = 0; s < K / 16; s++)
            for (int nb = 0; nb < N / 8; nb += 2) {
                /* matrices: n-blocks nb, nb+1 x k halves; lane l gives row l % 8 of matrix l / 8 */
                tern_v mi = tern_div(lane, tern_int(8));
                tern_v n = tern_add(tern_int(8 * nb), tern_add(tern_mul(tern_div(mi, tern_int(2)), tern_int(8)),
                                                              tern_rem(lane, tern_int(8))));
                tern_v k = tern_add(tern_int(16 * s), tern_mul(tern_rem(mi, tern_int(2)), tern_int(8)));
                tern_v bf[8];
                tern_load_matrix(tile, tern_add(tern_mul(n, tern_int(PAD)), k), false, bf);
                for (int h = 0; h < 2; h++) {
                    tern_v c4[4] = {d[4 * (nb + h)], d[4 * (nb + h) + 1], d[4 * (nb + h) + 2], d[4 * (nb + h) + 3]};
                    tern_v d4[4];
                    tern_mma_bf16(kb, &a[8 * s], &bf[4 * h], c4, d4);
                    for (int r = 0; r < 4; r++) d[4 * (nb + h) + r] = d4[r];
                }
            }
    }
    for (int j = 0; j < N / 2; j++) tern_assign(acc[j], d[j]);
}

static void k_bench(tern_kb *kb, void *user) {
    const variant *v = user;
    tern_v A = tern_param_buf(kb, "A", TERN_T_BF16, TERN_READ); /* [64][K] */
    tern_v B = tern_param_buf(kb, "B", TERN_T_BF16, TERN_READ); /* [N][K]: B^T */
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v tid = tern_local_index(kb);
    tern_v lane = tern_rem(tid, tern_int(32)), sg = tern_rem(tern_div(tid, tern_int(32)), tern_int(4));
    tern_v g = tern_div(lane, tern_int(4)), t = tern_rem(lane, tern_int(4));
    tern_v tile = v->how != MMA ? tern_shared_tiles(kb, "bt", (size_t)N * K) : tern_shared(kb, "bt", TERN_T_BF16, (size_t)N * PAD);
    /* stage B once (both warpgroups share it) */
    TERN_FOR(kb, e, tid, tern_int(N * K), tern_int(THREADS)) {
        tern_v n = tern_div(e, tern_int(K)), k = tern_rem(e, tern_int(K));
        tern_v idx = v->how != MMA ? tern_wg_tile_index(tern_int(0), N, n, k) : tern_add(tern_mul(n, tern_int(PAD)), k);
        tern_store(tile, idx, tern_load(B, e));
    }
    tern_barrier(kb);
    tern_v a[K / 2];
    for (int s = 0; s < K / 16; s++)
        for (int r = 0; r < 8; r++) {
            tern_v m = tern_add(tern_add(tern_mul(sg, tern_int(16)), g), tern_int(r & 2 ? 8 : 0));
            tern_v k = tern_add(tern_mul(t, tern_int(2)), tern_int(16 * s + (r & 4 ? 8 : 0) + (r & 1)));
            a[8 * s + r] = tern_load(A, tern_add(tern_mul(m, tern_int(K)), k));
        }
    tern_v acc[N / 2], acc2[N / 2];
    for (int j = 0; j < N / 2; j++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", j);
        acc[j] = tern_var(kb, name, tern_f32(0));
        snprintf(name, sizeof name, "acc2_%d", j);
        acc2[j] = tern_var(kb, name, tern_f32(0));
    }
    TERN_FOR(kb, rep, tern_int(0), tern_int(v->reps), tern_int(1)) {
        (void)rep;
        if (v->how == WGMMA_ASYNC) {
            tern_wg_tile b = {tile, tern_int(0), N, false};
            tern_wgmma_bf16_async(kb, N, K, a, NULL, &b, acc);
            tern_wgmma_bf16_async(kb, N, K, a, NULL, &b, acc2);
            tern_wgmma_wait(kb, 0);
        } else {
            step_sync(kb, v, tile, lane, a, acc);
        }
    }
    tern_v sum = tern_f32(0);
    for (int j = 0; j < N / 2; j++) sum = tern_add(sum, tern_add(acc[j], acc2[j]));
    tern_store(out, tern_global_id(kb, 0), sum);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run(tern_rt *rt, const char *name, mode how, int groups, int reps, float *first) {
    variant v = {how, reps};
    tern_kernel *k = NULL;
    tern_dbuf A = {0}, B = {0}, out = {0};
    static const char *const names[] = {"bench_mma", "bench_wgmma", "bench_wgmma_async"};
    tern_error *err = tern_kernel_build(names[how], k_bench, &v, &k);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, 64 * K, &A);
    if (!err) err = tern_rt_alloc(rt, TERN_T_BF16, (size_t)N * K, &B);
    if (!err) err = tern_rt_alloc(rt, TERN_T_F32, (size_t)groups * THREADS, &out);
    uint16_t *host = malloc(sizeof(uint16_t) * N * K);
    float *res = malloc(sizeof(float) * (size_t)groups * THREADS);
    if (!err && (!host || !res)) err = tern_errorf("out of memory");
    if (!err) {
        for (int i = 0; i < N * K; i++) host[i] = tern_f32_to_bf16((float)(i % 5 - 2) / 64.0f);
        err = tern_rt_upload(rt, A, host);
        if (!err) err = tern_rt_upload(rt, B, host);
    }
    tern_arg args[] = {tern_arg_dev(A), tern_arg_dev(B), tern_arg_dev(out)};
    double best = 1e30;
    for (int i = 0; i < 6 && !err; i++) {
        double t0 = now();
        err = tern_launch(rt, k, tern_dims1((uint32_t)groups), tern_dims1(THREADS), args, 3);
        if (!err) err = tern_rt_sync(rt);
        double dt = now() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    if (!err) err = tern_rt_download(rt, res, out);
    if (!err) {
        double flops = 2.0 * 64 * N * K * (double)reps * groups * (THREADS / 128) * (how == WGMMA_ASYNC ? 2 : 1);
        printf("%-6s groups %d reps %d: %.3f ms, %.1f TFLOP/s (out[0] %g)\n", name, groups, reps, best * 1e3,
               flops / best * 1e-12, res[0]);
        *first = res[0];
    }
    free(host);
    free(res);
    tern_rt_free(rt, &A);
    tern_rt_free(rt, &B);
    tern_rt_free(rt, &out);
    tern_kernel_free(k);
    if (err) {
        fprintf(stderr, "bench_wgmma %s: %s\n", name, tern_error_message(err));
        tern_error_free(err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *runtime = argc > 1 ? argv[1] : "cuda";
    int groups = argc > 2 ? atoi(argv[2]) : 528, reps = argc > 3 ? atoi(argv[3]) : 256;
    if (groups < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_wgmma [runtime [groups [reps]]]\n");
        return 2;
    }
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(runtime, &rt);
    if (err) {
        fprintf(stderr, "bench_wgmma: %s\n", tern_error_message(err));
        tern_error_free(err);
        return 1;
    }
    float a = 0, b = 0, c = 0;
    int rc = run(rt, "wgmma", WGMMA, groups, reps, &a) | run(rt, "mma", MMA, groups, reps, &b) |
             run(rt, "async", WGMMA_ASYNC, groups, reps, &c);
    if (!rc && a != b) printf("note: the sums differ (%g, %g): tensor cores add in their own order\n", a, b);
    if (!rc && c != 2 * a) printf("note: async's sum %g is not twice wgmma's %g\n", c, a);
    tern_rt_close(rt);
    return rc;
}
