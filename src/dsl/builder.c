/* The trace state: errors, open blocks, operands, and tern_kernel_build itself. */
#include "dsl/builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"
#include "dsl/interp.h"

tern_error *kernel_dump_sources(const tern_kernel *k); /* dump_sources.c */

void kb_fail(tern_kb *kb, tern_loc at, const char *fmt, ...) {
    if (!kb || kb->err) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *file = at.file ? at.file : "?";
    const char *slash = strrchr(file, '/');
    kb->err = tern_errorf("kernel '%s': %s (%s:%d)", kb->k->name, msg, slash ? slash + 1 : file,
                          at.line);
}

int32_t kb_block(const tern_kb *kb) {
    return kb->depth ? kb->frames[kb->depth - 1].ins : -1;
}

bool kb_visible(const tern_kb *kb, int32_t block) {
    if (block < 0) return true;
    for (int32_t i = kb->depth - 1; i >= 0; i--)
        if (kb->frames[i].ins == block) return true;
    return false;
}

static int32_t kb_file_id(tern_kb *kb, const char *file) {
    if (!file) return -1;
    if (file != kb->last_file) {
        kb->last_file_id = ir_add_string(kb->k, file);
        kb->last_file = file;
    }
    return kb->last_file_id;
}

int32_t kb_emit(tern_kb *kb, tern_loc at, ir_ins *in, int type) {
    if (!kb_ok(kb)) return -1;
    if (kb->k->result >= 0) {
        kb_fail(kb, at, "a statement after tern_result (the result must come last)");
        return -1;
    }
    if (kb->pipe_depth && !(in->op == IR_BARRIER && (in->aux == IR_BARRIER_PIPE || in->aux == IR_BARRIER_SYNC)) &&
        kb_refuse_in_pipe(kb, at, (ir_op)in->op))
        return -1;
    in->type = (uint8_t)type;
    in->file = kb_file_id(kb, at.file);
    in->line = at.line;
    in->dst = -1;
    int32_t index = ir_add_ins(kb->k, in);
    if (index < 0) {
        kb_fail(kb, at, "out of memory");
        return -1;
    }
    if (type == TERN_T_VOID) return index;
    /* constants, parameters and thread attributes are the same everywhere: top level */
    bool global = in->op == IR_CONST || in->op == IR_PARAM || in->op == IR_THREAD;
    int32_t v = ir_add_value(kb->k, (uint8_t)type, index, global ? -1 : kb_block(kb));
    if (v < 0) {
        kb_fail(kb, at, "out of memory");
        return -1;
    }
    kb->k->ins[index].dst = v;
    in->dst = v;
    return v;
}

tern_kb *kb_of(const tern_v *vs, int n) {
    for (int i = 0; i < n; i++)
        if (vs[i].kb) return vs[i].kb;
    return NULL;
}

tern_kb *tern_kb_of(tern_v v) { return v.kb; }

int kb_type_of(const tern_kb *kb, tern_v v) {
    switch (v.kind) {
    case TERN_V_CONST: return v.type;
    case TERN_V_VALUE:
        if (kb && v.kb == kb && v.id >= 0 && v.id < kb->k->nvals) return kb->k->vals[v.id].type;
        return TERN_T_VOID;
    case TERN_V_VAR:
        if (kb && v.kb == kb && v.id >= 0 && v.id < kb->k->nvars) return kb->k->vars[v.id].type;
        return TERN_T_VOID;
    default: return TERN_T_VOID;
    }
}

bool kb_literal_fits(int64_t x, int t) {
    switch (t) {
    case TERN_T_I32: return x >= INT32_MIN && x <= INT32_MAX;
    case TERN_T_U32: return x >= 0 && x <= (int64_t)UINT32_MAX;
    case TERN_T_I64: return true;
    case TERN_T_U64: return x >= 0;
    case TERN_T_F32: return x >= -16777216 && x <= 16777216; /* exact in f32 */
    default: return false;
    }
}

int kb_unify(const tern_kb *kb, tern_v a, tern_v b) {
    int ta = kb_type_of(kb, a), tb = kb_type_of(kb, b);
    bool wa = a.kind == TERN_V_CONST && a.weak, wb = b.kind == TERN_V_CONST && b.weak;
    if (wa && !wb) return kb_literal_fits(a.c.i, tb) ? tb : TERN_T_VOID;
    if (wb && !wa) return kb_literal_fits(b.c.i, ta) ? ta : TERN_T_VOID;
    return ta == tb ? ta : TERN_T_VOID;
}

