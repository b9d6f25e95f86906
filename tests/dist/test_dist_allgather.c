/* The Tensor effect's allgather across 2 ranks (run under the MPI launcher): on each handler
 * whose device opens here (cpu; opencl through host memory), f32 and bf16 views of random
 * lengths and places: afterwards every rank's view holds every rank's segment, bit for bit,
 * and nothing outside the view changed. A NULL communicator is a no-op; a length that does
 * not split evenly, integer buffers, absent and invalid views are errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "handler_probe.h"
#include "tern/dist.h"
#include "tern/half.h"
#include "tern/handlers.h"

#define CASES 40
#define GUARD 37 /* elements before and after each view */

/* The same sequence on every rank: sizes and places agree without a message. */
static uint64_t rng_state = 12345;
static size_t draw(size_t n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (size_t)(rng_state >> 33) % n;
}

/* Rank r's element i of a gathered buffer: distinct per rank and place, exact in bf16. */
static float value(int r, size_t i) { return (float)((int)(i % 200) - 100) + 0.5f * (float)r; }

/* One host element of dtype `dt` as f32. */
static float host_get(const void *h, tern_dtype dt, size_t i) {
    return dt == TERN_F32 ? ((const float *)h)[i] : tern_bf16_to_f32(((const uint16_t *)h)[i]);
}
static void host_set(void *h, tern_dtype dt, size_t i, float x) {
    if (dt == TERN_F32) ((float *)h)[i] = x;
    else ((uint16_t *)h)[i] = tern_f32_to_bf16(x);
}

/* A view of k * world elements at a random place; this rank writes its own segment, the
 * other segments hold junk the gather must replace, the guards hold a marker. */
static void check_case(const tern_ops *ops, tern_dev *d, tern_dist *comm, int c) {
    int rank = tern_dist_rank(comm), world = tern_dist_world(comm);
    tern_dtype dt = draw(2) ? TERN_BF16 : TERN_F32;
    size_t k = 1 + draw(c < CASES / 2 ? 50 : 40000), n = k * (size_t)world;
    size_t before = draw(GUARD), total = before + n + GUARD;
    size_t elem = tern_dtype_size(dt);
    char *host = malloc(total * elem), *got = malloc(total * elem);
    tern_buf all = tern_none();
    CHECK_OK(ops->alloc(d, dt, total, &all));
    if (!host || !got || !all.len) goto done;
    for (size_t i = 0; i < total; i++) {
        bool guard = i < before || i >= before + n;
        size_t at = i - before;
        bool mine = !guard && at / k == (size_t)rank;
        host_set(host, dt, i, guard ? -7.0f : mine ? value(rank, at) : 1000.0f + (float)rank);
    }
    CHECK_OK(ops->upload(d, all, host));
    CHECK_OK(ops->allgather(d, tern_view(all, before, n), comm));
    CHECK_OK(ops->download(d, got, all));
    size_t wrong = 0;
    for (size_t i = 0; i < total; i++) {
        bool guard = i < before || i >= before + n;
        size_t at = i - before;
        float want = guard ? -7.0f : value((int)(at / k), at);
        if (dt == TERN_BF16) want = tern_bf16_to_f32(tern_f32_to_bf16(want));
        wrong += host_get(got, dt, i) != want;
    }
    CHECKF(wrong == 0, "%s: case %d (%s, %zu per rank, view at %zu): %zu of %zu elements wrong",
           ops->handler, c, tern_dtype_name(dt), k, before, wrong, total);
done:
    CHECK_OK(ops->free(d, &all));
    free(host);
    free(got);
}

/* Errors, the same on every rank (so no rank waits for another). */
static void check_errors(const tern_ops *ops, tern_dev *d, tern_dist *comm) {
    tern_buf b = tern_none(), ints = tern_none();
    CHECK_OK(ops->alloc(d, TERN_F32, 101, &b));
    CHECK_OK(ops->alloc(d, TERN_I32, 16, &ints));
    CHECK_ERR(ops->allgather(d, b, comm), "allgather: buf has 101 elements, not a multiple of the 2 ranks");
    CHECK_ERR(ops->allgather(d, tern_view(b, 0, 7), comm), "not a multiple of the 2 ranks");
    CHECK_ERR(ops->allgather(d, ints, comm), "allgather: buf is i32, needs f32 or bf16");
    CHECK_ERR(ops->allgather(d, tern_view(b, 100, 4), comm), "invalid view");
    CHECK_ERR(ops->allgather(d, tern_none(), comm), "absent");
    CHECK_ERR(ops->allgather(NULL, b, comm), "allgather: the device is NULL");

    /* One rank (NULL): any length, nothing changes. */
    float host[101], got[101];
    for (int i = 0; i < 101; i++) host[i] = (float)i;
    CHECK_OK(ops->upload(d, b, host));
    CHECK_OK(ops->allgather(d, b, NULL));
    CHECK_OK(ops->download(d, got, b));
    int changed = 0;
    for (int i = 0; i < 101; i++) changed += got[i] != host[i];
    CHECKF(changed == 0, "%s: a NULL communicator changed %d elements", ops->handler, changed);
    CHECK_OK(ops->free(d, &ints));
    CHECK_OK(ops->free(d, &b));
}

static void check_handler(const tern_ops *ops, tern_dist *comm) {
    tern_dev *d = NULL;
    CHECK_OK(ops->open(NULL, &d));
    if (!d) return;
    rng_state = 12345;
    for (int c = 0; c < CASES; c++) check_case(ops, d, comm, c);
    check_errors(ops, d, comm);
    CHECK_OK(ops->close(d));
}

int main(void) {
    tern_dist *comm = NULL;
    CHECK_OK(tern_dist_open(&comm));
    if (!comm) return check_summary("test_dist_allgather");
    CHECKF(tern_dist_world(comm) == 2, "world %d: run me with 2 ranks", tern_dist_world(comm));

    /* The host collective itself: uneven lengths and other dtypes are refused. */
    float h[6] = {0};
    CHECK_ERR(tern_dist_allgather_host(comm, h, 5, TERN_F32), "5 elements are not a multiple of the 2 ranks");
    CHECK_ERR(tern_dist_allgather_host(comm, h, 4, TERN_I32), "allgather: i32 buffers are not gathered");
    CHECK_OK(tern_dist_allgather_host(NULL, h, 5, TERN_F32));

    static const char *const handlers[] = {"cpu", "opencl"};
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++) {
        const tern_ops *ops = tern_handler_ops(handlers[i]);
        if (ops && handler_has_device(ops)) check_handler(ops, comm);
    }
    int status = check_summary(tern_dist_rank(comm) == 0 ? "test_dist_allgather (rank 0)"
                                                         : "test_dist_allgather (rank 1)");
    tern_dist_close(comm);
    return status;
}
