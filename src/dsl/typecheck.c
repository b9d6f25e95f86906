/* ir_verify: checks every invariant of a finished kernel that the later passes rely on, so
 * the interpreter and emitters may assume them: operands in range, defined earlier and in
 * scope, operand and result types, and well-formed blocks. The tracer already enforces all
 * of this with friendlier messages; this is the safety net behind it. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsl/ir.h"

typedef struct verifier {
    const tern_kernel *k;
    bool *open;     /* open[i]: instruction i opens a block that is still open */
    int32_t *stack; /* open blocks */
    int32_t depth;
    tern_error *err;
    int32_t at;
} verifier;


/* An IF's imm for its aux: none for a plain if; a role's warpgroups; a pipe's spec (as
 * tern_pipe_at checks it); a pipe block's step, an i32 variable. */
static bool if_imm_ok(const tern_kernel *k, const ir_ins *in) {
    switch (in->aux) {
    case 0: return in->imm == 0;
    case IR_IF_ROLE: return in->imm >> 16 >= 0 && in->imm >> 16 < 1024 && (in->imm & 0xffff) >= 1;
    case IR_IF_PIPE: {
        ir_pipe_spec s = ir_pipe_unpack(in->imm);
        bool regs = (!s.producer_regs && !s.consumer_regs) ||
                    (s.producer_regs >= 24 && s.consumer_regs >= 24 && s.producer_regs <= 256 &&
                     s.consumer_regs <= 256 && s.producer_regs % 8 == 0 && s.consumer_regs % 8 == 0);
        return in->imm == ir_pipe_pack(s) && s.producer_first >= 1 && s.producer_count >= 1 &&
               s.producer_first + s.producer_count <= 8 && s.stages >= 1 && s.stages <= 32 && s.lag < s.stages &&
               regs;
    }
    default: { /* a pipe's block: its step variable, perhaps marked a continuation */
        int64_t var = in->imm & ~IR_PIPE_MORE;
        return var >= 0 && var < k->nvars && k->vars[var].type == TERN_T_I32;
    }
    }
}

static void fail(verifier *v, const char *fmt, ...) TERN_PRINTF(2, 3);
static void fail(verifier *v, const char *fmt, ...) {
    if (v->err) return;
    char msg[256], where[128], what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->err = tern_errorf("kernel '%s': invalid statement '%s' (%s): %s", v->k->name,
                         ir_describe(v->k, v->at, what, sizeof what),
                         ir_where(v->k, v->at, where, sizeof where), msg);
}

/* Checks value operand id and returns its type (VOID when invalid). */
static int val(verifier *v, int32_t id) {
    const tern_kernel *k = v->k;
    if (id < 0 || id >= k->nvals) {
        fail(v, "operand %d is not a value", id);
        return TERN_T_VOID;
    }
    const ir_value *x = &k->vals[id];
    if (x->def >= v->at) {
        fail(v, "value %d is used before it is made", id);
        return TERN_T_VOID;
    }
    if (x->block >= 0 && !v->open[x->block]) {
        fail(v, "value %d is used outside its block", id);
        return TERN_T_VOID;
    }
    return x->type;
}

static const ir_buf *buf(verifier *v, int32_t id) {
    if (id < 0 || id >= v->k->nbufs) {
        fail(v, "operand %d is not a buffer", id);
        return NULL;
    }
    return &v->k->bufs[id];
}

static const ir_var *var(verifier *v, int32_t id) {
    if (id < 0 || id >= v->k->nvars) {
        fail(v, "operand %d is not a variable", id);
        return NULL;
    }
    const ir_var *x = &v->k->vars[id];
    if (x->block >= 0 && !v->open[x->block]) fail(v, "variable %d is used outside its block", id);
    return x;
}

static void want(verifier *v, bool ok, const char *what) {
    if (!ok) fail(v, "%s", what);
}

/* COPY_ASYNC: device buffer a2 to threadgroup buffer a0, one element type, 4, 8 or 16 bytes;
 * a0 marked as a copy's destination (the emitters align it for the copy). */
