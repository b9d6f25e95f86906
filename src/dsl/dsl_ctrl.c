/* Structured control flow (if / else / for / while, break, continue, exit) and the block
 * bookkeeping behind the TERN_ macros. Opening calls push a frame even after an error, so
 * the macros' loops still terminate; nothing is emitted then. */
#include <stdlib.h>

#include "dsl/builder.h"

static void push_role(tern_kb *kb, tern_loc at, int32_t ins, bool in_cond, int32_t role) {
    if (kb->depth == kb->cap_frames) {
        int32_t cap = kb->cap_frames ? kb->cap_frames * 2 : 8;
        kb_frame *f = cap < 1 << 20 ? realloc(kb->frames, (size_t)cap * sizeof *f) : NULL;
        if (!f) {
            kb_fail(kb, at, "out of memory (or blocks nested too deep)");
            return;
        }
        kb->frames = f;
        kb->cap_frames = cap;
    }
    kb_frame fr = {ins, false, in_cond, role, kb->pipe_p, kb->pipe_c};
    kb->frames[kb->depth++] = fr;
    if (role) {
        kb->role_depth = kb->depth;
        kb->role = role;
    }
}

static void push(tern_kb *kb, tern_loc at, int32_t ins, bool in_cond) { push_role(kb, at, ins, in_cond, 0); }
void kb_push(tern_kb *kb, tern_loc at, int32_t ins, int32_t role) { push_role(kb, at, ins, false, role); }

bool kb_refuse_in_role(tern_kb *kb, tern_loc at, const char *what) {
    if (!kb || !kb->role_depth) return false;
    kb_fail(kb, at, "%s inside a warpgroup role's block (tern_role): it needs the whole threadgroup", what);
    return true;
}

/* A role's key: its first warpgroup and count (both below 1,024), + 1 so that 0 is none; an
 * else after a role's block is the other warpgroups' role (ROLE_ELSE set). */
enum { ROLE_ELSE = 1 << 30 };

void tern_role_at(tern_loc at, tern_kb *kb, int first, int count) {
    if (!kb) return;
    if (kb_ok(kb) && kb->role_depth) kb_fail(kb, at, "role: roles do not nest (one is open already)");
    if (kb_ok(kb) && kb->pipe_depth)
        kb_fail(kb, at, "role: inside a pipe, whose produce and consume blocks are its roles");
    if (kb_ok(kb) && (first < 0 || count < 1 || first + count > 1023))
        kb_fail(kb, at, "role: warpgroups %d .. %d; the first is 0 or more, the count 1 or more", first,
                first + count - 1);
    if (!kb_ok(kb)) {
        push(kb, at, -1, false);
        return;
    }
    kb_open_role(kb, at, first, count, IR_IF_ROLE, (int64_t)first << 16 | count);
}

void kb_open_role(tern_kb *kb, tern_loc at, int first, int count, uint8_t aux, int64_t imm) {
    /* warpgroup w = local index / 128 in [first, first + count) */
    tern_v w = tern_binary_at(at, TERN_DIV, tern_thread_at(at, kb, TERN_LOCAL_INDEX, 0), tern_int(128));
    tern_v in = tern_binary_at(at, TERN_LAND, tern_binary_at(at, TERN_GE, w, tern_int(first)),
                               tern_binary_at(at, TERN_LT, w, tern_int(first + count)));
    int32_t ins = -1;
    int32_t c = kb_use(kb, at, in, TERN_T_BOOL, "the role's condition");
    if (c >= 0) {
        ir_ins op = {.op = IR_IF, .aux = aux, .a = {c, -1, -1, -1}, .imm = imm};
        ins = kb_emit(kb, at, &op, TERN_T_VOID);
    }
    push_role(kb, at, ins, false, ins >= 0 ? (first << 10 | count) + 1 : 0);
}

void tern_if_at(tern_loc at, tern_kb *kb, tern_v cond) {
    if (!kb) return;
    int32_t ins = -1;
    int32_t c = kb_use(kb, at, cond, TERN_T_BOOL, "the if's condition");
    if (c >= 0) {
        ir_ins in = {.op = IR_IF, .a = {c, -1, -1, -1}};
        ins = kb_emit(kb, at, &in, TERN_T_VOID);
    }
    push(kb, at, ins, false);
}

