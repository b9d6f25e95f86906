/* out = A + B over 1024x1024 floats, one thread per element, launched as a grid of
 * threadgroups of 128 threads, on the runtime TERN_GPU names; checked against plain C. */
#include <math.h>
#include <stdlib.h>

#include "example_util.h"

static void matrix_add(tern_kb *kb, void *user) {
    (void)user;
    tern_v a = tern_param_buf(kb, "a", TERN_T_F32, TERN_READ);
    tern_v b = tern_param_buf(kb, "b", TERN_T_F32, TERN_READ);
    tern_v out = tern_param_buf(kb, "out", TERN_T_F32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(i, n)) {
        tern_store(out, i, tern_add(tern_load(a, i), tern_load(b, i)));
    }
}

int main(void) {
    const int rows = 1024, cols = 1024, n = rows * cols, group = 128;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
    if (!a || !b || !out) return 1;
    uint64_t seed = 42;
    for (int i = 0; i < n; i++) {
        a[i] = example_uniform(&seed, -1, 1);
        b[i] = example_uniform(&seed, -1, 1);
        out[i] = NAN; /* poisoned: an element the kernel misses fails the check */
    }
    tern_rt *rt = NULL;
    tern_kernel *k = NULL;
    tern_error *err = tern_rt_open(NULL, &rt);
    if (!err) err = tern_kernel_build("matrix_add", matrix_add, NULL, &k);
    if (!err) {
        tern_arg args[] = {tern_arg_host_in(TERN_T_F32, a, n), tern_arg_host_in(TERN_T_F32, b, n),
                           tern_arg_host(TERN_T_F32, out, n), tern_arg_i32(n)};
        err = tern_launch(rt, k, tern_dims1((n + group - 1) / group), tern_dims1(group), args, 4);
    }
    int status = 0;
    if (err) {
        status = example_fail("matrix_add", err);
    } else {
        int bad = 0;
        for (int i = 0; i < n; i++) bad += out[i] != a[i] + b[i]; /* IEEE addition: exact */
        printf("%s: matrix_add of %dx%d: %d mismatches\n", tern_rt_name(rt), rows, cols, bad);
        status = bad != 0;
    }
    tern_kernel_free(k);
    tern_rt_close(rt);
    free(a), free(b), free(out);
    return status;
}
