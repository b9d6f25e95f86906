/* The IR as text: one statement per line, for debugging, error messages and tests. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/ir.h"
#include "dsl/strbuf.h"

/* A value's name in dumps: its own name, or t<id>; constants print as literals. */
static void put_val(strbuf *sb, const tern_kernel *k, int32_t id) {
    if (id < 0 || id >= k->nvals) {
        sb_puts(sb, "?");
        return;
    }
    const ir_value *v = &k->vals[id];
    const ir_ins *def = &k->ins[v->def];
    if (def->op == IR_CONST) {
        if (def->type == TERN_T_F32)
            sb_printf(sb, "%.9g", ir_const_f(def));
        else if (def->type == TERN_T_BOOL)
            sb_puts(sb, def->imm ? "true" : "false");
        else if (def->type == TERN_T_U32 || def->type == TERN_T_U64)
            sb_printf(sb, "%" PRIu64, (uint64_t)def->imm);
        else
            sb_printf(sb, "%" PRId64, def->imm);
        sb_printf(sb, ":%s", tern_type_name(def->type));
    } else if (v->name >= 0) {
        sb_printf(sb, "%s", ir_string(k, v->name));
        if (def->op != IR_PARAM) sb_printf(sb, "_%d", id);
    } else {
        sb_printf(sb, "t%d", id);
    }
}

/* A buffer operand's name, "?" when it is not one. */
static const char *buf_name(const tern_kernel *k, int32_t b) {
    return b >= 0 && b < k->nbufs ? ir_string(k, k->bufs[b].name) : "?";
}

/* "mma_bf16 a {..8}, b {..4}, c {..4}" */
static void put_mma(strbuf *sb, const tern_kernel *k, const ir_ins *in) {
    static const char *const parts[3] = {"a", "b", "c"};
    static const int counts[3] = {8, 4, 4};
    sb_puts(sb, "mma_bf16");
    if (in->a[0] < 0 || in->a[0] + IR_MMA_OPERANDS > k->nextra) return;
    const int32_t *ops = &k->extra[in->a[0]];
    for (int s = 0, n = 0; s < 3; s++) {
        sb_printf(sb, "%s %s {", s ? "," : "", parts[s]);
        for (int j = 0; j < counts[s]; j++, n++) {
            if (j) sb_puts(sb, ", ");
            put_val(sb, k, ops[n]);
        }
        sb_puts(sb, "}");
    }
}

/* "wgmma_bf16 m64n64k16 a {..8} | a tile[v3] (64 rows), b tile[v4] (k rows of 64), c {..}" */
static void put_wgmma(strbuf *sb, const tern_kernel *k, const ir_ins *in) {
    ir_wg_shape s = ir_wg_unpack(in->imm);
    bool a_tile = in->a[1] >= 0;
    sb_printf(sb, "wgmma_bf16%s%s m64n%dk%d", in->aux & IR_WG_ASYNC ? "_async" : "", in->aux & IR_WG_ROLE ? " (role)" : "",
              s.n, s.k);
    int count = ir_wg_operands(s, a_tile);
    if (in->a[0] < 0 || in->a[0] + count > k->nextra) return;
    const int32_t *ops = &k->extra[in->a[0]];
    int j = 0;
    if (a_tile) {
        sb_printf(sb, " a %s[", buf_name(k, in->a[1]));
        put_val(sb, k, ops[j++]);
        sb_printf(sb, "] (%d rows%s)", s.a_rows, s.a_k_rows ? " of k" : "");
    } else {
        sb_puts(sb, " a {");
        for (; j < s.k / 2; j++) {
            if (j) sb_puts(sb, ", ");
            put_val(sb, k, ops[j]);
        }
        sb_puts(sb, "}");
    }
    sb_printf(sb, ", b %s[", buf_name(k, in->a[2]));
    put_val(sb, k, ops[j++]);
    sb_printf(sb, "] (%d rows%s), %s {", s.b_rows, s.b_k_rows ? " of k" : "", in->aux & IR_WG_ASYNC ? "acc" : "c");
    for (int first = j; j < count; j++) {
        if (j > first) sb_puts(sb, ", ");
        if (in->aux & IR_WG_ASYNC)
            sb_puts(sb, ops[j] >= 0 && ops[j] < k->nvars ? ir_string(k, k->vars[ops[j]].name) : "?");
        else
            put_val(sb, k, ops[j]);
    }
    sb_puts(sb, "}");
}

