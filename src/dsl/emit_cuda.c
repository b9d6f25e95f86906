/* CUDA C (compiled by NVRTC): an extern "C" __global__ function per kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/emit.h"
#include "dsl/emit_cuda.h"

static const char *cuda_type(int t) { return emit_type(&emit_cuda_dialect, t); }

static void cuda_cast(emitter *e, strbuf *out, int from, int to, const char *x) {
    (void)e;
    if (to == TERN_T_BOOL)
        sb_printf(out, "(%s != %s)", x, from == TERN_T_F32 ? "0.0f" : "0");
    else
        sb_printf(out, "(%s)%s", cuda_type(to), x); /* float to int: cvt.rzi saturates */
}

static void cuda_bitcast(emitter *e, strbuf *out, int from, int to, const char *x) {
    (void)e;
    if (from == TERN_T_F32)
        sb_printf(out, "%s(%s)", to == TERN_T_I32 ? "__float_as_int" : "__float_as_uint", x);
    else if (to == TERN_T_F32)
        sb_printf(out, "%s(%s)", from == TERN_T_I32 ? "__int_as_float" : "__uint_as_float", x);
    else
        sb_printf(out, "(%s)%s", cuda_type(to), x);
}

static void cuda_thread(emitter *e, strbuf *out, tern_thread_attr attr, int dim) {
    char c = "xyz"[dim];
    switch (attr) {
    case TERN_GLOBAL_ID: sb_printf(out, "(int)(blockIdx.%c * blockDim.%c + threadIdx.%c)", c, c, c); break;
    case TERN_LOCAL_ID: sb_printf(out, "(int)threadIdx.%c", c); break;
    case TERN_GROUP_ID: sb_printf(out, "(int)blockIdx.%c", c); break;
    case TERN_GROUP_SIZE: sb_printf(out, "(int)blockDim.%c", c); break;
    case TERN_GROUP_COUNT: sb_printf(out, "(int)gridDim.%c", c); break;
    case TERN_LOCAL_INDEX: sb_puts(out, "tern_local_index()"); break;
    case TERN_SIMD_LANE: sb_puts(out, "(tern_local_index() & 31)"); break;
    case TERN_SIMD_GROUP: sb_puts(out, "(tern_local_index() >> 5)"); break;
    case TERN_SIMD_GROUPS: sb_puts(out, "(int)((blockDim.x * blockDim.y * blockDim.z + 31) / 32)"); break;
    }
    if (attr >= TERN_LOCAL_INDEX && attr <= TERN_SIMD_GROUP) e->need |= NEED_LOCAL_INDEX;
}

/* The vector type of a `width`-element access to `elem` (16-bit elements travel as
 * 32-bit words). */
static const char *vec_type(int elem, int width) {
    int bits = ir_type_bits(elem);
    if (bits == 16) return width == 2 ? "unsigned int" : width == 4 ? "uint2" : "uint4";
    switch (elem) {
    case TERN_T_F32: return width == 2 ? "float2" : "float4";
    case TERN_T_I32: return width == 2 ? "int2" : "int4";
    case TERN_T_U32: return width == 2 ? "uint2" : "uint4";
    case TERN_T_I64: return "longlong2";
    case TERN_T_U64: return "ulonglong2";
    default: return "?";
    }
}

/* The 32-bit word w of a vector value named v with `words` words. */
static void word(strbuf *out, const char *v, int words, int w) {
    if (words == 1)
        sb_puts(out, v);
    else
        sb_printf(out, "%s.%c", v, "xyzw"[w]);
}

/* Names values dst .. dst+w-1 of instruction i, the elements of type elem held in vector
 * variable vname (w elements; 16-bit ones two to a 32-bit word). */