static const char *poison_op_name(int op) {
    if (op < 64) return ir_op2_name((tern_op2)op);
    if (op < 128) return ir_op1_name((tern_op1)(op - 64));
    switch (op) {
    case 128: return "cast";
    case 129: return "bitcast";
    case 130: return "select";
    case 131: return "fma";
    case 132: return "simd";
    default: return "?";
    }
}

int32_t kb_use(tern_kb *kb, tern_loc at, tern_v v, int type, const char *what) {
    if (!kb_ok(kb)) return -1;
    switch (v.kind) {
    case TERN_V_VALUE: {
        if (v.kb != kb) {
            kb_fail(kb, at, "%s belongs to another kernel", what);
            return -1;
        }
        if (v.id < 0 || v.id >= kb->k->nvals) {
            kb_fail(kb, at, "%s is not a value of this kernel", what);
            return -1;
        }
        const ir_value *val = &kb->k->vals[v.id];
        if (!kb_visible(kb, val->block)) {
            char where[128];
            kb_fail(kb, at,
                    "%s (made at %s) is used outside the block it was made in; carry it out "
                    "with a variable (tern_var)",
                    what, ir_where(kb->k, val->def, where, sizeof where));
            return -1;
        }
        if (type != TERN_T_VOID && val->type != type) {
            kb_fail(kb, at, "%s is %s, expected %s", what, tern_type_name(val->type),
                    tern_type_name(type));
            return -1;
        }
        return v.id;
    }
    case TERN_V_VAR: {
        if (v.kb != kb || v.id < 0 || v.id >= kb->k->nvars) {
            kb_fail(kb, at, "%s is not a variable of this kernel", what);
            return -1;
        }
        const ir_var *var = &kb->k->vars[v.id];
        if (!kb_visible(kb, var->block)) {
            kb_fail(kb, at, "%s: variable '%s' is used outside the block it was declared in",
                    what, ir_string(kb->k, var->name));
            return -1;
        }
        if (kb_wg_var_busy(kb, at, v.id, "read")) return -1;
        if (type != TERN_T_VOID && var->type != type) {
            kb_fail(kb, at, "%s is %s, expected %s", what, tern_type_name(var->type),
                    tern_type_name(type));
            return -1;
        }
        ir_ins in = {.op = IR_VAR_READ, .a = {v.id, -1, -1, -1}};
        return kb_emit(kb, at, &in, var->type);
    }
    case TERN_V_CONST: {
        int t = type == TERN_T_VOID ? v.type : type;
        ev x;
        x.u = v.c.u;
        if (v.weak) {
            if (!kb_literal_fits(v.c.i, t)) {
                kb_fail(kb, at, "%s: the literal %lld does not fit %s", what, (long long)v.c.i,
                        tern_type_name(t));
                return -1;
            }
            x = t == TERN_T_F32 ? ev_from_f((float)v.c.i) : ev_norm(t, v.c.u);
        } else if (v.type != t) {
            kb_fail(kb, at, "%s is %s, expected %s", what, tern_type_name(v.type),
                    tern_type_name(t));
            return -1;
        } else if (t == TERN_T_F32) {
            x = ev_from_f((float)v.c.f);
        }
        ir_ins in = {.op = IR_CONST, .a = {-1, -1, -1, -1}};
        in.imm = t == TERN_T_F32 ? ir_f_bits((double)x.f) : x.i;
        return kb_emit(kb, at, &in, t);
    }
    case TERN_V_BUF:
        kb_fail(kb, at, "%s is a buffer, not a value (use tern_load)", what);
        return -1;
    case TERN_V_POISON: {
        char line[32];
        snprintf(line, sizeof line, "%d", v.id);
        kb_fail(kb, at, "%s: the constant expression %s(%s, %s) made at line %s is invalid", what,
                poison_op_name(v.op), tern_type_name((tern_type)v.type),
                tern_type_name((tern_type)v.c.i), line);
        return -1;
    }
    default:
        kb_fail(kb, at, "%s is not a value (an uninitialised tern_v?)", what);
        return -1;
    }
}

int32_t kb_buf(tern_kb *kb, tern_loc at, tern_v v, const char *what) {
    if (!kb_ok(kb)) return -1;
    if (v.kind != TERN_V_BUF || v.kb != kb || v.id < 0 || v.id >= kb->k->nbufs) {
        kb_fail(kb, at, "%s is not a buffer of this kernel", what);
        return -1;
    }
    return v.id;
}

