/* The emitter walk shared by every target: naming, folding single-use values into their
 * use, expressions with C precedence, statements and blocks. See emit.h. */
#include "dsl/emit.h"

/* ---- the C-family spellings every dialect starts from (OpenCL C's) ---- */

static const char *const default_types[TERN_TYPE_COUNT] = {
    [TERN_T_VOID] = "void", [TERN_T_BOOL] = "bool",  [TERN_T_I32] = "int",     [TERN_T_U32] = "uint",
    [TERN_T_I64] = "long",  [TERN_T_U64] = "ulong",  [TERN_T_F32] = "float",   [TERN_T_F16] = "ushort",
    [TERN_T_BF16] = "ushort", [TERN_T_U16] = "ushort", /* 16-bit floats travel as their bits */
};

static const char *const default_math1[EMIT_OP1_COUNT] = {
    [TERN_ABS] = "fabs",    [TERN_EXP] = "exp",     [TERN_EXP2] = "exp2",
    [TERN_LOG] = "log",     [TERN_LOG2] = "log2",   [TERN_SQRT] = "sqrt",
    [TERN_RSQRT] = "rsqrt", [TERN_TANH] = "tanh",   [TERN_TANH_APPROX] = "tanh", [TERN_ERF] = "erf",
    [TERN_SIN] = "sin",     [TERN_COS] = "cos",     [TERN_FLOOR] = "floor",
    [TERN_CEIL] = "ceil",   [TERN_ROUND] = "round", [TERN_TRUNC] = "trunc",
    [TERN_ISNAN] = "isnan", [TERN_ISINF] = "isinf",
};

static const char *const default_math2[EMIT_OP2_COUNT] = {
    [TERN_MIN] = "fmin", [TERN_MAX] = "fmax", [TERN_POW] = "pow", [TERN_REM] = "fmod",
};

const char *emit_type(const dialect *d, int t) {
    if (t < 0 || t >= TERN_TYPE_COUNT) return "void";
    return d->types[t] ? d->types[t] : default_types[t];
}

const char *emit_math1(const dialect *d, tern_op1 op) {
    if ((unsigned)op >= EMIT_OP1_COUNT) return "?";
    const char *name = d->math1[op] ? d->math1[op] : default_math1[op];
    return name ? name : "?";
}

const char *emit_math2(const dialect *d, tern_op2 op) {
    if ((unsigned)op >= EMIT_OP2_COUNT) return "?";
    const char *name = d->math2[op] ? d->math2[op] : default_math2[op];
    return name ? name : "?";
}

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* C precedence levels, higher binds tighter. */
enum {
    PREC_TERNARY = 3,
    PREC_LOR = 4,
    PREC_LAND = 5,
    PREC_OR = 6,
    PREC_XOR = 7,
    PREC_AND = 8,
    PREC_EQ = 9,
    PREC_REL = 10,
    PREC_SHIFT = 11,
    PREC_ADD = 12,
    PREC_MUL = 13,
    PREC_UNARY = 15,
    PREC_PRIMARY = 16,
};

/* Folding deeper than this makes lines hard to read: such values get a name. */
#define MAX_FOLD_DEPTH 6

const dialect *emit_dialect(tern_target t) {
    switch (t) {
    case TERN_TARGET_CUDA: return &emit_cuda_dialect;
    case TERN_TARGET_OPENCL: return &emit_opencl_dialect;
    case TERN_TARGET_METAL: return &emit_metal_dialect;
    }
    return NULL;
}

/* ---- names ---- */

static bool name_taken(const emitter *e, const char *name) {
    for (int32_t i = 0; i < e->nnames; i++)
        if (!strcmp(e->names[i], name)) return true;
    return false;
}

const char *emit_unique(emitter *e, const char *base) {
    char stem[80], buf[96];
    /* a reserved prefix stays reserved whatever follows: move it out of the way */
    snprintf(stem, sizeof stem, emit_reserved(base) ? "v_%s" : "%s", base);
    snprintf(buf, sizeof buf, "%s", stem);
    for (int n = 2; emit_reserved(buf) || name_taken(e, buf); n++) snprintf(buf, sizeof buf, "%s_%d", stem, n);
    if (e->nnames == e->cap_names) {
        int32_t cap = e->cap_names ? e->cap_names * 2 : 64;
        char **p = realloc(e->names, (size_t)cap * sizeof *p);
        if (!p) {
            e->body.failed = true;
            return "oom";
        }
        e->names = p;
        e->cap_names = cap;
    }
    char *copy = strdup(buf);
    if (!copy) {
        e->body.failed = true;
        return "oom";
    }
    e->names[e->nnames++] = copy;
    return copy;
}

const char *emit_val_name(emitter *e, int32_t v) {
    if (e->val_name[v]) return e->val_name[v];
    const ir_value *val = &e->k->vals[v];
    char base[80];
    if (val->name >= 0) {
        /* the user's name, renamed if a target reserves it or it is taken */
        snprintf(base, sizeof base, "%s", emit_unique(e, ir_string(e->k, val->name)));
    } else {
        /* t<id> is reserved for these, so it cannot collide with a user's name */
        snprintf(base, sizeof base, "t%d", (int)v);
    }
    e->val_name[v] = strdup(base);
    if (!e->val_name[v]) {
        e->body.failed = true;
        return "oom";
    }
    return e->val_name[v];
}

/* ---- lines ---- */

void emit_line_start(emitter *e, int32_t ins) {
    e->body_line++;
    if (e->body_line >= e->cap_lines) {
        int32_t cap = e->cap_lines ? e->cap_lines * 2 : 256;
        int32_t *p = realloc(e->line_ins, (size_t)cap * sizeof *p);
        if (!p) {
            e->body.failed = true;
            e->body_line--;
            return;
        }
        e->line_ins = p;
        e->cap_lines = cap;
    }
    e->line_ins[e->body_line] = ins;
    for (int i = 0; i < e->indent; i++) sb_puts(&e->body, "    ");
}

