/* Metal Shading Language: a `kernel` function per kernel, buffers and scalars bound to
 * [[buffer(i)]] in parameter order, thread attributes taken as attributed parameters. The
 * source expects a compile without fast math (MTLCompileOptions.fastMathEnabled = NO).
 * print is not available in Metal and becomes a comment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"

static const char *mtl_type(int t) { return emit_type(&emit_metal_dialect, t); }

static void mtl_cast(emitter *e, strbuf *out, int from, int to, const char *x) {
    (void)e;
    if (to == TERN_T_BOOL)
        sb_printf(out, "(%s != %s)", x, from == TERN_T_F32 ? "0.0f" : "0");
    else
        sb_printf(out, "(%s)%s", mtl_type(to), x);
}

static void mtl_bitcast(emitter *e, strbuf *out, int from, int to, const char *x) {
    (void)e;
    (void)from;
    sb_printf(out, "as_type<%s>(%s)", mtl_type(to), x);
}

/* The attributed parameter each thread attribute comes from. */
static const char *const attr_param[] = {
    [TERN_GLOBAL_ID] = "uint3 tern_tpig [[thread_position_in_grid]]",
    [TERN_LOCAL_ID] = "uint3 tern_tpitg [[thread_position_in_threadgroup]]",
    [TERN_GROUP_ID] = "uint3 tern_tgpig [[threadgroup_position_in_grid]]",
    [TERN_GROUP_SIZE] = "uint3 tern_tptg [[threads_per_threadgroup]]",
    [TERN_GROUP_COUNT] = "uint3 tern_tgpg [[threadgroups_per_grid]]",
    [TERN_LOCAL_INDEX] = "uint tern_tiitg [[thread_index_in_threadgroup]]",
    [TERN_SIMD_LANE] = "uint tern_tiisg [[thread_index_in_simdgroup]]",
    [TERN_SIMD_GROUP] = "uint tern_sgitg [[simdgroup_index_in_threadgroup]]",
    [TERN_SIMD_GROUPS] = "uint tern_sgptg [[simdgroups_per_threadgroup]]",
};
static const char *const attr_name[] = {
    "tern_tpig", "tern_tpitg", "tern_tgpig", "tern_tptg", "tern_tgpg",
    "tern_tiitg", "tern_tiisg", "tern_sgitg", "tern_sgptg",
};

/* Which attributed parameters the kernel needs (bit per tern_thread_attr). */
static uint32_t attrs_needed(const emitter *e) {
    uint32_t need = 0;
    for (int32_t i = 0; i < e->k->nins; i++) {
        const ir_ins *in = &e->k->ins[i];
        if (in->op == IR_THREAD && e->use_count[in->dst]) need |= 1u << in->aux;
        if (in->op == IR_SIMD && in->aux == TERN_SIMD_PREFIX_SUM) need |= 1u << TERN_SIMD_LANE;
        if (in->op == IR_MMA || in->op == IR_LOAD_MATRIX) need |= 1u << TERN_SIMD_LANE;
        if (in->op == IR_WGMMA) need |= 1u << TERN_SIMD_LANE | 1u << TERN_SIMD_GROUP;
        if (in->op == IR_COPY_TILE) need |= 1u << TERN_LOCAL_INDEX;
    }
    return need;
}

static void mtl_thread(emitter *e, strbuf *out, tern_thread_attr attr, int dim) {
    (void)e;
    if (attr < TERN_LOCAL_INDEX)
        sb_printf(out, "(int)%s.%c", attr_name[attr], "xyz"[dim]);
    else
        sb_printf(out, "(int)%s", attr_name[attr]);
}

static const char *space(const emitter *e, int32_t buf) {
    return e->k->bufs[buf].shared ? "threadgroup" : "device";
}

/* Vector types as in CUDA: 16-bit elements travel as 32-bit words. */
static const char *vec_type(int elem, int width) {
    if (ir_type_bits(elem) == 16) return width == 2 ? "uint" : width == 4 ? "uint2" : "uint4";
    switch (elem) {
    case TERN_T_F32: return width == 2 ? "float2" : "float4";
    case TERN_T_I32: return width == 2 ? "int2" : "int4";
    case TERN_T_U32: return width == 2 ? "uint2" : "uint4";
    case TERN_T_I64: return "long2";
    case TERN_T_U64: return "ulong2";
    default: return "?";
    }
}

static void word(strbuf *out, const char *v, int words, int w) {
    if (words == 1)
        sb_puts(out, v);
    else
        sb_printf(out, "%s.%c", v, "xyzw"[w]);
}