tern_v kb_value(tern_kb *kb, int32_t id) {
    tern_v v;
    memset(&v, 0, sizeof v);
    if (id < 0 || !kb_ok(kb)) return kb_none(kb);
    v.kb = kb;
    v.id = id;
    v.kind = TERN_V_VALUE;
    v.type = kb->k->vals[id].type;
    return v;
}

/* What DSL calls return after an error: a value of kb that every later call ignores. */
tern_v kb_none(tern_kb *kb) {
    tern_v v;
    memset(&v, 0, sizeof v);
    v.kb = kb;
    v.id = -1;
    v.kind = TERN_V_VALUE;
    return v;
}

tern_v kb_const(int type, ev x, bool weak) {
    tern_v v;
    memset(&v, 0, sizeof v);
    v.kind = TERN_V_CONST;
    v.type = (uint8_t)type;
    v.weak = weak;
    if (type == TERN_T_F32)
        v.c.f = (double)x.f;
    else
        v.c.u = x.u;
    return v;
}

tern_v kb_poison(tern_loc at, int op, int ta, int tb) {
    tern_v v;
    memset(&v, 0, sizeof v);
    v.kind = TERN_V_POISON;
    v.op = (uint8_t)op;
    v.type = (uint8_t)ta;
    v.c.i = tb;
    v.id = at.line;
    return v;
}