void emit_line_end(emitter *e) { sb_putc(&e->body, '\n'); }

/* ---- expressions ---- */

static int expr_prec(emitter *e, strbuf *out, int32_t v);

static void literal(emitter *e, strbuf *out, const ir_ins *c, int *prec) {
    *prec = PREC_PRIMARY;
    switch (c->type) {
    case TERN_T_BOOL: sb_puts(out, c->imm ? "true" : "false"); break;
    case TERN_T_I32:
        if (c->imm == INT32_MIN) {
            sb_puts(out, "(-2147483647 - 1)");
        } else {
            sb_printf(out, "%" PRId64, c->imm);
            if (c->imm < 0) *prec = PREC_UNARY;
        }
        break;
    case TERN_T_U32: sb_printf(out, "%" PRIu64 "%s", (uint64_t)c->imm, e->d->u32_suffix); break;
    case TERN_T_I64:
        if (c->imm == INT64_MIN) {
            sb_printf(out, "(-9223372036854775807%s - 1)", e->d->i64_suffix);
        } else {
            sb_printf(out, "%" PRId64 "%s", c->imm, e->d->i64_suffix);
            if (c->imm < 0) *prec = PREC_UNARY;
        }
        break;
    case TERN_T_U64: sb_printf(out, "%" PRIu64 "%s", (uint64_t)c->imm, e->d->u64_suffix); break;
    case TERN_T_F32: {
        float f = (float)ir_const_f(c);
        if (f != f || f - f != 0) {
            /* inf and NaN by their bits: no target agrees on a spelling */
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            sb_printf(out, "tern_f32_bits(0x%08xu)", bits);
            e->need |= NEED_F32_BITS;
            break;
        }
        char buf[48];
        snprintf(buf, sizeof buf, "%.9g", (double)f);
        /* the shortest spelling that reads back exactly */
        for (int digits = 1; digits <= 9; digits++) {
            char shorter[48];
            snprintf(shorter, sizeof shorter, "%.*g", digits, (double)f);
            if (strtof(shorter, NULL) == f) {
                memcpy(buf, shorter, sizeof buf);
                break;
            }
        }
        sb_puts(out, buf);
        if (!strpbrk(buf, ".en")) sb_puts(out, ".0");
        sb_puts(out, "f");
        if (f < 0 || (f == 0 && buf[0] == '-')) *prec = PREC_UNARY;
        break;
    }
    default: sb_puts(out, "0"); break;
    }
}

/* Writes value v as an operand that binds at least as tightly as min_prec. */
static void operand(emitter *e, strbuf *out, int32_t v, int min_prec) {
    strbuf tmp;
    sb_init(&tmp);
    int p = expr_prec(e, &tmp, v);
    char *s = sb_take(&tmp);
    if (!s) {
        out->failed = true;
        return;
    }
    if (p < min_prec) {
        sb_putc(out, '(');
        sb_puts(out, s);
        sb_putc(out, ')');
    } else {
        sb_puts(out, s);
    }
    free(s);
}

void emit_operand(emitter *e, strbuf *out, int32_t v) { operand(e, out, v, PREC_PRIMARY); }
void emit_expr(emitter *e, strbuf *out, int32_t v) { expr_prec(e, out, v); }

void emit_from_storage(emitter *e, strbuf *out, int elem, const char *x) {
    switch (elem) {
    case TERN_T_F16:
        e->need |= NEED_F16;
        sb_printf(out, "tern_f16_to_f32(%s)", x);
        break;
    case TERN_T_BF16:
        e->need |= NEED_BF16;
        sb_printf(out, "tern_bf16_to_f32(%s)", x);
        break;
    case TERN_T_U16: sb_printf(out, "(%s)%s", emit_type(e->d, TERN_T_U32), x); break;
    default: sb_puts(out, x); break;
    }
}

void emit_to_storage(emitter *e, strbuf *out, int elem, const char *x) {
    switch (elem) {
    case TERN_T_F16:
        e->need |= NEED_F16;
        sb_printf(out, "tern_f32_to_f16(%s)", x);
        break;
    case TERN_T_BF16:
        e->need |= NEED_BF16;
        sb_printf(out, "tern_f32_to_bf16(%s)", x);
        break;
    case TERN_T_U16: sb_printf(out, "(%s)(%s)", emit_type(e->d, TERN_T_U16), x); break;
    default: sb_puts(out, x); break;
    }
}

void emit_elem(emitter *e, strbuf *out, int32_t buf, int32_t idx) {
    sb_printf(out, "%s[", e->buf_name[buf]);
    emit_expr(e, out, idx);
    sb_putc(out, ']');
}

static int binary_prec(tern_op2 op) {
    switch (op) {
    case TERN_MUL:
    case TERN_DIV:
    case TERN_REM: return PREC_MUL;
    case TERN_ADD:
    case TERN_SUB: return PREC_ADD;
    case TERN_SHL:
    case TERN_SHR: return PREC_SHIFT;
    case TERN_LT:
    case TERN_LE:
    case TERN_GT:
    case TERN_GE: return PREC_REL;
    case TERN_EQ:
    case TERN_NE: return PREC_EQ;
    case TERN_AND: return PREC_AND;
    case TERN_XOR: return PREC_XOR;
    case TERN_OR: return PREC_OR;
    case TERN_LAND: return PREC_LAND;
    case TERN_LOR: return PREC_LOR;
    default: return PREC_PRIMARY;
    }
}

static const char *binary_sym(tern_op2 op) {
    static const char *const syms[] = {
        [TERN_ADD] = "+", [TERN_SUB] = "-", [TERN_MUL] = "*", [TERN_DIV] = "/",
        [TERN_REM] = "%", [TERN_AND] = "&", [TERN_OR] = "|",  [TERN_XOR] = "^",
        [TERN_SHL] = "<<", [TERN_SHR] = ">>", [TERN_LT] = "<", [TERN_LE] = "<=",
        [TERN_GT] = ">",  [TERN_GE] = ">=", [TERN_EQ] = "==", [TERN_NE] = "!=",
        [TERN_LAND] = "&&", [TERN_LOR] = "||",
    };
    return (unsigned)op < sizeof syms / sizeof *syms && syms[op] ? syms[op] : "?";
}

