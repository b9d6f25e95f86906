/* OpenCL C 1.2: a __kernel function per kernel. Each buffer parameter comes with an element
 * offset (`x_off`) added to the pointer on entry, so a launch can pass views of a cl_mem
 * without sub-buffers. OpenCL 1.2 has no SIMD groups: they are emulated over threadgroup
 * memory (`tern_simd_scratch`, 8 bytes per thread, given at launch) with barriers, which is
 * why SIMD operations need threadgroup-uniform control flow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"

static const char *cl_type(int t) { return emit_type(&emit_opencl_dialect, t); }

static void cl_cast(emitter *e, strbuf *out, int from, int to, const char *x) {
    (void)e;
    if (to == TERN_T_BOOL)
        sb_printf(out, "(%s != %s)", x, from == TERN_T_F32 ? "0.0f" : "0");
    else if (from == TERN_T_F32 && to != TERN_T_F32)
        sb_printf(out, "convert_%s_sat(%s)", cl_type(to), x); /* truncates, saturates, NaN -> 0 */
    else
        sb_printf(out, "(%s)%s", cl_type(to), x);
}

static void cl_bitcast(emitter *e, strbuf *out, int from, int to, const char *x) {
    (void)e;
    (void)from;
    sb_printf(out, "as_%s(%s)", cl_type(to), x);
}

static void cl_thread(emitter *e, strbuf *out, tern_thread_attr attr, int dim) {
    switch (attr) {
    case TERN_GLOBAL_ID: sb_printf(out, "(int)get_global_id(%d)", dim); break;
    case TERN_LOCAL_ID: sb_printf(out, "(int)get_local_id(%d)", dim); break;
    case TERN_GROUP_ID: sb_printf(out, "(int)get_group_id(%d)", dim); break;
    case TERN_GROUP_SIZE: sb_printf(out, "(int)get_local_size(%d)", dim); break;
    case TERN_GROUP_COUNT: sb_printf(out, "(int)get_num_groups(%d)", dim); break;
    case TERN_LOCAL_INDEX: sb_puts(out, "tern_local_index()"); break;
    case TERN_SIMD_LANE: sb_puts(out, "(tern_local_index() & 31)"); break;
    case TERN_SIMD_GROUP: sb_puts(out, "(tern_local_index() >> 5)"); break;
    case TERN_SIMD_GROUPS:
        sb_puts(out, "(int)((get_local_size(0) * get_local_size(1) * get_local_size(2) + 31) / 32)");
        break;
    }
    if (attr >= TERN_LOCAL_INDEX && attr <= TERN_SIMD_GROUP) e->need |= NEED_LOCAL_INDEX;
}

static const char *vec_suffix_name(int elem, int width, char *buf, size_t size) {
    snprintf(buf, size, "%s%d", cl_type(elem), width);
    return buf;
}

static void cl_vload(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem, w = in->aux;
    char vt[24], vname[32];
    vec_suffix_name(elem, w, vt, sizeof vt);
    snprintf(vname, sizeof vname, "v%d", (int)in->dst);
    emit_line_start(e, i);
    sb_printf(&e->body, "const %s %s = vload%d(0, %s + ", vt, vname, w, e->buf_name[in->a[0]]);
    emit_expr(e, &e->body, in->a[1]);
    sb_puts(&e->body, ");");
    emit_line_end(e);
    for (int j = 0; j < w; j++) {
        char field[40];
        snprintf(field, sizeof field, "%s.s%d", vname, j);
        strbuf x;
        sb_init(&x);
        emit_from_storage(e, &x, elem, field);
        e->val_name[in->dst + j] = sb_take(&x);
        if (!e->val_name[in->dst + j]) e->body.failed = true;
    }
}

