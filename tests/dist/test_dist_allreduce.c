/* The Tensor effect's allreduce across 2 ranks (run under the MPI launcher): on each
 * handler whose device opens here (cpu; opencl through host memory), f32 and bf16 buffers
 * and views become the sum of the ranks' buffers; what lies outside a view is untouched; a
 * NULL communicator is a no-op; integer buffers and invalid views are errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "handler_probe.h"
#include "tern/dist.h"
#include "tern/half.h"
#include "tern/handlers.h"

#define N 1000

/* Rank r's value at i: distinct per rank and element. */
static float value(int r, size_t i) { return (float)(r + 1) * 0.25f * (float)i - (float)r; }

static void check_handler(const tern_ops *ops, tern_dist *comm) {
    int rank = tern_dist_rank(comm), world = tern_dist_world(comm);
    tern_dev *d = NULL;
    CHECK_OK(ops->open(NULL, &d));
    if (!d) return;
    float host[N], want[N], got[N];
    for (size_t i = 0; i < N; i++) {
        host[i] = value(rank, i);
        /* Two addends: IEEE addition is commutative, so MPI's sum is exactly this one. */
        want[i] = 0;
        for (int r = 0; r < world; r++) want[i] += value(r, i);
    }

    /* f32, the whole buffer. */
    tern_buf b = tern_none();
    CHECK_OK(ops->alloc(d, TERN_F32, N, &b));
    CHECK_OK(ops->upload(d, b, host));
    CHECK_OK(ops->allreduce(d, b, comm));
    CHECK_OK(ops->download(d, got, b));
    int wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += got[i] != want[i];
    CHECKF(wrong == 0, "%s: %d of %d f32 sums differ from the direct sum", ops->handler, wrong, N);

    /* A view [100, 300): only it is summed. */
    CHECK_OK(ops->upload(d, b, host));
    CHECK_OK(ops->allreduce(d, tern_view(b, 100, 200), comm));
    CHECK_OK(ops->download(d, got, b));
    wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += got[i] != (i >= 100 && i < 300 ? want[i] : host[i]);
    CHECKF(wrong == 0, "%s: %d elements wrong after the sum of a view", ops->handler, wrong);

    /* No communicator: nothing changes. */
    CHECK_OK(ops->upload(d, b, host));
    CHECK_OK(ops->allreduce(d, b, NULL));
    CHECK_OK(ops->download(d, got, b));
    wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += got[i] != host[i];
    CHECKF(wrong == 0, "%s: a NULL communicator changed %d elements", ops->handler, wrong);

    /* bf16: small integers, exact in bf16 and their sums too. */
    tern_buf h = tern_none();
    uint16_t h_host[N], h_got[N];
    for (size_t i = 0; i < N; i++) h_host[i] = tern_f32_to_bf16((float)((int)(i % 64) - 20 + rank * 3));
    CHECK_OK(ops->alloc(d, TERN_BF16, N, &h));
    CHECK_OK(ops->upload(d, h, h_host));
    CHECK_OK(ops->allreduce(d, h, comm));
    CHECK_OK(ops->download(d, h_got, h));
    wrong = 0;
    for (size_t i = 0; i < N; i++) {
        float sum = 0;
        for (int r = 0; r < world; r++) sum += (float)((int)(i % 64) - 20 + r * 3);
        wrong += tern_bf16_to_f32(h_got[i]) != sum;
    }
    CHECKF(wrong == 0, "%s: %d of %d bf16 sums are wrong", ops->handler, wrong, N);

    /* Errors, the same on every rank (so no rank waits for another). */
    tern_buf ints = tern_none();
    CHECK_OK(ops->alloc(d, TERN_I32, 16, &ints));
    CHECK_ERR(ops->allreduce(d, ints, comm), "allreduce: buf is i32, needs f32 or bf16");
    CHECK_ERR(ops->allreduce(d, tern_view(b, N - 10, 20), comm), "invalid view");
    CHECK_ERR(ops->allreduce(d, tern_none(), comm), "absent");

    CHECK_OK(ops->free(d, &ints));
    CHECK_OK(ops->free(d, &h));
    CHECK_OK(ops->free(d, &b));
    CHECK_OK(ops->close(d));
}

int main(void) {
    tern_dist *comm = NULL;
    CHECK_OK(tern_dist_open(&comm));
    if (!comm) return check_summary("test_dist_allreduce");
    CHECKF(tern_dist_world(comm) == 2, "world %d: run me with 2 ranks", tern_dist_world(comm));
    CHECK(tern_dist_get_kind(comm) == TERN_DIST_MPI);
    CHECK(tern_dist_local_rank(comm) == tern_dist_rank(comm)); /* one host */
    tern_dist *again = NULL;
    CHECK_ERR(tern_dist_open(&again), "already open");

    static const char *const handlers[] = {"cpu", "opencl"};
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++) {
        const tern_ops *ops = tern_handler_ops(handlers[i]);
        if (ops && handler_has_device(ops)) check_handler(ops, comm);
    }
    int status = check_summary(tern_dist_rank(comm) == 0 ? "test_dist_allreduce (rank 0)"
                                                         : "test_dist_allreduce (rank 1)");
    tern_dist_close(comm);
    return status;
}