/* The expression computing instruction i's value; returns its precedence. */
static int ins_expr(emitter *e, strbuf *out, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    const int32_t *a = in->a;
    const dialect *d = e->d;
    switch ((ir_op)in->op) {
    case IR_UNARY: {
        tern_op1 op = (tern_op1)in->aux;
        int t = k->vals[a[0]].type;
        if (op == TERN_NEG || op == TERN_NOT || op == TERN_LNOT) {
            strbuf x;
            sb_init(&x);
            int p = expr_prec(e, &x, a[0]);
            char *s = sb_take(&x);
            if (!s) {
                out->failed = true;
                return PREC_UNARY;
            }
            /* "- -x" must not become "--x" */
            bool paren = p < PREC_UNARY || s[0] == '-';
            sb_printf(out, paren ? "%s(%s)" : "%s%s", op == TERN_NEG ? "-" : op == TERN_NOT ? "~" : "!", s);
            free(s);
            return PREC_UNARY;
        }
        if (op == TERN_ABS && t != TERN_T_F32) {
            if (!ir_type_is_signed(t)) {
                operand(e, out, a[0], PREC_PRIMARY);
                return PREC_PRIMARY;
            }
            if (d->target == TERN_TARGET_OPENCL) sb_printf(out, "(%s)", emit_type(d, t));
            sb_puts(out, d->target == TERN_TARGET_CUDA && t == TERN_T_I64 ? "llabs(" : "abs(");
            emit_expr(e, out, a[0]);
            sb_putc(out, ')');
            return d->target == TERN_TARGET_OPENCL ? PREC_UNARY : PREC_PRIMARY;
        }
        if (op == TERN_ERF && d->target == TERN_TARGET_METAL) e->need |= NEED_ERF;
        sb_printf(out, "%s(", emit_math1(d, op));
        emit_expr(e, out, a[0]);
        sb_putc(out, ')');
        return PREC_PRIMARY;
    }
    case IR_BINARY: {
        tern_op2 op = (tern_op2)in->aux;
        int t = k->vals[a[0]].type;
        bool fn = op == TERN_MIN || op == TERN_MAX || op == TERN_POW ||
                  (op == TERN_REM && t == TERN_T_F32);
        if (fn) {
            const char *name = t == TERN_T_F32 ? emit_math2(d, op) : op == TERN_MIN ? d->imin : d->imax;
            sb_printf(out, "%s(", name);
            emit_expr(e, out, a[0]);
            sb_puts(out, ", ");
            emit_expr(e, out, a[1]);
            sb_putc(out, ')');
            return PREC_PRIMARY;
        }
        int p = binary_prec(op);
        /* bit operations and logic: parenthesise anything compound, for the reader */
        bool strict = op >= TERN_AND && op != TERN_LT && op != TERN_LE && op != TERN_GT &&
                      op != TERN_GE && op != TERN_EQ && op != TERN_NE;
        operand(e, out, a[0], strict ? PREC_UNARY : p);
        sb_printf(out, " %s ", binary_sym(op));
        if (op == TERN_SHL || op == TERN_SHR) {
            /* shift counts are taken modulo the width */
            const ir_ins *s = &k->ins[k->vals[a[1]].def];
            int bits = ir_type_bits(t);
            if (s->op == IR_CONST && s->imm >= 0 && s->imm < bits) {
                operand(e, out, a[1], PREC_UNARY);
            } else {
                sb_putc(out, '(');
                operand(e, out, a[1], PREC_AND + 1);
                sb_printf(out, " & %d)", bits - 1);
            }
        } else {
            operand(e, out, a[1], strict ? PREC_UNARY : p + 1);
        }
        return p;
    }
    case IR_SELECT:
        operand(e, out, a[0], PREC_TERNARY + 1);
        sb_puts(out, " ? ");
        operand(e, out, a[1], PREC_TERNARY + 1);
        sb_puts(out, " : ");
        operand(e, out, a[2], PREC_TERNARY + 1);
        return PREC_TERNARY;
    case IR_FMA:
        sb_printf(out, "%s(", d->fma_name);
        for (int j = 0; j < 3; j++) {
            if (j) sb_puts(out, ", ");
            emit_expr(e, out, a[j]);
        }
        sb_putc(out, ')');
        return PREC_PRIMARY;
    case IR_CAST:
    case IR_BITCAST: {
        strbuf x;
        sb_init(&x);
        operand(e, &x, a[0], PREC_UNARY);
        char *s = sb_take(&x);
        if (!s) {
            out->failed = true;
            return PREC_PRIMARY;
        }
        if (in->op == IR_CAST)
            d->cast(e, out, k->vals[a[0]].type, in->type, s);
        else
            d->bitcast(e, out, k->vals[a[0]].type, in->type, s);
        free(s);
        return PREC_UNARY;
    }
    case IR_VAR_READ: sb_puts(out, e->var_name[a[0]]); return PREC_PRIMARY;
    case IR_LOAD: {
        strbuf x;
        sb_init(&x);
        emit_elem(e, &x, a[0], a[1]);
        char *s = sb_take(&x);
        if (!s) {
            out->failed = true;
            return PREC_PRIMARY;
        }
        int elem = k->bufs[a[0]].elem;
        emit_from_storage(e, out, elem, s);
        free(s);
        return elem == TERN_T_U16 ? PREC_UNARY : PREC_PRIMARY;
    }
    default: sb_printf(out, "/* %s */ 0", ir_op_name((ir_op)in->op)); return PREC_PRIMARY;
    }
}

static int expr_prec(emitter *e, strbuf *out, int32_t v) {
    const ir_value *val = &e->k->vals[v];
    const ir_ins *def = &e->k->ins[val->def];
    if (def->op == IR_CONST) {
        int p;
        literal(e, out, def, &p);
        return p;
    }
    if (e->fold[v]) return ins_expr(e, out, val->def);
    sb_puts(out, emit_val_name(e, v));
    return PREC_PRIMARY;
}

