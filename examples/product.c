/* The handler "try it": on the device TERN_GPU names (host, opencl or cuda), make the
 * 2x2 matrix [1, 2; 3, 4], multiply it by itself with a kernel written in the DSL, read
 * element 0 back and print "<device>: first element = 7". */
#include <stdio.h>

#include "tern/kernel.h"

/* c[row, col] = sum over k of a[row, k] * b[k, col], one thread per element of c; n, the
 * matrix size, is a C constant baked into the kernel. */
static void matmul(tern_kb *kb, void *user) {
    int n = *(const int *)user;
    tern_v a = tern_param_buf(kb, "a", TERN_T_F32, TERN_READ);
    tern_v b = tern_param_buf(kb, "b", TERN_T_F32, TERN_READ);
    tern_v c = tern_param_buf(kb, "c", TERN_T_F32, TERN_WRITE);
    tern_v col = tern_global_id(kb, 0), row = tern_global_id(kb, 1);
    TERN_IF(kb, tern_land(tern_lt(row, tern_int(n)), tern_lt(col, tern_int(n)))) {
        tern_v sum = tern_var(kb, "sum", tern_f32(0.0f));
        for (int k = 0; k < n; k++) /* a C loop: unrolled into the kernel */
            tern_assign(sum, tern_fma(tern_load(a, tern_add(tern_mul(row, tern_int(n)), tern_int(k))),
                                      tern_load(b, tern_add(tern_int(k * n), col)), sum));
        tern_store(c, tern_add(tern_mul(row, tern_int(n)), col), sum);
    }
}

int main(void) {
    const int n = 2;
    const float values[4] = {1, 2, 3, 4};
    tern_rt *rt = NULL;
    tern_kernel *k = NULL;
    tern_dbuf m = {0}, product = {0};
    tern_error *err = tern_rt_open(NULL, &rt);
    if (!err) err = tern_kernel_build("matmul", matmul, (void *)&n, &k);
    if (!err) err = tern_rt_alloc(rt, TERN_T_F32, 4, &m);
    if (!err) err = tern_rt_alloc(rt, TERN_T_F32, 4, &product);
    if (!err) err = tern_rt_upload(rt, m, values);
    if (!err) {
        tern_arg args[] = {tern_arg_dev(m), tern_arg_dev(m), tern_arg_dev(product)};
        err = tern_launch(rt, k, tern_dims2(1, 1), tern_dims2(n, n), args, 3);
    }
    if (err) {
        printf("product failed: %s\n", tern_error_message(err));
        tern_error_free(err);
        tern_rt_free(rt, &m);
        tern_rt_free(rt, &product);
        tern_kernel_free(k);
        tern_rt_close(rt);
        return 1;
    }
    float first = 0;
    tern_dbuf element0 = product;
    element0.len = 1;
    err = tern_rt_download(rt, &first, element0);
    int status = 0;
    if (err) {
        printf("read failed: %s\n", tern_error_message(err));
        tern_error_free(err);
        status = 1;
    } else {
        float want = values[0] * values[0] + values[1] * values[2]; /* plain C: 1*1 + 2*3 */
        printf("%s: first element = %g\n", tern_rt_name(rt), first);
        if (first != want) {
            printf("mismatch: want %g\n", want);
            status = 1;
        }
    }
    tern_rt_free(rt, &m);
    tern_rt_free(rt, &product);
    tern_kernel_free(k);
    tern_rt_close(rt);
    return status;
}