static void mtl_vload(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem, w = in->aux;
    const char *vt = vec_type(elem, w);
    char vname[32];
    snprintf(vname, sizeof vname, "v%d", (int)in->dst);
    emit_line_start(e, i);
    sb_printf(&e->body, "const %s %s = *(%s const %s *)(%s + ", vt, vname, space(e, in->a[0]), vt,
              e->buf_name[in->a[0]]);
    emit_expr(e, &e->body, in->a[1]);
    sb_puts(&e->body, ");");
    emit_line_end(e);
    bool halves = ir_type_bits(elem) == 16;
    int words = halves ? w / 2 : w;
    for (int j = 0; j < w; j++) {
        strbuf x, wd;
        sb_init(&x);
        sb_init(&wd);
        word(&wd, vname, words, halves ? j / 2 : j);
        char *ws = sb_take(&wd);
        if (!ws) {
            e->body.failed = true;
            return;
        }
        if (!halves)
            sb_puts(&x, ws);
        else if (elem == TERN_T_BF16)
            sb_printf(&x, j % 2 ? "as_type<float>(%s & 0xffff0000u)" : "as_type<float>(%s << 16)", ws);
        else if (elem == TERN_T_F16)
            sb_printf(&x, j % 2 ? "tern_f16_to_f32((ushort)(%s >> 16))" : "tern_f16_to_f32((ushort)(%s & 0xffffu))", ws);
        else
            sb_printf(&x, j % 2 ? "(%s >> 16)" : "(%s & 0xffffu)", ws);
        if (halves && elem == TERN_T_F16) e->need |= NEED_F16;
        free(ws);
        e->val_name[in->dst + j] = sb_take(&x);
        if (!e->val_name[in->dst + j]) e->body.failed = true;
    }
}

static void mtl_vstore(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem, w = in->aux;
    const int32_t *vals = &k->extra[in->a[2]];
    const char *vt = vec_type(elem, w);
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "*(%s %s *)(%s + ", space(e, in->a[0]), vt, e->buf_name[in->a[0]]);
    emit_expr(e, b, in->a[1]);
    sb_printf(b, ") = %s(", vt);
    bool halves = ir_type_bits(elem) == 16;
    int words = halves ? w / 2 : w;
    for (int j = 0; j < words; j++) {
        if (j) sb_puts(b, ", ");
        if (!halves) {
            emit_expr(e, b, vals[j]);
            continue;
        }
        for (int h = 0; h < 2; h++) {
            strbuf x, y;
            sb_init(&x);
            sb_init(&y);
            emit_expr(e, &x, vals[2 * j + h]);
            char *xs = sb_take(&x);
            if (xs) emit_to_storage(e, &y, elem, xs);
            free(xs);
            char *ys = sb_take(&y);
            if (!ys) {
                b->failed = true;
                return;
            }
            sb_printf(b, h ? " | ((uint)%s << 16))" : "((uint)%s", ys);
            free(ys);
        }
    }
    sb_puts(b, ");");
    emit_line_end(e);
}

static void mtl_atomic(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem;
    static const char *const fns[] = {"atomic_fetch_add_explicit", "atomic_fetch_min_explicit",
                                      "atomic_fetch_max_explicit", "atomic_fetch_and_explicit",
                                      "atomic_fetch_or_explicit",  "atomic_fetch_xor_explicit",
                                      "atomic_exchange_explicit"};
    const char *at = elem == TERN_T_F32 ? "atomic_float" : elem == TERN_T_I32 ? "atomic_int" : "atomic_uint";
    strbuf *b = &e->body;
    emit_line_start(e, i);
    emit_decl_if_used(e, in->dst);
    if (in->op == IR_ATOMIC_CAS) {
        e->need |= NEED_ATOMIC_CAS;
        sb_printf(b, "tern_atomic_cas_%s((%s %s *)&", space(e, in->a[0]), space(e, in->a[0]), at);
    } else {
        sb_printf(b, "%s((%s %s *)&", fns[in->aux], space(e, in->a[0]), at);
    }
    emit_elem(e, b, in->a[0], in->a[1]);
    sb_puts(b, ", ");
    emit_expr(e, b, in->a[2]);
    if (in->op == IR_ATOMIC_CAS) {
        sb_puts(b, ", ");
        emit_expr(e, b, in->a[3]);
        sb_puts(b, ");");
    } else {
        sb_puts(b, ", memory_order_relaxed);");
    }
    emit_line_end(e);
}

