/* allgather through host memory: this rank's segment down, MPI's gather (src/dist/), the
 * whole buffer up. For GPU handlers without a device-side engine (opencl); cuda gathers on
 * the device with NCCL instead. */
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"
#include "tern/dist.h"

tern_error *gpu_allgather_via_host(gpu_core *g, tern_buf buf, tern_dist *comm) {
    TERN_TRY(tern_validate_allgather(buf, comm));
    int world = tern_dist_world(comm);
    if (world <= 1) return NULL;
    size_t elem = tern_dtype_size(buf.dtype), k = buf.len / (size_t)world;
    size_t mine = (size_t)tern_dist_rank(comm) * k;
    char *host = malloc(buf.len * elem);
    if (!host) return tern_errorf("allgather: out of memory for %zu elements on the host", buf.len);
    tern_error *err = gpu_download(g, host + mine * elem, tern_view(buf, mine, k));
    if (!err) err = tern_dist_allgather_host(comm, host, buf.len, buf.dtype);
    if (!err) err = gpu_upload(g, buf, host);
    free(host);
    return err;
}
