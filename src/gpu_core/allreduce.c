/* allreduce through host memory: download, MPI's sum (src/dist/), upload. For GPU handlers
 * without a device-side engine (opencl); cuda sums on the device with NCCL instead. */
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"
#include "tern/dist.h"

tern_error *gpu_allreduce_via_host(gpu_core *g, tern_buf buf, tern_dist *comm) {
    TERN_TRY(tern_validate_allreduce(buf, comm));
    if (tern_dist_world(comm) <= 1) return NULL;
    void *host = malloc(buf.len * tern_dtype_size(buf.dtype));
    if (!host) return tern_errorf("allreduce: out of memory for %zu elements on the host", buf.len);
    tern_error *err = gpu_download(g, host, buf);
    if (!err) err = tern_dist_allreduce_host(comm, host, buf.len, buf.dtype);
    if (!err) err = gpu_upload(g, buf, host);
    free(host);
    return err;
}