/* ---- analysis: blocks, uses, folding ---- */

static bool is_pure_value_op(ir_op op) {
    return op == IR_UNARY || op == IR_BINARY || op == IR_SELECT || op == IR_FMA || op == IR_CAST ||
           op == IR_BITCAST || op == IR_VAR_READ || op == IR_LOAD;
}

static void analyse(emitter *e) {
    const tern_kernel *k = e->k;
    int32_t *stack = malloc(((size_t)k->nins + 1) * sizeof *stack);
    int32_t *depth_of = calloc((size_t)k->nvals + 1, sizeof *depth_of);
    if (!stack || !depth_of) {
        e->body.failed = true;
        free(stack);
        free(depth_of);
        return;
    }
    int32_t depth = 0;
    for (int32_t i = 0; i < k->nins; i++) {
        ir_op op = (ir_op)k->ins[i].op;
        if (op == IR_END || op == IR_ELSE) depth--;
        e->block_of[i] = depth ? stack[depth - 1] : -1;
        if (ir_op_opens(op) || op == IR_ELSE) stack[depth++] = i;
        int32_t ops[IR_MAX_OPERANDS];
        int n = ir_operands(k, &k->ins[i], ops);
        for (int j = 0; j < n; j++) {
            e->use_count[ops[j]]++;
            e->use_ins[ops[j]] = i;
        }
    }
    /* a while's condition is a block of its own for folding purposes: the WHILE's body
     * starts at the WHILE, so block_of already separates it from what is outside */
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        int32_t v = in->dst;
        if (v < 0 || !is_pure_value_op((ir_op)in->op)) continue;
        int32_t ops[IR_MAX_OPERANDS];
        int n = ir_operands(k, in, ops);
        bool reads = in->op == IR_LOAD || in->op == IR_VAR_READ;
        int32_t deep = 0;
        for (int j = 0; j < n; j++) {
            if (e->fold[ops[j]]) {
                reads = reads || e->reads_state[ops[j]];
                if (depth_of[ops[j]] > deep) deep = depth_of[ops[j]];
            }
        }
        e->reads_state[v] = reads;
        depth_of[v] = deep + 1;
        if (k->vals[v].name >= 0 || e->use_count[v] != 1 || deep + 1 > MAX_FOLD_DEPTH) continue;
        int32_t use = e->use_ins[v];
        if (e->block_of[use] != e->block_of[i]) continue;
        const ir_ins *u = &k->ins[use];
        if (reads) {
            bool clear = true;
            for (int32_t j = i + 1; j < use && clear; j++)
                if (ir_op_has_effect((ir_op)k->ins[j].op)) clear = false;
            /* a for loop's end and step are evaluated once; C would re-read them */
            if (u->op == IR_FOR && (u->a[1] == v || u->a[2] == v)) clear = false;
            if (!clear) continue;
        }
        e->fold[v] = true;
    }
    free(stack);
    free(depth_of);
}

/* Whether instruction i writes anything when emitted. */
static bool writes_statement(const emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    switch ((ir_op)in->op) {
    case IR_CONST:
    case IR_PARAM:
    case IR_THREAD: return false;
    default:
        if (is_pure_value_op((ir_op)in->op)) return !e->fold[in->dst] && e->use_count[in->dst] > 0;
        return true;
    }
}

/* ---- statements ---- */

void emit_decl(emitter *e, int32_t v) {
    sb_printf(&e->body, "%s %s = ", emit_type(e->d, e->k->vals[v].type), emit_val_name(e, v));
}

void emit_decl_if_used(emitter *e, int32_t v) {
    if (e->use_count[v] > 0) emit_decl(e, v);
}

