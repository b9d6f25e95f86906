/* Tile copies (tern_copy_tile): a whole box of a bf16 matrix into a pipe's slot, the trace
 * side. What the operation means is in tern/kernel.h; ir.h's ir_tile_box is how the
 * instruction keeps the matrix and the box. */
#include "dsl/builder.h"

/* An i32 operand of the copy (weak literals take the type), or -1 after an error. */
static int32_t index_operand(tern_kb *kb, tern_loc at, tern_v v, const char *what) {
    int type = kb_type_of(kb, v);
    if (v.kind == TERN_V_CONST && v.weak) type = TERN_T_I32;
    if (type != TERN_T_I32) {
        if (kb_ok(kb)) kb_fail(kb, at, "copy_tile: %s is %s; it is an i32", what, tern_type_name((tern_type)type));
        return -1;
    }
    return kb_use(kb, at, v, TERN_T_I32, what);
}

void tern_copy_tile_at(tern_loc at, tern_kb *kb, const tern_wg_tile *dst, tern_v src, int cols, tern_v row,
                       tern_v col, int width) {
    if (!kb_ok(kb)) return;
    if (!dst) {
        kb_fail(kb, at, "copy_tile: the destination tile is NULL");
        return;
    }
    if (!kb_in_produce(kb)) {
        kb_fail(kb, at, "copy_tile: outside a pipe's produce block (the slot's mbarrier waits for its bytes)");
        return;
    }
    int32_t d = kb_buf(kb, at, dst->buf, "copy_tile's destination");
    if (d < 0) return;
    const ir_buf *D = &kb->k->bufs[d];
    if (!D->shared || !(D->used & IR_BUF_TILES)) {
        kb_fail(kb, at, "copy_tile: the destination '%s' is not a tern_shared_tiles array", ir_string(kb->k, D->name));
        return;
    }
    if (dst->rows < 8 || dst->rows > IR_TILE_MAX_ROWS || dst->rows % 8) {
        kb_fail(kb, at, "copy_tile: a tile of %d rows; a copy's rows are a multiple of 8 up to %d", dst->rows,
                IR_TILE_MAX_ROWS);
        return;
    }
    if (width < 64 || width > 64 * IR_TILE_MAX_PANELS || width % 64) {
        kb_fail(kb, at, "copy_tile: %d columns; a copy is 64, 128, 192 or 256 wide (panels of 64)", width);
        return;
    }
    if (cols < 8 || cols % 8) {
        kb_fail(kb, at, "copy_tile: a matrix of %d columns; they are a positive multiple of 8 (rows 16 bytes "
                "apart)", cols);
        return;
    }
    int32_t s = kb_buf(kb, at, src, "copy_tile's source");
    if (s < 0) return;
    const ir_buf *S = &kb->k->bufs[s];
    const char *name = ir_string(kb->k, S->name);
    if (S->shared || S->param < 0) {
        kb_fail(kb, at, "copy_tile from threadgroup array '%s': it copies from a buffer parameter", name);
        return;
    }
    if (S->elem != TERN_T_BF16 || !(S->intent & TERN_READ)) {
        kb_fail(kb, at, "copy_tile from '%s' (%s%s): it copies from a readable bf16 buffer", name,
                tern_type_name((tern_type)S->elem), S->intent & TERN_READ ? "" : ", TERN_WRITE");
        return;
    }
    if (s > 0xffff) {
        kb_fail(kb, at, "copy_tile: more buffers than a copy can name");
        return;
    }
    int32_t a = index_operand(kb, at, dst->at, "the tile's index");
    int32_t r = a < 0 ? -1 : index_operand(kb, at, row, "the row");
    int32_t c = r < 0 ? -1 : index_operand(kb, at, col, "the column");
    if (c < 0) return;
    ir_tile_box box = {s, cols, dst->rows, width / 64};
    int maps = ir_tile_maps(kb->k, NULL);
    ir_ins in = {.op = IR_COPY_TILE, .aux = (uint8_t)kb->pipe.producer_first, .a = {d, a, r, c},
                 .imm = ir_tile_pack(box)};
    int32_t i = kb_emit(kb, at, &in, TERN_T_VOID);
    if (i < 0) return;
    if (ir_tile_map_of(kb->k, i) < 0) {
        kb_fail(kb, at, "copy_tile: a kernel's copies use at most %d matrices and boxes (%d so far)",
                IR_TILE_MAX_MAPS, maps);
        return;
    }
    kb->k->bufs[d].used |= IR_BUF_STORED;
    kb->k->bufs[s].used |= IR_BUF_LOADED;
    kb->k->uses |= IR_USES_STORE | IR_USES_TILE_COPY;
}
