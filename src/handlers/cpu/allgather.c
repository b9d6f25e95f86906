/* allgather: every rank's segment of a host buffer to every rank, by MPI (src/dist/). */
#include "cpu.h"
#include "tern/dist.h"

tern_error *cpu_allgather(tern_dev *d, tern_buf buf, tern_dist *comm) {
    return tern_dist_allgather_host(comm, cpu_ptr(buf), buf.len, buf.dtype);
}
