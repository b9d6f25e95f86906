/* CUDA's pipes (tern/kernel.h, TERN_PIPE): the region runs as two branches, the producer's
 * warpgroups and the consumers', each with only its own blocks, so that neither waits for
 * the other except where a slot changes hands. A slot has two mbarriers: `full`, on which
 * every producer thread arrives once its asynchronous copies into the slot have landed
 * (cp.async.mbarrier.arrive.noinc), and `free`, on which every consumer thread arrives when
 * the consume block `lag` steps later ends. A role's n-th block is step n (its variable,
 * counted by the block itself), slot n % stages, and waits for phase n / stages of the slot's
 * barrier: the consumers for its filling, the producer (from its second round) for the
 * consumers' release of the round before. The other targets run the same blocks in lockstep
 * with the barriers the tracer put before them (emit_common.c), which CUDA drops here. */
#include <stdlib.h>

#include "dsl/emit.h"

static void copy_tile_helpers(const emitter *e, strbuf *out);

/* The mbarrier operations, on shared-memory addresses of 64-bit barriers: wait polls the
 * phase with the given parity (try_wait suspends the thread a while before it says no). */
void emit_cuda_pipe_helpers(const emitter *e, strbuf *out) {
    if (!(e->need & NEED_PIPE)) return;
    sb_puts(out, "__device__ __forceinline__ unsigned tern_mbar_at(unsigned long long *bar) {\n"
                 "    return (unsigned)__cvta_generic_to_shared(bar);\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_mbar_init(unsigned long long *bar, unsigned count) {\n"
                 "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(tern_mbar_at(bar)), \"r\"(count) : \"memory\");\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_mbar_wait(unsigned long long *bar, unsigned parity) {\n"
                 "    unsigned done = 0;\n"
                 "    while (!done)\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "        asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
                 "                     : \"=r\"(done) : \"r\"(tern_mbar_at(bar)), \"r\"(parity) : \"memory\");\n"
                 "#else\n"
                 "        asm volatile(\"{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
                 "                     : \"=r\"(done) : \"r\"(tern_mbar_at(bar)), \"r\"(parity) : \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_mbar_arrive(unsigned long long *bar) {\n"
                 "    asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(tern_mbar_at(bar)) : \"memory\");\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_mbar_arrive_copies(unsigned long long *bar) {\n"
                 "    asm volatile(\"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\" :: \"r\"(tern_mbar_at(bar)) : \"memory\");\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_fence_async() {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "template <int regs> __device__ __forceinline__ void tern_regs_inc() {\n"
                 "#ifdef __CUDA_ARCH_FEAT_SM90_ALL\n"
                 "    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %0;\" :: \"n\"(regs));\n"
                 "#endif\n"
                 "}\n"
                 "template <int regs> __device__ __forceinline__ void tern_regs_dec() {\n"
                 "#ifdef __CUDA_ARCH_FEAT_SM90_ALL\n"
                 "    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %0;\" :: \"n\"(regs));\n"
                 "#endif\n"
                 "}\n");
    copy_tile_helpers(e, out);
}

/* tern_copy_tile's helpers: a tensor map as the kernel takes it (CUtensorMap's 128 bytes,
 * made by the runtime), the slot's expected bytes, and one 2-D tensor copy completing on an
 * mbarrier. The map is a __grid_constant__ parameter, so its generic address is the one the
 * copy names. */
static void copy_tile_helpers(const emitter *e, strbuf *out) {
    if (!(e->need & NEED_COPY_TILE)) return;
    sb_puts(out, "struct __align__(64) tern_tmap { unsigned long long bits[16]; };\n"
                 "__device__ __forceinline__ void tern_mbar_expect(unsigned long long *bar, unsigned bytes) {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\" :: \"r\"(tern_mbar_at(bar)), \"r\"(bytes) : \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_tile_copy(void *dst, const tern_tmap *map, int col, int row,\n"
                 "                                               unsigned long long *bar) {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\"\n"
                 "                 :: \"r\"((unsigned)__cvta_generic_to_shared(dst)), \"l\"((unsigned long long)map), \"r\"(col), \"r\"(row),\n"
                 "                    \"r\"(tern_mbar_at(bar)) : \"memory\");\n"
                 "#endif\n"
                 "}\n"
                 "__device__ __forceinline__ void tern_fence_mbar_init() {\n"
                 "#if __CUDA_ARCH__ >= 900\n"
                 "    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");\n"
                 "#endif\n"
                 "}\n");
}