static void put_ins(strbuf *sb, const tern_kernel *k, int32_t i) {
    const ir_ins *in = &k->ins[i];
    const int32_t *a = in->a;
    if (in->dst >= 0 && in->op != IR_FOR) {
        put_val(sb, k, in->dst);
        if (in->op == IR_VLOAD) sb_printf(sb, "..+%d", in->aux - 1);
        if (in->op == IR_LOAD_MATRIX) sb_puts(sb, "..+7");
        if (in->op == IR_MMA) sb_printf(sb, "..+%d", IR_MMA_RESULTS - 1);
        if (in->op == IR_WGMMA) sb_printf(sb, "..+%d", ir_wg_unpack(in->imm).n / 2 - 1);
        sb_printf(sb, ": %s = ", tern_type_name(in->type));
    }
    const char *bname = ((in->op >= IR_LOAD && in->op <= IR_ATOMIC_CAS) || in->op == IR_LOAD_MATRIX) &&
                                a[0] >= 0 && a[0] < k->nbufs
                            ? ir_string(k, k->bufs[a[0]].name)
                            : "";
    switch ((ir_op)in->op) {
    case IR_CONST: put_val(sb, k, in->dst); break;
    case IR_PARAM: sb_printf(sb, "param %" PRId64, in->imm); break;
    case IR_THREAD:
        sb_printf(sb, "%s.%c", ir_thread_name((tern_thread_attr)in->aux), "xyz"[in->imm >= 0 && in->imm <= 2 ? in->imm : 0]);
        break;
    case IR_UNARY:
        sb_printf(sb, "%s ", ir_op1_name((tern_op1)in->aux));
        put_val(sb, k, a[0]);
        break;
    case IR_BINARY:
        sb_printf(sb, "%s ", ir_op2_name((tern_op2)in->aux));
        put_val(sb, k, a[0]);
        sb_puts(sb, ", ");
        put_val(sb, k, a[1]);
        break;
    case IR_SELECT:
    case IR_FMA:
        sb_printf(sb, "%s ", ir_op_name((ir_op)in->op));
        for (int j = 0; j < 3; j++) {
            if (j) sb_puts(sb, ", ");
            put_val(sb, k, a[j]);
        }
        break;
    case IR_CAST:
    case IR_BITCAST:
        sb_printf(sb, "%s ", ir_op_name((ir_op)in->op));
        put_val(sb, k, a[0]);
        break;
    case IR_VAR_DECL:
    case IR_ASSIGN:
        sb_printf(sb, "%s %s = ", in->op == IR_VAR_DECL ? "var" : "set",
                  a[0] >= 0 && a[0] < k->nvars ? ir_string(k, k->vars[a[0]].name) : "?");
        put_val(sb, k, a[1]);
        break;
    case IR_VAR_READ:
        sb_printf(sb, "read %s", a[0] >= 0 && a[0] < k->nvars ? ir_string(k, k->vars[a[0]].name) : "?");
        break;
    case IR_LOAD:
    case IR_VLOAD:
        sb_printf(sb, "%s %s[", ir_op_name((ir_op)in->op), bname);
        put_val(sb, k, a[1]);
        sb_puts(sb, "]");
        break;
    case IR_LOAD_MATRIX:
        sb_printf(sb, "load_matrix%s %s, row ", in->aux ? " transposed" : "", bname);
        put_val(sb, k, a[1]);
        break;
    case IR_STORE:
        sb_printf(sb, "store %s[", bname);
        put_val(sb, k, a[1]);
        sb_puts(sb, "] = ");
        put_val(sb, k, a[2]);
        break;
    case IR_VSTORE:
        sb_printf(sb, "store_vec %s[", bname);
        put_val(sb, k, a[1]);
        sb_puts(sb, "] = {");
        for (int j = 0; j < in->aux && a[2] >= 0 && a[2] + j < k->nextra; j++) {
            if (j) sb_puts(sb, ", ");
            put_val(sb, k, k->extra[a[2] + j]);
        }
        sb_puts(sb, "}");
        break;
    case IR_ATOMIC:
    case IR_ATOMIC_CAS:
        sb_printf(sb, "atomic_%s %s[",
                  in->op == IR_ATOMIC ? ir_atomic_name((tern_atomic_op)in->aux) : "cas", bname);
        put_val(sb, k, a[1]);
        sb_puts(sb, "], ");
        put_val(sb, k, a[2]);
        if (in->op == IR_ATOMIC_CAS) {
            sb_puts(sb, ", ");
            put_val(sb, k, a[3]);
        }
        break;
    case IR_COPY_ASYNC: /* "copy_async tile[i] <- x[j], 8" */
        sb_printf(sb, "copy_async %s[", buf_name(k, a[0]));
        put_val(sb, k, a[1]);
        sb_printf(sb, "] <- %s[", buf_name(k, a[2]));
        put_val(sb, k, a[3]);
        sb_printf(sb, "], %d", in->aux);
        break;
    case IR_COPY_WAIT: sb_printf(sb, "copy_async_wait %d", in->aux); break;
    case IR_STORE_BULK: /* "store_bulk x[i] <- tile[j], n" */
        sb_printf(sb, "store_bulk %s[", buf_name(k, a[0]));
        put_val(sb, k, a[1]);
        sb_printf(sb, "] <- %s[", buf_name(k, a[2]));
        put_val(sb, k, a[3]);
        sb_puts(sb, "], ");
        put_val(sb, k, (int32_t)in->imm);
        break;
    case IR_STORE_BULK_WAIT: sb_printf(sb, "store_bulk_wait %d", in->aux); break;
    case IR_COPY_TILE: { /* "copy_tile tile[i] <- x[r, c] of 768 columns, 128 x 64" */
        ir_tile_box b = ir_tile_unpack(in->imm);
        sb_printf(sb, "copy_tile %s[", buf_name(k, a[0]));
        put_val(sb, k, a[1]);
        sb_printf(sb, "] <- %s[", buf_name(k, b.buf));
        put_val(sb, k, a[2]);
        sb_puts(sb, ", ");
        put_val(sb, k, a[3]);
        sb_printf(sb, "] of %lld columns, %d x %d", (long long)b.cols, b.rows, 64 * b.panels);
        break;
    }
    case IR_PREFETCH:
        sb_printf(sb, "prefetch %s[", a[0] >= 0 && a[0] < k->nbufs ? ir_string(k, k->bufs[a[0]].name) : "?");
        put_val(sb, k, a[1]);
        sb_puts(sb, "]");
        break;
    case IR_SIMD:
        sb_printf(sb, "simd_%s ", ir_simd_name((tern_simd_op)in->aux));
        put_val(sb, k, a[0]);
        if (a[1] >= 0) {
            sb_puts(sb, ", ");
            put_val(sb, k, a[1]);
        }
        break;
    case IR_MMA: put_mma(sb, k, in); break;
    case IR_WGMMA: put_wgmma(sb, k, in); break;
    case IR_WGMMA_WAIT: sb_printf(sb, "wgmma_wait %d (%d accumulators done)", in->aux, a[1]); break;
    case IR_PRINT:
        sb_puts(sb, "print \"");
        sb_put_c_string(sb, ir_string(k, (int32_t)in->imm), false);
        sb_puts(sb, "\"");
        for (int j = 0; j < a[1] && a[0] >= 0 && a[0] + j < k->nextra; j++) {
            sb_puts(sb, ", ");
            put_val(sb, k, k->extra[a[0] + j]);
        }
        break;
    case IR_IF:
    case IR_WHILE_TEST:
    case IR_RESULT:
        sb_printf(sb, "%s ", in->op == IR_WHILE_TEST ? "while" : ir_op_name((ir_op)in->op));
        put_val(sb, k, a[0]);
        break;
    case IR_FOR:
        sb_puts(sb, "for ");
        put_val(sb, k, in->dst);
        sb_puts(sb, " = ");
        put_val(sb, k, a[0]);
        sb_puts(sb, " to ");
        put_val(sb, k, a[1]);
        sb_puts(sb, " step ");
        put_val(sb, k, a[2]);
        break;
    case IR_WHILE: sb_puts(sb, "loop"); break;
    default: sb_puts(sb, ir_op_name((ir_op)in->op)); break;
    }
}

