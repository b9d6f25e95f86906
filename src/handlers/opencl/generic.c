/* The generic operations on the opencl handler: the DSL runtime's own (tern_rt_build, ...),
 * which check purity, trace a wrapper kernel around the pure function and launch it on this
 * device's stream. */
#include "opencl.h"

tern_error *tern_opencl_build(tern_dev *d, tern_buf out, const tern_kernel *k) {
    return tern_rt_build(d->rt, tern_arg_buf(out), k);
}

tern_error *tern_opencl_zip_with(tern_dev *d, tern_buf out, tern_buf a, tern_buf b,
                               const tern_kernel *combine) {
    return tern_rt_zip_with(d->rt, tern_arg_buf(out), tern_arg_buf(a), tern_arg_buf(b), combine);
}

tern_error *tern_opencl_reduce(tern_dev *d, tern_buf a, double init, const tern_kernel *combine,
                             double *out) {
    return tern_rt_reduce(d->rt, tern_arg_buf(a), init, combine, out);
}

tern_error *tern_opencl_index_of(tern_dev *d, tern_buf a, double value, int64_t *out) {
    return tern_rt_index_of(d->rt, tern_arg_buf(a), value, out);
}