static void statement(emitter *e, int32_t i) {
    const bool *simple_while = e->simple_while;
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    const int32_t *a = in->a;
    strbuf *b = &e->body;
    switch ((ir_op)in->op) {
    case IR_CONST:
    case IR_PARAM:
    case IR_THREAD: return;
    case IR_UNARY:
    case IR_BINARY:
    case IR_SELECT:
    case IR_FMA:
    case IR_CAST:
    case IR_BITCAST:
    case IR_VAR_READ:
    case IR_LOAD:
        if (!writes_statement(e, i)) return;
        emit_line_start(e, i);
        emit_decl(e, in->dst);
        ins_expr(e, b, i);
        sb_putc(b, ';');
        emit_line_end(e);
        return;
    case IR_VAR_DECL:
        emit_line_start(e, i);
        sb_printf(b, "%s %s = ", emit_type(e->d, k->vars[a[0]].type), e->var_name[a[0]]);
        emit_expr(e, b, a[1]);
        sb_putc(b, ';');
        emit_line_end(e);
        return;
    case IR_ASSIGN:
        emit_line_start(e, i);
        sb_printf(b, "%s = ", e->var_name[a[0]]);
        emit_expr(e, b, a[1]);
        sb_putc(b, ';');
        emit_line_end(e);
        return;
    case IR_STORE: {
        emit_line_start(e, i);
        emit_elem(e, b, a[0], a[1]);
        sb_puts(b, " = ");
        strbuf x;
        sb_init(&x);
        emit_expr(e, &x, a[2]);
        char *s = sb_take(&x);
        if (s) emit_to_storage(e, b, k->bufs[a[0]].elem, s);
        else b->failed = true;
        free(s);
        sb_putc(b, ';');
        emit_line_end(e);
        return;
    }
    case IR_VLOAD: e->d->vload(e, i); return;
    case IR_VSTORE: e->d->vstore(e, i); return;
    case IR_ATOMIC:
    case IR_ATOMIC_CAS: e->d->atomic(e, i); return;
    case IR_SIMD: e->d->simd(e, i); return;
    case IR_MMA: e->d->mma(e, i); return;
    case IR_LOAD_MATRIX: e->d->load_matrix(e, i); return;
    case IR_WGMMA: e->d->wgmma(e, i); return;
    case IR_PRINT: e->d->print(e, i); return;
    case IR_BARRIER:
        emit_line_start(e, i);
        sb_printf(b, "%s;", e->d->barrier);
        emit_line_end(e);
        return;
    case IR_FENCE:
        emit_line_start(e, i);
        sb_printf(b, "%s;", e->d->fence);
        emit_line_end(e);
        return;
    case IR_WAIT_PREVIOUS:
        if (e->d->wait_previous) e->d->wait_previous(e, i);
        else emit_comment_statement(e, i, "wait_previous", "launches run one after the other");
        return;
    case IR_PREFETCH:
        if (e->d->prefetch) {
            e->d->prefetch(e, i);
        } else {
            strbuf x;
            sb_init(&x);
            sb_puts(&x, "prefetch ");
            emit_prefetch_address(e, &x, i);
            char *s = sb_take(&x);
            emit_comment_statement(e, i, s ? s : "prefetch", "no prefetch on this target");
            free(s);
        }
        return;
    case IR_COPY_ASYNC: e->d->copy_async(e, i); return;
    case IR_STORE_BULK: e->d->store_bulk(e, i); return;
    case IR_STORE_BULK_COMMIT:
    case IR_STORE_BULK_WAIT:
    case IR_STORE_BULK_FENCE:
        if (e->d->store_bulk_sync) {
            e->d->store_bulk_sync(e, i);
        } else {
            char what[40];
            const char *name = ir_op_name((ir_op)in->op);
            if (in->op == IR_STORE_BULK_WAIT) snprintf(what, sizeof what, "%s %d", name, in->aux);
            else snprintf(what, sizeof what, "%s", name);
            emit_comment_statement(e, i, what, "bulk stores are made at once here");
        }
        return;
    case IR_COPY_TILE: e->d->copy_tile(e, i); return;
    case IR_WGMMA_WAIT:
        if (e->d->wgmma_wait) {
            e->d->wgmma_wait(e, i);
        } else {
            char what[40];
            snprintf(what, sizeof what, "wgmma_wait %d", in->aux);
            emit_comment_statement(e, i, what, "products are made at once here");
        }
        return;
    case IR_COPY_COMMIT:
        if (e->d->copy_commit) e->d->copy_commit(e, i);
        else emit_comment_statement(e, i, "copy_async_commit", "copies are made at once here");
        return;
    case IR_COPY_WAIT:
        if (e->d->copy_wait) {
            e->d->copy_wait(e, i);
        } else {
            char what[40];
            snprintf(what, sizeof what, "copy_async_wait %d", in->aux);
            emit_comment_statement(e, i, what, "copies are made at once here");
        }
        return;
    case IR_IF:
        emit_line_start(e, i);
        sb_puts(b, "if (");
        if (in->aux == IR_IF_ROLE && e->d->target == TERN_TARGET_CUDA) {
            int first = (int)(in->imm >> 16), count = (int)(in->imm & 0xffff);
            sb_printf(b, "tern_role_wg >= %d && tern_role_wg < %d", first, first + count);
        } else {
            emit_expr(e, b, a[0]);
        }
        sb_puts(b, ") {");
        emit_line_end(e);
        e->indent++;
        return;
    case IR_ELSE:
        e->indent--;
        emit_line_start(e, i);
        sb_puts(b, "} else {");
        emit_line_end(e);
        e->indent++;
        return;
    case IR_END: {
        e->indent--;
        emit_line_start(e, i);
        sb_putc(b, '}');
        emit_line_end(e);
        return;
    }
    case IR_FOR: {
        const char *t = emit_type(e->d, in->type);
        const char *iv = emit_val_name(e, in->dst);
        emit_line_start(e, i);
        sb_printf(b, "for (%s %s = ", t, iv);
        emit_expr(e, b, a[0]);
        sb_printf(b, "; %s < ", iv);
        operand(e, b, a[1], PREC_REL + 1);
        const ir_ins *step = &k->ins[k->vals[a[2]].def];
        if (step->op == IR_CONST && step->imm == 1) {
            sb_printf(b, "; %s++) {", iv);
        } else {
            sb_printf(b, "; %s += ", iv);
            emit_expr(e, b, a[2]);
            sb_puts(b, ") {");
        }
        emit_line_end(e);
        e->indent++;
        return;
    }
    case IR_WHILE:
        if (simple_while[i]) return; /* the header comes at the test */
        emit_line_start(e, i);
        sb_puts(b, "while (true) {");
        emit_line_end(e);
        e->indent++;
        return;
    case IR_WHILE_TEST:
        if (simple_while[a[1]]) {
            emit_line_start(e, i);
            sb_puts(b, "while (");
            emit_expr(e, b, a[0]);
            sb_puts(b, ") {");
            emit_line_end(e);
            e->indent++;
            return;
        }
        emit_line_start(e, i);
        sb_puts(b, "if (!");
        operand(e, b, a[0], PREC_UNARY);
        sb_puts(b, ") break;");
        emit_line_end(e);
        return;
    case IR_BREAK:
    case IR_CONTINUE:
    case IR_EXIT:
        emit_line_start(e, i);
        sb_puts(b, in->op == IR_BREAK ? "break;" : in->op == IR_CONTINUE ? "continue;" : "return;");
        emit_line_end(e);
        return;
    case IR_RESULT:
        emit_line_start(e, i);
        sb_puts(b, "return ");
        emit_expr(e, b, a[0]);
        sb_putc(b, ';');
        emit_line_end(e);
        return;
    default:
        emit_line_start(e, i);
        sb_printf(b, "/* unknown statement %d */", in->op);
        emit_line_end(e);
        return;
    }
}

void emit_statement(emitter *e, int32_t i) { statement(e, i); }

void emit_linef(emitter *e, int32_t i, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof text) {
        e->body.failed = true;
        return;
    }
    emit_line_start(e, i);
    sb_puts(&e->body, text);
    emit_line_end(e);
}

