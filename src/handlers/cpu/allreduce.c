/* allreduce: the sum across ranks of a host buffer, by MPI (src/dist/). */
#include "cpu.h"
#include "tern/dist.h"

tern_error *cpu_allreduce(tern_dev *d, tern_buf buf, tern_dist *comm) {
    return tern_dist_allreduce_host(comm, cpu_ptr(buf), buf.len, buf.dtype);
}
