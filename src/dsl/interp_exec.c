/* The interpreter's core: the statement loop with structured control flow over lane lists,
 * the arithmetic, and the launch (threadgroups in parallel over OpenMP workers). */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/interp_ctx.h"

void ictx_fail(ictx *c, int32_t ins, int lane, const char *fmt, ...) {
    if (c->err) return;
    char msg[512], where[128], thread[96] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (lane >= 0)
        snprintf(thread, sizeof thread, " in thread (%u,%u,%u)", c->lxyz[0][lane],
                 c->lxyz[1][lane], c->lxyz[2][lane]);
    c->err = tern_errorf("kernel '%s': %s%s of threadgroup (%u,%u,%u) (%s)", c->k->name, msg,
                         thread, c->gid[0], c->gid[1], c->gid[2],
                         ir_where(c->k, ins, where, sizeof where));
}

/* Keeps the lanes still running; returns their count. */
static int refilter(const ictx *c, int32_t *lanes, int n) {
    int m = 0;
    for (int j = 0; j < n; j++)
        if (c->status[lanes[j]] == ST_RUN) lanes[m++] = lanes[j];
    return m;
}

static bool less_than(int t, ev a, ev b) { return ir_type_is_signed(t) ? a.i < b.i : a.u < b.u; }

static void exec_unary(ictx *c, const ir_ins *in, const int32_t *lanes, int n) {
    ev *d = IREG(c, in->dst);
    const ev *x = IREG(c, in->a[0]);
    int t = c->k->vals[in->a[0]].type;
    tern_op1 op = (tern_op1)in->aux;
    if (t == TERN_T_F32 && op == TERN_NEG) {
        FOR_LANES(c, lanes, n, d[l].f = -x[l].f);
    } else if (t == TERN_T_F32 && op == TERN_EXP) {
        FOR_LANES(c, lanes, n, d[l].f = expf(x[l].f));
    } else {
        FOR_LANES(c, lanes, n, d[l] = ev_unary(op, t, x[l]));
    }
}

/* Integers wrapped to their type, as ev_norm does. */
#define NORM_I32(u) ((uint64_t)(int64_t)(int32_t)(uint32_t)(u))
#define NORM_U32(u) ((uint64_t)(uint32_t)(u))
#define NORM_64(u) ((uint64_t)(u))

/* The integer operations that need no care (no division, no shift), for one type. */
#define INT_OPS(NORM, S)                                                                      \
    switch (op) {                                                                             \
    case TERN_ADD: FOR_LANES(c, lanes, n, d[l].u = NORM(x[l].u + y[l].u)); return;           \
    case TERN_SUB: FOR_LANES(c, lanes, n, d[l].u = NORM(x[l].u - y[l].u)); return;           \
    case TERN_MUL: FOR_LANES(c, lanes, n, d[l].u = NORM(x[l].u * y[l].u)); return;           \
    case TERN_AND: FOR_LANES(c, lanes, n, d[l].u = x[l].u & y[l].u); return;                 \
    case TERN_OR: FOR_LANES(c, lanes, n, d[l].u = x[l].u | y[l].u); return;                  \
    case TERN_XOR: FOR_LANES(c, lanes, n, d[l].u = NORM(x[l].u ^ y[l].u)); return;           \
    case TERN_MIN: FOR_LANES(c, lanes, n, d[l] = x[l].S < y[l].S ? x[l] : y[l]); return;     \
    case TERN_MAX: FOR_LANES(c, lanes, n, d[l] = x[l].S > y[l].S ? x[l] : y[l]); return;     \
    case TERN_LT: FOR_LANES(c, lanes, n, d[l].u = x[l].S < y[l].S); return;                  \
    case TERN_LE: FOR_LANES(c, lanes, n, d[l].u = x[l].S <= y[l].S); return;                 \
    case TERN_GT: FOR_LANES(c, lanes, n, d[l].u = x[l].S > y[l].S); return;                  \
    case TERN_GE: FOR_LANES(c, lanes, n, d[l].u = x[l].S >= y[l].S); return;                 \
    case TERN_EQ: FOR_LANES(c, lanes, n, d[l].u = x[l].u == y[l].u); return;                 \
    case TERN_NE: FOR_LANES(c, lanes, n, d[l].u = x[l].u != y[l].u); return;                 \
    default: break;                                                                           \
    }

