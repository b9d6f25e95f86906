/* Times cuBLASLt on GPT-2's MLP backward product (dfch [B T, 4C] = dres [B T, C] @ W^T, B T =
 * 16,384, C = 768, bf16) under the epilogues that could give the fc bias gradient in the same
 * product: none, DGELU (today's), and DGELU_BGRAD with an f32 or a bf16 bias gradient. For
 * each, the heuristic's candidates are timed and the best reported, or why it is refused.
 * A measurement for bench/h200/NOTES.md, not part of tern:
 *   nvcc -O2 -o lt_epilogues bench/h200/lt_epilogues.c -lcublasLt && ./lt_epilogues */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        int s_ = (int)(x);                                                                         \
        if (s_) {                                                                                  \
            printf("%s failed: %d\n", #x, s_);                                                     \
            return -1.0f;                                                                          \
        }                                                                                          \
    } while (0)

enum { ROWS = 3072, COLS = 16384, K = 768, CANDIDATES = 16, REPS = 20 };

/* D [ROWS, COLS] (column-major) = A [ROWS, K] B [K, COLS] with epilogue e; the best of the
 * heuristic's candidates in ms, or a negative value when refused. */
static float best_time(cublasLtHandle_t lt, cublasLtEpilogue_t e, cudaDataType_t bias_type, void *a, void *b,
                       void *d, void *aux, void *bias, void *ws, size_t ws_size) {
    cublasLtMatmulDesc_t desc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    if (e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
        int64_t ld = ROWS;
        CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
        CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    cublasLtMatrixLayout_t la, lb, ld_;
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ROWS, K, ROWS));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, COLS, K));
    CHECK(cublasLtMatrixLayoutCreate(&ld_, CUDA_R_16BF, ROWS, COLS, ROWS));
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                               sizeof ws_size));
    cublasLtMatmulHeuristicResult_t res[CANDIDATES];
    int found = 0;
    int s = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld_, ld_, pref, CANDIDATES, res, &found);
    if (s || !found) {
        printf("  refused (status %d, %d candidates)\n", s, found);
        return -1.0f;
    }
    float alpha = 1, beta = 0, best = -1;
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    for (int i = 0; i < found; i++) {
        if (cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld_, d, ld_, &res[i].algo, ws, ws_size, 0))
            continue;
        cudaEventRecord(t0, 0);
        for (int r = 0; r < REPS; r++)
            cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld_, d, ld_, &res[i].algo, ws, ws_size, 0);
        cudaEventRecord(t1, 0);
        cudaEventSynchronize(t1);
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        ms /= REPS;
        if (best < 0 || ms < best) best = ms;
    }
    printf("  %d candidates, best %.1f us (%.0f TFLOP/s)\n", found, best * 1e3,
           2.0 * ROWS * COLS * K / (best * 1e-3) / 1e12);
    return best;
}

int main(void) {
    cublasLtHandle_t lt;
    if (cublasLtCreate(&lt)) return 1;
    size_t ws_size = 32u << 20;
    void *a, *b, *d, *aux, *bias, *ws;
    cudaMalloc(&a, (size_t)ROWS * K * 2);
    cudaMalloc(&b, (size_t)K * COLS * 2);
    cudaMalloc(&d, (size_t)ROWS * COLS * 2);
    cudaMalloc(&aux, (size_t)ROWS * COLS * 2);
    cudaMalloc(&bias, (size_t)ROWS * 4);
    cudaMalloc(&ws, ws_size);
    cudaMemset(a, 0x3c, (size_t)ROWS * K * 2); /* small finite bf16 values */
    cudaMemset(b, 0x3c, (size_t)K * COLS * 2);
    cudaMemset(aux, 0x3c, (size_t)ROWS * COLS * 2);
    const struct { const char *name; cublasLtEpilogue_t e; cudaDataType_t bt; } cases[] = {
        {"DEFAULT", CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_32F},
        {"DGELU", CUBLASLT_EPILOGUE_DGELU, CUDA_R_32F},
        {"DGELU_BGRAD, f32 bias gradient", CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_32F},
        {"DGELU_BGRAD, bf16 bias gradient", CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("%s:\n", cases[i].name);
        best_time(lt, cases[i].e, cases[i].bt, a, b, d, aux, bias, ws, ws_size);
    }
    printf("lt_epilogues: done (%s)\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