static void cuda_move16(strbuf *out, const char *dst, const char *src) {
    sb_printf(out, "tern_copy_async_16(%s, %s);", dst, src);
}

void emit_cuda_copy_tile(emitter *e, int32_t i) {
    const tern_kernel *k = e->k;
    const ir_ins *in = &k->ins[i];
    ir_tile_box box = ir_tile_unpack(in->imm);
    int map = ir_tile_map_of(k, i);
    strbuf *b = &e->body;
    e->need |= NEED_COPY_TILE | NEED_COPY_ASYNC | NEED_LOCAL_INDEX;
    emit_linef(e, i, "#if __CUDA_ARCH__ >= 900");
    emit_linef(e, i, "if (tern_local_index() == %d) { /* copy_tile, %d x %d: the producer's first thread */",
               128 * in->aux, box.rows, 64 * box.panels);
    e->indent++;
    emit_linef(e, i, "tern_mbar_expect(tern_fill, %du);", 2 * box.rows * 64 * box.panels);
    for (int p = 0; p < box.panels; p++) {
        emit_line_start(e, i);
        sb_puts(b, "tern_tile_copy(&");
        emit_elem(e, b, in->a[0], in->a[1]);
        sb_printf(b, " + %d, &tern_map_%d, ", p * 64 * box.rows, map);
        emit_operand(e, b, in->a[3]);
        if (p) sb_printf(b, " + %d", 64 * p);
        sb_puts(b, ", ");
        emit_operand(e, b, in->a[2]);
        sb_puts(b, ", tern_fill);");
        emit_line_end(e);
    }
    e->indent--;
    emit_linef(e, i, "}");
    emit_linef(e, i, "#else");
    emit_copy_tile_loop(e, i, cuda_move16);
    emit_linef(e, i, "#endif");
}

/* Whether instructions from .. to - 1 hold an op (a tile copy; a store to threadgroup memory). */
static bool has_tile_copy(const tern_kernel *k, int32_t from, int32_t to) {
    for (int32_t j = from; j < to; j++)
        if (k->ins[j].op == IR_COPY_TILE) return true;
    return false;
}
static bool has_shared_store(const tern_kernel *k, int32_t from, int32_t to) {
    for (int32_t j = from; j < to; j++) {
        const ir_ins *in = &k->ins[j];
        if ((in->op == IR_STORE || in->op == IR_VSTORE || in->op == IR_ATOMIC || in->op == IR_ATOMIC_CAS) &&
            k->bufs[in->a[0]].shared)
            return true;
    }
    return false;
}

/* The registers a thread of this kernel is launched with, as ptxas gives them under its
 * launch bounds: what setmaxnreg gives back at the end of a role's branch. */
static int launch_regs(const tern_kernel *k) {
    int groups = k->min_groups ? k->min_groups : 1;
    int r = 65536 / (k->max_threads * groups) / 8 * 8;
    return r > 256 ? 256 : r;
}

/* Where the pipe block whose END is `block_end` goes on after a tern_pipe_sync: the
 * continuation's IF (an IF marked IR_PIPE_MORE after the role's barrier and the values of its
 * condition), or -1. */
static int32_t continuation(const tern_kernel *k, int32_t block_end) {
    int32_t q = block_end + 1;
    if (q >= k->nins || k->ins[q].op != IR_BARRIER || k->ins[q].aux != IR_BARRIER_SYNC) return -1;
    for (q++; q < k->nins && !ir_op_has_effect((ir_op)k->ins[q].op); q++) {
    }
    return q < k->nins && k->ins[q].op == IR_IF && (k->ins[q].imm & IR_PIPE_MORE) ? q : -1;
}

