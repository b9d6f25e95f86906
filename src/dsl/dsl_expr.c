/* Expressions: arithmetic, comparisons, logic, math, select, fma, casts. Each checks its
 * operand types at trace time and folds when every operand is a constant. */
#include <stdio.h>

#include "dsl/builder.h"

/* Poison codes for kb_poison (see poison_op_name in builder.c). */
enum { POISON_UNARY = 64, POISON_CAST = 128, POISON_BITCAST = 129, POISON_SELECT = 130,
       POISON_FMA = 131 };

static ev const_ev(tern_v v, int t) {
    if (v.weak) return t == TERN_T_F32 ? ev_from_f((float)v.c.i) : ev_norm(t, v.c.u);
    if (t == TERN_T_F32) return ev_from_f((float)v.c.f);
    ev x;
    x.u = v.c.u;
    return x;
}

/* The first poisoned operand, so its original failure is what gets reported. */
static const tern_v *find_poison(const tern_v *vs, int n) {
    for (int i = 0; i < n; i++)
        if (vs[i].kind == TERN_V_POISON) return &vs[i];
    return NULL;
}

/* Which operand types an operation accepts. */
static bool op2_accepts(tern_op2 op, int t) {
    switch (op) {
    case TERN_ADD:
    case TERN_SUB:
    case TERN_MUL:
    case TERN_DIV:
    case TERN_REM:
    case TERN_MIN:
    case TERN_MAX:
    case TERN_LT:
    case TERN_LE:
    case TERN_GT:
    case TERN_GE: return ir_type_is_numeric(t);
    case TERN_POW: return t == TERN_T_F32;
    case TERN_AND:
    case TERN_OR:
    case TERN_XOR: return ir_type_is_int(t) || t == TERN_T_BOOL;
    case TERN_SHL:
    case TERN_SHR: return ir_type_is_int(t);
    case TERN_EQ:
    case TERN_NE: return ir_type_is_value(t);
    case TERN_LAND:
    case TERN_LOR: return t == TERN_T_BOOL;
    }
    return false;
}

static bool op2_is_compare(tern_op2 op) {
    return op == TERN_LT || op == TERN_LE || op == TERN_GT || op == TERN_GE || op == TERN_EQ ||
           op == TERN_NE || op == TERN_LAND || op == TERN_LOR;
}

static const char *op2_wants(tern_op2 op) {
    switch (op) {
    case TERN_POW: return "f32";
    case TERN_AND:
    case TERN_OR:
    case TERN_XOR: return "integers or bools";
    case TERN_SHL:
    case TERN_SHR: return "integers";
    case TERN_EQ:
    case TERN_NE: return "values";
    case TERN_LAND:
    case TERN_LOR: return "bools";
    default: return "numbers (integers or f32)";
    }
}

tern_v tern_binary_at(tern_loc at, tern_op2 op, tern_v a, tern_v b) {
    tern_v ops[2] = {a, b};
    tern_kb *kb = kb_of(ops, 2);
    if ((unsigned)op > TERN_LOR) {
        kb_fail(kb, at, "unknown binary operation %d", (int)op);
        return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    }
    const tern_v *poison = find_poison(ops, 2);
    if (!kb) {
        if (poison) return *poison;
        int t = kb_unify(NULL, a, b);
        if (!op2_accepts(op, t)) return kb_poison(at, op, a.type, b.type);
        /* two literals compute in 64 bits and stay a literal */
        int ct = a.weak && b.weak ? TERN_T_I64 : t;
        bool fault = false;
        ev r = ev_binary(op, ct, const_ev(a, ct), const_ev(b, ct), &fault);
        if (fault) return kb_poison(at, op, a.type, b.type);
        bool weak = a.weak && b.weak && !op2_is_compare(op);
        return kb_const(op2_is_compare(op) ? TERN_T_BOOL : t, r, weak);
    }
    if (!kb_ok(kb)) return kb_none(kb);
    if (poison) {
        kb_use(kb, at, *poison, TERN_T_VOID, ir_op2_name(op));
        return kb_none(kb);
    }
    int t = kb_unify(kb, a, b);
    int ta = kb_type_of(kb, a), tb = kb_type_of(kb, b);
    if (t == TERN_T_VOID) {
        if (ta == TERN_T_VOID || tb == TERN_T_VOID) {
            /* report what is wrong with the operand itself */
            kb_use(kb, at, ta == TERN_T_VOID ? a : b, TERN_T_VOID, "an operand");
            if (!kb->err) kb_fail(kb, at, "%s: an operand is not a value", ir_op2_name(op));
        } else if ((a.kind == TERN_V_CONST && a.weak) || (b.kind == TERN_V_CONST && b.weak)) {
            kb_fail(kb, at, "%s: the literal %lld does not fit %s", ir_op2_name(op),
                    (long long)(a.weak ? a.c.i : b.c.i), tern_type_name(a.weak ? tb : ta));
        } else {
            kb_fail(kb, at, "%s of %s and %s: operand types differ (convert one with tern_cast)",
                    ir_op2_name(op), tern_type_name(ta), tern_type_name(tb));
        }
        return kb_none(kb);
    }
    if (!op2_accepts(op, t)) {
        kb_fail(kb, at, "%s is not defined for %s (it takes %s)", ir_op2_name(op),
                tern_type_name(t), op2_wants(op));
        return kb_none(kb);
    }
    int32_t x = kb_use(kb, at, a, t, "the first operand");
    int32_t y = kb_use(kb, at, b, t, "the second operand");
    if (x < 0 || y < 0) return kb_none(kb);
    ir_ins in = {.op = IR_BINARY, .aux = (uint8_t)op, .a = {x, y, -1, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, op2_is_compare(op) ? TERN_T_BOOL : t));
}

