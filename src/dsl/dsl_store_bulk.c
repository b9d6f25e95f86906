/* Bulk stores: a run of a threadgroup array written to device memory by the copy engine
 * (tern/kernel.h, tern_store_bulk), with their commit, wait and fence. */
#include "dsl/builder.h"

/* The buffer at one end of a bulk store: the source a threadgroup array, the destination a
 * writable buffer parameter. -1 after an error. */
static int32_t bulk_buf(tern_kb *kb, tern_loc at, tern_v v, bool is_dst) {
    int32_t b = kb_buf(kb, at, v, is_dst ? "store_bulk's destination" : "store_bulk's source");
    if (b < 0) return -1;
    const ir_buf *B = &kb->k->bufs[b];
    const char *name = ir_string(kb->k, B->name);
    if (is_dst && B->shared) {
        kb_fail(kb, at, "store_bulk to threadgroup array '%s': it writes device memory (a buffer parameter)", name);
        return -1;
    }
    if (!is_dst && !B->shared) {
        kb_fail(kb, at, "store_bulk from buffer parameter '%s': it copies from threadgroup memory (a tern_shared "
                "array)", name);
        return -1;
    }
    if (is_dst && !(B->intent & TERN_WRITE)) {
        kb_fail(kb, at, "store_bulk to buffer '%s', which is declared TERN_READ: declare it TERN_WRITE", name);
        return -1;
    }
    return b;
}

/* An index or count operand: an integer value. */
static int32_t bulk_int(tern_kb *kb, tern_loc at, tern_v x, const char *what) {
    int t = kb_type_of(kb, x);
    if (x.kind == TERN_V_CONST && x.weak) t = TERN_T_I32;
    if (!ir_type_is_int(t)) {
        if (!kb->err) kb_fail(kb, at, "store_bulk: %s is %s; it is an integer", what, tern_type_name((tern_type)t));
        return -1;
    }
    return kb_use(kb, at, x, t, what);
}

void tern_store_bulk_at(tern_loc at, tern_v dst, tern_v dst_index, tern_v src, tern_v src_index, tern_v n) {
    tern_kb *kb = dst.kb ? dst.kb : src.kb;
    if (!kb_ok(kb)) return;
    int32_t d = bulk_buf(kb, at, dst, true);
    int32_t s = d < 0 ? -1 : bulk_buf(kb, at, src, false);
    if (s < 0) return;
    const ir_buf *D = &kb->k->bufs[d], *S = &kb->k->bufs[s];
    if (D->elem != S->elem) {
        kb_fail(kb, at, "store_bulk from %s threadgroup array '%s' to %s buffer '%s': the element types differ (the "
                "bytes are copied as they are)", tern_type_name((tern_type)S->elem), ir_string(kb->k, S->name),
                tern_type_name((tern_type)D->elem), ir_string(kb->k, D->name));
        return;
    }
    if (tern_type_size((tern_type)D->elem) > 16) return; /* no such type; keeps 16 / size meaningful */
    int32_t di = bulk_int(kb, at, dst_index, "the destination index");
    int32_t si = di < 0 ? -1 : bulk_int(kb, at, src_index, "the source index");
    int32_t ni = si < 0 ? -1 : bulk_int(kb, at, n, "the element count");
    if (ni < 0) return;
    ir_ins in = {.op = IR_STORE_BULK, .a = {d, di, s, si}, .imm = ni};
    if (kb_emit(kb, at, &in, TERN_T_VOID) < 0) return;
    /* the source 16-byte aligned as a copy's destination is (the emitters' declarations) */
    kb->k->bufs[s].used |= IR_BUF_LOADED | IR_BUF_COPIED;
    kb->k->bufs[d].used |= IR_BUF_STORED;
    kb->k->uses |= IR_USES_STORE;
}

/* The three statements without operands. */
static void bulk_statement(tern_loc at, tern_kb *kb, ir_op op, int aux) {
    if (!kb_ok(kb)) return;
    ir_ins in = {.op = (uint8_t)op, .aux = (uint8_t)aux, .a = {-1, -1, -1, -1}};
    kb_emit(kb, at, &in, TERN_T_VOID);
}

void tern_store_bulk_commit_at(tern_loc at, tern_kb *kb) { bulk_statement(at, kb, IR_STORE_BULK_COMMIT, 0); }

void tern_store_bulk_wait_at(tern_loc at, tern_kb *kb, int pending) {
    if (kb_ok(kb) && (pending < 0 || pending > IR_COPY_WAIT_MAX)) {
        kb_fail(kb, at, "store_bulk_wait: pending %d is not in 0..%d", pending, IR_COPY_WAIT_MAX);
        return;
    }
    bulk_statement(at, kb, IR_STORE_BULK_WAIT, pending);
}

void tern_store_bulk_fence_at(tern_loc at, tern_kb *kb) { bulk_statement(at, kb, IR_STORE_BULK_FENCE, 0); }