static void exec_binary(ictx *c, int32_t i, const ir_ins *in, const int32_t *lanes, int n) {
    ev *d = IREG(c, in->dst);
    const ev *x = IREG(c, in->a[0]), *y = IREG(c, in->a[1]);
    int t = c->k->vals[in->a[0]].type;
    tern_op2 op = (tern_op2)in->aux;
    /* the common cases as plain loops the compiler can vectorise; the rest per element */
    switch (t) {
    case TERN_T_F32:
        switch (op) {
        case TERN_ADD: FOR_LANES(c, lanes, n, d[l].f = x[l].f + y[l].f); return;
        case TERN_SUB: FOR_LANES(c, lanes, n, d[l].f = x[l].f - y[l].f); return;
        case TERN_MUL: FOR_LANES(c, lanes, n, d[l].f = x[l].f * y[l].f); return;
        case TERN_DIV: FOR_LANES(c, lanes, n, d[l].f = x[l].f / y[l].f); return;
        case TERN_MIN: FOR_LANES(c, lanes, n, d[l].f = fminf(x[l].f, y[l].f)); return;
        case TERN_MAX: FOR_LANES(c, lanes, n, d[l].f = fmaxf(x[l].f, y[l].f)); return;
        case TERN_LT: FOR_LANES(c, lanes, n, d[l].u = x[l].f < y[l].f); return;
        case TERN_LE: FOR_LANES(c, lanes, n, d[l].u = x[l].f <= y[l].f); return;
        case TERN_GT: FOR_LANES(c, lanes, n, d[l].u = x[l].f > y[l].f); return;
        case TERN_GE: FOR_LANES(c, lanes, n, d[l].u = x[l].f >= y[l].f); return;
        case TERN_EQ: FOR_LANES(c, lanes, n, d[l].u = x[l].f == y[l].f); return;
        case TERN_NE: FOR_LANES(c, lanes, n, d[l].u = x[l].f != y[l].f); return;
        default: break;
        }
        break;
    case TERN_T_I32: INT_OPS(NORM_I32, i) break;
    case TERN_T_U32: INT_OPS(NORM_U32, u) break;
    case TERN_T_I64: INT_OPS(NORM_64, i) break;
    case TERN_T_U64: INT_OPS(NORM_64, u) break;
    case TERN_T_BOOL:
        switch (op) {
        case TERN_LAND: FOR_LANES(c, lanes, n, d[l].u = x[l].u & y[l].u); return;
        case TERN_LOR: FOR_LANES(c, lanes, n, d[l].u = x[l].u | y[l].u); return;
        default: break;
        }
        break;
    default: break;
    }
    bool fault = false;
    if ((op == TERN_DIV || op == TERN_REM) && t != TERN_T_F32) {
        FOR_LANES(c, lanes, n, {
            d[l] = ev_binary(op, t, x[l], y[l], &fault);
            if (fault) {
                ictx_fail(c, i, l, "integer %s by zero", op == TERN_DIV ? "division" : "remainder");
                return;
            }
        });
        return;
    }
    FOR_LANES(c, lanes, n, d[l] = ev_binary(op, t, x[l], y[l], &fault));
}

static int exec_range(ictx *c, int32_t begin, int32_t end, int32_t *lanes, int n, int depth);

/* After a pipe's region: a variable one role owns (ir_pipe_owners) is poisoned in the other
 * role's threads, as the registers are poisoned before a group runs, so that a kernel that
 * reads it there fails here too and not only on CUDA (which forgets it: emit_pipe.c). */
static void forget_others(ictx *c, int32_t region, const int32_t *lanes, int n) {
    const tern_kernel *k = c->k;
    uint8_t *owner = malloc((size_t)k->nvars + 1);
    if (!owner) {
        ictx_fail(c, region, -1, "out of memory");
        return;
    }
    ir_pipe_owners(k, region, owner);
    ir_pipe_spec s = ir_pipe_unpack(k->ins[region].imm);
    for (int32_t v = 0; v < k->nvars; v++) {
        if (owner[v] != IR_PIPE_PRODUCER && owner[v] != IR_PIPE_CONSUMERS) continue;
        ev *x = IVAR(c, v);
        for (int j = 0; j < n; j++) {
            bool producer = lanes[j] / 128 >= s.producer_first;
            if (producer != (owner[v] == IR_PIPE_PRODUCER)) memset(&x[lanes[j]], 0xa5, sizeof *x);
        }
    }
    free(owner);
}

