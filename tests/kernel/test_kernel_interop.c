/* Runtimes over a caller's context, as the GPU handlers use them: tern_rt_wrap_opencl over
 * a cl_context / device / queue made here, tern_rt_wrap_cuda over a CUcontext and a
 * CUstream made here. Kernels take the caller's buffers (with element offsets), the
 * caller's objects stay usable after the runtime is closed, and the caller reads the
 * results with its own API. A runtime whose driver is missing is skipped with a note. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/kernel.h"

#ifdef TERN_HAVE_OPENCL
#include <CL/cl.h>
#endif
#ifdef TERN_HAVE_CUDA
#include "dsl/cuda_api.h"
#endif

/* y[i] = 3 x[i] + 1 over n elements */
static void affine(tern_kb *kb, void *u) {
    (void)u;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ);
    tern_v y = tern_param_buf(kb, "y", TERN_T_F32, TERN_WRITE);
    tern_v n = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v i = tern_global_id(kb, 0);
    TERN_IF(kb, tern_lt(i, n)) { tern_store(y, i, tern_fma(tern_load(x, i), tern_f32(3), tern_f32(1))); }
}

enum { N = 1000, OFF = 7 };

#if defined(TERN_HAVE_OPENCL) || defined(TERN_HAVE_CUDA)
static void fill(float *x) {
    for (int i = 0; i < N + OFF; i++) x[i] = (float)i * 0.5f - 100;
}

static int count_bad(const float *x, const float *y) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += y[i] != x[OFF + i] * 3 + 1; /* fma and mul-add agree: 0.5 steps are exact */
    return bad;
}
#endif

#ifdef TERN_HAVE_OPENCL
static void test_opencl(const tern_kernel *k) {
    cl_platform_id plat;
    cl_device_id dev;
    if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
        clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
        printf("note: no OpenCL device, interop skipped\n");
        return;
    }
    cl_int code;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &code);
    cl_command_queue q = ctx ? clCreateCommandQueue(ctx, dev, 0, &code) : NULL;
    CHECK(ctx && q);
    if (!ctx || !q) return;
    float x[N + OFF], y[N];
    fill(x);
    cl_mem bx = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &code);
    cl_mem by = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof y, NULL, &code);
    tern_rt *rt = NULL;
    CHECK_OK(tern_rt_wrap_opencl(ctx, dev, q, &rt));
    if (rt) {
        CHECK(!strcmp(tern_rt_name(rt), "opencl"));
        tern_dbuf vx = {bx, OFF, N, TERN_T_F32}, vy = {by, 0, N, TERN_T_F32};
        tern_arg args[] = {tern_arg_dev(vx), tern_arg_dev(vy), tern_arg_i32(N)};
        CHECK_OK(tern_launch(rt, k, tern_dims1((N + 127) / 128), tern_dims1(128), args, 3));
        CHECK_OK(tern_rt_sync(rt));
        tern_rt_close(rt);
    }
    /* the queue and buffers are still ours */
    memset(y, 0, sizeof y);
    CHECK(clEnqueueReadBuffer(q, by, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL) == CL_SUCCESS);
    CHECKF(count_bad(x, y) == 0, "opencl interop: %d mismatches", count_bad(x, y));
    clReleaseMemObject(bx);
    clReleaseMemObject(by);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
}
#endif

#ifdef TERN_HAVE_CUDA
static void test_cuda(const tern_kernel *k) {
    const tern_cuda_api *cu = NULL;
    tern_error *err = tern_cuda_api_get(&cu);
    if (err) {
        printf("note: %s: cuda interop skipped\n", tern_error_message(err));
        tern_error_free(err);
        return;
    }
    int count = 0;
    if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        printf("note: no CUDA device: cuda interop skipped\n");
        return;
    }
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CHECK(cu->cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    CHECK(cu->cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cu->cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHECK(cu->cuStreamCreate(&stream, 0) == CUDA_SUCCESS);
    float x[N + OFF], y[N];
    fill(x);
    CUdeviceptr dx = 0, dy = 0;
    CHECK(cu->cuMemAlloc(&dx, sizeof x) == CUDA_SUCCESS && cu->cuMemAlloc(&dy, sizeof y) == CUDA_SUCCESS);
    CHECK(cu->cuMemcpyHtoD(dx, x, sizeof x) == CUDA_SUCCESS);
    tern_rt *rt = NULL;
    CHECK_OK(tern_rt_wrap_cuda(ctx, stream, &rt));
    if (rt) {
        tern_dbuf vx = {(void *)(uintptr_t)dx, OFF, N, TERN_T_F32}, vy = {(void *)(uintptr_t)dy, 0, N, TERN_T_F32};
        tern_arg args[] = {tern_arg_dev(vx), tern_arg_dev(vy), tern_arg_i32(N)};
        CHECK_OK(tern_launch(rt, k, tern_dims1((N + 127) / 128), tern_dims1(128), args, 3));
        CHECK_OK(tern_rt_set_stream(rt, stream));
        CHECK_OK(tern_rt_sync(rt));
        tern_rt_close(rt);
    }
    /* the context is still current and ours */
    CUcontext current = NULL;
    CHECK(cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx);
    memset(y, 0, sizeof y);
    CHECK(cu->cuMemcpyDtoH(y, dy, sizeof y) == CUDA_SUCCESS);
    CHECKF(count_bad(x, y) == 0, "cuda interop: %d mismatches", count_bad(x, y));
    cu->cuMemFree(dx);
    cu->cuMemFree(dy);
    cu->cuStreamDestroy(stream);
    cu->cuDevicePrimaryCtxRelease(dev);
    printf("cuda interop ran\n");
}
#endif

int main(void) {
    tern_kernel *k = NULL;
    CHECK_OK(tern_kernel_build("affine", affine, NULL, &k));
    if (k) {
#ifdef TERN_HAVE_OPENCL
        test_opencl(k);
#endif
#ifdef TERN_HAVE_CUDA
        test_cuda(k);
#endif
    }
    tern_kernel_free(k);
    CHECK_ERR(tern_rt_wrap_opencl(NULL, NULL, NULL, &(tern_rt *){NULL}), "must be given");
    CHECK_ERR(tern_rt_wrap_cuda(NULL, NULL, &(tern_rt *){NULL}), "must be given");
    return check_summary("test_kernel_interop");
}
