/* The generic operations over host memory, for the cpu handler: its buffers are host
 * pointers, so they are the host runtime's device buffers as they are. One host runtime
 * serves the whole process (it holds no per-thread state; its wrapper cache is locked). */
#include <pthread.h>
#include <stdlib.h>

#include "dsl/runtime.h"

static tern_rt *shared_rt;
static tern_error *shared_err;
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;

static void open_shared(void) { shared_err = rt_open_host(&shared_rt); }

static tern_error *host_rt(tern_rt **out) {
    pthread_once(&shared_once, open_shared);
    if (shared_err) return tern_errorf("%s", tern_error_message(shared_err));
    *out = shared_rt;
    return NULL;
}

tern_error *tern_host_build(tern_buf out, const tern_kernel *fn) {
    tern_rt *rt = NULL;
    TERN_TRY(host_rt(&rt));
    return tern_rt_build(rt, tern_arg_buf(out), fn);
}

tern_error *tern_host_zip_with(tern_buf out, tern_buf a, tern_buf b, const tern_kernel *fn) {
    tern_rt *rt = NULL;
    TERN_TRY(host_rt(&rt));
    return tern_rt_zip_with(rt, tern_arg_buf(out), tern_arg_buf(a), tern_arg_buf(b), fn);
}

tern_error *tern_host_reduce(tern_buf a, double init, const tern_kernel *fn, double *out) {
    tern_rt *rt = NULL;
    TERN_TRY(host_rt(&rt));
    return tern_rt_reduce(rt, tern_arg_buf(a), init, fn, out);
}

tern_error *tern_host_index_of(tern_buf a, double value, int64_t *out) {
    tern_rt *rt = NULL;
    TERN_TRY(host_rt(&rt));
    return tern_rt_index_of(rt, tern_arg_buf(a), value, out);
}