static bool op1_is_math(tern_op1 op) { return op >= TERN_EXP && op <= TERN_ISINF; }

tern_v tern_unary_at(tern_loc at, tern_op1 op, tern_v a) {
    tern_kb *kb = a.kb;
    if ((unsigned)op > TERN_ISINF) {
        kb_fail(kb, at, "unknown unary operation %d", (int)op);
        return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    }
    int t = kb_type_of(kb, a);
    if (a.kind == TERN_V_CONST && a.weak && op1_is_math(op)) t = TERN_T_F32;
    bool ok;
    switch (op) {
    case TERN_NEG:
    case TERN_ABS: ok = ir_type_is_numeric(t); break;
    case TERN_NOT: ok = ir_type_is_int(t); break;
    case TERN_LNOT: ok = t == TERN_T_BOOL; break;
    default: ok = t == TERN_T_F32; break;
    }
    int rt = (op == TERN_ISNAN || op == TERN_ISINF) ? TERN_T_BOOL : t;
    if (!kb) {
        if (a.kind == TERN_V_POISON) return a;
        if (!ok) return kb_poison(at, POISON_UNARY + op, t, TERN_T_VOID);
        return kb_const(rt, ev_unary(op, t, const_ev(a, t)), a.weak && !op1_is_math(op));
    }
    if (!kb_ok(kb)) return kb_none(kb);
    if (!ok) {
        if (t == TERN_T_VOID) {
            kb_use(kb, at, a, TERN_T_VOID, "the operand");
            if (!kb->err) kb_fail(kb, at, "%s: the operand is not a value", ir_op1_name(op));
        } else {
            const char *wants = op == TERN_NOT    ? "integers"
                                : op == TERN_LNOT ? "bools"
                                : op1_is_math(op) ? "f32"
                                                  : "numbers";
            kb_fail(kb, at, "%s is not defined for %s (it takes %s)", ir_op1_name(op),
                    tern_type_name(t), wants);
        }
        return kb_none(kb);
    }
    int32_t x = kb_use(kb, at, a, t, "the operand");
    if (x < 0) return kb_none(kb);
    ir_ins in = {.op = IR_UNARY, .aux = (uint8_t)op, .a = {x, -1, -1, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, rt));
}

tern_v tern_select_at(tern_loc at, tern_v cond, tern_v if_true, tern_v if_false) {
    tern_v ops[3] = {cond, if_true, if_false};
    tern_kb *kb = kb_of(ops, 3);
    int tc = kb_type_of(kb, cond);
    int t = kb_unify(kb, if_true, if_false);
    if (!kb) {
        const tern_v *poison = find_poison(ops, 3);
        if (poison) return *poison;
        if (tc != TERN_T_BOOL || !ir_type_is_value(t))
            return kb_poison(at, POISON_SELECT, if_true.type, if_false.type);
        return const_ev(cond, TERN_T_BOOL).u ? kb_const(t, const_ev(if_true, t), if_true.weak && if_false.weak)
                                              : kb_const(t, const_ev(if_false, t), if_true.weak && if_false.weak);
    }
    if (!kb_ok(kb)) return kb_none(kb);
    if (!ir_type_is_value(t)) {
        int ta = kb_type_of(kb, if_true), tb = kb_type_of(kb, if_false);
        if (ta == TERN_T_VOID || tb == TERN_T_VOID)
            kb_use(kb, at, ta == TERN_T_VOID ? if_true : if_false, TERN_T_VOID, "select's operand");
        if (!kb->err)
            kb_fail(kb, at, "select of %s and %s: the two choices must have the same type",
                    tern_type_name(ta), tern_type_name(tb));
        return kb_none(kb);
    }
    int32_t c = kb_use(kb, at, cond, TERN_T_BOOL, "select's condition");
    int32_t x = kb_use(kb, at, if_true, t, "select's first choice");
    int32_t y = kb_use(kb, at, if_false, t, "select's second choice");
    if (c < 0 || x < 0 || y < 0) return kb_none(kb);
    ir_ins in = {.op = IR_SELECT, .a = {c, x, y, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, t));
}

