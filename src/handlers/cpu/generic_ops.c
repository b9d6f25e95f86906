/* The generic effect operations of the cpu handler: build, zip_with, reduce, index_of,
 * taking pure DSL functions (tern/kernel.h). cpu buffers are host memory, so the kernel
 * library's host functions run them directly in the interpreter (tern_host_*). */

#include "cpu.h"
#include "tern/kernel.h"

tern_error *cpu_build(tern_dev *d, tern_buf out, const tern_kernel *k) {
    return tern_host_build(out, k);
}

tern_error *cpu_zip_with(tern_dev *d, tern_buf out, tern_buf a, tern_buf b, const tern_kernel *combine) {
    return tern_host_zip_with(out, a, b, combine);
}

tern_error *cpu_reduce(tern_dev *d, tern_buf a, double init, const tern_kernel *combine, double *out) {
    return tern_host_reduce(a, init, combine, out);
}

tern_error *cpu_index_of(tern_dev *d, tern_buf a, double value, int64_t *out) {
    return tern_host_index_of(a, value, out);
}

