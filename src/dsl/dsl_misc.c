/* Thread attributes, barriers, the wait for the previous kernel, SIMD-group operations (with
 * the bf16 MMA), print, function results and inlined calls. */
#include <stdio.h>
#include <string.h>

#include "dsl/builder.h"

tern_v tern_thread_at(tern_loc at, tern_kb *kb, tern_thread_attr attr, int dim) {
    if (!kb_ok(kb)) return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    if ((unsigned)attr > TERN_SIMD_GROUPS) {
        kb_fail(kb, at, "unknown thread attribute %d", (int)attr);
        return kb_none(kb);
    }
    if (attr >= TERN_LOCAL_INDEX) dim = 0;
    if (dim < 0 || dim > 2) {
        kb_fail(kb, at, "%s: dimension %d is not 0, 1 or 2", ir_thread_name(attr), dim);
        return kb_none(kb);
    }
    int32_t *slot = &kb->thread_vals[attr][dim];
    if (*slot > 0) return kb_value(kb, *slot - 1);
    ir_ins in = {.op = IR_THREAD, .aux = (uint8_t)attr, .a = {-1, -1, -1, -1}, .imm = dim};
    int32_t v = kb_emit(kb, at, &in, TERN_T_I32);
    if (v < 0) return kb_none(kb);
    *slot = v + 1;
    kb->k->uses |= IR_USES_THREAD;
    return kb_value(kb, v);
}

void tern_max_threads_at(tern_loc at, tern_kb *kb, int threads) {
    if (!kb_ok(kb)) return;
    if (threads < 1 || threads > 1024) {
        kb_fail(kb, at, "max_threads: %d is not in 1..1024", threads);
        return;
    }
    kb->k->max_threads = threads;
}

void tern_min_groups_at(tern_loc at, tern_kb *kb, int groups) {
    if (!kb_ok(kb)) return;
    if (!kb->k->max_threads) {
        kb_fail(kb, at, "min_groups needs tern_max_threads first");
        return;
    }
    if (groups < 1 || groups > 32) {
        kb_fail(kb, at, "min_groups: %d is not in 1..32", groups);
        return;
    }
    kb->k->min_groups = groups;
}

void tern_barrier_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb) || kb_refuse_in_role(kb, at, "a barrier")) return;
    ir_ins in = {.op = IR_BARRIER, .a = {-1, -1, -1, -1}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) >= 0) kb->k->uses |= IR_USES_BARRIER;
}

void tern_fence_device_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb)) return;
    ir_ins in = {.op = IR_FENCE, .a = {-1, -1, -1, -1}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) >= 0) kb->k->uses |= IR_USES_FENCE;
}

/* The first statement traced so far that a kernel may not do before its wait: a store or
 * atomic to device memory (an earlier kernel may still read it), or an exit (a thread that
 * ends without waiting would let the kernel finish before the one it overlaps). -1: none. */
static int32_t before_wait_violation(const tern_kernel *k) {
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        switch ((ir_op)in->op) {
        case IR_STORE:
        case IR_VSTORE:
        case IR_ATOMIC:
        case IR_ATOMIC_CAS:
        case IR_STORE_BULK:
            if (!k->bufs[in->a[0]].shared) return i;
            break;
        case IR_EXIT: return i;
        default: break;
        }
    }
    return -1;
}

void tern_wait_previous_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb)) return;
    if (kb->depth) {
        kb_fail(kb, at, "wait_previous inside a block: it belongs at top level, where every "
                "thread reaches it");
        return;
    }
    if (!(kb->k->uses & IR_USES_WAIT_PREVIOUS)) {
        int32_t bad = before_wait_violation(kb->k);
        if (bad >= 0) {
            char what[160], where[128];
            kb_fail(kb, at, "wait_previous after '%s' (%s): nothing may write device memory or "
                    "exit before the wait", ir_describe(kb->k, bad, what, sizeof what),
                    ir_where(kb->k, bad, where, sizeof where));
            return;
        }
    }
    ir_ins in = {.op = IR_WAIT_PREVIOUS, .a = {-1, -1, -1, -1}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) >= 0) kb->k->uses |= IR_USES_WAIT_PREVIOUS;
}

