/* Pipes (tern/kernel.h, TERN_PIPE): a producer's warpgroups filling a ring of slots that the
 * consumer warpgroups use, step by step. The tracer's part: the region, its produce and
 * consume blocks (warpgroup roles with a step variable each thread counts), and the rules
 * that let CUDA run each role on its own while the other targets run the same blocks in
 * lockstep, in the order traced. */
#include "dsl/builder.h"

bool kb_refuse_in_pipe(tern_kb *kb, tern_loc at, ir_op op) {
    if (!kb || !kb->pipe_depth) return false;
    switch (op) {
    case IR_BREAK:
    case IR_CONTINUE:
    case IR_EXIT:
    case IR_RESULT:
        kb_fail(kb, at, "%s inside a pipe (tern_pipe): every thread runs all of its role's blocks", ir_op_name(op));
        return true;
    default: break;
    }
    if (kb->role_depth) return false; /* inside a produce or consume block */
    switch (op) {
    case IR_BARRIER:
    case IR_STORE:
    case IR_VSTORE:
    case IR_ATOMIC:
    case IR_ATOMIC_CAS:
    case IR_COPY_ASYNC:
    case IR_COPY_COMMIT:
    case IR_COPY_WAIT:
    case IR_STORE_BULK:
    case IR_STORE_BULK_COMMIT:
    case IR_STORE_BULK_WAIT:
    case IR_STORE_BULK_FENCE:
    case IR_WGMMA:
    case IR_WGMMA_WAIT:
    case IR_MMA:
    case IR_LOAD_MATRIX:
    case IR_WAIT_PREVIOUS:
    case IR_FENCE:
    case IR_COPY_TILE:
        kb_fail(kb, at, "%s in a pipe outside its produce and consume blocks: on CUDA each role runs the region on "
                "its own", ir_op_name(op));
        return true;
    default: return false;
    }
}

void tern_pipe_at(tern_loc at, tern_kb *kb, const tern_pipe *p) {
    if (!kb) return;
    if (kb_ok(kb) && !p) kb_fail(kb, at, "pipe: the spec is NULL");
    if (kb_ok(kb) && kb->pipe_depth) kb_fail(kb, at, "pipe: pipes do not nest (one is open already)");
    if (kb_ok(kb) && kb->role_depth) kb_fail(kb, at, "pipe: inside a warpgroup role's block");
    if (kb_ok(kb) && (p->producer_first < 1 || p->producer_count < 1 || p->producer_first + p->producer_count > 8))
        kb_fail(kb, at, "pipe: the producer is warpgroups %d .. %d; it needs consumers before it (first >= 1) and "
                "at most 8 warpgroups in all", p->producer_first, p->producer_first + p->producer_count - 1);
    if (kb_ok(kb) && (p->stages < 1 || p->stages > 32 || p->lag < 0 || p->lag >= p->stages))
        kb_fail(kb, at, "pipe: %d stages, lag %d; stages are 1 .. 32 and the lag 0 .. stages - 1", p->stages, p->lag);
    if (kb_ok(kb) && (p->producer_regs || p->consumer_regs)) {
        bool ok = true;
        for (int i = 0; i < 2; i++) {
            int r = i ? p->consumer_regs : p->producer_regs;
            ok = ok && r >= 24 && r <= 256 && r % 8 == 0;
        }
        if (!ok)
            kb_fail(kb, at, "pipe: registers %d (producer) and %d (consumers); both 0, or both multiples of 8 in "
                    "24 .. 256", p->producer_regs, p->consumer_regs);
    }
    /* the producer's threads: its warpgroups, or one warpgroup's first warps */
    int threads = kb_ok(kb) ? kb->k->max_threads : 0, producers = threads - (kb_ok(kb) ? p->producer_first * 128 : 0);
    if (kb_ok(kb) && (producers < 32 || producers % 32 || producers > p->producer_count * 128 ||
                      (producers < p->producer_count * 128 && p->producer_count > 1)))
        kb_fail(kb, at, "pipe: tern_max_threads(kb, %d) first (now %d), or %d for a producer of the last warpgroup's "
                "first warps", (p->producer_first + p->producer_count) * 128, threads, p->producer_first * 128 + 32);
    if (kb_ok(kb) && producers < 128 && p->producer_regs)
        kb_fail(kb, at, "pipe: setmaxnreg with a producer of %d threads; it moves whole warpgroups' registers",
                producers);
    if (kb_ok(kb) && p->producer_regs) {
        /* setmaxnreg moves registers within the group's pool: what its threads start with */
        int groups = kb->k->min_groups ? kb->k->min_groups : 1, start = 65536 / (threads * groups) / 8 * 8;
        if (start > 256) start = 256;
        long need = (long)p->producer_regs * p->producer_count + (long)p->consumer_regs * p->producer_first;
        if (need > (long)start * (p->producer_first + p->producer_count))
            kb_fail(kb, at, "pipe: registers %d (producer) and %d (consumers) exceed the %d a thread starts with, "
                    "on average", p->producer_regs, p->consumer_regs, start);
    }
    if (!kb_ok(kb)) {
        kb_push(kb, at, -1, 0);
        return;
    }
    ir_pipe_spec s = {p->producer_first, p->producer_count, p->stages, p->lag, p->producer_regs, p->consumer_regs};
    int32_t c = kb_use(kb, at, tern_bool(true), TERN_T_BOOL, "the pipe's condition");
    int32_t ins = -1;
    if (c >= 0) {
        ir_ins op = {.op = IR_IF, .aux = IR_IF_PIPE, .a = {c, -1, -1, -1}, .imm = ir_pipe_pack(s)};
        ins = kb_emit(kb, at, &op, TERN_T_VOID);
    }
    kb_push(kb, at, ins, 0);
    if (ins < 0) return;
    kb->pipe_depth = kb->depth;
    kb->pipe = s;
    kb->pipe_p = kb->pipe_c = 0;
    kb->pipe_step = tern_var_at(at, kb, "pipe_step", tern_int(0));
    /* ptxas honours setmaxnreg only where it knows the registers a thread starts with: launch
     * bounds with a group count (it then gives every thread the most they allow) */
    if (s.producer_regs && !kb->k->min_groups) kb->k->min_groups = 1;
    kb->k->uses |= IR_USES_BARRIER;
}

