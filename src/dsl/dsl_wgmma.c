/* Warpgroup products (tern_wgmma_bf16) and their tiles: the trace side. The layout and the
 * operands' meaning are in tern/kernel.h; ir.h's ir_wg_shape is how the instruction keeps
 * them. */
#include <stdio.h>
#include <string.h>

#include "dsl/builder.h"

tern_v tern_shared_tiles_at(tern_loc at, tern_kb *kb, const char *name, size_t count) {
    tern_v v = kb_shared(kb, at, name, TERN_T_BF16, count, 1024);
    if (v.kind == TERN_V_BUF) kb->k->bufs[v.id].used |= IR_BUF_TILES;
    return v;
}

tern_v tern_wg_tile_index_at(tern_loc loc, tern_v at, int rows, tern_v row, tern_v col) {
    tern_kb *kb = kb_of((tern_v[]){at, row, col}, 3);
    if (rows <= 0 || rows % 8 || rows > IR_WG_MAX_ROWS) {
        if (kb_ok(kb))
            kb_fail(kb, loc, "wg_tile_index: a tile of %d rows; rows are a multiple of 8 up to %d", rows,
                    IR_WG_MAX_ROWS);
        return kb ? kb_none(kb) : kb_poison(loc, 0, 0, 0);
    }
    /* at + (col / 64) * rows * 64 + row * 64 + ((col % 64) / 8 ^ row % 8) * 8 + col % 8, for
     * non-negative row and col */
    tern_v panel = tern_binary_at(loc, TERN_MUL, tern_binary_at(loc, TERN_SHR, col, tern_int(6)), tern_int(rows * 64));
    tern_v chunk = tern_binary_at(loc, TERN_XOR, tern_binary_at(loc, TERN_AND, tern_binary_at(loc, TERN_SHR, col, tern_int(3)), tern_int(7)),
                                  tern_binary_at(loc, TERN_AND, row, tern_int(7)));
    tern_v within = tern_binary_at(loc, TERN_ADD, tern_binary_at(loc, TERN_SHL, chunk, tern_int(3)),
                                   tern_binary_at(loc, TERN_AND, col, tern_int(7)));
    tern_v r = tern_binary_at(loc, TERN_ADD, at, panel);
    r = tern_binary_at(loc, TERN_ADD, r, tern_binary_at(loc, TERN_SHL, row, tern_int(6)));
    return tern_binary_at(loc, TERN_ADD, r, within);
}

/* A tile operand: its array (a tern_shared_tiles one) and the value of its index. */
static bool tile_operand(tern_kb *kb, tern_loc loc, const tern_wg_tile *t, const char *which, int need_rows,
                         int32_t *buf, int32_t *at) {
    int32_t b = kb_buf(kb, loc, t->buf, "wgmma_bf16");
    if (b < 0) return false;
    const ir_buf *B = &kb->k->bufs[b];
    if (!B->shared || !(B->used & IR_BUF_TILES)) {
        kb_fail(kb, loc, "wgmma_bf16: %s's tile is in '%s', not a tern_shared_tiles array", which,
                ir_string(kb->k, B->name));
        return false;
    }
    if (t->rows <= 0 || t->rows % 8 || t->rows > IR_WG_MAX_ROWS || t->rows < need_rows) {
        kb_fail(kb, loc, "wgmma_bf16: %s's tile has %d rows; it needs at least %d, a multiple of 8 up to %d",
                which, t->rows, need_rows, IR_WG_MAX_ROWS);
        return false;
    }
    int type = kb_type_of(kb, t->at);
    if (t->at.kind == TERN_V_CONST && t->at.weak) type = TERN_T_I32;
    if (type != TERN_T_I32) {
        kb_fail(kb, loc, "wgmma_bf16: %s's tile index is %s; it is an i32", which, tern_type_name(type));
        return false;
    }
    *at = kb_use(kb, loc, t->at, TERN_T_I32, "the tile's index");
    if (*at < 0) return false;
    kb->k->bufs[b].used |= IR_BUF_LOADED;
    *buf = b;
    return true;
}

bool kb_wg_var_busy(tern_kb *kb, tern_loc at, int32_t var, const char *what) {
    for (int32_t i = 0; i < kb->nwg_pending; i++)
        for (int32_t j = 0; j < kb->wg_pending[i].nvars; j++)
            if (kb->wg_pending[i].vars[j] == var) {
                kb_fail(kb, at, "variable '%s' %s while a wgmma_bf16_async product writes it; tern_wgmma_wait first",
                        ir_string(kb->k, kb->k->vars[var].name), what);
                return true;
            }
    return false;
}

/* The trace of one product: synchronous (c values in, d values out) or asynchronous (acc:
 * the accumulator variables, C in and D out once waited for). False after an error. */