void tern_else_at(tern_loc at, tern_kb *kb) {
    if (!kb) return;
    if (!kb_ok(kb)) {
        push(kb, at, -1, false);
        return;
    }
    tern_kernel *k = kb->k;
    int32_t last = k->nins - 1;
    int32_t opener = last >= 0 && k->ins[last].op == IR_END ? k->ins[last].a[0] : -1;
    if (opener < 0 || k->ins[opener].op != IR_IF) {
        kb_fail(kb, at, "else must come right after an if's block");
        push(kb, at, -1, false);
        return;
    }
    k->nins--; /* reopen: drop the if's END */
    ir_ins in = {.op = IR_ELSE, .a = {opener, -1, -1, -1}};
    int32_t ins = kb_emit(kb, at, &in, TERN_T_VOID);
    if (ins >= 0) k->ins[opener].a[1] = ins;
    /* the else of a role's block is the role of the threadgroup's other warpgroups */
    int32_t role = opener == kb->closed_role_if && kb->closed_role ? kb->closed_role | ROLE_ELSE : 0;
    push_role(kb, at, ins, false, role);
}

/* The common integer type of a loop's bounds (literals adapt), or VOID after an error. */
static int loop_type(tern_kb *kb, tern_loc at, const tern_v *vs, int n) {
    int t = TERN_T_VOID;
    for (int i = 0; i < n && t == TERN_T_VOID; i++)
        if (!(vs[i].kind == TERN_V_CONST && vs[i].weak)) t = kb_type_of(kb, vs[i]);
    if (t == TERN_T_VOID) {
        bool all_weak = true;
        for (int i = 0; i < n; i++) all_weak = all_weak && vs[i].kind == TERN_V_CONST && vs[i].weak;
        if (all_weak) return TERN_T_I32;
        for (int i = 0; i < n; i++) kb_use(kb, at, vs[i], TERN_T_VOID, "a loop bound");
        return TERN_T_VOID;
    }
    if (!ir_type_is_int(t)) {
        kb_fail(kb, at, "for: bounds and step are %s; they must be integers", tern_type_name(t));
        return TERN_T_VOID;
    }
    return t;
}

tern_v tern_for_at(tern_loc at, tern_kb *kb, const char *index_name, tern_v start, tern_v end,
                   tern_v step) {
    if (!kb) return kb_poison(at, 0, 0, 0);
    int32_t ins = -1;
    int32_t idx = -1;
    if (kb_ok(kb)) {
        tern_v vs[3] = {start, end, step};
        int t = loop_type(kb, at, vs, 3);
        if (t && step.kind == TERN_V_CONST &&
            ((step.weak || ir_type_is_signed(t)) ? step.c.i <= 0 : step.c.u == 0))
            kb_fail(kb, at, "for: the step must be positive");
        int32_t s = t ? kb_use(kb, at, start, t, "the loop's start") : -1;
        int32_t e = s >= 0 ? kb_use(kb, at, end, t, "the loop's end") : -1;
        int32_t st = e >= 0 ? kb_use(kb, at, step, t, "the loop's step") : -1;
        if (st >= 0) {
            ir_ins in = {.op = IR_FOR, .a = {s, e, st, -1}};
            idx = kb_emit(kb, at, &in, t);
            if (idx >= 0) {
                ins = kb->k->vals[idx].def;
                kb->k->vals[idx].block = ins; /* the index lives inside the loop */
                if (index_name && kb_name_ok(index_name)) {
                    kb->k->vals[idx].name = ir_add_string(kb->k, index_name);
                }
            }
        }
    }
    push(kb, at, ins, false);
    if (ins >= 0) kb->loops++;
    return idx >= 0 ? kb_value(kb, idx) : kb_none(kb);
}

void tern_while_at(tern_loc at, tern_kb *kb) {
    if (!kb) return;
    ir_ins in = {.op = IR_WHILE, .a = {-1, -1, -1, -1}};
    int32_t ins = kb_emit(kb, at, &in, TERN_T_VOID);
    push(kb, at, ins, true);
    if (ins >= 0) kb->loops++;
}

void tern_while_test_at(tern_loc at, tern_kb *kb, tern_v cond) {
    if (!kb) return;
    if (!kb->depth) {
        kb_fail(kb, at, "while_test without a while");
        return;
    }
    kb_frame *f = &kb->frames[kb->depth - 1];
    if (!kb_ok(kb) || f->ins < 0) {
        f->in_cond = false;
        return;
    }
    if (!f->in_cond || kb->k->ins[f->ins].op != IR_WHILE) {
        kb_fail(kb, at, "while_test must follow tern_while and its condition");
        return;
    }
    int32_t c = kb_use(kb, at, cond, TERN_T_BOOL, "the while's condition");
    if (c < 0) return;
    ir_ins in = {.op = IR_WHILE_TEST, .a = {c, f->ins, -1, -1}};
    int32_t ins = kb_emit(kb, at, &in, TERN_T_VOID);
    if (ins < 0) return;
    kb->k->ins[f->ins].a[0] = ins;
    f->in_cond = false;
}

