/* allreduce: the handler's device-side engine (cuda: NCCL), or through host memory:
 * download, MPI's sum (src/dist/), upload (opencl, host). */
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"
#include "tern/dist.h"

tern_error *gpu_allreduce(tern_dev *d, tern_buf buf, tern_dist *comm) {
    gpu_core *g = gpu_core_of(d);
    if (g->hooks->allreduce) return g->hooks->allreduce(d, buf, comm);
    if (tern_dist_world(comm) <= 1) return NULL;
    void *host = malloc(buf.len * tern_dtype_size(buf.dtype));
    if (!host) return tern_errorf("allreduce: out of memory for %zu elements on the host", buf.len);
    tern_error *err = gpu_download(d, host, buf);
    if (!err) err = tern_dist_allreduce_host(comm, host, buf.len, buf.dtype);
    if (!err) err = gpu_upload(d, buf, host);
    free(host);
    return err;
}
