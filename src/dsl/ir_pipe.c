/* Which role of a pipe owns each variable declared before it (ir.h, ir_pipe_owners). */
#include <string.h>

#include "dsl/ir.h"

void ir_pipe_owners(const tern_kernel *k, int32_t region, uint8_t *owner) {
    memset(owner, 0, (size_t)k->nvars);
    int32_t end = k->ins[region].a[2], block_end = -1;
    uint8_t kind = IR_PIPE_SHARED; /* outside the pipe's blocks */
    for (int32_t j = region + 1; j < end; j++) {
        const ir_ins *in = &k->ins[j];
        if (j == block_end) kind = IR_PIPE_SHARED;
        if (in->op == IR_IF && (in->aux == IR_IF_PRODUCE || in->aux == IR_IF_CONSUME)) {
            kind = in->aux == IR_IF_PRODUCE ? IR_PIPE_PRODUCER : IR_PIPE_CONSUMERS;
            block_end = in->a[2];
        }
        const int32_t *vars = NULL;
        int32_t nvars = 0;
        switch ((ir_op)in->op) {
        case IR_VAR_READ:
        case IR_ASSIGN:
            vars = &in->a[0];
            nvars = 1;
            break;
        case IR_WGMMA:
            if (in->aux & IR_WG_ASYNC) { /* the accumulators follow the value operands */
                ir_wg_shape s = ir_wg_unpack(in->imm);
                bool a_tile = in->a[1] >= 0;
                vars = &k->extra[in->a[0] + ir_wg_values(s, a_tile, true)];
                nvars = s.n / 2;
            }
            break;
        case IR_WGMMA_WAIT:
            vars = &k->extra[in->a[0]];
            nvars = in->a[1];
            break;
        default: break;
        }
        for (int32_t v = 0; v < nvars; v++)
            if (k->vars[vars[v]].block < region) owner[vars[v]] |= kind;
    }
}