bool kb_name_ok(const char *name) {
    if (!name || !*name) return false;
    size_t n = strlen(name);
    if (n > 63) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

/* ---- constants ---- */

tern_v tern_bool(bool b) { return kb_const(TERN_T_BOOL, ev_from_u(b), false); }
tern_v tern_i32(int32_t x) { return kb_const(TERN_T_I32, ev_norm(TERN_T_I32, (uint64_t)(int64_t)x), false); }
tern_v tern_u32(uint32_t x) { return kb_const(TERN_T_U32, ev_from_u(x), false); }
tern_v tern_i64(int64_t x) { return kb_const(TERN_T_I64, ev_from_u((uint64_t)x), false); }
tern_v tern_u64(uint64_t x) { return kb_const(TERN_T_U64, ev_from_u(x), false); }
tern_v tern_f32(float x) { return kb_const(TERN_T_F32, ev_from_f(x), false); }
tern_v tern_int(int64_t x) { return kb_const(TERN_T_I32, ev_from_u((uint64_t)x), true); }

/* ---- parameters and threadgroup memory ---- */

static bool kb_name_free(tern_kb *kb, tern_loc at, const char *name, const char *what) {
    if (!kb_name_ok(name)) {
        kb_fail(kb, at, "%s name '%s' is not a C identifier of at most 63 characters", what,
                name ? name : "(null)");
        return false;
    }
    for (int32_t i = 0; i < kb->k->nparams; i++)
        if (!strcmp(ir_string(kb->k, kb->k->params[i].name), name)) {
            kb_fail(kb, at, "%s name '%s' is already a parameter", what, name);
            return false;
        }
    for (int32_t i = 0; i < kb->k->nbufs; i++)
        if (kb->k->bufs[i].shared && !strcmp(ir_string(kb->k, kb->k->bufs[i].name), name)) {
            kb_fail(kb, at, "%s name '%s' is already a threadgroup array", what, name);
            return false;
        }
    return true;
}

tern_v tern_param_buf_at(tern_loc at, tern_kb *kb, const char *name, tern_type elem,
                         tern_intent intent) {
    if (!kb_ok(kb)) return kb_none(kb);
    if (!kb_name_free(kb, at, name, "parameter")) return kb_none(kb);
    if (!ir_type_is_storage(elem)) {
        kb_fail(kb, at, "buffer parameter '%s': %s is not an element type", name,
                tern_type_name(elem));
        return kb_none(kb);
    }
    if (intent < TERN_READ || intent > TERN_READ_WRITE) {
        kb_fail(kb, at, "buffer parameter '%s': intent must be TERN_READ, TERN_WRITE or "
                "TERN_READ_WRITE", name);
        return kb_none(kb);
    }
    ir_buf b = {.elem = (uint8_t)elem, .intent = (uint8_t)intent, .shared = false,
                .name = ir_add_string(kb->k, name), .param = kb->k->nparams};
    int32_t id = ir_add_buf(kb->k, &b);
    ir_param p = {.is_buf = true, .type = (uint8_t)elem, .intent = (uint8_t)intent,
                  .name = b.name, .id = id};
    if (b.name < 0 || id < 0 || ir_add_param(kb->k, &p) < 0) {
        kb_fail(kb, at, "out of memory");
        return kb_none(kb);
    }
    if (elem == TERN_T_F16) kb->k->uses |= IR_USES_F16;
    if (elem == TERN_T_BF16) kb->k->uses |= IR_USES_BF16;
    tern_v v = kb_none(kb);
    v.id = id;
    v.kind = TERN_V_BUF;
    v.type = (uint8_t)elem;
    return v;
}

tern_v tern_param_scalar_at(tern_loc at, tern_kb *kb, const char *name, tern_type type) {
    if (!kb_ok(kb)) return kb_none(kb);
    if (!kb_name_free(kb, at, name, "parameter")) return kb_none(kb);
    if (!ir_type_is_numeric(type)) {
        kb_fail(kb, at, "scalar parameter '%s': %s is not a scalar type (i32, u32, i64, u64, "
                "f32)", name, tern_type_name(type));
        return kb_none(kb);
    }
    int32_t sname = ir_add_string(kb->k, name);
    ir_ins in = {.op = IR_PARAM, .a = {-1, -1, -1, -1}, .imm = kb->k->nparams};
    int32_t v = kb_emit(kb, at, &in, type);
    if (v < 0) return kb_none(kb);
    kb->k->vals[v].name = sname;
    ir_param p = {.is_buf = false, .type = (uint8_t)type, .intent = TERN_READ, .name = sname,
                  .id = v};
    if (sname < 0 || ir_add_param(kb->k, &p) < 0) {
        kb_fail(kb, at, "out of memory");
        return kb_none(kb);
    }
    if (type == TERN_T_I64 || type == TERN_T_U64) kb->k->uses |= IR_USES_I64;
    return kb_value(kb, v);
}

tern_v kb_shared(tern_kb *kb, tern_loc at, const char *name, tern_type elem, size_t count, size_t align) {
    if (!kb_ok(kb)) return kb_none(kb);
    if (!kb_name_free(kb, at, name, "threadgroup array")) return kb_none(kb);
    if (!ir_type_is_storage(elem)) {
        kb_fail(kb, at, "threadgroup array '%s': %s is not an element type", name,
                tern_type_name(elem));
        return kb_none(kb);
    }
    size_t size = tern_type_size(elem);
    const size_t limit = 256 * 1024; /* above every target's threadgroup memory */
    if (count == 0 || count > limit / size ||
        ((kb->k->shared_bytes + align - 1) & ~(align - 1)) + count * size > limit) {
        kb_fail(kb, at, "threadgroup array '%s' of %zu elements: threadgroup memory is limited "
                "to %zu bytes in all", name, count, limit);
        return kb_none(kb);
    }
    size_t offset = (kb->k->shared_bytes + align - 1) & ~(align - 1);
    ir_buf b = {.elem = (uint8_t)elem, .intent = TERN_READ_WRITE, .shared = true,
                .name = ir_add_string(kb->k, name), .param = -1, .count = count,
                .offset = offset};
    int32_t id = ir_add_buf(kb->k, &b);
    if (b.name < 0 || id < 0) {
        kb_fail(kb, at, "out of memory");
        return kb_none(kb);
    }
    kb->k->shared_bytes = offset + count * size;
    kb->k->uses |= IR_USES_SHARED;
    if (elem == TERN_T_F16) kb->k->uses |= IR_USES_F16;
    if (elem == TERN_T_BF16) kb->k->uses |= IR_USES_BF16;
    tern_v v = kb_none(kb);
    v.id = id;
    v.kind = TERN_V_BUF;
    v.type = (uint8_t)elem;
    return v;
}

tern_v tern_shared_at(tern_loc at, tern_kb *kb, const char *name, tern_type elem, size_t count) {
    return kb_shared(kb, at, name, elem, count, 16);
}

/* ---- variables and names ---- */

tern_v tern_var_at(tern_loc at, tern_kb *kb, const char *name, tern_v init) {
    if (!kb_ok(kb)) return kb_none(kb);
    if (!kb_name_ok(name)) {
        kb_fail(kb, at, "variable name '%s' is not a C identifier of at most 63 characters",
                name ? name : "(null)");
        return kb_none(kb);
    }
    int t = kb_type_of(kb, init);
    if (!ir_type_is_value(t)) {
        kb_use(kb, at, init, TERN_T_VOID, "the initial value"); /* reports why, if it can */
        kb_fail(kb, at, "variable '%s': the initial value is not a value", name);
        return kb_none(kb);
    }
    int32_t v0 = kb_use(kb, at, init, t, "the initial value");
    if (v0 < 0) return kb_none(kb);
    int32_t sname = ir_add_string(kb->k, name);
    int32_t var = ir_add_var(kb->k, (uint8_t)t, sname, kb_block(kb));
    if (sname < 0 || var < 0) {
        kb_fail(kb, at, "out of memory");
        return kb_none(kb);
    }
    ir_ins in = {.op = IR_VAR_DECL, .a = {var, v0, -1, -1}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) < 0) return kb_none(kb);
    tern_v r = kb_none(kb);
    r.id = var;
    r.kind = TERN_V_VAR;
    r.type = (uint8_t)t;
    return r;
}

