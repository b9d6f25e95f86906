/* allgather: as allreduce, through host memory and MPI (gpu_allgather_via_host). */
#include "opencl.h"

tern_error *TERN_OP(allgather)(tern_dev *d, tern_buf buf, tern_dist *comm) {
    CL_CHECK_DEV(d, "allgather");
    return gpu_allgather_via_host(&d->core, buf, comm);
}