/* The END of the last part of the pipe block opened at `j`. */
static int32_t step_end(const tern_kernel *k, int32_t j) {
    int32_t block_end = k->ins[j].a[2], more;
    while ((more = continuation(k, block_end)) >= 0) block_end = k->ins[more].a[2];
    return block_end;
}

/* A pipe block's role condition (the lockstep targets' test), unused here: the branch is the
 * role's own. */
static void role_condition(emitter *e, int32_t block) {
    emit_line_start(e, block);
    sb_puts(&e->body, "(void)");
    emit_operand(e, &e->body, e->k->ins[block].a[0]);
    sb_putc(&e->body, ';');
    emit_line_end(e);
}

/* One role's branch: the region's statements but the other role's blocks and the lockstep
 * barriers, each of its steps between its slot's wait and arrival (a step split by
 * tern_pipe_sync: its parts, the role's named barrier between them). */
static void pipe_branch(emitter *e, int32_t region, bool producer) {
    const tern_kernel *k = e->k;
    ir_pipe_spec s = ir_pipe_unpack(k->ins[region].imm);
    int32_t end = k->ins[region].a[2];
    bool tiles = has_tile_copy(k, region, end);
    int role_threads = producer ? k->max_threads - 128 * s.producer_first : 128 * s.producer_first;
    for (int32_t j = region + 1; j < end; j++) {
        const ir_ins *in = &k->ins[j];
        if (in->op == IR_BARRIER && in->aux == IR_BARRIER_PIPE) continue;
        bool block = in->op == IR_IF && (in->aux == IR_IF_PRODUCE || in->aux == IR_IF_CONSUME);
        if (!block) {
            emit_statement(e, j);
            continue;
        }
        int32_t last = step_end(k, j);
        role_condition(e, j);
        if ((in->aux == IR_IF_PRODUCE) != producer) {
            j = last;
            continue;
        }
        const char *step = e->var_name[in->imm & ~IR_PIPE_MORE];
        emit_linef(e, j, "{ /* %s step %s */", producer ? "produce" : "consume", step);
        e->indent++;
        emit_linef(e, j, "const int tern_slot = %s %% %d, tern_round = %s / %d;", step, s.stages, step, s.stages);
        if (producer)
            emit_linef(e, j, "if (tern_round > 0) tern_mbar_wait(&tern_free_%d[tern_slot], (tern_round - 1) & 1);",
                      region);
        else
            emit_linef(e, j, "tern_mbar_wait(&tern_full_%d[tern_slot], tern_round & 1);", region);
        if (!producer && s.lag) emit_linef(e, j, "const int tern_done = %s - %d;", step, s.lag);
        if (producer && has_tile_copy(k, j, last))
            emit_linef(e, j, "unsigned long long *const tern_fill = &tern_full_%d[tern_slot]; (void)tern_fill;",
                       region);
        for (int32_t part = j; part < last;) { /* each part's statements, the role's barrier between */
            int32_t part_end = k->ins[part].a[2];
            for (int32_t q = part + 1; q < part_end; q++) emit_statement(e, q);
            if (part_end == last) break;
            emit_linef(e, part_end + 1, "asm volatile(\"bar.sync %d, %d;\" ::: \"memory\"); /* pipe_sync */",
                       producer ? 2 : 1, role_threads);
            part = continuation(k, part_end);
            for (int32_t q = part_end + 2; q < part; q++) emit_statement(e, q); /* the condition's values */
            role_condition(e, part);
        }
        /* the tile copies (async proxy) may next overwrite what these stores wrote */
        if (!producer && tiles && has_shared_store(k, j, last)) emit_linef(e, last, "tern_fence_async();");
        if (producer)
            emit_linef(e, last, "tern_mbar_arrive_copies(&tern_full_%d[tern_slot]);", region);
        else if (s.lag)
            emit_linef(e, last, "if (tern_done >= 0) tern_mbar_arrive(&tern_free_%d[tern_done %% %d]);", region,
                      s.stages);
        else
            emit_linef(e, last, "tern_mbar_arrive(&tern_free_%d[tern_slot]);", region);
        e->indent--;
        emit_linef(e, last, "}");
        j = last;
    }
}