static void cl_vstore(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem, w = in->aux;
    const int32_t *vals = &k->extra[in->a[2]];
    char vt[24];
    vec_suffix_name(elem, w, vt, sizeof vt);
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "vstore%d((%s)(", w, vt);
    for (int j = 0; j < w; j++) {
        if (j) sb_puts(b, ", ");
        strbuf x;
        sb_init(&x);
        emit_expr(e, &x, vals[j]);
        char *s = sb_take(&x);
        if (!s) {
            b->failed = true;
            return;
        }
        emit_to_storage(e, b, elem, s);
        free(s);
    }
    sb_printf(b, "), 0, %s + ", e->buf_name[in->a[0]]);
    emit_expr(e, b, in->a[1]);
    sb_puts(b, ");");
    emit_line_end(e);
}

static void cl_atomic(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    const ir_buf *B = &k->bufs[in->a[0]];
    static const char *const fns[] = {"atomic_add", "atomic_min", "atomic_max", "atomic_and",
                                      "atomic_or",  "atomic_xor", "atomic_xchg"};
    strbuf *b = &e->body;
    emit_line_start(e, i);
    emit_decl_if_used(e, in->dst);
    if (B->elem == TERN_T_F32 && in->aux == TERN_ATOMIC_ADD) {
        e->need |= NEED_ATOMIC_F32;
        sb_printf(b, "tern_atomic_add_f32_%s(&", B->shared ? "local" : "global");
    } else {
        sb_printf(b, "%s(&", in->op == IR_ATOMIC_CAS ? "atomic_cmpxchg" : fns[in->aux]);
    }
    emit_elem(e, b, in->a[0], in->a[1]);
    sb_puts(b, ", ");
    emit_expr(e, b, in->a[2]);
    if (in->op == IR_ATOMIC_CAS) {
        sb_puts(b, ", ");
        emit_expr(e, b, in->a[3]);
    }
    sb_puts(b, ");");
    emit_line_end(e);
}

static void cl_simd(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    tern_simd_op op = (tern_simd_op)in->aux;
    int t = k->vals[in->a[0]].type;
    strbuf *b = &e->body;
    e->simd_need[op] |= 1u << t;
    e->need |= NEED_LOCAL_INDEX;
    emit_line_start(e, i);
    emit_decl(e, in->dst);
    sb_printf(b, "tern_simd_%s_%s(", ir_simd_name(op), emit_type_suffix(t));
    emit_expr(e, b, in->a[0]);
    if (in->a[1] >= 0) {
        sb_puts(b, ", (int)");
        emit_operand(e, b, in->a[1]);
    }
    sb_puts(b, ", tern_simd_scratch);");
    emit_line_end(e);
}

static void cl_mma(emitter *e, int32_t i) {
    e->need |= NEED_LOCAL_INDEX | NEED_BF16;
    emit_mma_call(e, i, "tern_simd_scratch", NULL);
}

static void cl_wgmma(emitter *e, int32_t i) {
    e->need |= NEED_LOCAL_INDEX;
    emit_wgmma_emulated(e, i, "tern_simd_scratch");
}

static void cl_load_matrix(emitter *e, int32_t i) {
    e->need |= NEED_LOCAL_INDEX;
    e->simd_need[TERN_SIMD_SHUFFLE] |= 1u << TERN_T_I32;
    emit_load_matrix_gather(e, i, "(tern_local_index() & 31)", "tern_simd_shuffle_i32(%s, %s, tern_simd_scratch)");
}

static void cl_print(emitter *e, int32_t i) { emit_print_call(e, i, "%ld", "%lu", false); }

/* OpenCL's own prefetch builtin: a hint, like CUDA's L2 prefetch (PoCL ignores it). */
static void cl_prefetch(emitter *e, int32_t i) {
    emit_line_start(e, i);
    sb_puts(&e->body, "prefetch(");
    emit_prefetch_address(e, &e->body, i);
    sb_puts(&e->body, ", 1);");
    emit_line_end(e);
}

/* OpenCL C 1.2 has only work-group copies (async_work_group_copy), which every work-item
 * must reach with the same arguments; tern's copies are per thread, so they are made at once
 * (what a correct kernel cannot tell from an asynchronous copy). */
static void cl_copy_async(emitter *e, int32_t i) { emit_copy_at_once(e, i, "__local", "__global"); }
static void cl_store_bulk(emitter *e, int32_t i) { emit_store_bulk_at_once(e, i, "__global", "__local"); }