void emit_comment_statement(emitter *e, int32_t i, const char *what, const char *why) {
    emit_line_start(e, i);
    sb_printf(&e->body, "/* %s: %s */", what, why);
    emit_line_end(e);
}

void emit_prefetch_address(emitter *e, strbuf *out, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    sb_putc(out, '&');
    emit_elem(e, out, in->a[0], in->a[1]);
}

int emit_copy_bytes(const emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    return (int)tern_type_size((tern_type)e->k->bufs[in->a[0]].elem) * in->aux;
}

/* Through 32-bit words whatever the element type: the bytes move as they are (a float copy
 * could quieten a signalling NaN), and one word type serves every element size. */
void emit_copy_at_once(emitter *e, int32_t i, const char *dst_space, const char *src_space) {
    const ir_ins *in = &e->k->ins[i];
    int bytes = emit_copy_bytes(e, i);
    const char *vt = bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : "uint";
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "*(%s %s *)&", dst_space, vt);
    emit_elem(e, b, in->a[0], in->a[1]);
    sb_printf(b, " = *(%s const %s *)&", src_space, vt);
    emit_elem(e, b, in->a[2], in->a[3]);
    sb_puts(b, "; /* copy_async, made at once */");
    emit_line_end(e);
}

void emit_copy_tile_loop(emitter *e, int32_t i, emit_move_fn move) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    ir_tile_box box = ir_tile_unpack(in->imm);
    int first = 128 * in->aux, producers = k->max_threads - first, pieces = box.rows * box.panels * 8;
    strbuf *b = &e->body, at, row, col, lid;
    sb_init(&at);
    sb_init(&row);
    sb_init(&col);
    sb_init(&lid);
    emit_operand(e, &at, in->a[1]);
    emit_operand(e, &row, in->a[2]);
    emit_operand(e, &col, in->a[3]);
    e->d->thread(e, &lid, TERN_LOCAL_INDEX, 0);
    char *sat = sb_take(&at), *srow = sb_take(&row), *scol = sb_take(&col), *slid = sb_take(&lid);
    if (!sat || !srow || !scol || !slid) {
        b->failed = true;
    } else {
        /* piece p: row p / (8 panels), 16 bytes c = p % (8 panels) along it */
        emit_linef(e, i, "for (int tern_p = %s - %d; tern_p < %d; tern_p += %d) { /* copy_tile, %d x %d */", slid,
                   first, pieces, producers, box.rows, 64 * box.panels);
        e->indent++;
        emit_linef(e, i, "const int tern_r = tern_p / %d, tern_c = tern_p %% %d;", 8 * box.panels, 8 * box.panels);
        char dst[512], src[512];
        snprintf(dst, sizeof dst, "&%s[%s + (tern_c >> 3) * %d + tern_r * 64 + (((tern_c & 7) ^ (tern_r & 7)) << 3)]",
                 e->buf_name[in->a[0]], sat, 64 * box.rows);
        snprintf(src, sizeof src, "&%s[(long)(%s + tern_r) * %lld + %s + (tern_c << 3)]",
                 e->buf_name[box.buf], srow, (long long)box.cols, scol);
        emit_line_start(e, i);
        move(b, dst, src);
        emit_line_end(e);
        e->indent--;
        emit_linef(e, i, "}");
    }
    free(sat);
    free(srow);
    free(scol);
    free(slid);
}

void emit_mma_call(emitter *e, int32_t i, const char *extra_arg, emit_pair_fn pair) {
    const ir_ins *in = &e->k->ins[i];
    const int32_t *ops = &e->k->extra[in->a[0]];
    strbuf *b = &e->body;
    char vname[32];
    snprintf(vname, sizeof vname, "v%d", (int)in->dst); /* v<digits> is reserved for these */
    emit_line_start(e, i);
    sb_printf(b, "const float4 %s = tern_mma_bf16(", vname);
    for (int j = 0; j < IR_MMA_OPERANDS; j++) {
        if (j) sb_puts(b, ", ");
        if (pair && j < 12) { /* a and b: 8 + 4 multiplicands */
            pair(e, b, ops[j], ops[j + 1]);
            j++;
            continue;
        }
        emit_expr(e, b, ops[j]);
    }
    if (extra_arg) sb_printf(b, ", %s", extra_arg);
    sb_puts(b, ");");
    emit_line_end(e);
    for (int j = 0; j < IR_MMA_RESULTS; j++) {
        char field[40];
        snprintf(field, sizeof field, "%s.%c", vname, "xyzw"[j]);
        e->val_name[in->dst + j] = strdup(field);
        if (!e->val_name[in->dst + j]) b->failed = true;
    }
    e->need |= NEED_MMA;
}

/* tern_load_matrix without the instruction: each lane fetches from the group's lanes the
 * row starts its elements lie in (`shuffle`: a format taking the value and the lane, both
 * int expressions) and loads them, in the layout of tern/kernel.h. */
void emit_load_matrix_gather(emitter *e, int32_t i, const char *lane, const char *shuffle) {
    const ir_ins *in = &e->k->ins[i];
    strbuf *b = &e->body;
    const char *row = emit_unique(e, "lm_row"), *ln = emit_unique(e, "lm_lane");
    emit_line_start(e, i);
    sb_printf(b, "const int %s = (int)(", row);
    emit_expr(e, b, in->a[1]);
    sb_puts(b, ");");
    emit_line_end(e);
    emit_line_start(e, i);
    sb_printf(b, "const int %s = %s;", ln, lane);
    emit_line_end(e);
    for (int m = 0; m < 4; m++)
        for (int j = 0; j < 2; j++) {
            char src[96], col[64], start[256], elem[400];
            if (in->aux) { /* transposed: rows 2 (lane % 4) + j, column lane / 4 */
                snprintf(src, sizeof src, "%d + 2 * (%s %% 4)", 8 * m + j, ln);
                snprintf(col, sizeof col, "%s / 4", ln);
            } else {
                snprintf(src, sizeof src, "%d + %s / 4", 8 * m, ln);
                snprintf(col, sizeof col, "2 * (%s %% 4) + %d", ln, j);
            }
            snprintf(start, sizeof start, shuffle, row, src);
            snprintf(elem, sizeof elem, "%s[%s + %s]", e->buf_name[in->a[0]], start, col);
            emit_line_start(e, i);
            emit_decl(e, in->dst + 2 * m + j);
            emit_from_storage(e, b, TERN_T_BF16, elem);
            sb_putc(b, ';');
            emit_line_end(e);
        }
}

