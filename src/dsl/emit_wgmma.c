/* tern_wgmma_bf16 and its asynchronous form in the emitted source: the accumulators (an
 * array, or the form's variables), then either Hopper's wgmma.mma_async (CUDA compiled for
 * sm_90a) or the same product as tern_mma_bf16 tiles per SIMD group (every other target, and
 * CUDA elsewhere), and tern_wgmma_wait. The layout of the tiles and of the fragments is
 * tern/kernel.h's; the interpreter (interp_wgmma.c) is the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"

/* What one product's emission works with. */
typedef struct wg_emit {
    const ir_ins *in;
    ir_wg_shape s;
    bool a_tile;
    const int32_t *ops;  /* the operands in extra */
    int32_t a_idx, b_idx; /* the tiles' index values (a_idx -1 for A in registers) */
    const int32_t *c;    /* C's n/2 values, or (asynchronous) the accumulator variables */
    const char *acc;     /* the accumulators' array */
} wg_emit;

static wg_emit wg_begin(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    wg_emit w = {.in = in, .s = ir_wg_unpack(in->imm), .a_tile = in->a[1] >= 0};
    w.ops = &e->k->extra[in->a[0]];
    w.a_idx = w.a_tile ? w.ops[0] : -1;
    w.b_idx = w.ops[w.a_tile ? 1 : w.s.k / 2];
    w.c = w.ops + (w.a_tile ? 2 : w.s.k / 2 + 1);
    return w;
}

/* "float acc[n/2] = {c...};" and the results named acc[j]; asynchronous: the array holds the
 * accumulator variables' values (for the fallback, which copies them back: accumulators_back). */
static void declare_accumulators(emitter *e, int32_t i, wg_emit *w) {
    w->acc = emit_unique(e, "wg_acc");
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "float %s[%d] = {", w->acc, w->s.n / 2);
    for (int j = 0; j < w->s.n / 2; j++) {
        if (j) sb_puts(b, ", ");
        if (w->in->aux & IR_WG_ASYNC)
            sb_puts(b, e->var_name[w->c[j]]);
        else
            emit_expr(e, b, w->c[j]);
    }
    sb_puts(b, "};");
    emit_line_end(e);
    if (w->in->aux & IR_WG_ASYNC) return;
    for (int j = 0; j < w->s.n / 2; j++) {
        char name[64];
        snprintf(name, sizeof name, "%s[%d]", w->acc, j);
        e->val_name[w->in->dst + j] = strdup(name);
        if (!e->val_name[w->in->dst + j]) b->failed = true;
    }
}

/* "const int name = (int)(value);" */
static const char *int_of(emitter *e, int32_t i, const char *base, int32_t v) {
    const char *name = emit_unique(e, base);
    emit_line_start(e, i);
    sb_printf(&e->body, "const int %s = (int)(", name);
    emit_expr(e, &e->body, v);
    sb_puts(&e->body, ");");
    emit_line_end(e);
    return name;
}

/* The element index of (row, col) of a tile: "tern_wg_at(at, rows, row, col)". */
static void tile_index(char *out, size_t size, const char *at, int rows, bool k_rows, const char *mn, const char *k) {
    snprintf(out, size, "tern_wg_at(%s, %d, %s, %s)", at, rows, k_rows ? k : mn, k_rows ? mn : k);
}

/* An element of a tile as f32 (unpacked targets) into out. */
static void tile_f32(emitter *e, strbuf *out, int32_t buf, const char *index) {
    strbuf elem;
    sb_init(&elem);
    sb_printf(&elem, "%s[%s]", e->buf_name[buf], index);
    char *x = sb_take(&elem);
    if (!x) {
        out->failed = true;
        return;
    }
    emit_from_storage(e, out, TERN_T_BF16, x);
    free(x);
}

/* Asynchronous, made at once: the variables take the array's results. */
static void accumulators_back(emitter *e, int32_t i, const wg_emit *w) {
    for (int j = 0; j < w->s.n / 2; j += 8) {
        emit_line_start(e, i);
        for (int q = j; q < j + 8 && q < w->s.n / 2; q++)
            sb_printf(&e->body, "%s%s = %s[%d];", q > j ? " " : "", e->var_name[w->c[q]], w->acc, q);
        emit_line_end(e);
    }
}

/* The dialect's SIMD lane and SIMD group expressions (the caller frees both); false, the
 * body failed, when out of memory. */