/* Ends the life of every variable the other role owns (ir_pipe_owners) in this branch: an
 * empty asm that defines it, so its value from before the region is not kept in registers
 * through the branch. After the region it has no defined value in this role's threads. */
static void forget_others(emitter *e, int32_t at, const uint8_t *owner, uint8_t other) {
    const tern_kernel *k = e->k;
    for (int32_t v = 0; v < k->nvars; v++) {
        if (owner[v] != other) continue;
        const char *how = NULL;
        switch (k->vars[v].type) {
        case TERN_T_F32: how = "f"; break;
        case TERN_T_I32:
        case TERN_T_U32: how = "r"; break;
        case TERN_T_I64:
        case TERN_T_U64: how = "l"; break;
        case TERN_T_F16:
        case TERN_T_BF16:
        case TERN_T_U16: how = "h"; break;
        default: continue; /* bool, 8-bit: left as they are */
        }
        emit_linef(e, at, "asm volatile(\"\" : \"=%s\"(%s));", how, e->var_name[v]);
    }
}

int32_t emit_cuda_pipe(emitter *e, int32_t region) {
    const tern_kernel *k = e->k;
    ir_pipe_spec s = ir_pipe_unpack(k->ins[region].imm);
    int32_t end = k->ins[region].a[2];
    int consumers = s.producer_first * 128, producers = k->max_threads - consumers; /* tern_pipe_at */
    e->need |= NEED_PIPE | NEED_LOCAL_INDEX;
    uint8_t *owner = malloc((size_t)k->nvars + 1);
    if (!owner) {
        e->body.failed = true;
        return end;
    }
    ir_pipe_owners(k, region, owner);
    emit_linef(e, region, "{ /* a pipe: warpgroups %d .. %d produce, %d .. %d consume; %d stages, lag %d */",
              s.producer_first, s.producer_first + s.producer_count - 1, 0, s.producer_first - 1, s.stages, s.lag);
    e->indent++;
    emit_linef(e, region, "__shared__ unsigned long long tern_full_%d[%d], tern_free_%d[%d];", region, s.stages,
              region, s.stages);
    /* the barriers count every thread of the other role: a launch of another size would
     * wait forever, so it faults instead */
    emit_linef(e, region, "if (blockDim.x * blockDim.y * blockDim.z != %d) __trap();", producers + consumers);
    emit_linef(e, region, "if (tern_local_index() == 0)");
    emit_linef(e, region, "    for (int tern_s = 0; tern_s < %d; tern_s++) {", s.stages);
    emit_linef(e, region, "        tern_mbar_init(&tern_full_%d[tern_s], %d);", region, producers);
    emit_linef(e, region, "        tern_mbar_init(&tern_free_%d[tern_s], %d);", region, consumers);
    emit_linef(e, region, "    }");
    if (has_tile_copy(k, region, end)) {
        /* the barriers' initialisation and the threads' earlier threadgroup stores made
         * visible to the tensor copies (the async proxy) */
        emit_linef(e, region, "tern_fence_mbar_init();");
        emit_linef(e, region, "tern_fence_async();");
    }
    emit_linef(e, region, "__syncthreads();");
    emit_linef(e, region, "if (tern_role_wg >= %d) {", s.producer_first);
    e->indent++;
    int back = launch_regs(k);
    if (s.producer_regs) emit_linef(e, region, "tern_regs_dec<%d>();", s.producer_regs);
    pipe_branch(e, region, true);
    if (s.producer_regs) emit_linef(e, end, "tern_regs_inc<%d>();", back);
    forget_others(e, end, owner, IR_PIPE_CONSUMERS);
    e->indent--;
    emit_linef(e, region, "} else {");
    e->indent++;
    if (s.consumer_regs) emit_linef(e, region, "tern_regs_inc<%d>();", s.consumer_regs);
    pipe_branch(e, region, false);
    forget_others(e, end, owner, IR_PIPE_PRODUCER);
    if (s.consumer_regs) emit_linef(e, end, "tern_regs_dec<%d>();", back);
    e->indent--;
    emit_linef(e, end, "}");
    emit_linef(e, end, "__syncthreads();");
    e->indent--;
    emit_linef(e, end, "}");
    free(owner);
    return end;
}