static void mtl_simd(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    tern_simd_op op = (tern_simd_op)in->aux;
    int t = k->vals[in->a[0]].type;
    strbuf *b = &e->body;
    emit_line_start(e, i);
    emit_decl(e, in->dst);
    switch (op) {
    case TERN_SIMD_SUM:
    case TERN_SIMD_MIN:
    case TERN_SIMD_MAX:
        e->simd_need[op] |= 1u << t;
        sb_printf(b, "tern_simd_%s_%s(", ir_simd_name(op), emit_type_suffix(t));
        emit_expr(e, b, in->a[0]);
        sb_putc(b, ')');
        break;
    case TERN_SIMD_PREFIX_SUM:
        e->simd_need[op] |= 1u << t;
        sb_printf(b, "tern_simd_prefix_sum_%s(", emit_type_suffix(t));
        emit_expr(e, b, in->a[0]);
        sb_puts(b, ", tern_tiisg)");
        break;
    case TERN_SIMD_SHUFFLE:
    case TERN_SIMD_SHUFFLE_XOR:
        sb_printf(b, "%s(", op == TERN_SIMD_SHUFFLE ? "simd_shuffle" : "simd_shuffle_xor");
        emit_expr(e, b, in->a[0]);
        sb_puts(b, ", (ushort)(");
        emit_operand(e, b, in->a[1]);
        sb_puts(b, " & 31))");
        break;
    case TERN_SIMD_SHUFFLE_DOWN:
    case TERN_SIMD_SHUFFLE_UP:
        sb_printf(b, "%s(", op == TERN_SIMD_SHUFFLE_DOWN ? "simd_shuffle_down" : "simd_shuffle_up");
        emit_expr(e, b, in->a[0]);
        sb_puts(b, ", (ushort)");
        emit_operand(e, b, in->a[1]);
        sb_putc(b, ')');
        break;
    case TERN_SIMD_BALLOT:
        sb_puts(b, "(uint)(simd_vote::vote_t)simd_ballot(");
        emit_expr(e, b, in->a[0]);
        sb_putc(b, ')');
        break;
    case TERN_SIMD_ANY:
    case TERN_SIMD_ALL:
        sb_printf(b, "%s(", op == TERN_SIMD_ANY ? "simd_any" : "simd_all");
        emit_expr(e, b, in->a[0]);
        sb_putc(b, ')');
        break;
    }
    sb_putc(b, ';');
    emit_line_end(e);
}

static void mtl_load_matrix(emitter *e, int32_t i) {
    emit_load_matrix_gather(e, i, "(int)tern_tiisg", "simd_shuffle(%s, (ushort)((%s) & 31))");
}

static void mtl_wgmma(emitter *e, int32_t i) { emit_wgmma_emulated(e, i, "tern_tiisg"); }

static void mtl_mma(emitter *e, int32_t i) {
    e->need |= NEED_BF16;
    emit_mma_call(e, i, "tern_tiisg", NULL);
}

static void mtl_print(emitter *e, int32_t i) {
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_puts(b, "/* print \"");
    const char *fmt = ir_string(e->k, (int32_t)e->k->ins[i].imm);
    for (const char *p = fmt; *p; p++)
        if (!(p[0] == '*' && p[1] == '/')) sb_putc(b, *p == '\n' ? ' ' : *p);
    sb_puts(b, "\": Metal has no printf */");
    emit_line_end(e);
}

static void mtl_head(emitter *e, strbuf *out) {
    const tern_kernel *k = e->k;
    bool fn = k->result >= 0;
    if (fn)
        sb_printf(out, "%s %s(", mtl_type(k->vals[k->result].type), k->name);
    else if (k->max_threads)
        sb_printf(out, "[[max_total_threads_per_threadgroup(%d)]] kernel void %s(", (int)k->max_threads, k->name);
    else
        sb_printf(out, "kernel void %s(", k->name);
    int n = 0;
    for (int32_t p = 0; p < k->nparams; p++) {
        const ir_param *pa = &k->params[p];
        if (n++) sb_puts(out, ", ");
        if (fn)
            sb_printf(out, "%s %s", mtl_type(pa->type), e->val_name[pa->id]);
        else if (pa->is_buf)
            sb_printf(out, "device %s%s *%s [[buffer(%d)]]", pa->intent == TERN_READ ? "const " : "",
                      mtl_type(pa->type), e->buf_name[pa->id], (int)p);
        else
            sb_printf(out, "constant %s &%s [[buffer(%d)]]", mtl_type(pa->type), e->val_name[pa->id], (int)p);
    }
    uint32_t need = fn ? 0 : attrs_needed(e);
    for (int a = 0; a <= TERN_SIMD_GROUPS; a++)
        if (need & (1u << a)) {
            if (n++) sb_puts(out, ", ");
            sb_puts(out, attr_param[a]);
        }
    sb_puts(out, ") {\n");
}

