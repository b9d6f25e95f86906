/* The interpreter's per-worker state, private to interp_*.c. One context runs one
 * threadgroup at a time; OpenMP workers each have their own. */
#ifndef TERN_KERNEL_INTERP_CTX_H
#define TERN_KERNEL_INTERP_CTX_H

#include "dsl/interp.h"
#include "dsl/interp_prog.h"

/* A buffer as the interpreter sees it during a launch. */
typedef struct ibuf {
    unsigned char *base; /* element 0 of the view (threadgroup arrays: in the group's memory) */
    size_t len;          /* elements */
    size_t offset;       /* the view's start in its allocation, for vector alignment */
    uint8_t elem;
} ibuf;

/* Thread status while running a group. */
enum { ST_RUN = 0, ST_BREAK, ST_CONTINUE, ST_EXIT };

typedef struct ictx {
    const tern_kernel *k;
    const interp_prog *p;
    int T;                /* threads per group */
    tern_dims grid, group;
    uint32_t gid[3];      /* the group being run */
    uint32_t *lxyz[3];    /* each lane's local id per dimension */
    ev *regs;             /* nvals * T: register v of lane l at regs[v * T + l] */
    ev *vars;             /* nvars * T */
    int32_t **lanes;      /* lane lists, one per nesting level */
    uint8_t *status;      /* per lane, ST_* */
    ibuf *bufs;           /* per IR buffer */
    unsigned char *shared;
    tern_error *err;
    uint64_t jumps;       /* how many break/continue/exit ran: blocks refilter when it moves */
    uint64_t steps, step_limit;
} ictx;

#define IREG(c, v) ((c)->regs + (size_t)(v) * (size_t)(c)->T)
#define IVAR(c, v) ((c)->vars + (size_t)(v) * (size_t)(c)->T)

/* Runs `stmt` for each active lane l (lanes[0..n), ascending; all lanes when n == T). */
#define FOR_LANES(c, lanes, n, stmt)                                                       \
    do {                                                                                   \
        if ((n) == (c)->T) {                                                               \
            for (int l = 0; l < (n); l++) { stmt; }                                        \
        } else {                                                                           \
            for (int j_ = 0; j_ < (n); j_++) {                                             \
                int l = (lanes)[j_];                                                       \
                stmt;                                                                      \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* Records the first error of this context: "kernel 'name': <message> in thread (x,y,z)
 * of threadgroup (x,y,z) (file:line)". lane < 0 omits the thread. */
void ictx_fail(ictx *c, int32_t ins, int lane, const char *fmt, ...) TERN_PRINTF(4, 5);

/* Memory (interp_mem.c). Each applies instruction `ins` to the active lanes. */
void interp_load(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_store(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_vload(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_vstore(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_atomic(ictx *c, int32_t ins, const int32_t *lanes, int n);
/* A prefetch does nothing here; its index is checked like a load's. */
void interp_prefetch(ictx *c, int32_t ins, const int32_t *lanes, int n);
/* An asynchronous copy is made at once (its commit and wait do nothing). */
void interp_copy_async(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_store_bulk(ictx *c, int32_t ins, const int32_t *lanes, int n);
/* A tile copy is made at once by the producer's threads together. */
void interp_copy_tile(ictx *c, int32_t ins, const int32_t *lanes, int n);

/* SIMD groups, barriers and print (interp_simd.c). */
void interp_simd(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_mma(ictx *c, int32_t ins, int n);
void interp_load_matrix(ictx *c, int32_t ins, int n);
/* tern_wgmma_bf16 (interp_wgmma.c) */
void interp_wgmma(ictx *c, int32_t ins, const int32_t *lanes, int n);
void interp_barrier(ictx *c, int32_t ins, int n);
void interp_print(ictx *c, int32_t ins, const int32_t *lanes, int n);

#endif