static int exec_if(ictx *c, int32_t i, int32_t *lanes, int n, int depth) {
    const ir_ins *in = &c->k->ins[i];
    const ev *cond = IREG(c, in->a[0]);
    int32_t els = in->a[1], end = in->a[2];
    int32_t *sub = c->lanes[depth + 1];
    int m = 0;
    for (int j = 0; j < n; j++)
        if (cond[lanes[j]].u) sub[m++] = lanes[j];
    if (m) exec_range(c, i + 1, els >= 0 ? els : end, sub, m, depth + 1);
    if (els >= 0 && !c->err) {
        m = 0;
        for (int j = 0; j < n; j++)
            if (!cond[lanes[j]].u) sub[m++] = lanes[j];
        if (m) exec_range(c, els + 1, end, sub, m, depth + 1);
    }
    if (in->aux == IR_IF_PIPE && !c->err) forget_others(c, i, lanes, n);
    return end + 1;
}

/* After an iteration: continue rejoins, break and exit leave. Returns the lanes left. */
static int loop_rejoin(ictx *c, int32_t *loop, int m) {
    int kept = 0;
    for (int j = 0; j < m; j++) {
        int l = loop[j];
        uint8_t st = c->status[l];
        if (st == ST_EXIT) continue;
        if (st == ST_BREAK) {
            c->status[l] = ST_RUN;
            continue;
        }
        c->status[l] = ST_RUN;
        loop[kept++] = l;
    }
    return kept;
}

static int exec_for(ictx *c, int32_t i, const int32_t *lanes, int n, int depth) {
    const ir_ins *in = &c->k->ins[i];
    int t = in->type;
    ev *iv = IREG(c, in->dst);
    const ev *start = IREG(c, in->a[0]), *stop = IREG(c, in->a[1]), *step = IREG(c, in->a[2]);
    int32_t end = in->a[3];
    int32_t *loop = c->lanes[depth + 1], *body = c->lanes[depth + 2];
    int m = 0;
    for (int j = 0; j < n; j++) {
        int l = lanes[j];
        if (ir_type_is_signed(t) ? step[l].i <= 0 : step[l].u == 0) {
            ictx_fail(c, i, l, "the for loop's step is not positive");
            return end + 1;
        }
        iv[l] = start[l];
        if (less_than(t, iv[l], stop[l])) loop[m++] = l;
    }
    while (m > 0 && !c->err) {
        memcpy(body, loop, (size_t)m * sizeof *body);
        exec_range(c, i + 1, end, body, m, depth + 2);
        m = loop_rejoin(c, loop, m);
        int kept = 0;
        for (int j = 0; j < m; j++) {
            int l = loop[j];
            iv[l] = ev_norm(t, iv[l].u + step[l].u);
            if (less_than(t, iv[l], stop[l])) loop[kept++] = l;
        }
        m = kept;
    }
    return end + 1;
}

static int exec_while(ictx *c, int32_t i, const int32_t *lanes, int n, int depth) {
    const ir_ins *in = &c->k->ins[i];
    int32_t test = in->a[0], end = in->a[1];
    const ev *cond = IREG(c, c->k->ins[test].a[0]);
    int32_t *loop = c->lanes[depth + 1], *body = c->lanes[depth + 2];
    memcpy(loop, lanes, (size_t)n * sizeof *loop);
    int m = n;
    while (m > 0 && !c->err) {
        memcpy(body, loop, (size_t)m * sizeof *body);
        int b = exec_range(c, i + 1, test, body, m, depth + 2); /* the condition */
        if (c->err) break;
        int pass = 0;
        for (int j = 0; j < b; j++)
            if (cond[body[j]].u) body[pass++] = body[j];
        /* lanes that exited in the condition or found it false leave the loop */
        memcpy(loop, body, (size_t)pass * sizeof *loop);
        m = pass;
        if (m) exec_range(c, test + 1, end, body, m, depth + 2);
        m = loop_rejoin(c, loop, m);
    }
    return end + 1;
}

/* Runs instructions [begin, end) for lanes[0..n) (filtered in place as threads leave);
 * returns how many lanes are still running at the end. */
