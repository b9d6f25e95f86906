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
#include <stdarg.h>
#include <stdio.h>

#include "dsl/emit.h"

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
}

static void pipe_line(emitter *e, int32_t ins, const char *fmt, ...) TERN_PRINTF(3, 4);
static void pipe_line(emitter *e, int32_t ins, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line) e->body.failed = true;
    emit_line_start(e, ins);
    sb_puts(&e->body, line);
    emit_line_end(e);
}

/* The registers a thread of this kernel is launched with, as ptxas gives them under its
 * launch bounds: what setmaxnreg gives back at the end of a role's branch. */
static int launch_regs(const tern_kernel *k) {
    int groups = k->min_groups ? k->min_groups : 1;
    int r = 65536 / (k->max_threads * groups) / 8 * 8;
    return r > 256 ? 256 : r;
}

/* One role's branch: the region's statements but the other role's blocks and the lockstep
 * barriers, each of its blocks between its slot's wait and arrival. */
static void pipe_branch(emitter *e, int32_t region, bool producer) {
    const tern_kernel *k = e->k;
    ir_pipe_spec s = ir_pipe_unpack(k->ins[region].imm);
    int32_t end = k->ins[region].a[2];
    for (int32_t j = region + 1; j < end; j++) {
        const ir_ins *in = &k->ins[j];
        if (in->op == IR_BARRIER && in->aux == IR_BARRIER_PIPE) continue;
        bool block = in->op == IR_IF && (in->aux == IR_IF_PRODUCE || in->aux == IR_IF_CONSUME);
        if (!block) {
            emit_statement(e, j);
            continue;
        }
        int32_t block_end = in->a[2];
        /* the block's role condition (the lockstep targets' test) is the branch's own here */
        emit_line_start(e, j);
        sb_puts(&e->body, "(void)");
        emit_operand(e, &e->body, in->a[0]);
        sb_putc(&e->body, ';');
        emit_line_end(e);
        if ((in->aux == IR_IF_PRODUCE) != producer) {
            j = block_end;
            continue;
        }
        const char *step = e->var_name[in->imm];
        pipe_line(e, j, "{ /* %s step %s */", producer ? "produce" : "consume", step);
        e->indent++;
        pipe_line(e, j, "const int tern_slot = %s %% %d, tern_round = %s / %d;", step, s.stages, step, s.stages);
        if (producer)
            pipe_line(e, j, "if (tern_round > 0) tern_mbar_wait(&tern_free_%d[tern_slot], (tern_round - 1) & 1);",
                      region);
        else
            pipe_line(e, j, "tern_mbar_wait(&tern_full_%d[tern_slot], tern_round & 1);", region);
        if (!producer && s.lag) pipe_line(e, j, "const int tern_done = %s - %d;", step, s.lag);
        for (int32_t q = j + 1; q < block_end; q++) emit_statement(e, q);
        if (producer)
            pipe_line(e, block_end, "tern_mbar_arrive_copies(&tern_full_%d[tern_slot]);", region);
        else if (s.lag)
            pipe_line(e, block_end, "if (tern_done >= 0) tern_mbar_arrive(&tern_free_%d[tern_done %% %d]);", region,
                      s.stages);
        else
            pipe_line(e, block_end, "tern_mbar_arrive(&tern_free_%d[tern_slot]);", region);
        e->indent--;
        pipe_line(e, block_end, "}");
        j = block_end;
    }
}

int32_t emit_cuda_pipe(emitter *e, int32_t region) {
    const tern_kernel *k = e->k;
    ir_pipe_spec s = ir_pipe_unpack(k->ins[region].imm);
    int32_t end = k->ins[region].a[2];
    int producers = s.producer_count * 128, consumers = s.producer_first * 128;
    e->need |= NEED_PIPE | NEED_LOCAL_INDEX;
    pipe_line(e, region, "{ /* a pipe: warpgroups %d .. %d produce, %d .. %d consume; %d stages, lag %d */",
              s.producer_first, s.producer_first + s.producer_count - 1, 0, s.producer_first - 1, s.stages, s.lag);
    e->indent++;
    pipe_line(e, region, "__shared__ unsigned long long tern_full_%d[%d], tern_free_%d[%d];", region, s.stages,
              region, s.stages);
    /* the barriers count every thread of the other role: a launch of another size would
     * wait forever, so it faults instead */
    pipe_line(e, region, "if (blockDim.x * blockDim.y * blockDim.z != %d) __trap();", producers + consumers);
    pipe_line(e, region, "if (tern_local_index() == 0)");
    pipe_line(e, region, "    for (int tern_s = 0; tern_s < %d; tern_s++) {", s.stages);
    pipe_line(e, region, "        tern_mbar_init(&tern_full_%d[tern_s], %d);", region, producers);
    pipe_line(e, region, "        tern_mbar_init(&tern_free_%d[tern_s], %d);", region, consumers);
    pipe_line(e, region, "    }");
    pipe_line(e, region, "__syncthreads();");
    pipe_line(e, region, "if (tern_role_wg >= %d) {", s.producer_first);
    e->indent++;
    int back = launch_regs(k);
    if (s.producer_regs) pipe_line(e, region, "tern_regs_dec<%d>();", s.producer_regs);
    pipe_branch(e, region, true);
    if (s.producer_regs) pipe_line(e, end, "tern_regs_inc<%d>();", back);
    e->indent--;
    pipe_line(e, region, "} else {");
    e->indent++;
    if (s.consumer_regs) pipe_line(e, region, "tern_regs_inc<%d>();", s.consumer_regs);
    pipe_branch(e, region, false);
    if (s.consumer_regs) pipe_line(e, end, "tern_regs_dec<%d>();", back);
    e->indent--;
    pipe_line(e, end, "}");
    pipe_line(e, end, "__syncthreads();");
    e->indent--;
    pipe_line(e, end, "}");
    return end;
}