static void check_copy(verifier *v, const ir_ins *in) {
    const ir_buf *d = buf(v, in->a[0]), *s = buf(v, in->a[2]);
    int di = val(v, in->a[1]), si = val(v, in->a[3]);
    size_t bytes = d ? tern_type_size((tern_type)d->elem) * in->aux : 0;
    bool sizes = bytes == 4 || bytes == 8 || bytes == 16;
    want(v, d && s && d->shared && (d->used & IR_BUF_COPIED) && !s->shared && (s->intent & TERN_READ) &&
                d->elem == s->elem && sizes && ir_type_is_int(di) && ir_type_is_int(si) &&
                in->type == TERN_T_VOID && in->dst < 0,
         "copy_async operands");
}

/* STORE_BULK: threadgroup buffer a2 to a writable device buffer a0, one element type, integer
 * indices and count (the value imm); a2 marked 16-byte aligned as a copy's destination is. */
static void check_store_bulk(verifier *v, const ir_ins *in) {
    const ir_buf *d = buf(v, in->a[0]), *s = buf(v, in->a[2]);
    bool count = in->imm >= 0 && in->imm <= INT32_MAX && ir_type_is_int(val(v, (int32_t)in->imm));
    want(v, d && s && s->shared && (s->used & IR_BUF_COPIED) && !d->shared && (d->intent & TERN_WRITE) &&
                d->elem == s->elem && ir_type_is_int(val(v, in->a[1])) && ir_type_is_int(val(v, in->a[3])) &&
                count && in->type == TERN_T_VOID && in->dst < 0,
         "store_bulk operands");
}

/* COPY_TILE: a tiles array a0 (its index a1), a readable bf16 buffer parameter named in imm
 * (row a2, column a3), a box that fits a copy, and a pipe's producer after consumers in aux. */
static void check_copy_tile(verifier *v, const ir_ins *in) {
    ir_tile_box b = ir_tile_unpack(in->imm);
    const ir_buf *d = buf(v, in->a[0]), *s = buf(v, b.buf);
    want(v, d && s && d->shared && (d->used & IR_BUF_TILES) && !s->shared && s->elem == TERN_T_BF16 &&
                (s->intent & TERN_READ) && val(v, in->a[1]) == TERN_T_I32 && val(v, in->a[2]) == TERN_T_I32 &&
                val(v, in->a[3]) == TERN_T_I32 && b.rows % 8 == 0 && b.cols % 8 == 0 && in->aux >= 1 &&
                in->aux < 8 && in->type == TERN_T_VOID && in->dst < 0,
         "copy_tile operands");
}

/* MMA: 16 f32 operands in extra, four consecutive f32 results defined here. */
static void check_mma(verifier *v, int32_t i) {
    const tern_kernel *k = v->k;
    const ir_ins *in = &k->ins[i];
    if (in->a[0] < 0 || in->a[0] + IR_MMA_OPERANDS > k->nextra || in->type != TERN_T_F32 ||
        in->dst < 0 || in->dst + IR_MMA_RESULTS > k->nvals) {
        fail(v, "mma operands or results");
        return;
    }
    for (int j = 0; j < IR_MMA_OPERANDS; j++)
        want(v, val(v, k->extra[in->a[0] + j]) == TERN_T_F32, "mma operand types");
    for (int j = 1; j < IR_MMA_RESULTS; j++)
        want(v, k->vals[in->dst + j].def == i && k->vals[in->dst + j].type == TERN_T_F32,
             "mma results");
}

/* WGMMA: a valid shape, tiles in tile arrays, its operands' types (A's registers or A's
 * tile index, B's tile index, C) and n/2 consecutive f32 results defined here. */