static int exec_range(ictx *c, int32_t begin, int32_t end, int32_t *lanes, int n, int depth) {
    const tern_kernel *k = c->k;
    uint64_t seen = c->jumps;
    for (int32_t i = begin; i < end && n > 0;) {
        if (c->err) return 0;
        if (c->step_limit && ++c->steps > c->step_limit) {
            ictx_fail(c, i, -1, "stopped after %llu statements", (unsigned long long)c->step_limit);
            return 0;
        }
        const ir_ins *in = &k->ins[i];
        const int32_t *a = in->a;
        switch ((ir_op)in->op) {
        case IR_CONST:
        case IR_PARAM:
        case IR_THREAD:
        case IR_RESULT: break; /* filled before the group runs */
        case IR_UNARY: exec_unary(c, in, lanes, n); break;
        case IR_BINARY: exec_binary(c, i, in, lanes, n); break;
        case IR_SELECT: {
            ev *d = IREG(c, in->dst);
            const ev *p = IREG(c, a[0]), *x = IREG(c, a[1]), *y = IREG(c, a[2]);
            FOR_LANES(c, lanes, n, d[l] = p[l].u ? x[l] : y[l]);
            break;
        }
        case IR_FMA: {
            ev *d = IREG(c, in->dst);
            const ev *x = IREG(c, a[0]), *y = IREG(c, a[1]), *z = IREG(c, a[2]);
            FOR_LANES(c, lanes, n, d[l] = ev_fma(x[l], y[l], z[l]));
            break;
        }
        case IR_CAST:
        case IR_BITCAST: {
            ev *d = IREG(c, in->dst);
            const ev *x = IREG(c, a[0]);
            int from = k->vals[a[0]].type, to = in->type;
            if (in->op == IR_CAST)
                FOR_LANES(c, lanes, n, d[l] = ev_cast(from, to, x[l]));
            else
                FOR_LANES(c, lanes, n, d[l] = ev_bitcast(from, to, x[l]));
            break;
        }
        case IR_VAR_DECL:
        case IR_ASSIGN: {
            ev *v = IVAR(c, a[0]);
            const ev *x = IREG(c, a[1]);
            FOR_LANES(c, lanes, n, v[l] = x[l]);
            break;
        }
        case IR_VAR_READ: {
            ev *d = IREG(c, in->dst);
            const ev *v = IVAR(c, a[0]);
            FOR_LANES(c, lanes, n, d[l] = v[l]);
            break;
        }
        case IR_LOAD: interp_load(c, i, lanes, n); break;
        case IR_STORE: interp_store(c, i, lanes, n); break;
        case IR_VLOAD: interp_vload(c, i, lanes, n); break;
        case IR_VSTORE: interp_vstore(c, i, lanes, n); break;
        case IR_ATOMIC:
        case IR_ATOMIC_CAS: interp_atomic(c, i, lanes, n); break;
        case IR_BARRIER: interp_barrier(c, i, n); break;
        /* threadgroups run in parallel here: order this group's plain stores before its
         * atomics (and a later group's reads after its own), as on a GPU */
        case IR_FENCE: __atomic_thread_fence(__ATOMIC_SEQ_CST); break;
        case IR_SIMD: interp_simd(c, i, lanes, n); break;
        case IR_MMA: interp_mma(c, i, n); break;
        case IR_LOAD_MATRIX: interp_load_matrix(c, i, n); break;
        case IR_WGMMA: interp_wgmma(c, i, lanes, n); break;
        case IR_WGMMA_WAIT: break; /* asynchronous products were made at once */
        case IR_PRINT: interp_print(c, i, lanes, n); break;
        case IR_WAIT_PREVIOUS: break; /* launches run one after the other here */
        case IR_PREFETCH: interp_prefetch(c, i, lanes, n); break;
        case IR_COPY_ASYNC: interp_copy_async(c, i, lanes, n); break;
        case IR_COPY_TILE: interp_copy_tile(c, i, lanes, n); break;
        case IR_STORE_BULK: interp_store_bulk(c, i, lanes, n); break;
        case IR_COPY_COMMIT:
        case IR_COPY_WAIT:
        case IR_STORE_BULK_COMMIT:
        case IR_STORE_BULK_WAIT:
        case IR_STORE_BULK_FENCE: break; /* the copies were made at once */
        case IR_BREAK:
        case IR_CONTINUE:
        case IR_EXIT: {
            uint8_t st = in->op == IR_BREAK ? ST_BREAK : in->op == IR_CONTINUE ? ST_CONTINUE : ST_EXIT;
            FOR_LANES(c, lanes, n, c->status[l] = st);
            c->jumps++;
            return 0; /* every lane of this block took the jump */
        }
        case IR_IF:
        case IR_FOR:
        case IR_WHILE: {
            int32_t next = in->op == IR_IF    ? exec_if(c, i, lanes, n, depth)
                           : in->op == IR_FOR ? exec_for(c, i, lanes, n, depth)
                                              : exec_while(c, i, lanes, n, depth);
            if (c->jumps != seen) {
                n = refilter(c, lanes, n);
                seen = c->jumps;
            }
            i = next;
            continue;
        }
        case IR_ELSE:
        case IR_END:
        case IR_WHILE_TEST:
            /* reached only past a block's end, which the openers skip */
            ictx_fail(c, i, -1, "internal error: stray %s", ir_op_name((ir_op)in->op));
            return 0;
        default:
            ictx_fail(c, i, -1, "internal error: unknown statement %d", in->op);
            return 0;
        }
        i++;
    }
    return n;
}