tern_v tern_fma_at(tern_loc at, tern_v a, tern_v b, tern_v c) {
    tern_v ops[3] = {a, b, c};
    tern_kb *kb = kb_of(ops, 3);
    if (!kb) {
        const tern_v *poison = find_poison(ops, 3);
        if (poison) return *poison;
        for (int i = 0; i < 3; i++)
            if (ops[i].type != TERN_T_F32 && !ops[i].weak)
                return kb_poison(at, POISON_FMA, ops[i].type, TERN_T_F32);
        return kb_const(TERN_T_F32, ev_fma(const_ev(a, TERN_T_F32), const_ev(b, TERN_T_F32),
                                           const_ev(c, TERN_T_F32)), false);
    }
    if (!kb_ok(kb)) return kb_none(kb);
    int32_t x = kb_use(kb, at, a, TERN_T_F32, "fma's first operand");
    int32_t y = kb_use(kb, at, b, TERN_T_F32, "fma's second operand");
    int32_t z = kb_use(kb, at, c, TERN_T_F32, "fma's third operand");
    if (x < 0 || y < 0 || z < 0) return kb_none(kb);
    ir_ins in = {.op = IR_FMA, .a = {x, y, z, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, TERN_T_F32));
}

static tern_v convert(tern_loc at, tern_v a, tern_type to, bool bits) {
    tern_kb *kb = a.kb;
    const char *name = bits ? "bitcast" : "cast";
    int from = kb_type_of(kb, a);
    bool ok = ir_type_is_value(to) && ir_type_is_value(from);
    if (bits) ok = ok && to != TERN_T_BOOL && from != TERN_T_BOOL &&
                   ir_type_bits(to) == ir_type_bits(from);
    if (!kb) {
        if (a.kind == TERN_V_POISON) return a;
        if (!ok) return kb_poison(at, bits ? POISON_BITCAST : POISON_CAST, from, to);
        ev x = const_ev(a, from);
        return kb_const(to, bits ? ev_bitcast(from, to, x) : ev_cast(from, to, x), false);
    }
    if (!kb_ok(kb)) return kb_none(kb);
    if (!ok) {
        if (from == TERN_T_VOID) {
            kb_use(kb, at, a, TERN_T_VOID, "the operand");
            if (!kb->err) kb_fail(kb, at, "%s: the operand is not a value", name);
        } else if (bits) {
            kb_fail(kb, at, "bitcast from %s to %s: the types must have the same size "
                    "(f32/i32/u32 or i64/u64)", tern_type_name(from), tern_type_name(to));
        } else {
            kb_fail(kb, at, "cast from %s to %s: both must be value types (bool, i32, u32, i64, "
                    "u64, f32)", tern_type_name(from), tern_type_name(to));
        }
        return kb_none(kb);
    }
    if (a.kind == TERN_V_CONST && a.weak) {
        /* a literal converts at trace time */
        ev x = ev_cast(TERN_T_I64, to, ev_from_u(a.c.u));
        return kb_const(to, x, false);
    }
    int32_t x = kb_use(kb, at, a, from, "the operand");
    if (x < 0) return kb_none(kb);
    if (from == (int)to && !bits) return kb_value(kb, x);
    ir_ins in = {.op = bits ? IR_BITCAST : IR_CAST, .a = {x, -1, -1, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, to));
}

tern_v tern_cast_at(tern_loc at, tern_v a, tern_type to) { return convert(at, a, to, false); }
tern_v tern_bitcast_at(tern_loc at, tern_v a, tern_type to) { return convert(at, a, to, true); }
