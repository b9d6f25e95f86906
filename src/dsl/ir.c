/* Kernel storage: growable tables of instructions, values, variables, buffers, parameters
 * and strings; and the facts about opcodes and types the other passes share. */
#include "dsl/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tern_kernel *ir_kernel_new(const char *name) {
    tern_kernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->name = strdup(name ? name : "");
    if (!k->name) {
        free(k);
        return NULL;
    }
    k->result = -1;
    return k;
}

void interp_prog_free(struct interp_prog *p); /* interp_prepare.c */

void ir_kernel_free(tern_kernel *k) {
    if (!k) return;
    interp_prog_free(k->prog);
    for (int32_t i = 0; i < k->nstrings; i++) free(k->strings[i]);
    free(k->strings);
    free(k->ins);
    free(k->vals);
    free(k->vars);
    free(k->bufs);
    free(k->params);
    free(k->extra);
    free(k->name);
    free(k);
}

/* Makes room for one more element in *items (count *n, capacity *cap); false when out of
 * memory or the table would pass INT32_MAX entries. */
static bool grow(void **items, int32_t n, int32_t *cap, size_t size) {
    if (n < *cap) return true;
    if (*cap > INT32_MAX / 2) return false;
    int32_t want = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, (size_t)want * size);
    if (!p) return false;
    *items = p;
    *cap = want;
    return true;
}

int32_t ir_add_ins(tern_kernel *k, const ir_ins *ins) {
    if (!grow((void **)&k->ins, k->nins, &k->cap_ins, sizeof *k->ins)) return -1;
    k->ins[k->nins] = *ins;
    return k->nins++;
}

int32_t ir_add_value(tern_kernel *k, uint8_t type, int32_t def, int32_t block) {
    if (!grow((void **)&k->vals, k->nvals, &k->cap_vals, sizeof *k->vals)) return -1;
    ir_value v = {type, def, -1, block};
    k->vals[k->nvals] = v;
    return k->nvals++;
}

int32_t ir_add_var(tern_kernel *k, uint8_t type, int32_t name, int32_t block) {
    if (!grow((void **)&k->vars, k->nvars, &k->cap_vars, sizeof *k->vars)) return -1;
    ir_var v = {type, name, block};
    k->vars[k->nvars] = v;
    return k->nvars++;
}

int32_t ir_add_buf(tern_kernel *k, const ir_buf *buf) {
    if (!grow((void **)&k->bufs, k->nbufs, &k->cap_bufs, sizeof *k->bufs)) return -1;
    k->bufs[k->nbufs] = *buf;
    return k->nbufs++;
}

int32_t ir_add_param(tern_kernel *k, const ir_param *p) {
    if (!grow((void **)&k->params, k->nparams, &k->cap_params, sizeof *k->params)) return -1;
    k->params[k->nparams] = *p;
    return k->nparams++;
}

int32_t ir_add_extra(tern_kernel *k, const int32_t *ids, int32_t count) {
    int32_t start = k->nextra;
    for (int32_t i = 0; i < count; i++) {
        if (!grow((void **)&k->extra, k->nextra, &k->cap_extra, sizeof *k->extra)) return -1;
        k->extra[k->nextra++] = ids[i];
    }
    return start;
}

int32_t ir_add_string(tern_kernel *k, const char *s) {
    if (!s) return -1;
    for (int32_t i = 0; i < k->nstrings; i++)
        if (!strcmp(k->strings[i], s)) return i;
    if (!grow((void **)&k->strings, k->nstrings, &k->cap_strings, sizeof *k->strings)) return -1;
    char *copy = strdup(s);
    if (!copy) return -1;
    k->strings[k->nstrings] = copy;
    return k->nstrings++;
}

const char *ir_string(const tern_kernel *k, int32_t id) {
    if (id < 0 || id >= k->nstrings) return "";
    return k->strings[id];
}

/* ---- names ---- */