void tern_end_at(tern_loc at, tern_kb *kb) {
    if (!kb) return;
    if (!kb->depth) {
        kb_fail(kb, at, "end without an open block");
        return;
    }
    /* a pipe's block counts its step; a pipe's region and the blocks in it are balanced */
    if (!kb_pipe_end(kb, at)) return;
    /* a product stays in flight past its block's end only where the block is a role's (not
     * a role's else): the role's next block waits for it or chains onto it */
    int32_t role = kb->frames[kb->depth - 1].role, inside = kb->role_depth ? kb->role : 0;
    bool may_leave = role && !(role & ROLE_ELSE);
    for (int32_t i = 0; i < kb->nwg_pending; i++) {
        const kb_wg_async *p = &kb->wg_pending[i];
        if (p->depth > kb->depth) {
            kb_fail(kb, at, "a wgmma_bf16_async product of a warpgroup role is still in flight at the end of "
                    "the block around the role's block; tern_wgmma_wait in the role");
            return;
        }
        /* issued in this block (a sibling role's product, at the same depth, is not) */
        if (p->depth == kb->depth && p->role == inside && !may_leave) {
            kb_fail(kb, at, "a wgmma_bf16_async product issued in this block is still in flight at its end; "
                    "tern_wgmma_wait inside the block");
            return;
        }
    }
    kb_frame f = kb->frames[--kb->depth];
    if (role) {
        kb->role_depth = kb->role = 0;
        kb->closed_role_if = f.ins;
        kb->closed_role = role & ~ROLE_ELSE;
        if (role & ROLE_ELSE) kb->closed_role = 0;
    }
    if (f.ins < 0 || !kb_ok(kb)) return;
    tern_kernel *k = kb->k;
    ir_op op = (ir_op)k->ins[f.ins].op;
    if (op == IR_FOR || op == IR_WHILE) kb->loops--;
    if (f.in_cond) {
        kb_fail(kb, at, "the while opened here has no condition (tern_while_test)");
        return;
    }
    ir_ins in = {.op = IR_END, .a = {f.ins, -1, -1, -1}};
    int32_t ins = kb_emit(kb, at, &in, TERN_T_VOID);
    if (ins < 0) return;
    switch (op) {
    case IR_IF: k->ins[f.ins].a[2] = ins; break;
    case IR_ELSE: k->ins[k->ins[f.ins].a[0]].a[2] = ins; break;
    case IR_FOR: k->ins[f.ins].a[3] = ins; break;
    case IR_WHILE: k->ins[f.ins].a[1] = ins; break;
    default: break;
    }
}

int tern_once_at(tern_loc at, tern_kb *kb) {
    if (!kb || !kb->depth) return 0;
    kb_frame *f = &kb->frames[kb->depth - 1];
    if (!f->entered) {
        f->entered = true;
        return 1;
    }
    tern_end_at(at, kb);
    return 0;
}

/* The innermost open loop, or -1. */
static int32_t innermost_loop(const tern_kb *kb) {
    for (int32_t i = kb->depth - 1; i >= 0; i--) {
        int32_t ins = kb->frames[i].ins;
        if (ins < 0) continue;
        ir_op op = (ir_op)kb->k->ins[ins].op;
        if (op == IR_FOR || op == IR_WHILE) return kb->frames[i].in_cond ? -2 : ins;
    }
    return -1;
}

static void jump(tern_loc at, tern_kb *kb, ir_op op) {
    if (!kb_ok(kb)) return;
    int32_t loop = innermost_loop(kb);
    if (loop < 0) {
        kb_fail(kb, at, loop == -2 ? "%s inside a while's condition" : "%s outside a loop",
                ir_op_name(op));
        return;
    }
    ir_ins in = {.op = (uint8_t)op, .a = {loop, -1, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

void tern_break_at(tern_loc at, tern_kb *kb) { jump(at, kb, IR_BREAK); }
void tern_continue_at(tern_loc at, tern_kb *kb) { jump(at, kb, IR_CONTINUE); }

void tern_exit_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb)) return;
    ir_ins in = {.op = IR_EXIT, .a = {-1, -1, -1, -1}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) >= 0) kb->k->uses |= IR_USES_EXIT;
}
