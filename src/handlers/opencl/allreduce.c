/* allreduce: OpenCL has no collective engine, so the buffer goes through host memory and
 * MPI (the GPU core's gpu_allreduce_via_host). */
#include "opencl.h"

tern_error *TERN_OP(allreduce)(tern_dev *d, tern_buf buf, tern_dist *comm) {
    CL_CHECK_DEV(d, "allreduce");
    return gpu_allreduce_via_host(&d->core, buf, comm);
}