static void name_vector_values(emitter *e, int32_t i, int32_t dst, const char *vname, int elem, int w) {
    bool halves = ir_type_bits(elem) == 16;
    int words = halves ? w / 2 : w;
    for (int j = 0; j < w; j++) {
        int32_t v = dst + j;
        strbuf x;
        sb_init(&x);
        if (!halves) {
            word(&x, vname, words, j);
        } else {
            strbuf wd;
            sb_init(&wd);
            word(&wd, vname, words, j / 2);
            char *ws = sb_take(&wd);
            if (!ws) {
                e->body.failed = true;
                sb_free(&x);
                return;
            }
            if (elem == TERN_T_BF16) {
                sb_printf(&x, j % 2 ? "__uint_as_float(%s & 0xffff0000u)" : "__uint_as_float(%s << 16)", ws);
                e->bf16_word[v] = strdup(ws); /* NULL (no bits shortcut) when out of memory */
                e->bf16_half[v] = (unsigned char)(j % 2);
            } else if (elem == TERN_T_F16) {
                sb_printf(&x, j % 2 ? "tern_f16_to_f32((unsigned short)(%s >> 16))"
                                    : "tern_f16_to_f32((unsigned short)(%s & 0xffffu))", ws);
            } else {
                sb_printf(&x, j % 2 ? "(%s >> 16)" : "(%s & 0xffffu)", ws);
            }
            if (elem == TERN_T_F16) e->need |= NEED_F16;
            free(ws);
        }
        char *s = sb_take(&x);
        if (!s) {
            e->body.failed = true;
            return;
        }
        if (!halves || e->use_count[v] <= 1) {
            e->val_name[v] = s; /* a field or a cheap expression: used in place */
        } else {
            emit_line_start(e, i);
            emit_decl(e, v);
            sb_printf(&e->body, "%s;", s);
            emit_line_end(e);
            free(s);
        }
    }
}

static void cuda_vload(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem, w = in->aux;
    const char *vt = vec_type(elem, w);
    char vname[32];
    snprintf(vname, sizeof vname, "v%d", (int)in->dst);
    emit_line_start(e, i);
    sb_printf(&e->body, "const %s %s = *(const %s *)(%s + ", vt, vname, vt, e->buf_name[in->a[0]]);
    emit_expr(e, &e->body, in->a[1]);
    sb_puts(&e->body, ");");
    emit_line_end(e);
    name_vector_values(e, i, in->dst, vname, elem, w);
}

/* tern_load_matrix: PTX ldmatrix, four 32-bit registers of bf16 pairs per lane, named as a
 * vector load's halves (so that the products take them as bits). Volatile with a memory
 * clobber: it reads threadgroup memory, which barriers order. */
static void cuda_load_matrix(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    char v[32];
    snprintf(v, sizeof v, "v%d", (int)in->dst);
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "uint4 %s;", v);
    emit_line_end(e);
    emit_line_start(e, i);
    sb_printf(b, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4%s.shared.b16 {%%0, %%1, %%2, %%3}, [%%4];\" "
                 ": \"=r\"(%s.x), \"=r\"(%s.y), \"=r\"(%s.z), \"=r\"(%s.w) "
                 ": \"r\"((unsigned int)__cvta_generic_to_shared(%s + ",
              in->aux ? ".trans" : "", v, v, v, v, e->buf_name[in->a[0]]);
    emit_expr(e, b, in->a[1]);
    sb_puts(b, ")) : \"memory\");");
    emit_line_end(e);
    name_vector_values(e, i, in->dst, v, TERN_T_BF16, 8);
}

/* ---- bf16 values moved as bits ----
 * A bf16 value loaded by a vector load is one half of a 32-bit word (e->bf16_word). When two
 * such values go to the tensor cores, or to a bf16 store as a pair, the word is built from
 * the loaded words with one byte permutation, instead of widening each half to f32 and
 * rounding it back (some ten instructions a pair, which dominated the flash attention
 * kernels' tile staging and fragment loads). This is exact: a bf16 value survives the round
 * trip unchanged (a NaN stays a NaN; payloads are not promised, tern/kernel.h). */

static bool bf16_bits(const emitter *e, int32_t v) { return v >= 0 && e->bf16_word[v] != NULL; }

/* The word (lo in the low half) of two values that both have bf16 bits. */
static void bf16_pair_bits(emitter *e, strbuf *out, int32_t lo, int32_t hi) {
    const char *wl = e->bf16_word[lo], *wh = e->bf16_word[hi];
    if (!strcmp(wl, wh) && !e->bf16_half[lo] && e->bf16_half[hi]) {
        sb_puts(out, wl); /* the loaded word as it is */
        return;
    }
    /* __byte_perm(x, y, s): bytes 0-3 are x's, 4-7 y's; s lists the result's from byte 0 */
    unsigned sel = (e->bf16_half[lo] ? 0x32u : 0x10u) | (e->bf16_half[hi] ? 0x7600u : 0x5400u);
    sb_printf(out, "__byte_perm(%s, %s, 0x%04xu)", wl, wh, sel);
}

