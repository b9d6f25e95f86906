/* The CUDA driver API, loaded at run time.
 *
 * tern never links libcuda: CI machines have the CUDA toolkit but no driver, and every tern
 * program must still start there (and say "no CUDA driver" when asked for the GPU). The
 * driver's functions are looked up once with dlopen("libcuda.so.1") into a table; the types
 * come from the toolkit's cuda.h. Shared by the DSL's cuda runtime and the cuda handler
 * (extend the table as either needs more). */
#ifndef TERN_KERNEL_CUDA_API_H
#define TERN_KERNEL_CUDA_API_H

#include <cuda.h>

#include "tern/error.h"

/* The driver functions tern uses. cuda.h maps several names to versioned symbols
 * (cuMemAlloc is cuMemAlloc_v2, ...); the table takes each declaration's type as cuda.h
 * gives it, and the loader looks up the symbol the name expands to. */
#define TERN_CUDA_FUNCTIONS(X) \
    X(cuInit) \
    X(cuDriverGetVersion) \
    X(cuDeviceGetCount) \
    X(cuDeviceGet) \
    X(cuDeviceGetName) \
    X(cuDeviceGetAttribute) \
    X(cuDeviceTotalMem) \
    X(cuDevicePrimaryCtxRetain) \
    X(cuDevicePrimaryCtxRelease) \
    X(cuCtxSetCurrent) \
    X(cuCtxGetCurrent) \
    X(cuCtxSynchronize) \
    X(cuCtxPushCurrent) \
    X(cuCtxPopCurrent) \
    X(cuCtxGetDevice) \
    X(cuFuncGetAttribute) \
    X(cuMemAlloc) \
    X(cuMemFree) \
    X(cuMemGetInfo) \
    X(cuMemAllocHost) \
    X(cuMemFreeHost) \
    X(cuMemcpyHtoD) \
    X(cuMemcpyDtoH) \
    X(cuMemcpyHtoDAsync) \
    X(cuMemcpyDtoHAsync) \
    X(cuMemcpyDtoDAsync) \
    X(cuMemsetD8Async) \
    X(cuMemsetD16Async) \
    X(cuMemsetD32Async) \
    X(cuStreamCreate) \
    X(cuStreamDestroy) \
    X(cuStreamSynchronize) \
    X(cuStreamQuery) \
    X(cuStreamBeginCapture) \
    X(cuStreamEndCapture) \
    X(cuStreamIsCapturing) \
    X(cuGraphInstantiate) \
    X(cuGraphLaunch) \
    X(cuGraphExecDestroy) \
    X(cuGraphDestroy) \
    X(cuEventCreate) \
    X(cuEventDestroy) \
    X(cuEventRecord) \
    X(cuEventSynchronize) \
    X(cuEventElapsedTime) \
    X(cuModuleLoadData) \
    X(cuModuleUnload) \
    X(cuModuleGetFunction) \
    X(cuFuncSetAttribute) \
    X(cuLaunchKernel) \
    X(cuGetErrorName) \
    X(cuGetErrorString)

/* Functions that older drivers lack: NULL in the table when missing, and their callers fall
 * back (cuLaunchKernelEx: to cuLaunchKernel, without launch attributes) or say what is
 * missing (cuTensorMapEncodeTiled, which tile copies on sm_90 need). */
#if CUDA_VERSION >= 12000
#define TERN_CUDA_OPTIONAL_FUNCTIONS(X) \
    X(cuLaunchKernelEx) \
    X(cuTensorMapEncodeTiled)
#elif CUDA_VERSION >= 11080
#define TERN_CUDA_OPTIONAL_FUNCTIONS(X) \
    X(cuLaunchKernelEx)
#else
#define TERN_CUDA_OPTIONAL_FUNCTIONS(X)
#endif

#define TERN_CUDA_FIELD_(name) __typeof__(name) *name;
typedef struct tern_cuda_api {
    TERN_CUDA_FUNCTIONS(TERN_CUDA_FIELD_)
    TERN_CUDA_OPTIONAL_FUNCTIONS(TERN_CUDA_FIELD_)
} tern_cuda_api;
#undef TERN_CUDA_FIELD_

/* The driver's table, loaded and cuInit-ed on first use (thread-safe). Without a driver
 * (no libcuda.so.1, or cuInit failing), an error saying so. */
tern_error *tern_cuda_api_get(const tern_cuda_api **out) TERN_MUST_USE;

/* NULL for CUDA_SUCCESS, otherwise "<what>: <error name> (<description>)". */
tern_error *tern_cuda_check(const tern_cuda_api *cu, CUresult r, const char *what) TERN_MUST_USE;

#endif
