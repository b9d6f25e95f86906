/* allgather: the handler's device-side engine (cuda: NCCL), or through host memory: this
 * rank's segment down, MPI's gather (src/dist/), the whole buffer up (opencl, host). */
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"
#include "tern/dist.h"

tern_error *gpu_allgather(tern_dev *d, tern_buf buf, tern_dist *comm) {
    gpu_core *g = gpu_core_of(d);
    if (g->hooks->allgather) return g->hooks->allgather(d, buf, comm);
    int world = tern_dist_world(comm);
    if (world <= 1) return NULL;
    size_t elem = tern_dtype_size(buf.dtype), k = buf.len / (size_t)world;
    size_t mine = (size_t)tern_dist_rank(comm) * k;
    char *host = malloc(buf.len * elem);
    if (!host) return tern_errorf("allgather: out of memory for %zu elements on the host", buf.len);
    tern_error *err = gpu_download(d, host + mine * elem, tern_view(buf, mine, k));
    if (!err) err = tern_dist_allgather_host(comm, host, buf.len, buf.dtype);
    if (!err) err = gpu_upload(d, buf, host);
    free(host);
    return err;
}