/* ---- shared prelude ---- */

const char *emit_type_suffix(int t) { return tern_type_name((tern_type)t); }

bool emit_needs_common(const emitter *e) { return e->need & (NEED_F32_BITS | NEED_BF16 | NEED_F16 | NEED_WGMMA); }

void emit_common_prelude(emitter *e, strbuf *out) {
    if (e->need & NEED_F32_BITS)
        sb_puts(out, "TERN_FN float tern_f32_bits(unsigned int b) { return TERN_AS_FLOAT(b); }\n");
    if (e->need & NEED_BF16) {
        sb_puts(out,
                "TERN_FN float tern_bf16_to_f32(unsigned short h) { return TERN_AS_FLOAT((unsigned int)h << 16); }\n"
                "/* round to nearest even; NaN stays NaN */\n"
                "TERN_FN unsigned short tern_f32_to_bf16(float f) {\n");
        /* CUDA on sm_80+: the same rounding in one instruction (a NaN becomes the canonical
         * one: payloads are not kept, see tern/kernel.h) */
        bool cuda = e->d->target == TERN_TARGET_CUDA;
        if (cuda)
            sb_puts(out, "#if __CUDA_ARCH__ >= 800\n"
                         "    unsigned short r;\n"
                         "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(f));\n"
                         "    return r;\n"
                         "#else\n");
        sb_puts(out, "    unsigned int b = TERN_AS_UINT(f);\n"
                     "    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);\n"
                     "    b += 0x7fffu + ((b >> 16) & 1u);\n"
                     "    return (unsigned short)(b >> 16);\n");
        if (cuda) sb_puts(out, "#endif\n");
        sb_puts(out, "}\n");
    }
    if (e->need & NEED_WGMMA) /* tern_wg_tile_offset's layout (tern/kernel.h) */
        sb_puts(out, "TERN_FN int tern_wg_at(int at, int rows, int r, int c) {\n"
                     "    return at + (c >> 6) * rows * 64 + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);\n"
                     "}\n");
    if (e->need & NEED_F16) {
        sb_puts(out,
                "TERN_FN float tern_f16_to_f32(unsigned short h) {\n"
                "    unsigned int sign = (unsigned int)(h & 0x8000u) << 16;\n"
                "    unsigned int exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;\n"
                "    if (exp == 0) {\n"
                "        if (man == 0) return TERN_AS_FLOAT(sign);\n"
                "        int e = -1; /* subnormal: normalise */\n"
                "        do { e++; man <<= 1; } while (!(man & 0x400u));\n"
                "        return TERN_AS_FLOAT(sign | ((unsigned int)(112 - e) << 23) | ((man & 0x3ffu) << 13));\n"
                "    }\n"
                "    if (exp == 31) return TERN_AS_FLOAT(sign | 0x7f800000u | (man << 13));\n"
                "    return TERN_AS_FLOAT(sign | ((exp + 112) << 23) | (man << 13));\n"
                "}\n"
                "/* round to nearest even, overflow to infinity, NaN stays NaN */\n"
                "TERN_FN unsigned short tern_f32_to_f16(float f) {\n"
                "    unsigned int bits = TERN_AS_UINT(f);\n"
                "    unsigned int sign = (bits >> 16) & 0x8000u, a = bits & 0x7fffffffu;\n"
                "    if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);\n"
                "    if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);\n"
                "    if (a < 0x38800000u) {\n"
                "        if (a < 0x33000000u) return (unsigned short)sign;\n"
                "        unsigned int e = a >> 23, man = (a & 0x7fffffu) | 0x800000u;\n"
                "        unsigned int shift = 126 - e, q = man >> shift;\n"
                "        unsigned int rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);\n"
                "        if (rest > mid || (rest == mid && (q & 1u))) q++;\n"
                "        return (unsigned short)(sign | q);\n"
                "    }\n"
                "    a += 0xfffu + ((a >> 13) & 1u);\n"
                "    return (unsigned short)(sign | ((a - 0x38000000u) >> 13));\n"
                "}\n");
    }
}

/* ---- the whole kernel ---- */