static void check_wgmma(verifier *v, int32_t i) {
    const tern_kernel *k = v->k;
    const ir_ins *in = &k->ins[i];
    ir_wg_shape s = ir_wg_unpack(in->imm);
    bool a_tile = in->a[1] >= 0;
    if (s.n < 8 || s.n > IR_WG_MAX_N || s.n % 8 || s.k < 16 || s.k > IR_WG_MAX_K || s.k % 16 ||
        (s.b_k_rows && s.n % 64) || s.b_rows % 8 || s.b_rows < (s.b_k_rows ? s.k : s.n) ||
        (a_tile && (s.a_rows % 8 || s.a_rows < (s.a_k_rows ? s.k : 64)))) {
        fail(v, "wgmma shape");
        return;
    }
    int count = ir_wg_operands(s, a_tile);
    bool async = (in->aux & IR_WG_ASYNC) != 0;
    if (in->aux > (IR_WG_ASYNC | IR_WG_ROLE) || in->a[0] < 0 || in->a[0] + count > k->nextra ||
        (async ? in->type != TERN_T_VOID || in->dst >= 0
               : in->type != TERN_T_F32 || in->dst < 0 || in->dst + s.n / 2 > k->nvals)) {
        fail(v, "wgmma operands or results");
        return;
    }
    for (int t = a_tile ? 1 : 2; t < 3; t++) {
        const ir_buf *b = buf(v, in->a[t]);
        want(v, b && b->shared && b->elem == TERN_T_BF16 && (b->used & IR_BUF_TILES), "wgmma tiles");
    }
    const int32_t *ops = &k->extra[in->a[0]];
    int j = 0;
    if (a_tile)
        want(v, val(v, ops[j++]) == TERN_T_I32, "wgmma A tile index");
    else
        for (; j < s.k / 2; j++) want(v, val(v, ops[j]) == TERN_T_F32, "wgmma A registers");
    want(v, val(v, ops[j++]) == TERN_T_I32, "wgmma B tile index");
    if (async) { /* the accumulators: f32 variables */
        for (; j < count; j++) {
            const ir_var *x = var(v, ops[j]);
            want(v, x && x->type == TERN_T_F32, "wgmma accumulators");
        }
        return;
    }
    for (; j < count; j++) want(v, val(v, ops[j]) == TERN_T_F32, "wgmma C");
    for (int r = 1; r < s.n / 2; r++)
        want(v, k->vals[in->dst + r].def == i && k->vals[in->dst + r].type == TERN_T_F32, "wgmma results");
}

