/* Kernel hashing: FNV-1a over the kernel's meaning (statements, types, names, constants;
 * not source locations), finished with a 64-bit avalanche. */
#include "dsl/hash.h"

#include <string.h>

#include "dsl/ir.h"

uint64_t hash_bytes(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t hash_str(uint64_t h, const char *s) { return hash_bytes(h, s ? s : "", strlen(s ? s : "") + 1); }

uint64_t hash_u64(uint64_t h, uint64_t x) { return hash_bytes(h, &x, sizeof x); }

uint64_t hash_finish(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

uint64_t ir_hash_kernel(const tern_kernel *k) {
    uint64_t h = hash_u64(hash_str(HASH_SEED, k->name), (uint64_t)k->max_threads);
    if (k->min_groups) h = hash_u64(h, (uint64_t)k->min_groups);
    for (int32_t i = 0; i < k->nins; i++) {
        const ir_ins *in = &k->ins[i];
        unsigned char head[3] = {in->op, in->type, in->aux};
        h = hash_bytes(h, head, sizeof head);
        h = hash_u64(h, (uint64_t)(int64_t)in->dst);
        for (int j = 0; j < 4; j++) h = hash_u64(h, (uint64_t)(int64_t)in->a[j]);
        if (in->op == IR_PRINT)
            h = hash_str(h, ir_string(k, (int32_t)in->imm));
        else
            h = hash_u64(h, (uint64_t)in->imm);
    }
    for (int32_t i = 0; i < k->nvals; i++) {
        h = hash_u64(h, k->vals[i].type);
        h = hash_str(h, ir_string(k, k->vals[i].name));
    }
    for (int32_t i = 0; i < k->nvars; i++) {
        h = hash_u64(h, k->vars[i].type);
        h = hash_str(h, ir_string(k, k->vars[i].name));
    }
    for (int32_t i = 0; i < k->nbufs; i++) {
        const ir_buf *b = &k->bufs[i];
        /* a tiles array's alignment changes what is emitted; other arrays hash as before */
        h = hash_u64(h, (uint64_t)b->elem | (uint64_t)b->intent << 8 | (uint64_t)b->shared << 16 |
                            (uint64_t)((b->used & IR_BUF_TILES) != 0) << 24);
        h = hash_u64(h, b->count);
        h = hash_str(h, ir_string(k, b->name));
    }
    for (int32_t i = 0; i < k->nparams; i++) h = hash_str(h, ir_string(k, k->params[i].name));
    for (int32_t i = 0; i < k->nextra; i++) h = hash_u64(h, (uint64_t)(int64_t)k->extra[i]);
    return hash_finish(h);
}