/* A multiplicand pair of tern_mma_bf16 (or tern_wgmma_bf16's register A): the bits, the pair
 * declared by cuda_mma, or the two f32 values rounded to bf16. */
void emit_cuda_bf16_pair(emitter *e, strbuf *out, int32_t lo, int32_t hi) {
    if (bf16_bits(e, lo) && bf16_bits(e, hi)) {
        bf16_pair_bits(e, out, lo, hi);
        return;
    }
    if (e->bf16_pack[lo] && e->bf16_pack_hi[lo] == hi) {
        sb_puts(out, e->bf16_pack[lo]);
        return;
    }
    sb_puts(out, "tern_bf16x2(");
    emit_expr(e, out, lo);
    sb_puts(out, ", ");
    emit_expr(e, out, hi);
    sb_putc(out, ')');
}

static void cuda_vstore(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    int elem = k->bufs[in->a[0]].elem, w = in->aux;
    const int32_t *vals = &k->extra[in->a[2]];
    const char *vt = vec_type(elem, w);
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "*(%s *)(%s + ", vt, e->buf_name[in->a[0]]);
    emit_expr(e, b, in->a[1]);
    sb_puts(b, ") = ");
    bool halves = ir_type_bits(elem) == 16;
    int words = halves ? w / 2 : w;
    if (words > 1) sb_printf(b, "make_%s(", vt);
    for (int j = 0; j < words; j++) {
        if (j) sb_puts(b, ", ");
        if (!halves) {
            emit_expr(e, b, vals[j]);
            continue;
        }
        if (elem == TERN_T_BF16 && bf16_bits(e, vals[2 * j]) && bf16_bits(e, vals[2 * j + 1])) {
            bf16_pair_bits(e, b, vals[2 * j], vals[2 * j + 1]);
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
            sb_printf(b, h ? " | ((unsigned int)%s << 16)" : "((unsigned int)%s", ys);
            if (h) sb_putc(b, ')');
            free(ys);
        }
    }
    if (words > 1) sb_putc(b, ')');
    sb_putc(b, ';');
    emit_line_end(e);
}

static void cuda_atomic(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    static const char *const fns[] = {"atomicAdd", "atomicMin", "atomicMax", "atomicAnd",
                                      "atomicOr",  "atomicXor", "atomicExch"};
    strbuf *b = &e->body;
    emit_line_start(e, i);
    emit_decl_if_used(e, in->dst);
    sb_printf(b, "%s(&", in->op == IR_ATOMIC_CAS ? "atomicCAS" : fns[in->aux]);
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

static void cuda_simd(emitter *e, int32_t i) {
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
    case TERN_SIMD_PREFIX_SUM:
        sb_printf(b, "tern_simd_%s_%s(", ir_simd_name(op), emit_type_suffix(t));
        emit_expr(e, b, in->a[0]);
        sb_putc(b, ')');
        e->simd_need[op] |= 1u << t;
        if (op == TERN_SIMD_PREFIX_SUM) e->need |= NEED_LOCAL_INDEX;
        break;
    case TERN_SIMD_SHUFFLE:
    case TERN_SIMD_SHUFFLE_XOR:
    case TERN_SIMD_SHUFFLE_DOWN:
    case TERN_SIMD_SHUFFLE_UP: {
        const char *fn = op == TERN_SIMD_SHUFFLE        ? "__shfl_sync"
                         : op == TERN_SIMD_SHUFFLE_XOR  ? "__shfl_xor_sync"
                         : op == TERN_SIMD_SHUFFLE_DOWN ? "__shfl_down_sync"
                                                        : "__shfl_up_sync";
        sb_printf(b, "%s(0xffffffffu, ", fn);
        emit_expr(e, b, in->a[0]);
        sb_puts(b, ", ");
        const ir_ins *lane = &k->ins[k->vals[in->a[1]].def];
        if (op == TERN_SIMD_SHUFFLE_XOR && !(lane->op == IR_CONST && lane->imm >= 0 && lane->imm < 32)) {
            emit_operand(e, b, in->a[1]);
            sb_puts(b, " & 31");
        } else {
            emit_expr(e, b, in->a[1]);
        }
        sb_putc(b, ')');
        break;
    }
    case TERN_SIMD_BALLOT:
    case TERN_SIMD_ANY:
    case TERN_SIMD_ALL:
        sb_printf(b, "%s(0xffffffffu, ", op == TERN_SIMD_BALLOT ? "__ballot_sync"
                                         : op == TERN_SIMD_ANY  ? "__any_sync"
                                                                : "__all_sync");
        emit_expr(e, b, in->a[0]);
        sb_putc(b, ')');
        if (op != TERN_SIMD_BALLOT) sb_puts(b, " != 0");
        break;
    }
    sb_putc(b, ';');
    emit_line_end(e);
}