tern_v tern_simd_at(tern_loc at, tern_simd_op op, tern_v v, tern_v arg) {
    tern_v ops[2] = {v, arg};
    tern_kb *kb = kb_of(ops, 2);
    if (!kb) {
        /* every lane holds the same constant: no kernel needed to know the answer only for
         * some operations, so keep it simple and ask for a value of a kernel */
        return kb_poison(at, 132, v.type, arg.type);
    }
    if (!kb_ok(kb)) return kb_none(kb);
    if ((unsigned)op > TERN_SIMD_ALL) {
        kb_fail(kb, at, "unknown SIMD operation %d", (int)op);
        return kb_none(kb);
    }
    int t = kb_type_of(kb, v);
    if (v.kind == TERN_V_CONST && v.weak) t = TERN_T_I32;
    bool on_bools = op == TERN_SIMD_BALLOT || op == TERN_SIMD_ANY || op == TERN_SIMD_ALL;
    bool ok = on_bools ? t == TERN_T_BOOL : ir_type_is_numeric(t);
    if (!ok) {
        if (t == TERN_T_VOID) kb_use(kb, at, v, TERN_T_VOID, "the SIMD operand");
        if (!kb->err)
            kb_fail(kb, at, "simd_%s of %s: it takes %s", ir_simd_name(op), tern_type_name(t),
                    on_bools ? "a bool" : "a number (integer or f32)");
        return kb_none(kb);
    }
    int32_t x = kb_use(kb, at, v, t, "the SIMD operand");
    if (x < 0) return kb_none(kb);
    int32_t y = -1;
    if (op >= TERN_SIMD_SHUFFLE && op <= TERN_SIMD_SHUFFLE_UP) {
        int ta = kb_type_of(kb, arg);
        if (arg.kind == TERN_V_CONST && arg.weak) ta = TERN_T_U32;
        if (ta != TERN_T_I32 && ta != TERN_T_U32) {
            if (ta == TERN_T_VOID) kb_use(kb, at, arg, TERN_T_VOID, "the lane");
            if (!kb->err)
                kb_fail(kb, at, "simd_%s: the lane or offset is %s; it must be i32 or u32",
                        ir_simd_name(op), tern_type_name(ta));
            return kb_none(kb);
        }
        if (arg.kind == TERN_V_CONST && arg.weak && (arg.c.i < 0 || arg.c.i > 31)) {
            kb_fail(kb, at, "simd_%s: the constant lane or offset %lld is not in 0..31",
                    ir_simd_name(op), (long long)arg.c.i);
            return kb_none(kb);
        }
        y = kb_use(kb, at, arg, ta, "the lane");
        if (y < 0) return kb_none(kb);
    }
    int rt = op == TERN_SIMD_BALLOT ? TERN_T_U32 : t;
    if (kb_refuse_in_role(kb, at, "a SIMD-group operation")) return kb_none(kb);
    ir_ins in = {.op = IR_SIMD, .aux = (uint8_t)op, .a = {x, y, -1, -1}};
    int32_t r = kb_emit(kb, at, &in, rt);
    if (r >= 0) kb->k->uses |= IR_USES_SIMD;
    return kb_value(kb, r);
}

/* The 16 operand ids of an MMA (a, b, c in that order) into ids; false after an error. */
static bool mma_operands(tern_kb *kb, tern_loc at, const tern_v *a, const tern_v *b, const tern_v *c,
                         int32_t *ids) {
    static const char names[3] = {'a', 'b', 'c'};
    const tern_v *arrays[3] = {a, b, c};
    const int counts[3] = {8, 4, 4};
    for (int s = 0; s < 3; s++)
        if (!arrays[s]) {
            kb_fail(kb, at, "mma_bf16: %c is NULL (it takes arrays of %d values)", names[s], counts[s]);
            return false;
        }
    int n = 0;
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < counts[s]; j++) {
            char what[48];
            snprintf(what, sizeof what, "mma_bf16's %c[%d]", names[s], j);
            ids[n] = kb_use(kb, at, arrays[s][j], TERN_T_F32, what);
            if (ids[n++] < 0) return false;
        }
    return true;
}