static bool wgmma_trace(tern_kb *kb, tern_loc loc, int n, int k, const tern_v *a, const tern_wg_tile *a_tile,
                        const tern_wg_tile *b_tile, const tern_v *c, tern_v *d, const tern_v *acc) {
    const char *op = acc ? "wgmma_bf16_async" : "wgmma_bf16";
    if (!(n >= 8 && n <= IR_WG_MAX_N && n % 8 == 0 && k >= 16 && k <= IR_WG_MAX_K && k % 16 == 0)) {
        kb_fail(kb, loc, "%s: n %d, k %d; n is a multiple of 8 from 8 to %d, k of 16 from 16 to %d", op, n, k,
                IR_WG_MAX_N, IR_WG_MAX_K);
        return false;
    }
    if ((!acc && (!d || !c)) || !b_tile || !a == !a_tile) {
        kb_fail(kb, loc, "%s: %s", op, !acc && !d ? "d is NULL" : !acc && !c ? "c is NULL" : !b_tile ? "b_tile is NULL"
                                      : a ? "a and a_tile are both given; A is one of them"
                                          : "a and a_tile are both NULL; A is one of them");
        return false;
    }
    if (b_tile->k_rows && n % 64) {
        kb_fail(kb, loc, "%s: n %d with B's tile of k rows; such a tile's rows are whole panels of 64", op, n);
        return false;
    }
    if (a && kb_refuse_in_role(kb, loc, "a warpgroup product with A in registers")) return false;
    if (acc && kb->nwg_pending == IR_WG_MAX_PENDING) {
        kb_fail(kb, loc, "%s: %d products in flight already (tern_wgmma_wait)", op, IR_WG_MAX_PENDING);
        return false;
    }
    /* A chain: the accumulators are exactly those of the newest product in flight, in order.
     * The tensor cores apply products on the same accumulators in issue order (PTX wgmma), and
     * every other target makes each product at once, so acc = A B + acc holds in order; any
     * other use of a variable in flight is still refused. */
    bool chains = false;
    int32_t role = kb->role_depth ? kb->role : 0;
    if (acc && kb->nwg_pending) {
        const kb_wg_async *last = &kb->wg_pending[kb->nwg_pending - 1];
        chains = last->nvars == n / 2 && last->depth == kb->depth && last->role == role;
        for (int j = 0; chains && j < n / 2; j++)
            chains = acc[j].kind == TERN_V_VAR && acc[j].kb == kb && acc[j].id == last->vars[j];
    }
    ir_wg_shape s = {.n = n, .k = k, .b_rows = b_tile->rows, .b_k_rows = b_tile->k_rows};
    int32_t ids[IR_MAX_OPERANDS];
    int count = 0;
    int32_t a_buf = -1, b_buf = -1;
    if (a) {
        for (int j = 0; j < k / 2; j++) {
            char what[48];
            snprintf(what, sizeof what, "%s's a[%d]", op, j);
            if ((ids[count++] = kb_use(kb, loc, a[j], TERN_T_F32, what)) < 0) return false;
        }
    } else {
        s.a_rows = a_tile->rows;
        s.a_k_rows = a_tile->k_rows;
        if (!tile_operand(kb, loc, a_tile, "A", a_tile->k_rows ? k : 64, &a_buf, &ids[count++])) return false;
    }
    if (!tile_operand(kb, loc, b_tile, "B", b_tile->k_rows ? k : n, &b_buf, &ids[count++])) return false;
    for (int j = 0; j < n / 2; j++) {
        if (!acc) {
            char what[48];
            snprintf(what, sizeof what, "wgmma_bf16's c[%d]", j);
            if ((ids[count++] = kb_use(kb, loc, c[j], TERN_T_F32, what)) < 0) return false;
            continue;
        }
        /* an accumulator: an f32 variable in scope, not written by a product in flight, nor
         * twice by this one */
        tern_v v = acc[j];
        if (v.kind != TERN_V_VAR || v.kb != kb || v.id < 0 || v.id >= kb->k->nvars ||
            kb->k->vars[v.id].type != TERN_T_F32 || !kb_visible(kb, kb->k->vars[v.id].block)) {
            kb_fail(kb, loc, "%s: acc[%d] is not an f32 variable in scope (tern_var)", op, j);
            return false;
        }
        if (!chains && kb_wg_var_busy(kb, loc, v.id, "is an accumulator")) return false;
        for (int i = count - j; i < count; i++)
            if (ids[i] == v.id) {
                kb_fail(kb, loc, "%s: acc[%d] is also an earlier accumulator of the product", op, j);
                return false;
            }
        ids[count++] = v.id;
    }
    int32_t first = ir_add_extra(kb->k, ids, count);
    if (first < 0) {
        kb_fail(kb, loc, "out of memory");
        return false;
    }
    /* aux: IR_WG_ASYNC, IR_WG_ROLE (emulated per thread: tern/kernel.h, warpgroup roles) */
    uint8_t aux = (uint8_t)((acc ? IR_WG_ASYNC : 0) | (role ? IR_WG_ROLE : 0));
    ir_ins in = {.op = IR_WGMMA, .aux = aux, .a = {first, a_buf, b_buf, -1}, .imm = ir_wg_pack(s)};
    int32_t r = kb_emit(kb, loc, &in, acc ? TERN_T_VOID : TERN_T_F32);
    if (r < 0 && !acc) return false;
    if (!kb_ok(kb)) return false;
    kb->k->uses |= IR_USES_SIMD | IR_USES_WGMMA;
    if (acc) {
        kb_wg_async *p = &kb->wg_pending[kb->nwg_pending++];
        p->depth = kb->depth;
        p->role = role;
        p->nvars = n / 2;
        memcpy(p->vars, ids + count - n / 2, sizeof(int32_t) * (size_t)(n / 2));
        return true;
    }
    /* d is written only now, every operand read: d may be c */
    int32_t def = kb->k->vals[r].def;
    d[0] = kb_value(kb, r);
    for (int j = 1; j < n / 2; j++) {
        int32_t v = ir_add_value(kb->k, TERN_T_F32, def, kb->k->vals[r].block);
        if (v != r + j) {
            kb_fail(kb, loc, "out of memory");
            return false;
        }
        d[j] = kb_value(kb, v);
    }
    return true;
}