/* Whether v is written out where it is used, as an expression reading memory or a variable:
 * then a copy of it made earlier could differ. */
static bool folds_state(const emitter *e, int32_t v) { return e->fold[v] && e->reads_state[v]; }

/* Products that share a multiplicand (a flash attention's P times each tile of V) would each
 * round the same f32 pair (the compiler does not merge the conversions): pairs of values
 * are declared once per block and reused, unless one is an expression reading state. */
static void cuda_mma(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    const int32_t *ops = &e->k->extra[in->a[0]];
    int32_t block = e->block_of[i];
    for (int p = 0; p < 6; p++) {
        int32_t lo = ops[2 * p], hi = ops[2 * p + 1];
        if ((bf16_bits(e, lo) && bf16_bits(e, hi)) || folds_state(e, lo) || folds_state(e, hi)) continue;
        if (e->bf16_pack[lo] && e->bf16_pack_hi[lo] == hi && e->bf16_pack_block[lo] == block) continue;
        const char *name = emit_unique(e, "pk");
        emit_line_start(e, i);
        sb_printf(&e->body, "const unsigned int %s = tern_bf16x2(", name);
        emit_expr(e, &e->body, lo);
        sb_puts(&e->body, ", ");
        emit_expr(e, &e->body, hi);
        sb_puts(&e->body, ");");
        emit_line_end(e);
        e->bf16_pack[lo] = name, e->bf16_pack_hi[lo] = hi, e->bf16_pack_block[lo] = block;
    }
    emit_mma_call(e, i, NULL, emit_cuda_bf16_pair);
    e->need |= NEED_MMA;
}

void emit_print_call(emitter *e, int32_t i, const char *i64_conv, const char *u64_conv,
                     bool promote_float) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    const char *fmt = ir_string(k, (int32_t)in->imm);
    const int32_t *vals = &k->extra[in->a[0]];
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_puts(b, "printf(\"");
    int next = 0;
    for (const char *p = fmt; *p; p++) {
        if (p[0] == '{' && p[1] == '}' && next < in->a[1]) {
            int t = k->vals[vals[next++]].type;
            sb_puts(b, t == TERN_T_F32 ? "%g" : t == TERN_T_I64 ? i64_conv : t == TERN_T_U64 ? u64_conv
                                       : t == TERN_T_U32 ? "%u" : "%d");
            p++;
        } else {
            char one[2] = {*p, 0};
            sb_put_c_string(b, one, true);
        }
    }
    sb_putc(b, '"');
    for (int j = 0; j < in->a[1]; j++) {
        int t = k->vals[vals[j]].type;
        sb_puts(b, ", ");
        if (t == TERN_T_F32 && promote_float) sb_puts(b, "(double)");
        if (t == TERN_T_BOOL) sb_puts(b, "(int)");
        emit_operand(e, b, vals[j]);
    }
    sb_puts(b, ");");
    emit_line_end(e);
}

static void cuda_print(emitter *e, int32_t i) { emit_print_call(e, i, "%lld", "%llu", true); }

