/* Purity: what the generic operations and tern_call accept. A pure function has scalar
 * parameters only, ends with tern_result, and does nothing but compute: no print, stores,
 * atomics, barriers, fences, asynchronous copies, SIMD operations, threadgroup memory, thread
 * attributes or exit. */
#include <stdio.h>

#include "dsl/ir.h"

/* What instruction `in` does that a pure function may not, or NULL. */
static const char *impurity(const tern_kernel *k, const ir_ins *in, char *buf, size_t size) {
    switch ((ir_op)in->op) {
    case IR_PRINT: return "calls print";
    case IR_STORE:
    case IR_VSTORE:
        snprintf(buf, size, "stores to buffer '%s'", ir_string(k, k->bufs[in->a[0]].name));
        return buf;
    case IR_LOAD:
    case IR_VLOAD:
        snprintf(buf, size, "loads from buffer '%s'", ir_string(k, k->bufs[in->a[0]].name));
        return buf;
    case IR_COPY_ASYNC: /* a load from device memory and a store to threadgroup memory */
        snprintf(buf, size, "stores to buffer '%s' (copy_async from '%s')",
                 ir_string(k, k->bufs[in->a[0]].name), ir_string(k, k->bufs[in->a[2]].name));
        return buf;
    case IR_COPY_TILE:
        snprintf(buf, size, "stores to buffer '%s' (copy_tile from '%s')", ir_string(k, k->bufs[in->a[0]].name),
                 ir_string(k, k->bufs[ir_tile_unpack(in->imm).buf].name));
        return buf;
    case IR_STORE_BULK:
        snprintf(buf, size, "stores to buffer '%s' (store_bulk from '%s')",
                 ir_string(k, k->bufs[in->a[0]].name), ir_string(k, k->bufs[in->a[2]].name));
        return buf;
    case IR_COPY_COMMIT:
    case IR_COPY_WAIT:
    case IR_STORE_BULK_COMMIT:
    case IR_STORE_BULK_WAIT:
    case IR_STORE_BULK_FENCE: return "uses asynchronous copies";
    case IR_ATOMIC:
    case IR_ATOMIC_CAS: return "uses atomics";
    case IR_BARRIER: return "uses a barrier";
    case IR_FENCE: return "uses a memory fence";
    case IR_SIMD:
    case IR_MMA:
    case IR_WGMMA:
    case IR_WGMMA_WAIT:
    case IR_LOAD_MATRIX: return "uses SIMD-group operations";
    case IR_EXIT: return "exits the thread";
    case IR_THREAD:
        snprintf(buf, size, "reads the thread attribute %s", ir_thread_name((tern_thread_attr)in->aux));
        return buf;
    default: return NULL;
    }
}

tern_error *tern_kernel_check_pure(const tern_kernel *k, const char *op) {
    if (!op) op = "tern_call";
    if (!k) return tern_errorf("%s: the kernel is NULL", op);
    char buf[160], where[128];
    for (int32_t i = 0; i < k->nins; i++) {
        const char *why = impurity(k, &k->ins[i], buf, sizeof buf);
        if (why)
            return tern_errorf("%s: kernel '%s' is not pure: it %s (%s)", op, k->name, why,
                               ir_where(k, i, where, sizeof where));
    }
    for (int32_t i = 0; i < k->nparams; i++)
        if (k->params[i].is_buf)
            return tern_errorf("%s: kernel '%s' is not pure: it takes buffer parameter '%s'", op,
                               k->name, ir_string(k, k->params[i].name));
    if (k->uses & IR_USES_SHARED)
        return tern_errorf("%s: kernel '%s' is not pure: it uses threadgroup memory", op, k->name);
    if (k->result < 0)
        return tern_errorf("%s: kernel '%s' is not a function: it has no tern_result", op, k->name);
    return NULL;
}