void tern_assign_at(tern_loc at, tern_v var, tern_v value) {
    tern_kb *kb = var.kb ? var.kb : value.kb;
    if (!kb_ok(kb)) return;
    if (var.kind != TERN_V_VAR || var.kb != kb || var.id < 0 || var.id >= kb->k->nvars) {
        kb_fail(kb, at, "tern_assign: the target is not a variable (declare it with tern_var)");
        return;
    }
    const ir_var *v = &kb->k->vars[var.id];
    if (!kb_visible(kb, v->block)) {
        kb_fail(kb, at, "tern_assign: variable '%s' is out of scope", ir_string(kb->k, v->name));
        return;
    }
    char what[96];
    snprintf(what, sizeof what, "the value assigned to '%s'", ir_string(kb->k, v->name));
    int32_t x = kb_use(kb, at, value, v->type, what);
    if (x < 0 || kb_wg_var_busy(kb, at, var.id, "assigned")) return;
    ir_ins in = {.op = IR_ASSIGN, .a = {var.id, x, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

tern_v tern_name_at(tern_loc at, tern_v v, const char *name) {
    tern_kb *kb = v.kb;
    if (!kb_ok(kb)) return v;
    if (!kb_name_ok(name)) {
        kb_fail(kb, at, "name '%s' is not a C identifier of at most 63 characters",
                name ? name : "(null)");
        return v;
    }
    int32_t s = ir_add_string(kb->k, name);
    if (s < 0) {
        kb_fail(kb, at, "out of memory");
        return v;
    }
    if (v.kind == TERN_V_VALUE && v.id >= 0 && v.id < kb->k->nvals) {
        const ir_ins *def = &kb->k->ins[kb->k->vals[v.id].def];
        if (def->op != IR_CONST && def->op != IR_PARAM) kb->k->vals[v.id].name = s;
    } else if (v.kind == TERN_V_VAR && v.id >= 0 && v.id < kb->k->nvars) {
        kb->k->vars[v.id].name = s;
    }
    return v;
}

/* ---- building ---- */

tern_error *tern_kernel_build(const char *name, tern_trace_fn fn, void *user,
                              tern_kernel **out) {
    if (!out) return tern_errorf("tern_kernel_build: out is NULL");
    *out = NULL;
    if (!kb_name_ok(name))
        return tern_errorf("kernel name '%s' is not a C identifier of at most 63 characters",
                           name ? name : "(null)");
    if (emit_reserved_kernel_name(name))
        return tern_errorf("kernel name '%s' is a keyword or builtin of a target language", name);
    if (!fn) return tern_errorf("kernel '%s': the trace function is NULL", name);
    tern_kb *kb = calloc(1, sizeof *kb);
    if (!kb) return tern_errorf("kernel '%s': out of memory", name);
    kb->k = ir_kernel_new(name);
    if (!kb->k) {
        free(kb);
        return tern_errorf("kernel '%s': out of memory", name);
    }
    fn(kb, user);
    tern_error *err = kb->err;
    tern_kernel *k = kb->k;
    if (!err && kb->nwg_pending > 0)
        err = tern_errorf("kernel '%s': %d wgmma_bf16_async product%s still in flight at its end "
                          "(tern_wgmma_wait missing)", name, (int)kb->nwg_pending, kb->nwg_pending > 1 ? "s are" : " is");
    if (!err && kb->depth > 0) {
        char where[128];
        int32_t open = kb->frames[kb->depth - 1].ins;
        err = tern_errorf("kernel '%s': the %s opened at %s is never closed (tern_end missing, "
                          "or C break/return/goto left a TERN_ macro)",
                          name, ir_op_name((ir_op)k->ins[open].op),
                          ir_where(k, open, where, sizeof where));
    }
    free(kb->frames);
    free(kb);
    if (!err) err = ir_verify(k);
    if (!err) {
        k->hash = ir_hash_kernel(k);
        err = interp_prepare(k);
    }
    if (!err) err = kernel_dump_sources(k);
    if (err) {
        ir_kernel_free(k);
        return err;
    }
    *out = k;
    return NULL;
}

void tern_kernel_free(tern_kernel *k) { ir_kernel_free(k); }
