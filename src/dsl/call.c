/* tern_call: inlines a pure function into the kernel being traced by replaying its
 * statements through the DSL, so every check (types, scopes) and fold applies again, and
 * errors point at the function's own source lines. */
#include <stdio.h>
#include <stdlib.h>

#include "dsl/builder.h"

static tern_v const_of(const ir_ins *in) {
    if (in->type == TERN_T_F32) return tern_f32((float)ir_const_f(in));
    return kb_const(in->type, ev_from_u((uint64_t)in->imm), false);
}

tern_v tern_call_at(tern_loc at, tern_kb *kb, const tern_kernel *fn, int count, const tern_v *args) {
    if (!kb_ok(kb)) return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    tern_error *impure = tern_kernel_check_pure(fn, "tern_call");
    if (impure) {
        kb_fail(kb, at, "%s", tern_error_message(impure));
        tern_error_free(impure);
        return kb_none(kb);
    }
    if (count != fn->nparams || (count > 0 && !args)) {
        kb_fail(kb, at, "tern_call: function '%s' takes %d arguments, %d given", fn->name,
                fn->nparams, count);
        return kb_none(kb);
    }
    tern_v *vals = calloc((size_t)fn->nvals + 1, sizeof *vals);
    tern_v *vars = calloc((size_t)fn->nvars + 1, sizeof *vars);
    if (!vals || !vars) {
        free(vals);
        free(vars);
        kb_fail(kb, at, "out of memory");
        return kb_none(kb);
    }
    tern_v result = kb_none(kb);
    for (int32_t i = 0; i < fn->nins && kb_ok(kb); i++) {
        const ir_ins *in = &fn->ins[i];
        tern_loc here = {in->file >= 0 ? ir_string(fn, in->file) : at.file,
                         in->file >= 0 ? in->line : at.line};
        tern_v r = kb_none(kb);
        const int32_t *a = in->a;
        switch ((ir_op)in->op) {
        case IR_CONST: r = const_of(in); break;
        case IR_PARAM: {
            const ir_param *p = &fn->params[in->imm];
            tern_v arg = args[in->imm];
            int t = kb_type_of(kb, arg);
            if (!(arg.kind == TERN_V_CONST && arg.weak && kb_literal_fits(arg.c.i, p->type)) &&
                t != p->type) {
                kb_fail(kb, at, "tern_call: argument %d of '%s' ('%s') is %s, expected %s",
                        (int)in->imm + 1, fn->name, ir_string(fn, p->name), tern_type_name(t),
                        tern_type_name(p->type));
                break;
            }
            r = arg;
            break;
        }
        case IR_UNARY: r = tern_unary_at(here, (tern_op1)in->aux, vals[a[0]]); break;
        case IR_BINARY: r = tern_binary_at(here, (tern_op2)in->aux, vals[a[0]], vals[a[1]]); break;
        case IR_SELECT: r = tern_select_at(here, vals[a[0]], vals[a[1]], vals[a[2]]); break;
        case IR_FMA: r = tern_fma_at(here, vals[a[0]], vals[a[1]], vals[a[2]]); break;
        case IR_CAST: r = tern_cast_at(here, vals[a[0]], (tern_type)in->type); break;
        case IR_BITCAST: r = tern_bitcast_at(here, vals[a[0]], (tern_type)in->type); break;
        case IR_VAR_DECL:
            vars[a[0]] = tern_var_at(here, kb, ir_string(fn, fn->vars[a[0]].name), vals[a[1]]);
            break;
        case IR_VAR_READ: {
            /* read now: a later assignment must not change this value */
            int32_t id = kb_use(kb, here, vars[a[0]], TERN_T_VOID, "a variable");
            r = kb_value(kb, id);
            break;
        }
        case IR_ASSIGN: tern_assign_at(here, vars[a[0]], vals[a[1]]); break;
        case IR_IF: tern_if_at(here, kb, vals[a[0]]); break;
        case IR_ELSE: tern_else_at(here, kb); break;
        case IR_END: tern_end_at(here, kb); break;
        case IR_FOR:
            r = tern_for_at(here, kb, ir_string(fn, fn->vals[in->dst].name), vals[a[0]],
                            vals[a[1]], vals[a[2]]);
            break;
        case IR_WHILE: tern_while_at(here, kb); break;
        case IR_WHILE_TEST: tern_while_test_at(here, kb, vals[a[0]]); break;
        case IR_BREAK: tern_break_at(here, kb); break;
        case IR_CONTINUE: tern_continue_at(here, kb); break;
        case IR_RESULT: result = vals[a[0]]; break;
        case IR_WAIT_PREVIOUS: break; /* the caller's statements precede it: its own wait decides */
        default:
            kb_fail(kb, here, "tern_call: '%s' has a %s, which cannot be inlined", fn->name,
                    ir_op_name((ir_op)in->op));
            break;
        }
        if (in->dst >= 0) {
            vals[in->dst] = r;
            if (fn->vals[in->dst].name >= 0 && r.kind == TERN_V_VALUE && in->op != IR_FOR &&
                in->op != IR_PARAM)
                tern_name_at(here, r, ir_string(fn, fn->vals[in->dst].name));
        }
    }
    free(vals);
    free(vars);
    return kb_ok(kb) ? result : kb_none(kb);
}