static void check_ins(verifier *v, int32_t i) {
    const tern_kernel *k = v->k;
    const ir_ins *in = &k->ins[i];
    const int32_t *a = in->a;
    int t = in->type;
    if (in->dst >= 0 && (in->dst >= k->nvals || k->vals[in->dst].def != i ||
                         k->vals[in->dst].type != t))
        fail(v, "the result's value record does not match");
    switch ((ir_op)in->op) {
    case IR_CONST: want(v, ir_type_is_value(t), "constant of a non-value type"); break;
    case IR_PARAM:
        want(v, in->imm >= 0 && in->imm < k->nparams && !k->params[in->imm].is_buf &&
                    k->params[in->imm].type == t, "parameter mismatch");
        break;
    case IR_THREAD: want(v, t == TERN_T_I32 && in->aux <= TERN_SIMD_GROUPS && in->imm >= 0 &&
                               in->imm <= 2, "bad thread attribute"); break;
    case IR_UNARY: {
        int x = val(v, a[0]);
        bool isbool = in->aux == TERN_ISNAN || in->aux == TERN_ISINF;
        want(v, in->aux <= TERN_ISINF && (isbool ? t == TERN_T_BOOL && x == TERN_T_F32 : x == t),
             "unary operand type");
        break;
    }
    case IR_BINARY: {
        int x = val(v, a[0]), y = val(v, a[1]);
        bool cmp = in->aux >= TERN_LT;
        want(v, in->aux <= TERN_LOR && x == y && ir_type_is_value(x) &&
                    (cmp ? t == TERN_T_BOOL : t == x), "binary operand types");
        break;
    }
    case IR_SELECT:
        want(v, val(v, a[0]) == TERN_T_BOOL && val(v, a[1]) == t && val(v, a[2]) == t,
             "select operand types");
        break;
    case IR_FMA:
        want(v, t == TERN_T_F32 && val(v, a[0]) == t && val(v, a[1]) == t && val(v, a[2]) == t,
             "fma operand types");
        break;
    case IR_CAST: want(v, ir_type_is_value(val(v, a[0])) && ir_type_is_value(t), "cast types"); break;
    case IR_BITCAST: {
        int x = val(v, a[0]);
        want(v, ir_type_is_numeric(x) && ir_type_is_numeric(t) && ir_type_bits(x) == ir_type_bits(t),
             "bitcast types");
        break;
    }
    case IR_VAR_DECL: {
        const ir_var *x = var(v, a[0]);
        want(v, x && val(v, a[1]) == x->type, "variable initial type");
        break;
    }
    case IR_VAR_READ: {
        const ir_var *x = var(v, a[0]);
        want(v, x && x->type == t, "variable read type");
        break;
    }
    case IR_ASSIGN: {
        const ir_var *x = var(v, a[0]);
        want(v, x && val(v, a[1]) == x->type, "assignment type");
        break;
    }
    case IR_LOAD:
    case IR_VLOAD: {
        const ir_buf *b = buf(v, a[0]);
        want(v, b && (b->intent & TERN_READ) && ir_type_is_int(val(v, a[1])) &&
                    t == (int)tern_type_value(b->elem), "load types");
        if (in->op == IR_VLOAD)
            want(v, in->aux >= 2 && in->aux <= 8 && in->dst + in->aux <= k->nvals,
                 "vector width");
        break;
    }
    case IR_STORE: {
        const ir_buf *b = buf(v, a[0]);
        want(v, b && (b->intent & TERN_WRITE) && ir_type_is_int(val(v, a[1])) &&
                    val(v, a[2]) == (int)tern_type_value(b->elem), "store types");
        break;
    }
    case IR_VSTORE: {
        const ir_buf *b = buf(v, a[0]);
        want(v, b && (b->intent & TERN_WRITE) && ir_type_is_int(val(v, a[1])), "store types");
        if (a[2] < 0 || in->aux < 2 || in->aux > 8 || a[2] + in->aux > k->nextra) {
            fail(v, "vector store values");
            break;
        }
        for (int j = 0; j < in->aux && b; j++)
            want(v, val(v, k->extra[a[2] + j]) == (int)tern_type_value(b->elem), "store types");
        break;
    }
    case IR_ATOMIC:
    case IR_ATOMIC_CAS: {
        const ir_buf *b = buf(v, a[0]);
        want(v, b && b->intent == TERN_READ_WRITE && ir_type_is_int(val(v, a[1])) &&
                    val(v, a[2]) == b->elem && t == b->elem, "atomic types");
        if (in->op == IR_ATOMIC_CAS) want(v, val(v, a[3]) == t, "atomic types");
        break;
    }
    case IR_SIMD: {
        int x = val(v, a[0]);
        want(v, in->aux <= TERN_SIMD_ALL && ir_type_is_value(x), "SIMD operand type");
        if (in->aux >= TERN_SIMD_SHUFFLE && in->aux <= TERN_SIMD_SHUFFLE_UP) {
            int y = val(v, a[1]);
            want(v, y == TERN_T_I32 || y == TERN_T_U32, "SIMD lane type");
        }
        break;
    }
    case IR_MMA: check_mma(v, i); break;
    case IR_WGMMA: check_wgmma(v, i); break;
    case IR_WGMMA_WAIT:
        want(v, in->aux < IR_WG_MAX_PENDING && a[1] >= 0 && a[0] >= 0 && a[0] + a[1] <= k->nextra, "wgmma_wait");
        for (int j = 0; j < a[1] && a[0] + a[1] <= k->nextra; j++) {
            const ir_var *x = var(v, k->extra[a[0] + j]);
            want(v, x && x->type == TERN_T_F32, "wgmma_wait's accumulators");
        }
        break;
    case IR_PRINT:
        if (a[0] < 0 || a[1] < 0 || a[1] > 16 || a[0] + a[1] > k->nextra || in->imm < 0 ||
            in->imm >= k->nstrings) {
            fail(v, "print operands");
            break;
        }
        for (int j = 0; j < a[1]; j++) want(v, ir_type_is_value(val(v, k->extra[a[0] + j])), "print value");
        break;
    case IR_IF:
        want(v, val(v, a[0]) == TERN_T_BOOL && a[2] > i && a[2] < k->nins &&
                    k->ins[a[2]].op == IR_END && in->aux <= IR_IF_CONSUME && if_imm_ok(k, in),
             "if block");
        break;
    case IR_FOR:
        want(v, ir_type_is_int(t) && val(v, a[0]) == t && val(v, a[1]) == t && val(v, a[2]) == t &&
                    a[3] > i && a[3] < k->nins && k->ins[a[3]].op == IR_END, "for loop");
        break;
    case IR_WHILE:
        want(v, a[0] > i && a[0] < k->nins && k->ins[a[0]].op == IR_WHILE_TEST && a[1] > a[0] &&
                    a[1] < k->nins && k->ins[a[1]].op == IR_END, "while loop");
        break;
    case IR_WHILE_TEST: want(v, val(v, a[0]) == TERN_T_BOOL, "while condition"); break;
    case IR_RESULT: want(v, ir_type_is_value(val(v, a[0])) && i == k->nins - 1, "result"); break;
    case IR_LOAD_MATRIX: {
        const ir_buf *b = buf(v, a[0]);
        want(v, b && b->shared && b->elem == TERN_T_BF16 && (b->intent & TERN_READ) &&
                    ir_type_is_int(val(v, a[1])) && t == TERN_T_F32 && in->dst + 8 <= k->nvals,
             "load_matrix types");
        break;
    }
    case IR_WAIT_PREVIOUS: want(v, v->depth == 0, "wait_previous inside a block"); break;
    case IR_COPY_ASYNC: check_copy(v, in); break;
    case IR_COPY_TILE: check_copy_tile(v, in); break;
    case IR_COPY_WAIT: want(v, in->aux <= IR_COPY_WAIT_MAX, "copy_async_wait's pending count"); break;
    case IR_STORE_BULK: check_store_bulk(v, in); break;
    case IR_STORE_BULK_WAIT: want(v, in->aux <= IR_COPY_WAIT_MAX, "store_bulk_wait's pending count"); break;
    case IR_PREFETCH: {
        const ir_buf *b = buf(v, a[0]);
        want(v, b && !b->shared && (b->intent & TERN_READ) && ir_type_is_int(val(v, a[1])), "prefetch operands");
        break;
    }
    case IR_ELSE:
    case IR_END:
    case IR_FENCE:
    case IR_COPY_COMMIT:
    case IR_STORE_BULK_COMMIT:
    case IR_STORE_BULK_FENCE:
    case IR_BREAK:
    case IR_CONTINUE:
    case IR_EXIT: break;
    case IR_BARRIER:
        want(v, in->aux <= IR_BARRIER_SYNC && (in->aux != IR_BARRIER_SYNC || in->imm == IR_PIPE_PRODUCER ||
                                                in->imm == IR_PIPE_CONSUMERS),
             "barrier");
        break;
    default: fail(v, "unknown opcode %d", in->op);
    }
}

