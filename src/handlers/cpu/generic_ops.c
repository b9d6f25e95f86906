/* The generic effect operations of the cpu handler: build, zip_with, reduce, index_of,
 * taking pure DSL functions (tern/kernel.h). cpu buffers are host memory, so the kernel
 * library's host functions run them directly in the interpreter (tern_host_*). */

#include "cpu.h"
#include "tern/kernel.h"

tern_error *TERN_OP(build)(tern_dev *d, tern_buf out, const tern_kernel *k) {
    CPU_CHECK_DEV(d, "build");
    return tern_host_build(out, k);
}

tern_error *TERN_OP(zip_with)(tern_dev *d, tern_buf out, tern_buf a, tern_buf b, const tern_kernel *combine) {
    CPU_CHECK_DEV(d, "zip_with");
    return tern_host_zip_with(out, a, b, combine);
}

tern_error *TERN_OP(reduce)(tern_dev *d, tern_buf a, double init, const tern_kernel *combine, double *out) {
    CPU_CHECK_DEV(d, "reduce");
    return tern_host_reduce(a, init, combine, out);
}

tern_error *TERN_OP(index_of)(tern_dev *d, tern_buf a, double value, int64_t *out) {
    CPU_CHECK_DEV(d, "index_of");
    return tern_host_index_of(a, value, out);
}