static bool lane_and_group(emitter *e, char **lane_expr, char **group_expr) {
    strbuf x;
    sb_init(&x);
    e->d->thread(e, &x, TERN_SIMD_LANE, 0);
    *lane_expr = sb_take(&x);
    sb_init(&x);
    e->d->thread(e, &x, TERN_SIMD_GROUP, 0);
    *group_expr = sb_take(&x);
    if (*lane_expr && *group_expr) return true;
    free(*lane_expr);
    free(*group_expr);
    e->body.failed = true;
    return false;
}

/* The product as tern_mma_bf16 tiles: SIMD group j of the warpgroup computes rows 16 j ..
 * 16 j + 15, an m16n8k16 product per block of 8 columns and step of 16 along k, in k order
 * (the interpreter's). packed: CUDA's helper, which takes bf16 pairs as 32-bit words;
 * mma_extra: the helper's last argument on OpenCL and Metal. */
void emit_wgmma_fallback(emitter *e, int32_t i, const char *acc, bool packed, const char *mma_extra) {
    const ir_ins *in = &e->k->ins[i];
    wg_emit w = wg_begin(e, i);
    w.acc = acc;
    strbuf *b = &e->body;
    emit_linef(e, i, "{");
    e->indent++;
    char *lane_expr, *group_expr;
    if (!lane_and_group(e, &lane_expr, &group_expr)) return;
    const char *g = emit_unique(e, "wg_g"), *t = emit_unique(e, "wg_t"), *j = emit_unique(e, "wg_j");
    emit_linef(e, i, "const int %s = (%s) >> 2, %s = (%s) & 3, %s = (%s) & 3;", g, lane_expr, t, lane_expr, j, group_expr);
    free(lane_expr);
    free(group_expr);
    const char *bat = int_of(e, i, "wg_b_at", w.b_idx);
    const char *aat = w.a_tile ? int_of(e, i, "wg_a_at", w.a_idx) : NULL;
    const char *word = packed ? "unsigned int" : "float";
    for (int s = 0; s < w.s.k / 16; s++) {
        /* A's eight values of this step: rows 16 j + g (+ 8), columns 16 s + 2 t (+ 1) (+ 8) */
        const char *av[8];
        for (int r = 0; r < 8; r += packed ? 2 : 1) {
            const char *name = emit_unique(e, "wg_a");
            av[r] = name;
            emit_line_start(e, i);
            sb_printf(b, "const %s %s = ", word, name);
            if (!w.a_tile) {
                if (packed) {
                    emit_cuda_bf16_pair(e, b, w.ops[8 * s + r], w.ops[8 * s + r + 1]);
                } else {
                    emit_expr(e, b, w.ops[8 * s + r]);
                }
            } else {
                for (int h = 0; h < (packed ? 2 : 1); h++) {
                    int rr = r + h;
                    char m[96], kk[96], idx[320];
                    snprintf(m, sizeof m, "16 * %s + %s + %d", j, g, rr & 2 ? 8 : 0);
                    snprintf(kk, sizeof kk, "%d + 2 * %s + %d", 16 * s + (rr & 4 ? 8 : 0), t, rr & 1);
                    tile_index(idx, sizeof idx, aat, w.s.a_rows, w.s.a_k_rows, m, kk);
                    if (packed)
                        sb_printf(b, h ? " | ((unsigned int)%s[%s] << 16)" : "(unsigned int)%s[%s]",
                                  e->buf_name[in->a[1]], idx);
                    else
                        tile_f32(e, b, in->a[1], idx);
                }
            }
            sb_putc(b, ';');
            emit_line_end(e);
        }
        const char *nb = emit_unique(e, "wg_nb");
        if (e->d->target == TERN_TARGET_CUDA) emit_linef(e, i, "#pragma unroll");
        emit_linef(e, i, "for (int %s = 0; %s < %d; %s++) {", nb, nb, w.s.n / 8, nb);
        e->indent++;
        /* B's four values: rows 16 s + 2 t + {0, 1, 8, 9}, column 8 nb + g */
        char col[96], bv[4][320];
        snprintf(col, sizeof col, "8 * %s + %s", nb, g);
        for (int r = 0; r < 4; r++) {
            char kk[96];
            snprintf(kk, sizeof kk, "%d + 2 * %s", 16 * s + (r & 2 ? 8 : 0) + (r & 1), t);
            tile_index(bv[r], sizeof bv[r], bat, w.s.b_rows, w.s.b_k_rows, col, kk);
        }
        const char *res = emit_unique(e, "wg_r");
        emit_line_start(e, i);
        sb_printf(b, "const float4 %s = tern_mma_bf16(", res);
        for (int r = 0; r < 8; r += packed ? 2 : 1) sb_printf(b, "%s, ", av[r]);
        const char *bn = e->buf_name[in->a[2]];
        if (packed) {
            sb_printf(b, "(unsigned int)%s[%s] | ((unsigned int)%s[%s] << 16), ", bn, bv[0], bn, bv[1]);
            sb_printf(b, "(unsigned int)%s[%s] | ((unsigned int)%s[%s] << 16), ", bn, bv[2], bn, bv[3]);
        } else {
            for (int r = 0; r < 4; r++) {
                tile_f32(e, b, in->a[2], bv[r]);
                sb_puts(b, ", ");
            }
        }
        sb_printf(b, "%s[4 * %s], %s[4 * %s + 1], %s[4 * %s + 2], %s[4 * %s + 3]", acc, nb, acc, nb, acc, nb, acc, nb);
        if (mma_extra) sb_printf(b, ", %s", mma_extra);
        sb_puts(b, ");");
        emit_line_end(e);
        emit_linef(e, i, "%s[4 * %s] = %s.x, %s[4 * %s + 1] = %s.y, %s[4 * %s + 2] = %s.z, %s[4 * %s + 3] = %s.w;", acc, nb,
             res, acc, nb, res, acc, nb, res, acc, nb, res);
        e->indent--;
        emit_linef(e, i, "}");
    }
    e->indent--;
    emit_linef(e, i, "}");
    e->need |= NEED_MMA | NEED_BF16 | NEED_WGMMA;
}