static void mtl_shared(emitter *e, strbuf *out, int32_t b) {
    const ir_buf *B = &e->k->bufs[b];
    /* an asynchronous copy's destination: 16-byte aligned, as its vector accesses need */
    sb_printf(out, "    %sthreadgroup %s %s[%zu];\n", B->used & IR_BUF_COPIED ? "alignas(16) " : "",
              mtl_type(B->elem), e->buf_name[b], B->count);
}

/* Metal has no per-thread asynchronous copy (simdgroup_async_copy is not public): the copy
 * is made at once, which a correct kernel cannot tell apart. */
static void mtl_copy_async(emitter *e, int32_t i) { emit_copy_at_once(e, i, "threadgroup", "device"); }
static void mtl_store_bulk(emitter *e, int32_t i) { emit_store_bulk_at_once(e, i, "device", "threadgroup"); }

static void mtl_move16(strbuf *out, const char *dst, const char *src) {
    sb_printf(out, "*(threadgroup uint4 *)%s = *(device const uint4 *)%s;", dst, src);
}
static void mtl_copy_tile(emitter *e, int32_t i) { emit_copy_tile_loop(e, i, mtl_move16); }

static void simd_helper(strbuf *out, tern_simd_op op, int t) {
    const char *ty = mtl_type(t), *sfx = emit_type_suffix(t);
    if (op == TERN_SIMD_PREFIX_SUM) {
        sb_printf(out,
                  "inline %s tern_simd_prefix_sum_%s(%s v, uint lane) {\n"
                  "    for (ushort o = 1; o < 32; o <<= 1) {\n"
                  "        %s y = simd_shuffle_up(v, o);\n"
                  "        if (lane >= o) v = v + y;\n"
                  "    }\n"
                  "    %s r = simd_shuffle_up(v, (ushort)1);\n"
                  "    return lane == 0 ? (%s)0 : r;\n"
                  "}\n", ty, sfx, ty, ty, ty, ty);
        return;
    }
    const char *comb = op == TERN_SIMD_SUM ? "v + o"
                       : t == TERN_T_F32   ? (op == TERN_SIMD_MIN ? "fmin(v, o)" : "fmax(v, o)")
                                           : (op == TERN_SIMD_MIN ? "min(v, o)" : "max(v, o)");
    sb_printf(out,
              "/* butterfly, the order every tern target uses */\n"
              "inline %s tern_simd_%s_%s(%s v) {\n"
              "    for (ushort m = 16; m > 0; m >>= 1) {\n"
              "        %s o = simd_shuffle_xor(v, m);\n"
              "        v = %s;\n"
              "    }\n"
              "    return v;\n"
              "}\n", ty, ir_simd_name(op), sfx, ty, ty, comb);
}

/* tern_mma_bf16 emulated with shuffles: d[i] = c[i] + sum over k = 0..15 of A[row][k]
 * B[k][col], in k order like the interpreter. A[row][k] lives in lane (row % 8) * 4 +
 * (k % 8) / 2, register (row >= 8 ? 2 : 0) + (k >= 8 ? 4 : 0) + (k & 1); B[k][col] in lane
 * col * 4 + (k % 8) / 2, register (k >= 8 ? 2 : 0) + (k & 1). For a given k the register
 * is the same on every lane, so each element is one shuffle. Correct, not fast. */