static void cl_move16(strbuf *out, const char *dst, const char *src) {
    sb_printf(out, "*(__local uint4 *)%s = *(__global const uint4 *)%s;", dst, src);
}
static void cl_copy_tile(emitter *e, int32_t i) { emit_copy_tile_loop(e, i, cl_move16); }

static void cl_head(emitter *e, strbuf *out) {
    const tern_kernel *k = e->k;
    if (k->result >= 0)
        sb_printf(out, "%s %s(", cl_type(k->vals[k->result].type), k->name);
    else
        sb_printf(out, "__kernel void %s(", k->name);
    for (int32_t p = 0; p < k->nparams; p++) {
        const ir_param *pa = &k->params[p];
        if (p) sb_puts(out, ", ");
        if (pa->is_buf)
            sb_printf(out, "__global %s%s *%s, ulong %s_off", pa->intent == TERN_READ ? "const " : "",
                      cl_type(pa->type), e->buf_name[pa->id], e->buf_name[pa->id]);
        else
            sb_printf(out, "%s %s", cl_type(pa->type), e->val_name[pa->id]);
    }
    if (k->result < 0 && (k->uses & IR_USES_SIMD))
        sb_printf(out, "%s__local ulong *tern_simd_scratch", k->nparams ? ", " : "");
    if (k->result < 0 && !k->nparams && !(k->uses & IR_USES_SIMD)) sb_puts(out, "void");
    sb_puts(out, ") {\n");
    for (int32_t p = 0; p < k->nparams; p++) {
        const ir_param *pa = &k->params[p];
        if (pa->is_buf) sb_printf(out, "    %s += %s_off;\n", e->buf_name[pa->id], e->buf_name[pa->id]);
    }
}

static void cl_shared(emitter *e, strbuf *out, int32_t b) {
    const ir_buf *B = &e->k->bufs[b];
    /* an asynchronous copy's destination: 16-byte aligned, as its vector accesses need */
    sb_printf(out, "    __local %s %s[%zu]%s;\n", cl_type(B->elem), e->buf_name[b], B->count,
              B->used & IR_BUF_COPIED ? " __attribute__((aligned(16)))" : "");
}

/* The emulated SIMD helpers: each thread publishes its value in the scratch and reads its
 * group's 32 values back; the combining order is the targets' common one. */