/* The barrier the lockstep targets pass before each of the pipe's blocks and at its end. */
static void pipe_barrier(tern_kb *kb, tern_loc at) {
    ir_ins in = {.op = IR_BARRIER, .aux = IR_BARRIER_PIPE, .a = {-1, -1, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

static void pipe_block(tern_loc at, tern_kb *kb, bool produce) {
    if (!kb) return;
    const char *what = produce ? "produce" : "consume";
    const ir_pipe_spec *p = &kb->pipe;
    if (kb_ok(kb) && !kb->pipe_depth) kb_fail(kb, at, "%s: outside a pipe (TERN_PIPE)", what);
    if (kb_ok(kb) && kb->role_depth) kb_fail(kb, at, "%s: inside another of the pipe's blocks or a role's", what);
    /* the order CUDA's roles would give (tern/kernel.h): a slot is refilled only after the
     * consume block lag steps after its last use, and used only after it is filled */
    if (kb_ok(kb) && produce && kb->pipe_c < kb->pipe_p - p->stages + p->lag + 1)
        kb_fail(kb, at, "produce: step %d's slot is still the consumers' until consume block %d ends (%d stages, "
                "lag %d); trace that consume block first", kb->pipe_p, kb->pipe_p - p->stages + p->lag,
                p->stages, p->lag);
    if (kb_ok(kb) && !produce && kb->pipe_c >= kb->pipe_p)
        kb_fail(kb, at, "consume: step %d before its produce block", kb->pipe_c);
    if (!kb_ok(kb)) {
        kb_push(kb, at, -1, 0);
        return;
    }
    pipe_barrier(kb, at);
    int first = produce ? p->producer_first : 0, count = produce ? p->producer_count : p->producer_first;
    kb_open_role(kb, at, first, count, produce ? IR_IF_PRODUCE : IR_IF_CONSUME, kb->pipe_step.id);
    if (produce)
        kb->pipe_p++;
    else
        kb->pipe_c++;
}

void tern_produce_at(tern_loc at, tern_kb *kb) { pipe_block(at, kb, true); }
void tern_consume_at(tern_loc at, tern_kb *kb) { pipe_block(at, kb, false); }

/* The open produce or consume block's IF, or -1. */
static int32_t open_block(const tern_kb *kb) {
    if (!kb->pipe_depth || !kb->role_depth) return -1;
    int32_t ins = kb->frames[kb->role_depth - 1].ins;
    if (ins < 0) return -1;
    uint8_t aux = kb->k->ins[ins].aux;
    return aux == IR_IF_PRODUCE || aux == IR_IF_CONSUME ? ins : -1;
}

void tern_pipe_sync_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb)) return;
    int32_t ins = open_block(kb);
    if (ins < 0 || kb->depth != kb->role_depth) {
        kb_fail(kb, at, "pipe_sync: outside the top level of a pipe's produce or consume block");
        return;
    }
    const ir_ins *in = &kb->k->ins[ins];
    const uint8_t aux = in->aux;
    const int64_t step = in->imm & ~IR_PIPE_MORE;
    const bool produce = aux == IR_IF_PRODUCE;
    /* the block ends here without counting its step, the role's barrier, and its continuation */
    kb->pipe_splitting = true;
    tern_end_at(at, kb);
    kb->pipe_splitting = false;
    if (!kb_ok(kb)) return;
    ir_ins bar = {.op = IR_BARRIER, .aux = IR_BARRIER_SYNC, .a = {-1, -1, -1, -1},
                  .imm = produce ? IR_PIPE_PRODUCER : IR_PIPE_CONSUMERS};
    if (kb_emit(kb, at, &bar, TERN_T_VOID) < 0) return;
    const ir_pipe_spec *p = &kb->pipe;
    kb_open_role(kb, at, produce ? p->producer_first : 0, produce ? p->producer_count : p->producer_first, aux,
                 step | IR_PIPE_MORE);
    /* the macro around the block is inside its body already: this frame is entered */
    if (kb->depth) kb->frames[kb->depth - 1].entered = true;
}

