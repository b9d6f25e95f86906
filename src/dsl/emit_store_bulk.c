/* tern_store_bulk and its commit, wait and fence as each target writes them: CUDA hands the
 * run to the copy engine (sm_90: cp.async.bulk from shared to global memory, one bulk group a
 * commit); OpenCL and Metal copy it at once, 16 bytes at a time, and their commit, wait and
 * fence become comments (emit_common.c). */
#include "dsl/emit.h"

/* The run's bytes: the count times the element size, as an unsigned expression. */
static void bulk_bytes(emitter *e, strbuf *b, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    sb_puts(b, "(unsigned)(");
    emit_operand(e, b, (int32_t)in->imm);
    sb_printf(b, ") * %zuu", tern_type_size((tern_type)e->k->bufs[in->a[0]].elem));
}

void emit_store_bulk_at_once(emitter *e, int32_t i, const char *dst_space, const char *src_space) {
    const ir_ins *in = &e->k->ins[i];
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_printf(b, "{ %s uint4 *tern_bd = (%s uint4 *)&", dst_space, dst_space);
    emit_elem(e, b, in->a[0], in->a[1]);
    sb_printf(b, "; %s const uint4 *tern_bs = (%s const uint4 *)&", src_space, src_space);
    emit_elem(e, b, in->a[2], in->a[3]);
    sb_puts(b, "; for (unsigned tern_bi = 0; tern_bi < ");
    bulk_bytes(e, b, i);
    sb_puts(b, " / 16u; tern_bi++) tern_bd[tern_bi] = tern_bs[tern_bi]; } /* store_bulk, made at once */");
    emit_line_end(e);
}

void emit_cuda_store_bulk(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    strbuf *b = &e->body;
    emit_line_start(e, i);
    sb_puts(b, "tern_store_bulk(&");
    emit_elem(e, b, in->a[0], in->a[1]);
    sb_puts(b, ", &");
    emit_elem(e, b, in->a[2], in->a[3]);
    sb_puts(b, ", ");
    bulk_bytes(e, b, i);
    sb_puts(b, ");");
    emit_line_end(e);
    e->need |= NEED_STORE_BULK;
}

/* Commit, wait (its pending count a template argument) and fence. */
void emit_cuda_store_bulk_sync(emitter *e, int32_t i) {
    const ir_ins *in = &e->k->ins[i];
    emit_line_start(e, i);
    if (in->op == IR_STORE_BULK_COMMIT) sb_puts(&e->body, "tern_store_bulk_commit();");
    else if (in->op == IR_STORE_BULK_WAIT) sb_printf(&e->body, "tern_store_bulk_wait<%d>();", in->aux);
    else sb_puts(&e->body, "tern_store_bulk_fence();");
    emit_line_end(e);
    e->need |= NEED_STORE_BULK;
}

/* The helpers. Volatile with a "memory" clobber, as cp.async's: the compiler moves no memory
 * access across a store, commit, wait or fence. A run of 0 bytes issues nothing (the copy
 * engine's size is at least 16). Below sm_90 the issuing thread copies the run itself. */
void emit_cuda_store_bulk_helpers(const emitter *e, strbuf *out) {
    if (!(e->need & NEED_STORE_BULK)) return;
    sb_puts(out, "__device__ __forceinline__ void tern_store_bulk(void *dst, const void *src, unsigned bytes) {\n"
                 "    if (!bytes) return;\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\"\n"
                 "                 :: \"l\"(__cvta_generic_to_global(dst)),\n"
                 "                    \"r\"((unsigned)__cvta_generic_to_shared(src)), \"r\"(bytes) : \"memory\");\n"
                 "#else\n"
                 "    for (unsigned i = 0; i < bytes / 16u; i++) ((uint4 *)dst)[i] = ((const uint4 *)src)[i];\n"
                 "#endif\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_store_bulk_commit() {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "template <int pending> __device__ __forceinline__ void tern_store_bulk_wait() {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"cp.async.bulk.wait_group.read %0;\" :: \"n\"(pending) : \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_store_bulk_fence() {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                 "#endif\n"
                 "}\n");
}