static void cuda_head(emitter *e, strbuf *out) {
    const tern_kernel *k = e->k;
    if (k->result >= 0)
        sb_printf(out, "__device__ %s %s(", cuda_type(k->vals[k->result].type), k->name);
    else if (k->max_threads && k->min_groups)
        sb_printf(out, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", (int)k->max_threads,
                  (int)k->min_groups, k->name);
    else if (k->max_threads)
        sb_printf(out, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", (int)k->max_threads, k->name);
    else
        sb_printf(out, "extern \"C\" __global__ void %s(", k->name);
    for (int32_t p = 0; p < k->nparams; p++) {
        const ir_param *pa = &k->params[p];
        if (p) sb_puts(out, ", ");
        if (pa->is_buf)
            sb_printf(out, "%s%s *%s", pa->intent == TERN_READ ? "const " : "", cuda_type(pa->type),
                      e->buf_name[pa->id]);
        else
            sb_printf(out, "%s %s", cuda_type(pa->type), e->val_name[pa->id]);
    }
    /* tern_copy_tile's tensor maps, which the runtime makes at launch (ir_tile_maps) */
    int maps = ir_tile_maps(k, NULL);
    for (int m = 0; m < maps; m++)
        sb_printf(out, "%sconst __grid_constant__ tern_tmap tern_map_%d", k->nparams || m ? ", " : "", m);
    sb_puts(out, ") {\n");
    /* every kernel lets the next one launch at once: one launched to overlap it (see
     * tern_wait_previous) still waits for all of this one at its griddepcontrol.wait */
    if (k->result < 0)
        sb_puts(out, "#if __CUDA_ARCH__ >= 900\n"
                     "    asm volatile(\"griddepcontrol.launch_dependents;\");\n"
                     "#endif\n");
    /* warpgroup roles test this (emit_common.c, IR_IF): taken from lane 0 while every thread is
     * here, ptxas sees it is the same across the warp, so a role's block is not a divergent
     * path and its wgmma products stay in their pipeline (else it serialises them) */
    for (int32_t i = 0; i < k->nins; i++)
        if (k->ins[i].op == IR_IF && (k->ins[i].aux == IR_IF_ROLE || k->ins[i].aux == IR_IF_PIPE)) {
            sb_puts(out, "    const int tern_role_wg = __shfl_sync(__activemask(), tern_local_index() >> 7, 0);\n");
            e->need |= NEED_LOCAL_INDEX;
            break;
        }
}

/* Statement i as a call of a helper without arguments, which `need` asks to be emitted. */
static void cuda_helper_call(emitter *e, int32_t i, const char *call, uint32_t need) {
    emit_line_start(e, i);
    sb_puts(&e->body, call);
    emit_line_end(e);
    e->need |= need;
}

static void cuda_wait_previous(emitter *e, int32_t i) { cuda_helper_call(e, i, "tern_wait_previous();", NEED_WAIT_PREVIOUS); }

static void cuda_prefetch(emitter *e, int32_t i) {
    emit_line_start(e, i);
    sb_puts(&e->body, "tern_prefetch_l2(");
    emit_prefetch_address(e, &e->body, i);
    sb_puts(&e->body, ");");
    emit_line_end(e);
    e->need |= NEED_PREFETCH;
}

/* tern_copy_async: a call of the helper for its size (copy_async_helpers), with the
 * elements' addresses. */
static void cuda_copy_async(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "tern_copy_async_%d(&", emit_copy_bytes(e, i));
    emit_elem(e, b, in->a[0], in->a[1]);
    sb_puts(b, ", &");
    emit_elem(e, b, in->a[2], in->a[3]);
    sb_puts(b, ");");
    emit_line_end(e);
    e->need |= NEED_COPY_ASYNC;
}

static void cuda_copy_commit(emitter *e, int32_t i) { cuda_helper_call(e, i, "tern_copy_async_commit();", NEED_COPY_ASYNC); }

/* The pending count is an immediate of the instruction: a template argument. */
static void cuda_copy_wait(emitter *e, int32_t i) {
    emit_line_start(e, i);
    sb_printf(&e->body, "tern_copy_async_wait<%d>();", e->k->ins[i].aux);
    emit_line_end(e);
    e->need |= NEED_COPY_ASYNC;
}

/* The helpers of tern_copy_async, one per size, and of its commit and wait. sm_80 and newer:
 * PTX cp.async, the shared address as a 32-bit offset in the shared window, the global one
 * converted from the generic pointer. 16 bytes go as .cg (cached in L2 only: the tile is read
 * again from shared memory, not from L1); .cg takes only 16, so 4 and 8 go as .ca. Volatile
 * with a "memory" clobber, so the compiler moves no memory access across the copy, the
 * commit or the wait (a read of the tile above its wait would see old data). Older GPUs have
 * no cp.async: they copy at once through a register, and commit and wait are nothing. */
