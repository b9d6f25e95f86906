/* Memory: loads, stores, vector accesses and atomics on buffers and threadgroup arrays. */
#include <stdio.h>

#include "dsl/builder.h"

/* The buffer and index of an access, checking the buffer allows it. -1 after an error. */
static int32_t access_buf(tern_kb *kb, tern_loc at, tern_v buf, const char *op, int need) {
    int32_t b = kb_buf(kb, at, buf, op);
    if (b < 0) return -1;
    const ir_buf *B = &kb->k->bufs[b];
    if ((B->intent & need) != need) {
        const char *want = need == TERN_READ_WRITE ? "TERN_READ_WRITE"
                           : need == TERN_READ     ? "TERN_READ"
                                                   : "TERN_WRITE";
        kb_fail(kb, at, "%s on buffer '%s', which is declared %s: declare it %s", op,
                ir_string(kb->k, B->name),
                B->intent == TERN_READ ? "TERN_READ" : "TERN_WRITE", want);
        return -1;
    }
    return b;
}

static int32_t access_index(tern_kb *kb, tern_loc at, tern_v index, const char *op) {
    int t = kb_type_of(kb, index);
    if (index.kind == TERN_V_CONST && index.weak) t = TERN_T_I32;
    if (index.kind == TERN_V_CONST && index.weak && !kb_literal_fits(index.c.i, TERN_T_I32))
        t = TERN_T_I64;
    if (!ir_type_is_int(t)) {
        if (t == TERN_T_VOID) {
            kb_use(kb, at, index, TERN_T_VOID, "the index");
            if (!kb->err) kb_fail(kb, at, "%s: the index is not a value", op);
        } else {
            kb_fail(kb, at, "%s: the index is %s; indexes are integers", op, tern_type_name(t));
        }
        return -1;
    }
    return kb_use(kb, at, index, t, "the index");
}

tern_v tern_load_at(tern_loc at, tern_v buf, tern_v index) {
    tern_kb *kb = buf.kb;
    if (!kb_ok(kb)) return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    int32_t b = access_buf(kb, at, buf, "load", TERN_READ);
    int32_t i = b < 0 ? -1 : access_index(kb, at, index, "load");
    if (i < 0) return kb_none(kb);
    kb->k->bufs[b].used |= IR_BUF_LOADED;
    ir_ins in = {.op = IR_LOAD, .a = {b, i, -1, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, tern_type_value(kb->k->bufs[b].elem)));
}