/* ---- the launch ---- */

static void ctx_free(ictx *c) {
    if (c->lanes)
        for (int32_t d = 0; d < 2 * c->p->max_depth + 3; d++) free(c->lanes[d]);
    free(c->lanes);
    for (int d = 0; d < 3; d++) free(c->lxyz[d]);
    free(c->regs);
    free(c->vars);
    free(c->status);
    free(c->bufs);
    free(c->shared);
}

static bool ctx_init(ictx *c, const tern_kernel *k, tern_dims grid, tern_dims group,
                     const interp_arg *args) {
    memset(c, 0, sizeof *c);
    c->k = k;
    c->p = k->prog;
    c->grid = grid;
    c->group = group;
    c->T = (int)(group.x * group.y * group.z);
    size_t T = (size_t)c->T;
    int32_t levels = 2 * c->p->max_depth + 3;
    c->lanes = calloc((size_t)levels, sizeof *c->lanes);
    c->regs = malloc(((size_t)k->nvals + 1) * T * sizeof *c->regs);
    c->vars = malloc(((size_t)k->nvars + 1) * T * sizeof *c->vars);
    c->status = calloc(T, 1);
    c->bufs = calloc((size_t)k->nbufs + 1, sizeof *c->bufs);
    c->shared = malloc(k->shared_bytes + 16);
    bool ok = c->lanes && c->regs && c->vars && c->status && c->bufs && c->shared;
    for (int32_t d = 0; ok && d < levels; d++) ok = (c->lanes[d] = malloc(T * sizeof(int32_t)));
    for (int d = 0; ok && d < 3; d++) ok = (c->lxyz[d] = malloc(T * sizeof(uint32_t)));
    if (!ok) return false;
    for (size_t l = 0; l < T; l++) {
        c->lxyz[0][l] = (uint32_t)(l % group.x);
        c->lxyz[1][l] = (uint32_t)(l / group.x % group.y);
        c->lxyz[2][l] = (uint32_t)(l / ((size_t)group.x * group.y));
    }
    /* poison registers so a missed write shows up as garbage, not as a lucky zero */
    memset(c->regs, 0xa5, ((size_t)k->nvals + 1) * T * sizeof *c->regs);
    for (int32_t j = 0; j < c->p->nconsts; j++) {
        const ir_ins *in = &k->ins[c->p->consts[j]];
        ev x = in->type == TERN_T_F32 ? ev_from_f((float)ir_const_f(in)) : ev_from_u((uint64_t)in->imm);
        ev *d = IREG(c, in->dst);
        for (size_t l = 0; l < T; l++) d[l] = x;
    }
    for (int32_t j = 0; j < c->p->nparams; j++) {
        const ir_ins *in = &k->ins[c->p->params[j]];
        ev *d = IREG(c, in->dst);
        for (size_t l = 0; l < T; l++) d[l] = args[in->imm].scalar;
    }
    for (int32_t b = 0; b < k->nbufs; b++) {
        const ir_buf *B = &k->bufs[b];
        ibuf *ib = &c->bufs[b];
        ib->elem = B->elem;
        if (B->shared) {
            ib->base = c->shared + B->offset;
            ib->len = B->count;
        } else {
            ib->base = args[B->param].base;
            ib->len = args[B->param].len;
            ib->offset = args[B->param].offset;
        }
    }
    return true;
}