static void simd_helper(strbuf *out, tern_simd_op op, int t) {
    const char *ty = cl_type(t), *sfx = emit_type_suffix(t);
    bool arg = op >= TERN_SIMD_SHUFFLE && op <= TERN_SIMD_SHUFFLE_UP;
    bool vote = op == TERN_SIMD_BALLOT || op == TERN_SIMD_ANY || op == TERN_SIMD_ALL;
    const char *rty = op == TERN_SIMD_BALLOT ? "uint" : ty;
    const char *sty = vote ? "uint" : ty; /* what goes through the scratch */
    sb_printf(out, "%s tern_simd_%s_%s(%s v, %s__local ulong *scratch) {\n", rty, ir_simd_name(op), sfx, ty,
              arg ? "int arg, " : "");
    sb_printf(out,
              "    const int lid = tern_local_index(), lane = lid & 31;\n"
              "    __local %s *s = (__local %s *)scratch + (lid - lane);\n"
              "    barrier(CLK_LOCAL_MEM_FENCE);\n"
              "    s[lane] = %s;\n"
              "    barrier(CLK_LOCAL_MEM_FENCE);\n",
              sty, sty, vote ? "(uint)v" : "v");
    switch (op) {
    case TERN_SIMD_SUM:
    case TERN_SIMD_MIN:
    case TERN_SIMD_MAX: {
        const char *comb = op == TERN_SIMD_SUM ? "a[j] + a[j + m]"
                           : t == TERN_T_F32   ? (op == TERN_SIMD_MIN ? "fmin(a[j], a[j + m])" : "fmax(a[j], a[j + m])")
                                               : (op == TERN_SIMD_MIN ? "min(a[j], a[j + m])" : "max(a[j], a[j + m])");
        sb_printf(out,
                  "    %s a[32];\n"
                  "    for (int j = 0; j < 32; j++) a[j] = s[j];\n"
                  "    for (int m = 16; m > 0; m >>= 1)\n"
                  "        for (int j = 0; j < m; j++) a[j] = %s;\n"
                  "    return a[0];\n", ty, comb);
        break;
    }
    case TERN_SIMD_PREFIX_SUM:
        sb_printf(out,
                  "    %s a[32], b[32];\n"
                  "    for (int j = 0; j < 32; j++) a[j] = s[j];\n"
                  "    for (int o = 1; o < 32; o <<= 1) {\n"
                  "        for (int j = 0; j < 32; j++) b[j] = j >= o ? a[j] + a[j - o] : a[j];\n"
                  "        for (int j = 0; j < 32; j++) a[j] = b[j];\n"
                  "    }\n"
                  "    return lane == 0 ? (%s)0 : a[lane - 1];\n", ty, ty);
        break;
    case TERN_SIMD_SHUFFLE: sb_puts(out, "    return s[arg & 31];\n"); break;
    case TERN_SIMD_SHUFFLE_XOR: sb_puts(out, "    return s[lane ^ (arg & 31)];\n"); break;
    case TERN_SIMD_SHUFFLE_DOWN: sb_puts(out, "    return (uint)arg < (uint)(32 - lane) ? s[lane + arg] : v;\n"); break;
    case TERN_SIMD_SHUFFLE_UP: sb_puts(out, "    return (uint)arg <= (uint)lane ? s[lane - arg] : v;\n"); break;
    case TERN_SIMD_BALLOT:
        sb_puts(out, "    uint bits = 0;\n"
                     "    for (int j = 0; j < 32; j++) bits |= (uint)(s[j] != 0) << j;\n"
                     "    return bits;\n");
        break;
    case TERN_SIMD_ANY:
    case TERN_SIMD_ALL:
        sb_printf(out, "    bool r = %s;\n"
                       "    for (int j = 0; j < 32; j++) r = r %s (s[j] != 0);\n"
                       "    return r;\n",
                  op == TERN_SIMD_ANY ? "false" : "true", op == TERN_SIMD_ANY ? "||" : "&&");
        break;
    }
    sb_puts(out, "}\n");
}

/* The gather of one published register r (0..7: a, 8..11: b) into the lane's A rows
 * (g, g+8) and B columns (2t, 2t+1): register r of lane g*4 + q holds
 * A[g + (r & 2 ? 8 : 0)][(r & 4 ? 8 : 0) + 2q + (r & 1)], register r - 8 of lane col*4 + q
 * holds B[((r - 8) & 2 ? 8 : 0) + 2q + (r & 1)][col] (tern_mma_bf16's layout). */
static void mma_gather(strbuf *out, int r) {
    if (r < 8)
        sb_printf(out, "    for (int q = 0; q < 4; q++) A[%d][%d + 2 * q] = s[g * 4 + q];\n", (r >> 1) & 1,
                  (r & 4 ? 8 : 0) + (r & 1));
    else
        sb_printf(out, "    for (int q = 0; q < 4; q++) B[0][%d + 2 * q] = s[2 * t * 4 + q], B[1][%d + 2 * q] = s[(2 * t + 1) * 4 + q];\n",
                  ((r - 8) & 2 ? 8 : 0) + (r & 1), ((r - 8) & 2 ? 8 : 0) + (r & 1));
}

/* tern_mma_bf16 emulated over the SIMD scratch: the group's lanes publish each a and b
 * register (rounded to bf16) in turn and every lane gathers the elements of A's rows g, g+8
 * and B's columns 2t, 2t+1; then d[i] = c[i] + sum over k = 0..15 of A[row][k] B[k][col],
 * in k order like the interpreter. Twelve rounds of two barriers: correct, not fast. */