void tern_mma_bf16_at(tern_loc at, tern_kb *kb, const tern_v a[8], const tern_v b[4], const tern_v c[4],
                      tern_v d[4]) {
    /* read every operand before d is written: d may be c */
    int32_t ids[IR_MMA_OPERANDS];
    bool ok = kb_ok(kb) && d && !kb_refuse_in_role(kb, at, "mma_bf16") && mma_operands(kb, at, a, b, c, ids);
    if (d)
        for (int j = 0; j < IR_MMA_RESULTS; j++) d[j] = kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    if (!ok) {
        if (kb_ok(kb) && !d) kb_fail(kb, at, "mma_bf16: d is NULL");
        return;
    }
    int32_t first = ir_add_extra(kb->k, ids, IR_MMA_OPERANDS);
    if (first < 0) {
        kb_fail(kb, at, "out of memory");
        return;
    }
    ir_ins in = {.op = IR_MMA, .a = {first, -1, -1, -1}};
    int32_t r = kb_emit(kb, at, &in, TERN_T_F32);
    if (r < 0) return;
    kb->k->uses |= IR_USES_SIMD;
    int32_t def = kb->k->vals[r].def;
    d[0] = kb_value(kb, r);
    for (int j = 1; j < IR_MMA_RESULTS; j++) {
        int32_t v = ir_add_value(kb->k, TERN_T_F32, def, kb->k->vals[r].block);
        if (v != r + j) {
            kb_fail(kb, at, "out of memory");
            return;
        }
        d[j] = kb_value(kb, v);
    }
}

void tern_print_at(tern_loc at, tern_kb *kb, const char *fmt, int count, const tern_v *values) {
    if (!kb_ok(kb)) return;
    if (!fmt) {
        kb_fail(kb, at, "print: the format is NULL");
        return;
    }
    int holes = 0;
    for (const char *p = fmt; (p = strstr(p, "{}")); p += 2) holes++;
    if (count < 0 || count > 16 || (count > 0 && !values) || holes != count) {
        kb_fail(kb, at, "print: the format has %d {} for %d values (at most 16)", holes, count);
        return;
    }
    if (strlen(fmt) > 1000) {
        kb_fail(kb, at, "print: the format is longer than 1000 characters");
        return;
    }
    int32_t ids[16];
    for (int i = 0; i < count; i++) {
        int t = kb_type_of(kb, values[i]);
        if (values[i].kind == TERN_V_CONST && values[i].weak) t = TERN_T_I32;
        ids[i] = kb_use(kb, at, values[i], ir_type_is_value(t) ? t : TERN_T_VOID, "a printed value");
        if (ids[i] < 0) return;
    }
    int32_t first = ir_add_extra(kb->k, ids, count);
    int32_t s = ir_add_string(kb->k, fmt);
    if (first < 0 || s < 0) {
        kb_fail(kb, at, "out of memory");
        return;
    }
    ir_ins in = {.op = IR_PRINT, .a = {first, count, -1, -1}, .imm = s};
    if (kb_emit(kb, at, &in, TERN_T_VOID) >= 0) kb->k->uses |= IR_USES_PRINT;
}

void tern_result_at(tern_loc at, tern_kb *kb, tern_v value) {
    if (!kb_ok(kb)) return;
    if (kb->depth) {
        kb_fail(kb, at, "tern_result inside a block: a function's result comes last, at top level");
        return;
    }
    int t = kb_type_of(kb, value);
    if (value.kind == TERN_V_CONST && value.weak) t = TERN_T_I32;
    int32_t x = kb_use(kb, at, value, ir_type_is_value(t) ? t : TERN_T_VOID, "the result");
    if (x < 0) return;
    if (!ir_type_is_value(kb->k->vals[x].type)) {
        kb_fail(kb, at, "the result is not a value");
        return;
    }
    ir_ins in = {.op = IR_RESULT, .a = {x, -1, -1, -1}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) >= 0) kb->k->result = x;
}