void tern_store_at(tern_loc at, tern_v buf, tern_v index, tern_v value) {
    tern_kb *kb = buf.kb;
    if (!kb_ok(kb)) return;
    int32_t b = access_buf(kb, at, buf, "store", TERN_WRITE);
    int32_t i = b < 0 ? -1 : access_index(kb, at, index, "store");
    if (i < 0) return;
    char what[96];
    snprintf(what, sizeof what, "the value stored to '%s'", ir_string(kb->k, kb->k->bufs[b].name));
    int32_t x = kb_use(kb, at, value, tern_type_value(kb->k->bufs[b].elem), what);
    if (x < 0) return;
    kb->k->bufs[b].used |= IR_BUF_STORED;
    kb->k->uses |= IR_USES_STORE;
    ir_ins in = {.op = IR_STORE, .a = {b, i, x, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

static bool vec_width_ok(tern_kb *kb, tern_loc at, int32_t b, int width, const char *op) {
    int bits = ir_type_bits(kb->k->bufs[b].elem);
    bool ok = width == 2 || width == 4 || (width == 8 && bits == 16);
    if (bits == 64) ok = width == 2;
    if (!ok) {
        kb_fail(kb, at, "%s of width %d on %s buffer '%s': widths are 2 or 4 (32-bit elements), "
                "2, 4 or 8 (16-bit), 2 (64-bit)", op, width,
                tern_type_name(kb->k->bufs[b].elem), ir_string(kb->k, kb->k->bufs[b].name));
        return false;
    }
    return true;
}

void tern_load_vec_at(tern_loc at, tern_v buf, tern_v index, int width, tern_v *out) {
    tern_kb *kb = buf.kb;
    if (out)
        for (int j = 0; j < width && j < 8; j++) out[j] = kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    if (!kb_ok(kb)) return;
    if (!out) {
        kb_fail(kb, at, "load_vec: out is NULL");
        return;
    }
    int32_t b = access_buf(kb, at, buf, "load_vec", TERN_READ);
    if (b < 0 || !vec_width_ok(kb, at, b, width, "load_vec")) return;
    int32_t i = access_index(kb, at, index, "load_vec");
    if (i < 0) return;
    kb->k->bufs[b].used |= IR_BUF_LOADED;
    int t = tern_type_value(kb->k->bufs[b].elem);
    ir_ins in = {.op = IR_VLOAD, .aux = (uint8_t)width, .a = {b, i, -1, -1}};
    int32_t first = kb_emit(kb, at, &in, t);
    if (first < 0) return;
    int32_t def = kb->k->vals[first].def;
    out[0] = kb_value(kb, first);
    for (int j = 1; j < width; j++) {
        int32_t v = ir_add_value(kb->k, (uint8_t)t, def, kb->k->vals[first].block);
        if (v != first + j) {
            kb_fail(kb, at, "out of memory");
            return;
        }
        out[j] = kb_value(kb, v);
    }
}

void tern_store_vec_at(tern_loc at, tern_v buf, tern_v index, int width, const tern_v *values) {
    tern_kb *kb = buf.kb;
    if (!kb_ok(kb)) return;
    if (!values) {
        kb_fail(kb, at, "store_vec: values is NULL");
        return;
    }
    int32_t b = access_buf(kb, at, buf, "store_vec", TERN_WRITE);
    if (b < 0 || !vec_width_ok(kb, at, b, width, "store_vec")) return;
    int32_t i = access_index(kb, at, index, "store_vec");
    if (i < 0) return;
    int t = tern_type_value(kb->k->bufs[b].elem);
    int32_t ids[8];
    for (int j = 0; j < width; j++) {
        char what[64];
        snprintf(what, sizeof what, "store_vec's value %d", j);
        ids[j] = kb_use(kb, at, values[j], t, what);
        if (ids[j] < 0) return;
    }
    int32_t first = ir_add_extra(kb->k, ids, width);
    if (first < 0) {
        kb_fail(kb, at, "out of memory");
        return;
    }
    kb->k->bufs[b].used |= IR_BUF_STORED;
    kb->k->uses |= IR_USES_STORE;
    ir_ins in = {.op = IR_VSTORE, .aux = (uint8_t)width, .a = {b, i, first, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

tern_v tern_atomic_at(tern_loc at, tern_atomic_op op, tern_v buf, tern_v index, tern_v value) {
    tern_kb *kb = buf.kb;
    if (!kb_ok(kb)) return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    if ((unsigned)op > TERN_ATOMIC_XCHG) {
        kb_fail(kb, at, "unknown atomic operation %d", (int)op);
        return kb_none(kb);
    }
    char name[32];
    snprintf(name, sizeof name, "atomic_%s", ir_atomic_name(op));
    int32_t b = access_buf(kb, at, buf, name, TERN_READ_WRITE);
    if (b < 0) return kb_none(kb);
    int elem = kb->k->bufs[b].elem;
    bool ok = elem == TERN_T_I32 || elem == TERN_T_U32 ||
              (elem == TERN_T_F32 && (op == TERN_ATOMIC_ADD || op == TERN_ATOMIC_XCHG));
    if (!ok) {
        kb_fail(kb, at, "%s on %s buffer '%s': atomics take i32 or u32 buffers (f32: add and "
                "xchg only)", name, tern_type_name(elem), ir_string(kb->k, kb->k->bufs[b].name));
        return kb_none(kb);
    }
    int32_t i = access_index(kb, at, index, name);
    int32_t x = i < 0 ? -1 : kb_use(kb, at, value, elem, "the atomic's operand");
    if (x < 0) return kb_none(kb);
    kb->k->bufs[b].used |= IR_BUF_ATOMIC;
    kb->k->uses |= IR_USES_ATOMIC | IR_USES_STORE;
    if (elem == TERN_T_F32) kb->k->uses |= IR_USES_F32_ATOMIC;
    ir_ins in = {.op = IR_ATOMIC, .aux = (uint8_t)op, .a = {b, i, x, -1}};
    return kb_value(kb, kb_emit(kb, at, &in, elem));
}

tern_v tern_atomic_cas_at(tern_loc at, tern_v buf, tern_v index, tern_v expected, tern_v desired) {
    tern_kb *kb = buf.kb;
    if (!kb_ok(kb)) return kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    int32_t b = access_buf(kb, at, buf, "atomic_cas", TERN_READ_WRITE);
    if (b < 0) return kb_none(kb);
    int elem = kb->k->bufs[b].elem;
    if (elem != TERN_T_I32 && elem != TERN_T_U32) {
        kb_fail(kb, at, "atomic_cas on %s buffer '%s': it takes i32 or u32 buffers",
                tern_type_name(elem), ir_string(kb->k, kb->k->bufs[b].name));
        return kb_none(kb);
    }
    int32_t i = access_index(kb, at, index, "atomic_cas");
    int32_t e = i < 0 ? -1 : kb_use(kb, at, expected, elem, "atomic_cas's expected value");
    int32_t d = e < 0 ? -1 : kb_use(kb, at, desired, elem, "atomic_cas's new value");
    if (d < 0) return kb_none(kb);
    kb->k->bufs[b].used |= IR_BUF_ATOMIC;
    kb->k->uses |= IR_USES_ATOMIC | IR_USES_STORE;
    ir_ins in = {.op = IR_ATOMIC_CAS, .a = {b, i, e, d}};
    return kb_value(kb, kb_emit(kb, at, &in, elem));
}

void tern_prefetch_at(tern_loc at, tern_v buf, tern_v index) {
    tern_kb *kb = buf.kb;
    if (!kb_ok(kb)) return;
    int32_t b = access_buf(kb, at, buf, "prefetch", TERN_READ);
    if (b < 0) return;
    if (kb->k->bufs[b].shared) {
        kb_fail(kb, at, "prefetch of threadgroup array '%s': it fetches device memory (a buffer "
                "parameter)", ir_string(kb->k, kb->k->bufs[b].name));
        return;
    }
    int32_t i = access_index(kb, at, index, "prefetch");
    if (i < 0) return;
    ir_ins in = {.op = IR_PREFETCH, .a = {b, i, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

void tern_load_matrix_at(tern_loc at, tern_v buf, tern_v row_index, bool transposed, tern_v out[8]) {
    tern_kb *kb = buf.kb;
    if (out)
        for (int j = 0; j < 8; j++) out[j] = kb ? kb_none(kb) : kb_poison(at, 0, 0, 0);
    if (!kb_ok(kb)) return;
    if (!out) {
        kb_fail(kb, at, "load_matrix: out is NULL");
        return;
    }
    if (kb_refuse_in_role(kb, at, "load_matrix")) return;
    int32_t b = access_buf(kb, at, buf, "load_matrix", TERN_READ);
    if (b < 0) return;
    const ir_buf *B = &kb->k->bufs[b];
    if (!B->shared || B->elem != TERN_T_BF16) {
        kb_fail(kb, at, "load_matrix: '%s' is %s %s memory; it reads threadgroup bf16 buffers",
                ir_string(kb->k, B->name), tern_type_name(B->elem), B->shared ? "threadgroup" : "device");
        return;
    }
    int32_t i = access_index(kb, at, row_index, "load_matrix");
    if (i < 0) return;
    kb->k->bufs[b].used |= IR_BUF_LOADED;
    ir_ins in = {.op = IR_LOAD_MATRIX, .aux = transposed ? 1 : 0, .a = {b, i, -1, -1}};
    int32_t first = kb_emit(kb, at, &in, TERN_T_F32);
    if (first < 0) return;
    kb->k->uses |= IR_USES_SIMD;
    int32_t def = kb->k->vals[first].def;
    out[0] = kb_value(kb, first);
    for (int j = 1; j < 8; j++) {
        int32_t v = ir_add_value(kb->k, TERN_T_F32, def, kb->k->vals[first].block);
        if (v != first + j) {
            kb_fail(kb, at, "out of memory");
            return;
        }
        out[j] = kb_value(kb, v);
    }
}

/* ---- asynchronous copies (tern_copy_async) ---- */

/* A copy's buffer operand: dst must be a threadgroup array, src a readable buffer parameter.
 * -1 after an error. */
static int32_t copy_buf(tern_kb *kb, tern_loc at, tern_v v, bool is_dst) {
    int32_t b = kb_buf(kb, at, v, is_dst ? "copy_async's destination" : "copy_async's source");
    if (b < 0) return -1;
    const ir_buf *B = &kb->k->bufs[b];
    const char *name = ir_string(kb->k, B->name);
    if (is_dst && !B->shared) {
        kb_fail(kb, at, "copy_async to buffer parameter '%s': it copies into threadgroup memory "
                "(a tern_shared array)", name);
        return -1;
    }
    if (!is_dst && B->shared) {
        kb_fail(kb, at, "copy_async from threadgroup array '%s': it copies from device memory (a "
                "buffer parameter)", name);
        return -1;
    }
    if (!is_dst && !(B->intent & TERN_READ)) {
        kb_fail(kb, at, "copy_async from buffer '%s', which is declared TERN_WRITE: declare it "
                "TERN_READ", name);
        return -1;
    }
    return b;
}

/* Whether n elements of `elem` make a copy of 4, 8 or 16 bytes (what cp.async moves). */
static bool copy_size_ok(tern_kb *kb, tern_loc at, int elem, int n) {
    long long size = (long long)tern_type_size((tern_type)elem), bytes = size * n;
    if (n > 0 && (bytes == 4 || bytes == 8 || bytes == 16)) return true;
    const char *name = tern_type_name((tern_type)elem);
    if (n > 0)
        kb_fail(kb, at, "copy_async of %d %s element%s (%lld bytes): a copy is 4, 8 or 16 bytes "
                "(%s: n = %s)", n, name, n == 1 ? "" : "s", bytes, name,
                size == 2 ? "2, 4 or 8" : size == 4 ? "1, 2 or 4" : "1 or 2");
    else
        kb_fail(kb, at, "copy_async of %d elements: n must be positive", n);
    return false;
}

void tern_copy_async_at(tern_loc at, tern_v dst, tern_v dst_index, tern_v src, tern_v src_index,
                        int n) {
    tern_kb *kb = dst.kb ? dst.kb : src.kb;
    if (!kb_ok(kb)) return;
    int32_t d = copy_buf(kb, at, dst, true);
    int32_t s = d < 0 ? -1 : copy_buf(kb, at, src, false);
    if (s < 0) return;
    const ir_buf *D = &kb->k->bufs[d], *S = &kb->k->bufs[s];
    if (D->elem != S->elem) {
        kb_fail(kb, at, "copy_async from %s buffer '%s' to %s threadgroup array '%s': the element "
                "types differ (the bytes are copied as they are)", tern_type_name((tern_type)S->elem),
                ir_string(kb->k, S->name), tern_type_name((tern_type)D->elem),
                ir_string(kb->k, D->name));
        return;
    }
    if (!copy_size_ok(kb, at, D->elem, n)) return;
    int32_t di = access_index(kb, at, dst_index, "copy_async");
    int32_t si = di < 0 ? -1 : access_index(kb, at, src_index, "copy_async");
    if (si < 0) return;
    ir_ins in = {.op = IR_COPY_ASYNC, .aux = (uint8_t)n, .a = {d, di, s, si}};
    if (kb_emit(kb, at, &in, TERN_T_VOID) < 0) return;
    kb->k->bufs[d].used |= IR_BUF_STORED | IR_BUF_COPIED;
    kb->k->bufs[s].used |= IR_BUF_LOADED;
    kb->k->uses |= IR_USES_STORE;
}

void tern_copy_async_commit_at(tern_loc at, tern_kb *kb) {
    if (!kb_ok(kb)) return;
    ir_ins in = {.op = IR_COPY_COMMIT, .a = {-1, -1, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

void tern_copy_async_wait_at(tern_loc at, tern_kb *kb, int pending) {
    if (!kb_ok(kb)) return;
    if (pending < 0 || pending > IR_COPY_WAIT_MAX) {
        kb_fail(kb, at, "copy_async_wait: pending %d is not in 0..%d", pending, IR_COPY_WAIT_MAX);
        return;
    }
    ir_ins in = {.op = IR_COPY_WAIT, .aux = (uint8_t)pending, .a = {-1, -1, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}