void tern_wgmma_bf16_at(tern_loc loc, tern_kb *kb, int n, int k, const tern_v *a, const tern_wg_tile *a_tile,
                        const tern_wg_tile *b_tile, const tern_v *c, tern_v *d) {
    if (kb_ok(kb) && wgmma_trace(kb, loc, n, k, a, a_tile, b_tile, c, d, NULL)) return;
    if (d && n >= 2 && n <= IR_WG_MAX_N) /* no result: what d holds is unusable */
        for (int j = 0; j < n / 2; j++) d[j] = kb ? kb_none(kb) : kb_poison(loc, 0, 0, 0);
}

void tern_wgmma_bf16_async_at(tern_loc loc, tern_kb *kb, int n, int k, const tern_v *a, const tern_wg_tile *a_tile,
                              const tern_wg_tile *b_tile, const tern_v *acc) {
    if (!kb_ok(kb)) return;
    if (!acc) {
        kb_fail(kb, loc, "wgmma_bf16_async: acc is NULL");
        return;
    }
    wgmma_trace(kb, loc, n, k, a, a_tile, b_tile, NULL, NULL, acc);
}

void tern_wgmma_wait_at(tern_loc loc, tern_kb *kb, int pending) {
    if (!kb_ok(kb)) return;
    if (pending < 0 || pending >= IR_WG_MAX_PENDING) {
        kb_fail(kb, loc, "wgmma_wait: pending %d is not in 0..%d", pending, IR_WG_MAX_PENDING - 1);
        return;
    }
    int32_t role = kb->role_depth ? kb->role : 0;
    for (int32_t i = 0; i < kb->nwg_pending; i++) {
        if (kb->wg_pending[i].role != role) {
            kb_fail(kb, loc, "wgmma_wait %s while a product issued %s is in flight; wait for it in its own role",
                    role ? "in a warpgroup role" : "outside a warpgroup role",
                    kb->wg_pending[i].role ? "in a warpgroup role" : "outside a role");
            return;
        }
        if (kb->wg_pending[i].depth != kb->depth) {
            kb_fail(kb, loc, "wgmma_wait inside a block while a product issued outside it is in flight; "
                    "wait where the products were issued");
            return;
        }
    }
    int done = kb->nwg_pending > pending ? kb->nwg_pending - pending : 0;
    int32_t ids[IR_WG_MAX_PENDING * (IR_WG_MAX_N / 2)];
    int count = 0;
    for (int i = 0; i < done; i++)
        for (int j = 0; j < kb->wg_pending[i].nvars; j++) ids[count++] = kb->wg_pending[i].vars[j];
    int32_t first = count ? ir_add_extra(kb->k, ids, count) : 0;
    if (first < 0) {
        kb_fail(kb, loc, "out of memory");
        return;
    }
    ir_ins in = {.op = IR_WGMMA_WAIT, .aux = (uint8_t)pending, .a = {first, count, -1, -1}};
    if (kb_emit(kb, loc, &in, TERN_T_VOID) < 0) return;
    memmove(kb->wg_pending, kb->wg_pending + done, sizeof(kb_wg_async) * (size_t)(kb->nwg_pending - done));
    kb->nwg_pending -= done;
}