const char *ir_op_name(ir_op op) {
    static const char *const names[IR_OP_COUNT] = {
        [IR_CONST] = "const",       [IR_PARAM] = "param",       [IR_THREAD] = "thread",
        [IR_UNARY] = "unary",       [IR_BINARY] = "binary",     [IR_SELECT] = "select",
        [IR_FMA] = "fma",           [IR_CAST] = "cast",         [IR_BITCAST] = "bitcast",
        [IR_VAR_DECL] = "var",      [IR_VAR_READ] = "read",     [IR_ASSIGN] = "assign",
        [IR_LOAD] = "load",         [IR_STORE] = "store",       [IR_VLOAD] = "load_vec",
        [IR_VSTORE] = "store_vec",  [IR_ATOMIC] = "atomic",     [IR_ATOMIC_CAS] = "atomic_cas",
        [IR_BARRIER] = "barrier",   [IR_SIMD] = "simd",         [IR_PRINT] = "print",
        [IR_IF] = "if",             [IR_ELSE] = "else",         [IR_END] = "end",
        [IR_FOR] = "for",           [IR_WHILE] = "while",       [IR_WHILE_TEST] = "while_test",
        [IR_BREAK] = "break",       [IR_CONTINUE] = "continue", [IR_EXIT] = "exit",
        [IR_RESULT] = "result",     [IR_MMA] = "mma_bf16",
        [IR_WAIT_PREVIOUS] = "wait_previous", [IR_PREFETCH] = "prefetch",
        [IR_LOAD_MATRIX] = "load_matrix", [IR_FENCE] = "fence_device",
        [IR_COPY_ASYNC] = "copy_async", [IR_COPY_COMMIT] = "copy_async_commit",
        [IR_COPY_WAIT] = "copy_async_wait", [IR_WGMMA] = "wgmma_bf16", [IR_WGMMA_WAIT] = "wgmma_wait",
        [IR_COPY_TILE] = "copy_tile", [IR_STORE_BULK] = "store_bulk",
        [IR_STORE_BULK_COMMIT] = "store_bulk_commit", [IR_STORE_BULK_WAIT] = "store_bulk_wait",
        [IR_STORE_BULK_FENCE] = "store_bulk_fence",
    };
    return (unsigned)op < IR_OP_COUNT && names[op] ? names[op] : "?";
}