tern_error *ir_verify(const tern_kernel *k) {
    verifier v = {.k = k};
    v.open = calloc((size_t)k->nins + 1, sizeof *v.open);
    v.stack = calloc((size_t)k->nins + 1, sizeof *v.stack);
    if (!v.open || !v.stack) {
        free(v.open);
        free(v.stack);
        return tern_errorf("kernel '%s': out of memory", k->name);
    }
    for (int32_t i = 0; i < k->nins && !v.err; i++) {
        v.at = i;
        check_ins(&v, i);
        const ir_ins *in = &k->ins[i];
        ir_op op = (ir_op)in->op;
        if (ir_op_opens(op)) {
            v.open[i] = true;
            v.stack[v.depth++] = i;
        } else if (op == IR_ELSE) {
            int32_t top = v.depth ? v.stack[v.depth - 1] : -1;
            if (top < 0 || k->ins[top].op != IR_IF || in->a[0] != top || k->ins[top].a[1] != i) {
                fail(&v, "else without its if");
                break;
            }
            v.open[top] = false; /* the then-block's values are not visible in the else */
            v.open[i] = true;
            v.stack[v.depth - 1] = i;
        } else if (op == IR_END) {
            int32_t top = v.depth ? v.stack[v.depth - 1] : -1;
            if (top < 0 || in->a[0] != top) {
                fail(&v, "end without its block");
                break;
            }
            v.open[top] = false;
            v.depth--;
        } else if (op == IR_BREAK || op == IR_CONTINUE) {
            bool inside = false;
            for (int32_t d = 0; d < v.depth; d++)
                if (v.stack[d] == in->a[0] && (k->ins[in->a[0]].op == IR_FOR || k->ins[in->a[0]].op == IR_WHILE))
                    inside = true;
            want(&v, inside, "break or continue outside its loop");
        }
    }
    if (!v.err && v.depth) {
        v.at = v.stack[v.depth - 1];
        fail(&v, "block never closed");
    }
    if (!v.err && k->result >= 0 && (k->nins == 0 || k->ins[k->nins - 1].op != IR_RESULT)) {
        v.at = k->nins - 1;
        fail(&v, "the result is not the last statement");
    }
    free(v.open);
    free(v.stack);
    return v.err;
}
