/* Matrix products on an OpenCL device: CLBlast's SGEMM against tern's DSL matmul (the GPU
 * core's gpu_matmul), f32, GPT-2 shaped. Prints milliseconds per product and GFLOP/s.
 *
 *   bench_opencl_matmul [M N K [reps]]     (default: the GPT-2 124M shapes at 256 rows) */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpu_core/gpu_core.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(tern_error *err) {
    fprintf(stderr, "error: %s\n", tern_error_message(err));
    tern_error_free(err);
    return 1;
}

int main(int argc, char **argv) {
    int shapes[4][3] = {{256, 2304, 768}, {256, 768, 768}, {256, 3072, 768}, {256, 768, 3072}};
    int nshapes = 4, reps = 3;
    if (argc >= 4) {
        shapes[0][0] = atoi(argv[1]), shapes[0][1] = atoi(argv[2]), shapes[0][2] = atoi(argv[3]);
        nshapes = 1;
        if (argc >= 5) reps = atoi(argv[4]);
    }
    cl_platform_id plat;
    cl_device_id dev;
    cl_int code = clGetPlatformIDs(1, &plat, NULL);
    if (code == CL_SUCCESS) code = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
    if (code != CL_SUCCESS) {
        fprintf(stderr, "error: no OpenCL device (%d)\n", code);
        return 1;
    }
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &code);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &code);
    tern_rt *rt;
    tern_error *err = tern_rt_wrap_opencl(ctx, dev, q, &rt);
    if (err) return fail(err);
    gpu_core g;
    if ((err = gpu_core_init(&g, rt, NULL, NULL, NULL))) return fail(err);
    printf("device: %s\n", tern_rt_device(rt));
    for (int s = 0; s < nshapes; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
        float *host = malloc((na > nb ? na : nb) * sizeof *host);
        for (size_t i = 0; i < (na > nb ? na : nb); i++) host[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        tern_buf a, b, c;
        if ((err = gpu_alloc(gpu_dev(&g), TERN_F32, na, &a)) || (err = gpu_alloc(gpu_dev(&g), TERN_F32, nb, &b)) ||
            (err = gpu_alloc(gpu_dev(&g), TERN_F32, nc, &c)) || (err = gpu_upload(gpu_dev(&g), a, host)) ||
            (err = gpu_upload(gpu_dev(&g), b, host)))
            return fail(err);
        double flops = 2.0 * m * n * k;
        /* CLBlast: row-major C[m, n] = A[m, k] B[k, n] */
        double best_blast = 1e30;
        for (int r = 0; r <= reps; r++) {
            double t0 = now();
            CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo,
                                                (size_t)m, (size_t)n, (size_t)k, 1.0f, (cl_mem)a.mem, 0, (size_t)k,
                                                (cl_mem)b.mem, 0, (size_t)n, 0.0f, (cl_mem)c.mem, 0, (size_t)n, &q, NULL);
            clFinish(q);
            double t = now() - t0;
            if (st != CLBlastSuccess) {
                fprintf(stderr, "error: CLBlastSgemm: %d\n", (int)st);
                return 1;
            }
            if (r > 0 && t < best_blast) best_blast = t; /* the first run tunes/compiles */
        }
        double best_dsl = 1e30;
        tern_matmul mm = {.m = m, .n = n, .k = k, .alpha = 1, .beta = 0};
        for (int r = 0; r <= reps; r++) {
            double t0 = now();
            if ((err = gpu_matmul_dsl(gpu_dev(&g), c, a, b, &mm)) || (err = gpu_sync(gpu_dev(&g)))) return fail(err);
            double t = now() - t0;
            if (r > 0 && t < best_dsl) best_dsl = t;
        }
        printf("m %5d n %5d k %5d   clblast %8.2f ms %7.1f GFLOP/s   dsl %8.2f ms %7.1f GFLOP/s\n", m, n, k,
               best_blast * 1e3, flops / best_blast * 1e-9, best_dsl * 1e3, flops / best_dsl * 1e-9);
        if ((err = gpu_free(gpu_dev(&g), &a)) || (err = gpu_free(gpu_dev(&g), &b)) || (err = gpu_free(gpu_dev(&g), &c))) return fail(err);
        free(host);
    }
    gpu_core_free(&g);
    tern_rt_close(rt);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