/* The byte offset of step s's operand in its tile, and the descriptor's leading byte offset:
 * K-major tiles step 32 bytes along a 128-byte row, and a panel (rows x 128 bytes) every
 * fourth step; k-row tiles step 16 rows (2,048 bytes), their panels `rows` x 128 bytes
 * apart (the leading offset). The stride offset is 1,024 bytes (8 rows) in both. */
static void step_place(int rows, bool k_rows, int s, unsigned *offset, unsigned *lead) {
    if (k_rows) {
        *offset = 2048u * (unsigned)s;
        *lead = 128u * (unsigned)rows;
    } else {
        *offset = 2u * ((unsigned)(16 * s / 64) * (unsigned)rows * 64u + (unsigned)(16 * s % 64));
        *lead = 16u; /* unused by swizzled K-major layouts */
    }
}

/* CUDA: accumulators, then wgmma.mma_async on sm_90a, the fallback elsewhere. Asynchronous:
 * the variables are the instruction's accumulators, committed as one group and left in
 * flight (emit_cuda_wgmma_wait); the fallback makes the product at once. */
void emit_cuda_wgmma(emitter *e, int32_t i) {
    wg_emit w = wg_begin(e, i);
    const ir_ins *in = w.in;
    bool async = (in->aux & IR_WG_ASYNC) != 0;
    strbuf *b = &e->body;
    if (!async) declare_accumulators(e, i, &w);
    emit_linef(e, i, "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
    emit_linef(e, i, "{");
    e->indent++;
    const char *bat = int_of(e, i, "wg_b_at", w.b_idx);
    const char *baddr = emit_unique(e, "wg_b_addr");
    emit_linef(e, i, "const unsigned int %s = (unsigned int)__cvta_generic_to_shared(%s) + 2u * (unsigned int)%s;", baddr,
         e->buf_name[in->a[2]], bat);
    const char *aaddr = NULL;
    if (w.a_tile) {
        const char *aat = int_of(e, i, "wg_a_at", w.a_idx);
        aaddr = emit_unique(e, "wg_a_addr");
        emit_linef(e, i, "const unsigned int %s = (unsigned int)__cvta_generic_to_shared(%s) + 2u * (unsigned int)%s;",
             aaddr, e->buf_name[in->a[1]], aat);
    }
    /* the swizzle is of address bits: a tile off a 1,024-byte boundary would be read in
     * another order than it was written. The arrays are declared so aligned and `at` is a
     * multiple of 512 (the host checks it); should either not hold, fault rather than be
     * silently wrong */
    emit_linef(e, i, "if ((%s%s%s) & 1023u) __trap();", baddr, aaddr ? " | " : "", aaddr ? aaddr : "");
    /* A's registers as bf16 pairs, all made before the first product: registers written
     * between two wgmma instructions make ptxas wait for the products in flight */
    const char *pairs[IR_WG_MAX_K / 4];
    if (!w.a_tile)
        for (int p = 0; p < w.s.k / 4; p++) {
            pairs[p] = emit_unique(e, "wg_ap");
            emit_line_start(e, i);
            sb_printf(b, "const unsigned int %s = ", pairs[p]);
            emit_cuda_bf16_pair(e, b, w.ops[2 * p], w.ops[2 * p + 1]);
            sb_putc(b, ';');
            emit_line_end(e);
        }
    /* the tiles were written through the generic proxy (stores, cp.async); wgmma reads them
     * through the async proxy */
    emit_linef(e, i, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
    emit_linef(e, i, "asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
    int nacc = w.s.n / 2;
    for (int s = 0; s < w.s.k / 16; s++) {
        unsigned boff, blead, aoff = 0, alead = 0;
        step_place(w.s.b_rows, w.s.b_k_rows, s, &boff, &blead);
        if (w.a_tile) step_place(w.s.a_rows, w.s.a_k_rows, s, &aoff, &alead);
        int a_first = nacc, b_op = nacc + (w.a_tile ? 1 : 4), scale_op = b_op + 1;
        emit_line_start(e, i);
        sb_printf(b, "asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %%%d, 0; "
                     "wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 {", scale_op, w.s.n);
        for (int j = 0; j < nacc; j++) sb_printf(b, j ? ", %%%d" : "%%%d", j);
        if (w.a_tile)
            sb_printf(b, "}, %%%d, %%%d, p, 1, 1, %d, %d; }\"", a_first, b_op, w.s.a_k_rows, w.s.b_k_rows);
        else
            sb_printf(b, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d; }\"", a_first, a_first + 1, a_first + 2,
                      a_first + 3, b_op, w.s.b_k_rows);
        sb_puts(b, " : ");
        for (int j = 0; j < nacc; j++) {
            if (j) sb_puts(b, ", ");
            if (async)
                sb_printf(b, "\"+f\"(%s)", e->var_name[w.c[j]]);
            else
                sb_printf(b, "\"+f\"(%s[%d])", w.acc, j);
        }
        sb_puts(b, " : ");
        if (w.a_tile) {
            sb_printf(b, "\"l\"(tern_wg_desc(%s + %uu, %uu)), ", aaddr, aoff, alead);
        } else {
            for (int r = 0; r < 8; r += 2) sb_printf(b, "\"r\"(%s), ", pairs[(8 * s + r) / 2]);
        }
        sb_printf(b, "\"l\"(tern_wg_desc(%s + %uu, %uu)), \"r\"(1) : \"memory\");", baddr, boff, blead);
        emit_line_end(e);
    }
    emit_linef(e, i, "asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    if (!async) {
        /* the wait, then the accumulators through an empty volatile asm, as
         * emit_cuda_wgmma_wait: no read of them may move above the wait */
        emit_linef(e, i, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
        for (int j = 0; j < nacc; j += 16) {
            emit_line_start(e, i);
            sb_puts(b, "asm volatile(\"\" : ");
            for (int q = j; q < j + 16 && q < nacc; q++) sb_printf(b, "%s\"+f\"(%s[%d])", q > j ? ", " : "", w.acc, q);
            sb_puts(b, " :: \"memory\");");
            emit_line_end(e);
        }
    }
    e->indent--;
    emit_linef(e, i, "}");
    emit_linef(e, i, "#else");
    if (async) {
        emit_linef(e, i, "{");
        e->indent++;
        declare_accumulators(e, i, &w);
        emit_wgmma_fallback(e, i, w.acc, true, NULL);
        accumulators_back(e, i, &w);
        e->indent--;
        emit_linef(e, i, "}");
    } else {
        emit_wgmma_fallback(e, i, w.acc, true, NULL);
    }
    emit_linef(e, i, "#endif");
}

/* CUDA: wgmma.wait_group on sm_90a, then each completed accumulator through an empty volatile
 * asm, so that the compiler moves no read of it above the wait (a register is not memory: the
 * wait's clobber does not order it). Elsewhere the products were made at once. */
void emit_cuda_wgmma_wait(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    const int32_t *vars = &e->k->extra[in->a[0]];
    emit_linef(e, i, "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)");
    emit_linef(e, i, "asm volatile(\"wgmma.wait_group.sync.aligned %d;\" ::: \"memory\");", in->aux);
    for (int j = 0; j < in->a[1]; j += 16) {
        emit_line_start(e, i);
        sb_puts(&e->body, "asm volatile(\"\" : ");
        for (int q = j; q < j + 16 && q < in->a[1]; q++)
            sb_printf(&e->body, "%s\"+f\"(%s)", q > j ? ", " : "", e->var_name[vars[q]]);
        sb_puts(&e->body, " :: \"memory\");");
        emit_line_end(e);
    }
    emit_linef(e, i, "#endif");
}

/* A role's product (OpenCL, Metal): each thread its own accumulators from the tiles, k in
 * order from C with one rounding a step, as the interpreter; no SIMD-group exchange, so no
 * barrier, which the warpgroups outside the role would not reach. A is a tile (the tracer
 * refuses A in registers in a role). */
static void emit_wgmma_per_thread(emitter *e, int32_t i, const wg_emit *w) {
    const ir_ins *in = w->in;
    char *lane_expr, *group_expr;
    if (!lane_and_group(e, &lane_expr, &group_expr)) return;
    const char *row = emit_unique(e, "wg_m"), *col = emit_unique(e, "wg_col");
    const char *q = emit_unique(e, "wg_q"), *kk = emit_unique(e, "wg_k"), *sum = emit_unique(e, "wg_sum");
    const char *aat = int_of(e, i, "wg_a_at", w->a_idx), *bat = int_of(e, i, "wg_b_at", w->b_idx);
    emit_linef(e, i, "for (int %s = 0; %s < %d; %s++) {", q, q, w->s.n / 2, q);
    e->indent++;
    /* d[4 b + r] = D[16 j + g + 8 (r / 2)][8 b + 2 t + r % 2] */
    emit_linef(e, i, "const int %s = 16 * ((%s) & 3) + ((%s) >> 2) + ((%s & 2) ? 8 : 0);", row, group_expr, lane_expr, q);
    emit_linef(e, i, "const int %s = 8 * (%s >> 2) + 2 * ((%s) & 3) + (%s & 1);", col, q, lane_expr, q);
    free(lane_expr);
    free(group_expr);
    emit_linef(e, i, "float %s = %s[%s];", sum, w->acc, q);
    emit_linef(e, i, "for (int %s = 0; %s < %d; %s++)", kk, kk, w->s.k, kk);
    e->indent++;
    char aix[320], bix[320];
    tile_index(aix, sizeof aix, aat, w->s.a_rows, w->s.a_k_rows, row, kk);
    tile_index(bix, sizeof bix, bat, w->s.b_rows, w->s.b_k_rows, col, kk);
    emit_line_start(e, i);
    sb_printf(&e->body, "%s = fma(", sum);
    tile_f32(e, &e->body, in->a[1], aix);
    sb_puts(&e->body, ", ");
    tile_f32(e, &e->body, in->a[2], bix);
    sb_printf(&e->body, ", %s);", sum);
    emit_line_end(e);
    e->indent--;
    emit_linef(e, i, "%s[%s] = %s;", w->acc, q, sum);
    e->indent--;
    emit_linef(e, i, "}");
    e->need |= NEED_BF16 | NEED_WGMMA;
}

/* OpenCL and Metal: accumulators, then the fallback over the dialect's tern_mma_bf16 (the
 * asynchronous form made at once, into its variables), or per thread in a role. */
void emit_wgmma_emulated(emitter *e, int32_t i, const char *mma_extra) {
    wg_emit w = wg_begin(e, i);
    bool async = (w.in->aux & IR_WG_ASYNC) != 0;
    if (async) {
        emit_linef(e, i, "{");
        e->indent++;
    }
    declare_accumulators(e, i, &w);
    if (w.in->aux & IR_WG_ROLE)
        emit_wgmma_per_thread(e, i, &w);
    else
        emit_wgmma_fallback(e, i, w.acc, false, mma_extra);
    if (async) {
        accumulators_back(e, i, &w);
        e->indent--;
        emit_linef(e, i, "}");
    }
}
