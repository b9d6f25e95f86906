/* The cuda runtime (placeholder until the CUDA backend lands). */
#include "kernel/runtime.h"

tern_error *rt_open_cuda(tern_rt **out) {
    (void)out;
    return tern_errorf("cuda runtime: not built in");
}
tern_error *rt_wrap_cuda(void *context, void *stream, tern_rt **out) {
    (void)context, (void)stream, (void)out;
    return tern_errorf("cuda runtime: not built in");
}
