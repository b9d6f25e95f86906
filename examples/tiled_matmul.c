/* C = A B with 16x16 tiles staged in threadgroup memory: each threadgroup computes one
 * tile of C; for each step along K its threads load one tile of A and one of B, wait at a
 * barrier, multiply the tiles (the inner loop is a C loop, so it unrolls), and wait again
 * before the tiles are overwritten. Sizes need not be multiples of the tile. */
#include <math.h>
#include <stdlib.h>

#include "example_util.h"

#define TILE 16

static void tiled_matmul(tern_kb *kb, void *user) {
    (void)user;
    tern_v a = tern_param_buf(kb, "a", TERN_T_F32, TERN_READ);
    tern_v b = tern_param_buf(kb, "b", TERN_T_F32, TERN_READ);
    tern_v c = tern_param_buf(kb, "c", TERN_T_F32, TERN_WRITE);
    tern_v M = tern_param_scalar(kb, "M", TERN_T_I32);
    tern_v N = tern_param_scalar(kb, "N", TERN_T_I32);
    tern_v K = tern_param_scalar(kb, "K", TERN_T_I32);
    tern_v ta = tern_shared(kb, "ta", TERN_T_F32, TILE * TILE);
    tern_v tb = tern_shared(kb, "tb", TERN_T_F32, TILE * TILE);
    tern_v tx = tern_local_id(kb, 0), ty = tern_local_id(kb, 1);
    tern_v row = tern_name(tern_global_id(kb, 1), "row"), col = tern_name(tern_global_id(kb, 0), "col");
    tern_v slot = tern_name(tern_add(tern_mul(ty, tern_int(TILE)), tx), "slot");
    tern_v acc = tern_var(kb, "acc", tern_f32(0.0f));
    TERN_FOR(kb, k0, tern_int(0), K, tern_int(TILE)) {
        tern_v ak = tern_add(k0, tx), bk = tern_add(k0, ty);
        TERN_IF(kb, tern_land(tern_lt(row, M), tern_lt(ak, K))) { tern_store(ta, slot, tern_load(a, tern_add(tern_mul(row, K), ak))); }
        TERN_ELSE(kb) { tern_store(ta, slot, tern_f32(0.0f)); }
        TERN_IF(kb, tern_land(tern_lt(bk, K), tern_lt(col, N))) { tern_store(tb, slot, tern_load(b, tern_add(tern_mul(bk, N), col))); }
        TERN_ELSE(kb) { tern_store(tb, slot, tern_f32(0.0f)); }
        tern_barrier(kb);
        for (int k = 0; k < TILE; k++)
            tern_assign(acc, tern_fma(tern_load(ta, tern_add(tern_mul(ty, tern_int(TILE)), tern_int(k))),
                                      tern_load(tb, tern_add(tern_int(k * TILE), tx)), acc));
        tern_barrier(kb);
    }
    TERN_IF(kb, tern_land(tern_lt(row, M), tern_lt(col, N))) { tern_store(c, tern_add(tern_mul(row, N), col), acc); }
}

int main(void) {
    const int M = 200, N = 150, K = 300;
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
    if (!a || !b || !c) return 1;
    uint64_t seed = 3;
    for (int i = 0; i < M * K; i++) a[i] = example_uniform(&seed, -1, 1);
    for (int i = 0; i < K * N; i++) b[i] = example_uniform(&seed, -1, 1);
    for (int i = 0; i < M * N; i++) c[i] = NAN;
    tern_rt *rt = NULL;
    tern_kernel *k = NULL;
    tern_error *err = tern_rt_open(NULL, &rt);
    if (!err) err = tern_kernel_build("tiled_matmul", tiled_matmul, NULL, &k);
    if (!err) {
        tern_arg args[] = {tern_arg_host_in(TERN_T_F32, a, (size_t)M * K), tern_arg_host_in(TERN_T_F32, b, (size_t)K * N),
                           tern_arg_host(TERN_T_F32, c, (size_t)M * N), tern_arg_i32(M), tern_arg_i32(N), tern_arg_i32(K)};
        err = tern_launch(rt, k, tern_dims2((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), tern_dims2(TILE, TILE), args, 6);
    }
    int status = 0;
    if (err) {
        status = example_fail("tiled_matmul", err);
    } else {
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double want = 0, scale = 0;
                for (int kk = 0; kk < K; kk++) {
                    want += (double)a[i * K + kk] * b[kk * N + j];
                    scale += fabs((double)a[i * K + kk] * b[kk * N + j]);
                }
                double got = c[i * N + j], e = isnan(got) ? INFINITY : fabs(got - want) / scale;
                if (e > worst) worst = e;
            }
        /* a 300-term f32 dot product: error within a few 300 * 6e-8 of the sum of |terms| */
        printf("%s: tiled_matmul %dx%dx%d: worst error %.2g (relative to the sum of |terms|)\n",
               tern_rt_name(rt), M, N, K, worst);
        status = worst > 1e-5;
    }
    tern_kernel_free(k);
    tern_rt_close(rt);
    free(a), free(b), free(c);
    return status;
}