static void copy_async_helpers(const emitter *e, strbuf *out) {
    if (!(e->need & NEED_COPY_ASYNC)) return;
    static const int bytes[3] = {4, 8, 16};
    static const char *const word[3] = {"unsigned int", "uint2", "uint4"};
    for (int j = 0; j < 3; j++)
        sb_printf(out,
                  "__device__ __forceinline__ void tern_copy_async_%d(void *dst, const void *src) {\n"
                  "#if __CUDA_ARCH__ >= 800\n"
                  "    asm volatile(\"cp.async.%s.shared.global [%%0], [%%1], %d;\"\n"
                  "                 :: \"r\"((unsigned)__cvta_generic_to_shared(dst)), \"l\"(__cvta_generic_to_global(src))\n"
                  "                 : \"memory\");\n"
                  "#else\n"
                  "    *(%s *)dst = *(const %s *)src;\n"
                  "#endif\n"
                  "}\n",
                  bytes[j], bytes[j] == 16 ? "cg" : "ca", bytes[j], word[j], word[j]);
    sb_puts(out, "__device__ __forceinline__ void tern_copy_async_commit() {\n"
                 "#if __CUDA_ARCH__ >= 800\n"
                 "    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "template <int pending> __device__ __forceinline__ void tern_copy_async_wait() {\n"
                 "#if __CUDA_ARCH__ >= 800\n"
                 "    asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(pending) : \"memory\");\n"
                 "#endif\n"
                 "}\n");
}

/* The helpers of tern_wait_previous and tern_prefetch. The wait is an instruction of sm_90
 * and newer (programmatic dependent launch), which older targets never launch overlapped:
 * there it is nothing. The "memory" clobber keeps the compiler from moving loads above it. */
static void pdl_helpers(const emitter *e, strbuf *out) {
    if (e->need & NEED_WAIT_PREVIOUS)
        sb_puts(out, "__device__ __forceinline__ void tern_wait_previous() {\n"
                     "#if __CUDA_ARCH__ >= 900\n"
                     "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
                     "#endif\n"
                     "}\n");
    if (e->need & NEED_PREFETCH)
        sb_puts(out, "__device__ __forceinline__ void tern_prefetch_l2(const void *p) {\n"
                     "    asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(__cvta_generic_to_global(p)));\n"
                     "}\n");
}

/* Whether the kernel has a unary operation `op`. */
static bool uses_op1(const tern_kernel *k, tern_op1 op) {
    for (int32_t i = 0; i < k->nins; i++)
        if (k->ins[i].op == IR_UNARY && k->ins[i].aux == op) return true;
    return false;
}

/* The math that is one hardware instruction: exp2 as the instruction as it is, which flushes
 * subnormal results (x < -126) to zero (exp2f without fast-math is the same approximation,
 * about 2 ulp, with a range fix-up around it: three more instructions on every exponential of
 * a softmax, the flash attention kernels' inner loops); tanh_approx as tanh.approx.f32 (sm_75
 * and later; max relative error about 2^-11), one special-function instruction where tanhf
 * is a dozen (a GELU epilogue's rate). docs/kernels.md states both. */
static void approx_helpers(const emitter *e, strbuf *out) {
    if (uses_op1(e->k, TERN_EXP2))
        sb_puts(out, "__device__ __forceinline__ float tern_exp2f(float x) {\n"
                     "    float y;\n"
                     "    asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
                     "    return y;\n"
                     "}\n");
    if (uses_op1(e->k, TERN_TANH_APPROX))
        sb_puts(out, "__device__ __forceinline__ float tern_tanhf_approx(float x) {\n"
                     "#if __CUDA_ARCH__ >= 750\n"
                     "    float y;\n"
                     "    asm(\"tanh.approx.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
                     "    return y;\n"
                     "#else\n"
                     "    return tanhf(x);\n"
                     "#endif\n"
                     "}\n");
}

static void cuda_shared(emitter *e, strbuf *out, int32_t b) {
    const ir_buf *B = &e->k->bufs[b];
    if (e->k->shared_bytes <= CUDA_STATIC_SHARED_LIMIT) {
        /* an asynchronous copy's destination: 16-byte aligned, as the copies need; tiles
         * of warpgroup products on the 1,024-byte boundaries their layout starts on */
        const char *align = B->used & IR_BUF_TILES ? "__align__(1024) " : B->used & IR_BUF_COPIED ? "__align__(16) " : "";
        sb_printf(out, "    __shared__ %s%s %s[%zu];\n", align, cuda_type(B->elem), e->buf_name[b], B->count);
        return;
    }
    /* more than static shared memory allows: carve the dynamic allocation */
    bool first = true;
    for (int32_t j = 0; j < b; j++) first = first && !e->k->bufs[j].shared;
    if (first) /* the offsets of tile arrays are multiples of 1,024 (kb_shared) */
        sb_printf(out, "    extern __shared__ __align__(%d) unsigned char tern_shared_mem[];\n",
                  e->k->uses & IR_USES_WGMMA ? 1024 : 16);
    sb_printf(out, "    %s *%s = (%s *)(tern_shared_mem + %zu); /* %zu elements */\n", cuda_type(B->elem),
              e->buf_name[b], cuda_type(B->elem), B->offset, B->count);
}

/* One SIMD reduction or scan helper for type t. */
static void simd_helper(strbuf *out, tern_simd_op op, int t) {
    const char *ty = cuda_type(t), *sfx = emit_type_suffix(t);
    const char *zero = t == TERN_T_F32 ? "0.0f" : "0";
    if (op == TERN_SIMD_PREFIX_SUM) {
        sb_printf(out,
                  "/* exclusive: Hillis-Steele over the warp, then one lane up */\n"
                  "__device__ __forceinline__ %s tern_simd_prefix_sum_%s(%s v) {\n"
                  "    const int lane = tern_local_index() & 31;\n"
                  "    for (int o = 1; o < 32; o <<= 1) {\n"
                  "        %s y = __shfl_up_sync(0xffffffffu, v, o);\n"
                  "        if (lane >= o) v = v + y;\n"
                  "    }\n"
                  "    %s r = __shfl_up_sync(0xffffffffu, v, 1);\n"
                  "    return lane == 0 ? (%s)%s : r;\n"
                  "}\n", ty, sfx, ty, ty, ty, ty, zero);
        return;
    }
    const char *combine = op == TERN_SIMD_SUM ? "v + o"
                          : t == TERN_T_F32   ? (op == TERN_SIMD_MIN ? "fminf(v, o)" : "fmaxf(v, o)")
                                              : (op == TERN_SIMD_MIN ? "min(v, o)" : "max(v, o)");
    sb_printf(out,
              "/* butterfly: every lane ends with the same value */\n"
              "__device__ __forceinline__ %s tern_simd_%s_%s(%s v) {\n"
              "    for (int m = 16; m > 0; m >>= 1) {\n"
              "        %s o = __shfl_xor_sync(0xffffffffu, v, m);\n"
              "        v = %s;\n"
              "    }\n"
              "    return v;\n"
              "}\n", ty, ir_simd_name(op), sfx, ty, ty, combine);
}

/* tern_mma_bf16 on the tensor cores (sm_80 or newer): a and b as bf16 pairs, the first
 * element of each pair in the low half (tern_bf16x2 or the loaded bits: emit_cuda_bf16_pair), then PTX
 * mma.sync m16n8k16. Not volatile: the product has no effect beyond its outputs, so the
 * compiler may schedule and interleave the products and the loads that feed them. */
static void mma_helper(strbuf *out) {
    sb_puts(out,
            "__device__ __forceinline__ unsigned int tern_bf16x2(float lo, float hi) {\n"
            "    unsigned int r; /* cvt puts its first source in the upper half */\n"
            "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
            "    return r;\n"
            "}\n"
            "__device__ __forceinline__ float4 tern_mma_bf16(unsigned int a01, unsigned int a23, unsigned int a45,\n"
            "                                                unsigned int a67, unsigned int b01, unsigned int b23,\n"
            "                                                float c0, float c1, float c2, float c3) {\n"
            "    float4 d;\n"
            "    asm(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
            "                 \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
            "                 : \"=f\"(d.x), \"=f\"(d.y), \"=f\"(d.z), \"=f\"(d.w)\n"
            "                 : \"r\"(a01), \"r\"(a23), \"r\"(a45), \"r\"(a67), \"r\"(b01), \"r\"(b23),\n"
            "                   \"f\"(c0), \"f\"(c1), \"f\"(c2), \"f\"(c3));\n"
            "    return d;\n"
            "}\n");
}

static void cuda_prelude(emitter *e, strbuf *out) {
    if (emit_needs_common(e))
        sb_puts(out, "#define TERN_FN __device__ __forceinline__\n"
                     "#define TERN_AS_FLOAT(x) __uint_as_float(x)\n"
                     "#define TERN_AS_UINT(x) __float_as_uint(x)\n");
    emit_common_prelude(e, out);
    if (e->need & NEED_LOCAL_INDEX)
        sb_puts(out, "__device__ __forceinline__ int tern_local_index() {\n"
                     "    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));\n"
                     "}\n");
    for (int op = 0; op <= TERN_SIMD_PREFIX_SUM; op++)
        for (int t = 0; t < TERN_TYPE_COUNT; t++)
            if (e->simd_need[op] & (1u << t)) simd_helper(out, (tern_simd_op)op, t);
    if (e->need & NEED_MMA) mma_helper(out);
    if (e->need & NEED_WGMMA) /* wgmma's shared memory descriptor: 128-byte swizzle, 8 rows 1,024 bytes apart */
        sb_puts(out, "__device__ __forceinline__ unsigned long long tern_wg_desc(unsigned int addr, unsigned int lead) {\n"
                     "    return (unsigned long long)((addr & 0x3ffffu) >> 4) | (unsigned long long)((lead >> 4) & 0x3fffu) << 16 |\n"
                     "           (unsigned long long)(1024u >> 4) << 32 | 1ull << 62;\n"
                     "}\n");

    pdl_helpers(e, out);
    copy_async_helpers(e, out);
    emit_cuda_store_bulk_helpers(e, out);
    emit_cuda_pipe_helpers(e, out);
    approx_helpers(e, out);
}

const dialect emit_cuda_dialect = {
    .target = TERN_TARGET_CUDA,
    /* CUDA C spells out the unsigned and 64-bit types, and its single-precision math
     * functions end in f (exp2 is tern_exp2f: a prelude helper, see there) */
    .types = {[TERN_T_U32] = "unsigned int", [TERN_T_I64] = "long long", [TERN_T_U64] = "unsigned long long",
              [TERN_T_F16] = "unsigned short", [TERN_T_BF16] = "unsigned short", [TERN_T_U16] = "unsigned short"},
    .math1 = {[TERN_ABS] = "fabsf",  [TERN_EXP] = "expf",     [TERN_EXP2] = "tern_exp2f", [TERN_LOG] = "logf",
              [TERN_LOG2] = "log2f", [TERN_SQRT] = "sqrtf",   [TERN_RSQRT] = "rsqrtf",    [TERN_TANH] = "tanhf",
              [TERN_TANH_APPROX] = "tern_tanhf_approx",
              [TERN_ERF] = "erff",   [TERN_SIN] = "sinf",     [TERN_COS] = "cosf",        [TERN_FLOOR] = "floorf",
              [TERN_CEIL] = "ceilf", [TERN_ROUND] = "roundf", [TERN_TRUNC] = "truncf"},
    .math2 = {[TERN_MIN] = "fminf", [TERN_MAX] = "fmaxf", [TERN_POW] = "powf", [TERN_REM] = "fmodf"},
    .u32_suffix = "u",
    .i64_suffix = "ll",
    .u64_suffix = "ull",
    .fma_name = "fmaf",
    .imin = "min",
    .imax = "max",
    .cast = cuda_cast,
    .bitcast = cuda_bitcast,
    .thread = cuda_thread,
    .vload = cuda_vload,
    .vstore = cuda_vstore,
    .atomic = cuda_atomic,
    .simd = cuda_simd,
    .mma = cuda_mma,
    .load_matrix = cuda_load_matrix,
    .wgmma = emit_cuda_wgmma,
    .wgmma_wait = emit_cuda_wgmma_wait,
    .print = cuda_print,
    .barrier = "__syncthreads()",
    .fence = "__threadfence()",
    .head = cuda_head,
    .shared = cuda_shared,
    .prelude = cuda_prelude,
    .wait_previous = cuda_wait_previous,
    .prefetch = cuda_prefetch,
    .copy_async = cuda_copy_async,
    .copy_commit = cuda_copy_commit,
    .copy_wait = cuda_copy_wait,
    .copy_tile = emit_cuda_copy_tile,
    .store_bulk = emit_cuda_store_bulk,
    .store_bulk_sync = emit_cuda_store_bulk_sync,
    .pipe = emit_cuda_pipe,
};