static void mma_helper(strbuf *out) {
    sb_puts(out,
            "inline float4 tern_mma_bf16(float a0, float a1, float a2, float a3, float a4, float a5, float a6, float a7,\n"
            "                            float b0, float b1, float b2, float b3, float c0, float c1, float c2, float c3,\n"
            "                            uint lane) {\n"
            "    float a[8] = {a0, a1, a2, a3, a4, a5, a6, a7}, b[4] = {b0, b1, b2, b3}, d[4] = {c0, c1, c2, c3};\n"
            "    for (int r = 0; r < 8; r++) a[r] = tern_bf16_to_f32(tern_f32_to_bf16(a[r]));\n"
            "    for (int r = 0; r < 4; r++) b[r] = tern_bf16_to_f32(tern_f32_to_bf16(b[r]));\n"
            "    const uint g = lane >> 2, t = lane & 3;\n"
            "    for (int k = 0; k < 16; k++) {\n"
            "        const uint q = (uint)(k & 7) >> 1;\n"
            "        const int ra = (k >= 8 ? 4 : 0) + (k & 1), rb = (k >= 8 ? 2 : 0) + (k & 1);\n"
            "        float top = simd_shuffle(a[ra], (ushort)(g * 4 + q));        /* A[g][k] */\n"
            "        float bottom = simd_shuffle(a[ra + 2], (ushort)(g * 4 + q)); /* A[g + 8][k] */\n"
            "        float left = simd_shuffle(b[rb], (ushort)(2 * t * 4 + q));   /* B[k][2t] */\n"
            "        float right = simd_shuffle(b[rb], (ushort)((2 * t + 1) * 4 + q)); /* B[k][2t + 1] */\n"
            "        d[0] = fma(top, left, d[0]);\n"
            "        d[1] = fma(top, right, d[1]);\n"
            "        d[2] = fma(bottom, left, d[2]);\n"
            "        d[3] = fma(bottom, right, d[3]);\n"
            "    }\n"
            "    return float4(d[0], d[1], d[2], d[3]);\n"
            "}\n");
}

static void mtl_prelude(emitter *e, strbuf *out) {
    sb_puts(out, "#include <metal_stdlib>\n"
                 "using namespace metal;\n");
    if (emit_needs_common(e))
        sb_puts(out, "#define TERN_FN inline\n"
                     "#define TERN_AS_FLOAT(x) as_type<float>(x)\n"
                     "#define TERN_AS_UINT(x) as_type<uint>(x)\n");
    emit_common_prelude(e, out);
    if (e->need & NEED_ERF)
        sb_puts(out,
                "/* Metal has no erf: erfc by a Chebyshev fit (fractional error below 1.2e-7) */\n"
                "inline float tern_erf(float x) {\n"
                "    float z = fabs(x), t = 1.0f / (1.0f + 0.5f * z);\n"
                "    float r = t * exp(-z * z - 1.26551223f + t * (1.00002368f + t * (0.37409196f +\n"
                "              t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f +\n"
                "              t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));\n"
                "    return x >= 0.0f ? 1.0f - r : r - 1.0f;\n"
                "}\n");
    if (e->need & NEED_ATOMIC_CAS) {
        static const char *const sp[] = {"device", "threadgroup"};
        static const char *const ty[][2] = {{"atomic_int", "int"}, {"atomic_uint", "uint"}};
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 2; t++)
                sb_printf(out,
                          "inline %s tern_atomic_cas_%s(%s %s *p, %s expected, %s desired) {\n"
                          "    %s seen = expected;\n"
                          "    while (!atomic_compare_exchange_weak_explicit(p, &seen, desired, "
                          "memory_order_relaxed, memory_order_relaxed))\n"
                          "        if (seen != expected) break;\n"
                          "    return seen;\n"
                          "}\n",
                          ty[t][1], sp[s], sp[s], ty[t][0], ty[t][1], ty[t][1], ty[t][1]);
    }
    for (int op = 0; op <= TERN_SIMD_PREFIX_SUM; op++)
        for (int t = 0; t < TERN_TYPE_COUNT; t++)
            if (e->simd_need[op] & (1u << t)) simd_helper(out, (tern_simd_op)op, t);
    if (e->need & NEED_MMA) mma_helper(out);
}

const dialect emit_metal_dialect = {
    .target = TERN_TARGET_METAL,
    .math1 = {[TERN_ERF] = "tern_erf"}, /* a prelude helper: Metal has no erf */
    .u32_suffix = "u",
    .i64_suffix = "l",
    .u64_suffix = "ul",
    .fma_name = "fma",
    .imin = "min",
    .imax = "max",
    .cast = mtl_cast,
    .bitcast = mtl_bitcast,
    .thread = mtl_thread,
    .vload = mtl_vload,
    .vstore = mtl_vstore,
    .atomic = mtl_atomic,
    .simd = mtl_simd,
    .mma = mtl_mma,
    .load_matrix = mtl_load_matrix,
    .wgmma = mtl_wgmma,
    .print = mtl_print,
    .barrier = "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device)",
    /* MSL 3.2's scoped fence: the strongest ordering of device memory Metal has */
    .fence = "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device)",
    .head = mtl_head,
    .shared = mtl_shared,
    .prelude = mtl_prelude,
    .copy_async = mtl_copy_async,
    .copy_tile = mtl_copy_tile,
    .store_bulk = mtl_store_bulk,
};
