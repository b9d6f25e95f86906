/* A kernel's description: name, parameters, result, sizes, hash. */
#include "dsl/ir.h"

const char *tern_kernel_name(const tern_kernel *k) { return k ? k->name : ""; }

int tern_kernel_param_count(const tern_kernel *k) { return k ? k->nparams : 0; }

tern_param_info tern_kernel_param(const tern_kernel *k, int index) {
    tern_param_info info = {"", false, TERN_T_VOID, TERN_READ};
    if (!k || index < 0 || index >= k->nparams) return info;
    const ir_param *p = &k->params[index];
    info.name = ir_string(k, p->name);
    info.is_buffer = p->is_buf;
    info.type = (tern_type)p->type;
    info.intent = (tern_intent)p->intent;
    return info;
}

bool tern_kernel_is_function(const tern_kernel *k) { return k && k->result >= 0; }

tern_type tern_kernel_result_type(const tern_kernel *k) {
    return k && k->result >= 0 ? (tern_type)k->vals[k->result].type : TERN_T_VOID;
}

size_t tern_kernel_shared_bytes(const tern_kernel *k) { return k ? k->shared_bytes : 0; }

uint64_t tern_kernel_hash(const tern_kernel *k) { return k ? k->hash : 0; }

const char *tern_target_name(tern_target t) {
    switch (t) {
    case TERN_TARGET_CUDA: return "cuda";
    case TERN_TARGET_OPENCL: return "opencl";
    case TERN_TARGET_METAL: return "metal";
    }
    return "unknown target";
}
