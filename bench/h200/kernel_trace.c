/* Every kernel's start and end on the GPU, nodes of CUDA graphs included, as CSV lines
 * "start_ns,end_ns,graph_node,name" in $KTRACE_OUT: a CUPTI activity tracer that the CUDA
 * driver loads into any program (CUDA_INJECTION64_PATH), for the timeline of a decoded token
 * (which kernel ends when, with the overlapped launches as they run) where Nsight Systems is
 * not installed. Tracing adds its own cost to each kernel: compare a program's times with and
 * without it.
 *   gcc -O2 -shared -fPIC -I$CUDA/include -o /tmp/libktrace.so bench/h200/kernel_trace.c \
 *       -L$CUDA/lib64 -lcupti
 *   KTRACE_OUT=/tmp/trace.csv CUDA_INJECTION64_PATH=/tmp/libktrace.so program ... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cupti.h>

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kernel_record;
#else
typedef CUpti_ActivityKernel9 kernel_record;
#endif

#define BUFFER_BYTES (16u << 20)

static FILE *trace_out;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        const kernel_record *k = (const kernel_record *)rec;
        if (trace_out)
            fprintf(trace_out, "%llu,%llu,%llu,%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                    (unsigned long long)k->graphNodeId, k->name ? k->name : "?");
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "kernel_trace: %zu records dropped\n", dropped);
    free(buffer);
}

static void flush_at_exit(void) {
    cuptiActivityFlushAll(1);
    if (trace_out) fclose(trace_out);
    trace_out = NULL;
}

int InitializeInjection(void) {
    const char *path = getenv("KTRACE_OUT");
    trace_out = fopen(path ? path : "ktrace.csv", "w");
    if (!trace_out) {
        fprintf(stderr, "kernel_trace: cannot open %s\n", path ? path : "ktrace.csv");
        return 0;
    }
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "kernel_trace: CUPTI refused the activity trace\n");
        return 0;
    }
    atexit(flush_at_exit);
    return 1;
}