const char *ir_describe(const tern_kernel *k, int32_t ins, char *buf, size_t size) {
    if (!size) return buf;
    buf[0] = '\0';
    if (ins < 0 || ins >= k->nins) return buf;
    strbuf sb;
    sb_init(&sb);
    put_ins(&sb, k, ins);
    char *s = sb_take(&sb);
    if (s) {
        snprintf(buf, size, "%s", s);
        free(s);
    }
    return buf;
}

char *tern_kernel_dump(const tern_kernel *k) {
    if (!k) return NULL;
    strbuf sb;
    sb_init(&sb);
    sb_printf(&sb, "kernel %s(", k->name);
    for (int32_t i = 0; i < k->nparams; i++) {
        const ir_param *p = &k->params[i];
        if (i) sb_puts(&sb, ", ");
        sb_printf(&sb, "%s: %s%s", ir_string(k, p->name), tern_type_name(p->type),
                  p->is_buf ? (p->intent == TERN_READ ? "* read" : p->intent == TERN_WRITE ? "* write" : "* read_write") : "");
    }
    sb_puts(&sb, ")\n");
    for (int32_t i = 0; i < k->nbufs; i++)
        if (k->bufs[i].shared)
            sb_printf(&sb, "  shared %s: %s[%zu]\n", ir_string(k, k->bufs[i].name),
                      tern_type_name(k->bufs[i].elem), k->bufs[i].count);
    int depth = 1;
    for (int32_t i = 0; i < k->nins; i++) {
        ir_op op = (ir_op)k->ins[i].op;
        if (op == IR_CONST || op == IR_PARAM) continue;
        if (op == IR_END || op == IR_ELSE || op == IR_WHILE_TEST) depth--;
        for (int d = 0; d < depth; d++) sb_puts(&sb, "  ");
        put_ins(&sb, k, i);
        sb_putc(&sb, '\n');
        if (ir_op_opens(op) || op == IR_ELSE || op == IR_WHILE_TEST) depth++;
    }
    return sb_take(&sb);
}