static void mma_helper(strbuf *out) {
    sb_puts(out, "float4 tern_mma_bf16(float a0, float a1, float a2, float a3, float a4, float a5, float a6, float a7,\n"
                 "                     float b0, float b1, float b2, float b3, float c0, float c1, float c2, float c3,\n"
                 "                     __local ulong *scratch) {\n"
                 "    const int lid = tern_local_index(), lane = lid & 31, g = lane >> 2, t = lane & 3;\n"
                 "    __local float *s = (__local float *)(scratch + (lid - lane));\n"
                 "    float A[2][16], B[2][16]; /* A[h][k] = A[g + 8h][k], B[h][k] = B[k][2t + h] */\n");
    for (int r = 0; r < 12; r++) {
        sb_printf(out, "    barrier(CLK_LOCAL_MEM_FENCE);\n"
                       "    s[lane] = tern_bf16_to_f32(tern_f32_to_bf16(%c%d));\n"
                       "    barrier(CLK_LOCAL_MEM_FENCE);\n", r < 8 ? 'a' : 'b', r < 8 ? r : r - 8);
        mma_gather(out, r);
    }
    sb_puts(out, "    float d[4] = {c0, c1, c2, c3};\n"
                 "    for (int i = 0; i < 4; i++)\n"
                 "        for (int k = 0; k < 16; k++) d[i] = fma(A[i >> 1][k], B[i & 1][k], d[i]);\n"
                 "    return (float4)(d[0], d[1], d[2], d[3]);\n"
                 "}\n");
}

static void cl_prelude(emitter *e, strbuf *out) {
    if (emit_needs_common(e))
        sb_puts(out, "#define TERN_FN\n"
                     "#define TERN_AS_FLOAT(x) as_float(x)\n"
                     "#define TERN_AS_UINT(x) as_uint(x)\n");
    emit_common_prelude(e, out);
    if (e->need & NEED_LOCAL_INDEX)
        sb_puts(out, "int tern_local_index(void) {\n"
                     "    return (int)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + "
                     "get_local_size(1) * get_local_id(2)));\n"
                     "}\n");
    if (e->need & NEED_ATOMIC_F32) {
        static const char *const spaces[] = {"global", "local"};
        for (int s = 0; s < 2; s++)
            sb_printf(out,
                      "float tern_atomic_add_f32_%s(volatile __%s float *p, float v) {\n"
                      "    volatile __%s uint *u = (volatile __%s uint *)p;\n"
                      "    uint old = *u, seen;\n"
                      "    while ((seen = atomic_cmpxchg(u, old, as_uint(as_float(old) + v))) != old) old = seen;\n"
                      "    return as_float(old);\n"
                      "}\n",
                      spaces[s], spaces[s], spaces[s], spaces[s]);
    }
    for (int op = 0; op <= TERN_SIMD_ALL; op++)
        for (int t = 0; t < TERN_TYPE_COUNT; t++)
            if (e->simd_need[op] & (1u << t)) simd_helper(out, (tern_simd_op)op, t);
    if (e->need & NEED_MMA) mma_helper(out);
}

const dialect emit_opencl_dialect = {
    .target = TERN_TARGET_OPENCL,
    .u32_suffix = "u",
    .i64_suffix = "l",
    .u64_suffix = "ul",
    .fma_name = "fma",
    .imin = "min",
    .imax = "max",
    .cast = cl_cast,
    .bitcast = cl_bitcast,
    .thread = cl_thread,
    .vload = cl_vload,
    .vstore = cl_vstore,
    .atomic = cl_atomic,
    .simd = cl_simd,
    .mma = cl_mma,
    .load_matrix = cl_load_matrix,
    .wgmma = cl_wgmma,
    .print = cl_print,
    .barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)",
    /* OpenCL C 1.2 (what the runtime builds) has no scoped fence; mem_fence orders this
     * work-item's global accesses, which with the atomic that follows it is the 1.2 idiom */
    .fence = "mem_fence(CLK_GLOBAL_MEM_FENCE)",
    .head = cl_head,
    .shared = cl_shared,
    .prelude = cl_prelude,
    .prefetch = cl_prefetch,
    .copy_async = cl_copy_async,
    .copy_tile = cl_copy_tile,
    .store_bulk = cl_store_bulk,
};