static void fill_thread_attrs(ictx *c) {
    const tern_kernel *k = c->k;
    uint32_t gsize[3] = {c->group.x, c->group.y, c->group.z};
    uint32_t gcount[3] = {c->grid.x, c->grid.y, c->grid.z};
    for (int32_t j = 0; j < c->p->nthreads; j++) {
        const ir_ins *in = &k->ins[c->p->threads[j]];
        ev *d = IREG(c, in->dst);
        int dim = (int)in->imm;
        for (int l = 0; l < c->T; l++) {
            uint32_t x;
            switch ((tern_thread_attr)in->aux) {
            case TERN_GLOBAL_ID: x = c->gid[dim] * gsize[dim] + c->lxyz[dim][l]; break;
            case TERN_LOCAL_ID: x = c->lxyz[dim][l]; break;
            case TERN_GROUP_ID: x = c->gid[dim]; break;
            case TERN_GROUP_SIZE: x = gsize[dim]; break;
            case TERN_GROUP_COUNT: x = gcount[dim]; break;
            case TERN_LOCAL_INDEX: x = (uint32_t)l; break;
            case TERN_SIMD_LANE: x = (uint32_t)l % TERN_SIMD_WIDTH; break;
            case TERN_SIMD_GROUP: x = (uint32_t)l / TERN_SIMD_WIDTH; break;
            case TERN_SIMD_GROUPS: x = (uint32_t)(c->T + TERN_SIMD_WIDTH - 1) / TERN_SIMD_WIDTH; break;
            default: x = 0;
            }
            d[l] = ev_norm(TERN_T_I32, x);
        }
    }
}

static void run_group(ictx *c, uint64_t g) {
    c->gid[0] = (uint32_t)(g % c->grid.x);
    c->gid[1] = (uint32_t)(g / c->grid.x % c->grid.y);
    c->gid[2] = (uint32_t)(g / ((uint64_t)c->grid.x * c->grid.y));
    fill_thread_attrs(c);
    memset(c->status, ST_RUN, (size_t)c->T);
    memset(c->shared, 0xff, c->k->shared_bytes); /* undefined at start: NaN / -1 */
    int32_t *top = c->lanes[0];
    for (int l = 0; l < c->T; l++) top[l] = l;
    c->steps = 0;
    exec_range(c, 0, c->k->nins, top, c->T, 0);
}

tern_error *interp_run(const tern_kernel *k, tern_dims grid, tern_dims group,
                       const interp_arg *args, uint64_t step_limit) {
    if (!k->prog) return tern_errorf("kernel '%s': not prepared", k->name);
    uint64_t threads = (uint64_t)group.x * group.y * group.z;
    uint64_t groups = (uint64_t)grid.x * grid.y * grid.z;
    if (threads == 0 || threads > 1024 || groups == 0)
        return tern_errorf("kernel '%s': launch of %llu threadgroups of %llu threads", k->name,
                           (unsigned long long)groups, (unsigned long long)threads);
    if ((k->uses & IR_USES_SIMD) && threads % TERN_SIMD_WIDTH)
        return tern_errorf("kernel '%s' uses SIMD-group operations: its threadgroup size (%llu) "
                           "must be a multiple of %d", k->name, (unsigned long long)threads,
                           TERN_SIMD_WIDTH);
    tern_error *first = NULL;
    int stop = 0;
    /* a group is a lot of work only when it has many threads; small launches stay serial */
    int workers = omp_get_max_threads();
    if ((uint64_t)workers > groups) workers = (int)groups;
#pragma omp parallel num_threads(workers)
    {
        ictx c;
        bool ok = ctx_init(&c, k, grid, group, args);
        if (!ok) {
#pragma omp critical(tern_interp_error)
            if (!first) first = tern_errorf("kernel '%s': out of memory in the interpreter", k->name);
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
        }
        c.step_limit = step_limit;
#pragma omp for schedule(dynamic, 4)
        for (uint64_t g = 0; g < groups; g++) {
            if (!ok || __atomic_load_n(&stop, __ATOMIC_RELAXED)) continue;
            run_group(&c, g);
            if (c.err) {
                __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
#pragma omp critical(tern_interp_error)
                {
                    if (!first) {
                        first = c.err;
                    } else {
                        tern_error_free(c.err);
                    }
                }
                c.err = NULL;
            }
        }
        ctx_free(&c);
    }
    return first;
}