bool kb_in_produce(const tern_kb *kb) {
    int32_t ins = open_block(kb);
    return ins >= 0 && kb->k->ins[ins].aux == IR_IF_PRODUCE;
}

tern_v tern_pipe_step_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb)) return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    if (open_block(kb) < 0) {
        kb_fail(kb, at, "pipe_step: outside a pipe's produce and consume blocks");
        return kb_none(kb);
    }
    int32_t v = kb_use(kb, at, kb->pipe_step, TERN_T_I32, "the pipe's step");
    return v >= 0 ? kb_value(kb, v) : kb_none(kb);
}

bool kb_pipe_end(tern_kb *kb, tern_loc at) {
    if (!kb_ok(kb) || !kb->pipe_depth || kb->depth < kb->pipe_depth) return true;
    const kb_frame *f = &kb->frames[kb->depth - 1];
    if (f->ins < 0) return true;
    const ir_ins *in = &kb->k->ins[f->ins];
    bool block = in->op == IR_IF && (in->aux == IR_IF_PRODUCE || in->aux == IR_IF_CONSUME);
    if (block) {
        if (kb->pipe_splitting) return kb_ok(kb); /* tern_pipe_sync: the block goes on */
        if (in->aux == IR_IF_CONSUME) {
            int in_flight = 0;
            for (int32_t i = 0; i < kb->nwg_pending; i++)
                in_flight += kb->wg_pending[i].depth == kb->depth && kb->wg_pending[i].role == f->role;
            if (in_flight > kb->pipe.lag) {
                kb_fail(kb, at, "consume: %d wgmma_bf16_async products in flight at the block's end; the pipe's lag "
                        "(%d) frees the slot of that many steps before, so at most %d may be", in_flight,
                        kb->pipe.lag, kb->pipe.lag);
                return false;
            }
        }
        tern_assign_at(at, kb->pipe_step, tern_binary_at(at, TERN_ADD, kb->pipe_step, tern_int(1)));
        return kb_ok(kb);
    }
    int32_t p = kb->pipe_p - f->pipe_p, c = kb->pipe_c - f->pipe_c;
    if (p != c) {
        kb_fail(kb, at, "%s has %d produce and %d consume blocks; each block of a pipe has as many of each",
                kb->depth == kb->pipe_depth ? "the pipe" : "this block in a pipe", p, c);
        return false;
    }
    if (kb->depth == kb->pipe_depth) {
        pipe_barrier(kb, at);
        kb->pipe_depth = 0;
    }
    return kb_ok(kb);
}