const char *ir_op1_name(tern_op1 op) {
    static const char *const names[] = {
        "neg", "not", "lnot", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh",
        "erf", "sin", "cos", "floor", "ceil", "round", "trunc", "isnan", "isinf",
    };
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

const char *ir_op2_name(tern_op2 op) {
    static const char *const names[] = {
        "add", "sub", "mul", "div", "rem", "min", "max", "pow", "and", "or", "xor",
        "shl", "shr", "lt", "le", "gt", "ge", "eq", "ne", "land", "lor",
    };
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

const char *ir_atomic_name(tern_atomic_op op) {
    static const char *const names[] = {"add", "min", "max", "and", "or", "xor", "xchg"};
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

const char *ir_simd_name(tern_simd_op op) {
    static const char *const names[] = {
        "sum", "min", "max", "prefix_sum", "shuffle", "shuffle_xor", "shuffle_down",
        "shuffle_up", "ballot", "any", "all",
    };
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

const char *ir_thread_name(tern_thread_attr a) {
    static const char *const names[] = {
        "global_id", "local_id", "group_id", "group_size", "group_count",
        "local_index", "simd_lane", "simd_group", "simd_groups",
    };
    return (unsigned)a < sizeof names / sizeof *names ? names[a] : "?";
}

/* ---- types ---- */

const char *tern_type_name(tern_type t) {
    static const char *const names[TERN_TYPE_COUNT] = {
        "void", "bool", "i32", "u32", "i64", "u64", "f32", "f16", "bf16", "u16",
    };
    return (unsigned)t < TERN_TYPE_COUNT ? names[t] : "invalid type";
}

size_t tern_type_size(tern_type t) {
    switch (t) {
    case TERN_T_BOOL: return 1;
    case TERN_T_I32:
    case TERN_T_U32:
    case TERN_T_F32: return 4;
    case TERN_T_I64:
    case TERN_T_U64: return 8;
    case TERN_T_F16:
    case TERN_T_BF16:
    case TERN_T_U16: return 2;
    default: return 0;
    }
}

tern_type tern_type_value(tern_type t) {
    switch (t) {
    case TERN_T_F16:
    case TERN_T_BF16: return TERN_T_F32;
    case TERN_T_U16: return TERN_T_U32;
    default: return t;
    }
}

tern_type tern_type_of_dtype(tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return TERN_T_F32;
    case TERN_BF16: return TERN_T_BF16;
    case TERN_F16: return TERN_T_F16;
    case TERN_I32: return TERN_T_I32;
    case TERN_U16: return TERN_T_U16;
    case TERN_Q8: break; /* no DSL type: the GPU core refuses q8_0 */
    }
    return TERN_T_VOID;
}

bool ir_op_has_effect(ir_op op) {
    switch (op) {
    case IR_CONST:
    case IR_PARAM:
    case IR_THREAD:
    case IR_UNARY:
    case IR_BINARY:
    case IR_SELECT:
    case IR_FMA:
    case IR_CAST:
    case IR_BITCAST:
    case IR_VAR_READ:
    case IR_LOAD:
    case IR_VLOAD: return false;
    /* SIMD and MMA are collectives: as "effects" nothing folds, moves or drops them, so
     * every lane still reaches them together */
    default: return true;
    }
}

bool ir_op_opens(ir_op op) { return op == IR_IF || op == IR_FOR || op == IR_WHILE; }

int ir_operands(const tern_kernel *k, const ir_ins *in, int32_t *out) {
    const int32_t *a = in->a;
    int n = 0;
    switch ((ir_op)in->op) {
    case IR_UNARY:
    case IR_CAST:
    case IR_BITCAST:
    case IR_IF:
    case IR_WHILE_TEST:
    case IR_RESULT: out[n++] = a[0]; break;
    case IR_BINARY:
        out[n++] = a[0];
        out[n++] = a[1];
        break;
    case IR_SELECT:
    case IR_FMA:
    case IR_FOR:
        out[n++] = a[0];
        out[n++] = a[1];
        out[n++] = a[2];
        break;
    case IR_VAR_DECL:
    case IR_ASSIGN:
    case IR_LOAD:
    case IR_VLOAD:
    case IR_PREFETCH:
    case IR_LOAD_MATRIX: out[n++] = a[1]; break;
    case IR_STORE:
    case IR_ATOMIC:
        out[n++] = a[1];
        out[n++] = a[2];
        break;
    case IR_COPY_ASYNC: /* a0 and a2 are buffers */
        out[n++] = a[1];
        out[n++] = a[3];
        break;
    case IR_STORE_BULK: /* a0 and a2 are buffers, the count the value imm */
        out[n++] = a[1];
        out[n++] = a[3];
        out[n++] = (int32_t)in->imm;
        break;
    case IR_ATOMIC_CAS:
    case IR_COPY_TILE: /* a0 is a buffer */
        out[n++] = a[1];
        out[n++] = a[2];
        out[n++] = a[3];
        break;
    case IR_VSTORE:
        out[n++] = a[1];
        for (int j = 0; j < in->aux && j < 16; j++) out[n++] = k->extra[a[2] + j];
        break;
    case IR_SIMD:
        out[n++] = a[0];
        if (a[1] >= 0) out[n++] = a[1];
        break;
    case IR_PRINT:
        for (int j = 0; j < a[1] && j < 16; j++) out[n++] = k->extra[a[0] + j];
        break;
    case IR_MMA:
        for (int j = 0; j < IR_MMA_OPERANDS; j++) out[n++] = k->extra[a[0] + j];
        break;
    case IR_WGMMA: {
        int count = ir_wg_values(ir_wg_unpack(in->imm), a[1] >= 0, (in->aux & IR_WG_ASYNC) != 0);
        for (int j = 0; j < count && j < IR_MAX_OPERANDS; j++) out[n++] = k->extra[a[0] + j];
        break;
    }
    default: break;
    }
    return n;
}

/* ---- locations and descriptions ---- */

const char *ir_where(const tern_kernel *k, int32_t ins, char *buf, size_t size) {
    if (ins < 0 || ins >= k->nins || k->ins[ins].file < 0) {
        snprintf(buf, size, "?");
        return buf;
    }
    const char *file = ir_string(k, k->ins[ins].file);
    const char *slash = strrchr(file, '/');
    snprintf(buf, size, "%s:%d", slash ? slash + 1 : file, k->ins[ins].line);
    return buf;
}

/* ---- tile copies' tensor maps ---- */

static bool same_map(ir_tile_box a, ir_tile_box b) { return a.buf == b.buf && a.cols == b.cols && a.rows == b.rows; }

int ir_tile_maps(const tern_kernel *k, ir_tile_box *out) {
    ir_tile_box maps[IR_TILE_MAX_MAPS];
    int n = 0;
    for (int32_t i = 0; i < k->nins; i++) {
        if (k->ins[i].op != IR_COPY_TILE) continue;
        ir_tile_box b = ir_tile_unpack(k->ins[i].imm);
        int j = 0;
        while (j < n && !same_map(maps[j], b)) j++;
        if (j == n && n < IR_TILE_MAX_MAPS) maps[n++] = b;
    }
    if (out) memcpy(out, maps, (size_t)n * sizeof *maps);
    return n;
}

int ir_tile_map_of(const tern_kernel *k, int32_t ins) {
    ir_tile_box maps[IR_TILE_MAX_MAPS], b = ir_tile_unpack(k->ins[ins].imm);
    int n = ir_tile_maps(k, maps);
    for (int j = 0; j < n; j++)
        if (same_map(maps[j], b)) return j;
    return -1;
}