static void emitter_free(emitter *e) {
    const tern_kernel *k = e->k;
    sb_free(&e->body);
    free(e->line_ins);
    if (e->val_name)
        for (int32_t i = 0; i < k->nvals; i++) free(e->val_name[i]);
    free(e->val_name);
    free(e->var_name);
    free(e->buf_name);
    free(e->use_count);
    free(e->use_ins);
    free(e->block_of);
    free(e->fold);
    free(e->reads_state);
    if (e->bf16_word)
        for (int32_t i = 0; i < k->nvals; i++) free(e->bf16_word[i]);
    free(e->bf16_word);
    free(e->bf16_half);
    free(e->bf16_pack);
    free(e->bf16_pack_hi);
    free(e->bf16_pack_block);
    for (int32_t i = 0; i < e->nnames; i++) free(e->names[i]);
    free(e->names);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

tern_error *emit_source(const tern_kernel *k, const dialect *d, char **out, int32_t **line_ins,
                        int32_t *nlines) {
    *out = NULL;
    if (line_ins) *line_ins = NULL;
    if (nlines) *nlines = 0;
    emitter e;
    memset(&e, 0, sizeof e);
    e.k = k;
    e.d = d;
    sb_init(&e.body);
    size_t nv = (size_t)k->nvals + 1, ni = (size_t)k->nins + 1;
    e.val_name = calloc(nv, sizeof *e.val_name);
    e.var_name = calloc((size_t)k->nvars + 1, sizeof *e.var_name);
    e.buf_name = calloc((size_t)k->nbufs + 1, sizeof *e.buf_name);
    e.use_count = calloc(nv, sizeof *e.use_count);
    e.use_ins = calloc(nv, sizeof *e.use_ins);
    e.block_of = calloc(ni, sizeof *e.block_of);
    e.fold = calloc(nv, sizeof *e.fold);
    e.reads_state = calloc(nv, sizeof *e.reads_state);
    e.bf16_word = calloc(nv, sizeof *e.bf16_word);
    e.bf16_half = calloc(nv, sizeof *e.bf16_half);
    e.bf16_pack = calloc(nv, sizeof *e.bf16_pack);
    e.bf16_pack_hi = calloc(nv, sizeof *e.bf16_pack_hi);
    e.bf16_pack_block = calloc(nv, sizeof *e.bf16_pack_block);
    bool *simple_while = calloc(ni, sizeof *simple_while);
    if (!e.val_name || !e.var_name || !e.buf_name || !e.use_count || !e.use_ins || !e.block_of ||
        !e.fold || !e.reads_state || !e.bf16_word || !e.bf16_half || !e.bf16_pack ||
        !e.bf16_pack_hi || !e.bf16_pack_block || !simple_while) {
        free(simple_while);
        emitter_free(&e);
        return tern_errorf("kernel '%s': out of memory", k->name);
    }
    /* names: parameters first (they keep theirs unless reserved), then threadgroup arrays */
    for (int32_t i = 0; i < k->nparams; i++) {
        const ir_param *p = &k->params[i];
        const char *name = emit_unique(&e, ir_string(k, p->name));
        if (p->is_buf)
            e.buf_name[p->id] = (char *)name;
        else
            e.val_name[p->id] = strdup(name);
    }
    for (int32_t b = 0; b < k->nbufs; b++)
        if (k->bufs[b].shared) e.buf_name[b] = (char *)emit_unique(&e, ir_string(k, k->bufs[b].name));
    for (int32_t v = 0; v < k->nvars; v++)
        e.var_name[v] = (char *)emit_unique(&e, ir_string(k, k->vars[v].name));
    /* thread attributes read better by what they are than as t<id> */
    static const char *const thread_names[] = {"global", "local", "group", "group_size",
                                               "groups", "local_index", "simd_lane",
                                               "simd_group", "simd_groups"};
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        if (in->op != IR_THREAD || k->vals[in->dst].name >= 0 || in->aux > TERN_SIMD_GROUPS) continue;
        char base[40];
        if (in->aux < TERN_LOCAL_INDEX)
            snprintf(base, sizeof base, "%s_%c", thread_names[in->aux], "xyz"[in->imm]);
        else
            snprintf(base, sizeof base, "%s", thread_names[in->aux]);
        e.val_name[in->dst] = strdup(emit_unique(&e, base));
    }
    analyse(&e);
    /* vector loads: components are the vector's fields, named when the load is emitted */
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        if (in->op == IR_WHILE) {
            bool simple = true;
            for (int32_t j = i + 1; j < in->a[0] && simple; j++) simple = !writes_statement(&e, j);
            simple_while[i] = simple;
        }
    }
    e.indent = 1;
    e.simple_while = simple_while;
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        if (d->pipe && in->op == IR_IF && in->aux == IR_IF_PIPE)
            i = d->pipe(&e, i); /* the region is written whole; i is its END */
        else
            statement(&e, i);
    }
    e.simple_while = NULL;
    free(simple_while);

    /* head, declarations and prelude now that the body says what it needs */
    strbuf head;
    sb_init(&head);
    d->head(&e, &head);
    for (int32_t b = 0; b < k->nbufs; b++)
        if (k->bufs[b].shared) d->shared(&e, &head, b);
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        if (in->op != IR_THREAD || e.use_count[in->dst] == 0) continue;
        sb_printf(&head, "    const int %s = ", emit_val_name(&e, in->dst));
        d->thread(&e, &head, (tern_thread_attr)in->aux, (int)in->imm);
        sb_puts(&head, ";\n");
    }
    strbuf pre;
    sb_init(&pre);
    sb_printf(&pre, "/* kernel '%s', emitted by tern for %s */\n", k->name, tern_target_name(d->target));
    d->prelude(&e, &pre);
    char *pre_s = sb_take(&pre), *head_s = sb_take(&head);
    sb_puts(&e.body, "}\n");
    char *body_s = sb_take(&e.body);
    tern_error *err = NULL;
    if (!pre_s || !head_s || !body_s) {
        err = tern_errorf("kernel '%s': out of memory while emitting %s", k->name,
                          tern_target_name(d->target));
    } else {
        strbuf all;
        sb_init(&all);
        sb_puts(&all, pre_s);
        sb_puts(&all, head_s);
        sb_puts(&all, body_s);
        *out = sb_take(&all);
        if (!*out) err = tern_errorf("kernel '%s': out of memory", k->name);
        int32_t offset = count_lines(pre_s) + count_lines(head_s);
        int32_t total = offset + e.body_line + 2;
        if (!err && line_ins) {
            int32_t *map = malloc(((size_t)total + 1) * sizeof *map);
            if (map) {
                for (int32_t l = 0; l <= total; l++) map[l] = -1;
                for (int32_t l = 1; l <= e.body_line; l++) map[offset + l] = e.line_ins[l];
                *line_ins = map;
                if (nlines) *nlines = total;
            }
        }
    }
    free(pre_s);
    free(head_s);
    free(body_s);
    emitter_free(&e);
    return err;
}

tern_error *tern_kernel_emit(const tern_kernel *k, tern_target t, char **out) {
    if (!out) return tern_errorf("tern_kernel_emit: out is NULL");
    *out = NULL;
    if (!k) return tern_errorf("tern_kernel_emit: the kernel is NULL");
    const dialect *d = emit_dialect(t);
    if (!d) return tern_errorf("kernel '%s': unknown target %d", k->name, (int)t);
    return emit_source(k, d, out, NULL, NULL);
}
