/* What the interpreter precomputes per kernel: nesting depth, and the instructions whose
 * values are the same in every iteration (constants, parameters, thread attributes),
 * filled once instead of executed. */
#include <stdlib.h>

#include "dsl/interp.h"
#include "dsl/interp_prog.h"

void interp_prog_free(struct interp_prog *p) {
    if (!p) return;
    free(p->consts);
    free(p->threads);
    free(p->params);
    free(p);
}

tern_error *interp_prepare(tern_kernel *k) {
    interp_prog *p = calloc(1, sizeof *p);
    if (!p) return tern_errorf("kernel '%s': out of memory", k->name);
    size_t n = (size_t)k->nins + 1;
    p->consts = malloc(n * sizeof *p->consts);
    p->threads = malloc(n * sizeof *p->threads);
    p->params = malloc(n * sizeof *p->params);
    if (!p->consts || !p->threads || !p->params) {
        interp_prog_free(p);
        return tern_errorf("kernel '%s': out of memory", k->name);
    }
    int32_t depth = 0;
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        switch ((ir_op)in->op) {
        case IR_CONST: p->consts[p->nconsts++] = i; break;
        case IR_THREAD: p->threads[p->nthreads++] = i; break;
        case IR_PARAM: p->params[p->nparams++] = i; break;
        case IR_IF:
        case IR_FOR:
        case IR_WHILE:
            depth++;
            if (depth > p->max_depth) p->max_depth = depth;
            break;
        case IR_END: depth--; break;
        case IR_BREAK:
        case IR_CONTINUE:
        case IR_EXIT: p->has_jumps = true; break;
        default: break;
        }
    }
    k->prog = p;
    return NULL;
}
