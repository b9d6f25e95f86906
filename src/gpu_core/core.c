/* The GPU core's state: the table of built kernels, scratch memory, the fault buffer. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_core/gpu_internal.h"
#include "handlers/options.h"

struct gpu_kernel_slot {
    bool used;
    gk_family family;
    gk_spec spec;
    uint64_t hash;
    tern_kernel *kernel;
};

static uint64_t spec_hash(gk_family family, const gk_spec *spec) {
    /* FNV-1a over the family and the spec's bytes */
    uint64_t h = 1469598103934665603ull ^ (uint64_t)family;
    const unsigned char *p = (const unsigned char *)spec;
    for (size_t i = 0; i < sizeof *spec; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* "layernorm_bbbb_8_768_3": the family, a letter per buffer type, the constants. */
static void kernel_name(gk_family family, const gk_spec *spec, char *out, size_t cap) {
    static const char letters[TERN_TYPE_COUNT] = {'v', 'z', 'i', 'u', 'l', 'q', 'f', 'h', 'b', 's'};
    size_t n = (size_t)snprintf(out, cap, "%s", gk_family_name(family));
    char types[9];
    int nt = 0;
    for (int i = 0; i < 8; i++)
        if (spec->t[i] && spec->t[i] < TERN_TYPE_COUNT) types[nt++] = letters[spec->t[i]];
    types[nt] = 0;
    if (nt && n < cap) n += (size_t)snprintf(out + n, cap - n, "_%s", types);
    int last = (int)(sizeof spec->n / sizeof spec->n[0]) - 1;
    while (last >= 0 && spec->n[last] == 0) last--;
    for (int i = 0; i <= last && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "_%ld", (long)(spec->n[i] < 0 ? -spec->n[i] : spec->n[i]));
}

static tern_error *grow_table(gpu_core *g) {
    size_t cap = g->kernels_cap ? g->kernels_cap * 2 : 64;
    gpu_kernel_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return tern_errorf("out of memory for the kernel table");
    for (size_t i = 0; i < g->kernels_cap; i++) {
        if (!g->kernels[i].used) continue;
        size_t at = g->kernels[i].hash & (cap - 1);
        while (slots[at].used) at = (at + 1) & (cap - 1);
        slots[at] = g->kernels[i];
    }
    free(g->kernels);
    g->kernels = slots;
    g->kernels_cap = cap;
    return NULL;
}

tern_error *gpu_kernel(gpu_core *g, gk_family family, const gk_spec *spec, const tern_kernel **out) {
    uint64_t h = spec_hash(family, spec);
    if (g->kernels_cap) {
        size_t at = h & (g->kernels_cap - 1);
        for (; g->kernels[at].used; at = (at + 1) & (g->kernels_cap - 1)) {
            gpu_kernel_slot *s = &g->kernels[at];
            if (s->hash == h && s->family == family && !memcmp(&s->spec, spec, sizeof *spec)) {
                *out = s->kernel;
                return NULL;
            }
        }
    }
    if (2 * (g->kernels_len + 1) > g->kernels_cap) TERN_TRY(grow_table(g));
    char name[64];
    kernel_name(family, spec, name, sizeof name);
    tern_kernel *k;
    gk_spec copy = *spec;
    TERN_TRY(tern_kernel_build(name, gk_family_trace(family), &copy, &k));
    size_t at = h & (g->kernels_cap - 1);
    while (g->kernels[at].used) at = (at + 1) & (g->kernels_cap - 1);
    g->kernels[at] = (gpu_kernel_slot){.used = true, .family = family, .spec = *spec, .hash = h, .kernel = k};
    g->kernels_len++;
    *out = k;
    return NULL;
}

tern_error *gpu_launch(gpu_core *g, const char *op, const tern_kernel *k, tern_dims grid,
                       tern_dims group, const tern_arg *args, size_t count) {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return NULL; /* nothing to do */
    tern_error *err = tern_launch(g->rt, k, grid, group, args, count);
    if (err) { /* it may have been queued all the same */
        gpu_inflight_unknown(g);
        return tern_error_wrap(err, "%s", op);
    }
    gpu_inflight_note(g, k, args, count);
    g->launches++;
    return NULL;
}

tern_error *gpu_run(gpu_core *g, const char *op, gk_family family, const gk_spec *spec,
                    tern_dims grid, tern_dims group, const tern_arg *args, size_t count) {
    const tern_kernel *k;
    tern_error *err = gpu_kernel(g, family, spec, &k);
    if (err) return tern_error_wrap(err, "%s", op);
    return gpu_launch(g, op, k, grid, group, args, count);
}

/* Grows *buf (of *have elements of type t) to at least len, by half again at least. */
static tern_error *grow_scratch(gpu_core *g, tern_type t, size_t len, tern_dbuf *buf, size_t *have) {
    if (len == 0) len = 1;
    if (len > *have) {
        size_t want = *have + *have / 2;
        if (want < len) want = len;
        tern_dbuf s;
        TERN_TRY(tern_error_wrap(tern_rt_alloc(g->rt, t, want, &s), "scratch of %zu elements", want));
        tern_rt_free(g->rt, buf);
        *buf = s;
        *have = want;
        g->scratch_epoch++;
    }
    return NULL;
}

tern_error *gpu_scratch(gpu_core *g, size_t len, tern_dbuf *out) {
    TERN_TRY(grow_scratch(g, TERN_T_F32, len, &g->scratch, &g->scratch_len));
    *out = g->scratch;
    return NULL;
}

tern_error *gpu_temp(tern_dev *d, int slot, tern_dtype dtype, size_t len, tern_buf *out) {
    gpu_core *g = gpu_core_of(d);
    size_t size = tern_dtype_size(dtype);
    if (size == 0 || len > SIZE_MAX / 8) return tern_errorf("a temporary of %zu %s elements", len, tern_dtype_name(dtype));
    if (slot < 0 || slot > 1) return tern_errorf("no temporary slot %d", slot);
    TERN_TRY(grow_scratch(g, TERN_T_F32, (len * size + 3) / 4, &g->temp[slot], &g->temp_len[slot]));
    *out = (tern_buf){g->temp[slot].mem, 0, len, dtype};
    return NULL;
}

tern_error *gpu_scratch_i32(gpu_core *g, size_t len, tern_dbuf *out) {
    TERN_TRY(grow_scratch(g, TERN_T_I32, len, &g->scratch_i, &g->scratch_i_len));
    *out = g->scratch_i;
    return NULL;
}

gpu_tune gpu_tune_defaults(void) {
    return (gpu_tune){.gemv_narrow = true, .gemv_early = true, .gemv_smem = true, .gemv_groups = 512, .ac_split_min = GK_AC_SPLIT_MIN, .ac_early = true, .ac_defer = true, .ac_join = true, .lnb_rows = 16, .ln_merge = true,
                      .argmax_parts = true, .ln_fit_group = true, .replay_steps = 1};
}

const tern_option gpu_tune_keys[] = {
    {"gemv_tc", TERN_OPTION_INT, offsetof(gpu_tune, gemv_tc), 0, 32},
    {"gemv_narrow", TERN_OPTION_BOOL, offsetof(gpu_tune, gemv_narrow), 0, 1},
    {"gemv_early", TERN_OPTION_BOOL, offsetof(gpu_tune, gemv_early), 0, 1},
    {"gemv_smem", TERN_OPTION_BOOL, offsetof(gpu_tune, gemv_smem), 0, 1},
    {"gemv_ks", TERN_OPTION_INT, offsetof(gpu_tune, gemv_ks), 0, 8},
    {"gemv_groups", TERN_OPTION_INT, offsetof(gpu_tune, gemv_groups), 1, 1 << 20},
    {"ac_splits", TERN_OPTION_INT, offsetof(gpu_tune, ac_splits), 0, GK_AC_MAX_SPLITS},
    {"ac_split_min", TERN_OPTION_INT, offsetof(gpu_tune, ac_split_min), 1, 1 << 20},
    {"ac_early", TERN_OPTION_BOOL, offsetof(gpu_tune, ac_early), 0, 1},
    {"ac_defer", TERN_OPTION_BOOL, offsetof(gpu_tune, ac_defer), 0, 1},
    {"ac_join", TERN_OPTION_BOOL, offsetof(gpu_tune, ac_join), 0, 1},
    {"lnb_rows", TERN_OPTION_INT, offsetof(gpu_tune, lnb_rows), 1, 64},
    {"ln_merge", TERN_OPTION_BOOL, offsetof(gpu_tune, ln_merge), 0, 1},
    {"ce_group", TERN_OPTION_INT, offsetof(gpu_tune, ce_group), 0, 1024},
    {"argmax_parts", TERN_OPTION_BOOL, offsetof(gpu_tune, argmax_parts), 0, 1},
    {"ln_fit_group", TERN_OPTION_BOOL, offsetof(gpu_tune, ln_fit_group), 0, 1},
    {"replay_steps", TERN_OPTION_INT, offsetof(gpu_tune, replay_steps), 1, 64},
};
const size_t gpu_tune_key_count = sizeof gpu_tune_keys / sizeof gpu_tune_keys[0];

tern_error *gpu_core_init(gpu_core *g, tern_rt *rt, const gpu_hooks *hooks, const char *device_name,
                          const gpu_tune *tune) {
    static const gpu_hooks none = {0};
    memset(g, 0, sizeof *g);
    if (!rt) return tern_errorf("gpu core: the runtime is NULL");
    g->rt = rt;
    g->hooks = hooks ? hooks : &none;
    g->name = device_name ? device_name : tern_rt_device(rt);
    g->tune = tune ? *tune : gpu_tune_defaults();
    if (g->tune.gemv_ks & (g->tune.gemv_ks - 1))
        return tern_errorf("gpu core: gemv_ks = %d is not a power of two", g->tune.gemv_ks);
    if (g->tune.gemv_tc & (g->tune.gemv_tc - 1))
        return tern_errorf("gpu core: gemv_tc = %d is not a power of two", g->tune.gemv_tc);
    if (g->tune.ce_group && (g->tune.ce_group < 64 || (g->tune.ce_group & (g->tune.ce_group - 1))))
        return tern_errorf("gpu core: ce_group = %d is not a power of two from 64 to 1024", g->tune.ce_group);
    const char *name = tern_rt_name(rt);
    g->host = name && !strcmp(name, "host");
    g->cuda = name && !strcmp(name, "cuda");
    /* a wide group per row for GPUs; 256 elsewhere (the interpreter, CPU OpenCL) */
    g->sample_group = g->cuda ? 1024 : 256;
    /* cross-entropy: on CUDA, groups of 1,024 keep fewer rows in flight, so that they stay
     * in L2 between the kernel's two passes (src/kernels/cross_entropy.c) */
    g->ce_group = g->tune.ce_group ? g->tune.ce_group : g->cuda ? 1024 : GK_CE_GROUP;
    int32_t zero[GK_FAULT_LEN] = {0};
    tern_error *err = tern_rt_alloc(rt, TERN_T_I32, GK_FAULT_LEN, &g->fault);
    if (!err) err = tern_rt_upload(rt, g->fault, zero);
    if (err) {
        gpu_core_free(g);
        return tern_error_wrap(err, "gpu core: the fault buffer");
    }
    err = tern_rt_alloc(rt, TERN_T_I32, 1, &g->zero_counter);
    if (!err) err = tern_rt_upload(rt, g->zero_counter, zero);
    if (err) {
        gpu_core_free(g);
        return tern_error_wrap(err, "gpu core: the sampling counter's zero");
    }
    return NULL;
}

void gpu_core_free(gpu_core *g) {
    if (!g) return;
    for (size_t i = 0; i < g->kernels_cap; i++)
        if (g->kernels[i].used) tern_kernel_free(g->kernels[i].kernel);
    free(g->kernels);
    if (g->rt) {
        tern_rt_free(g->rt, &g->fault);
        tern_rt_free(g->rt, &g->zero_counter);
        tern_rt_free(g->rt, &g->scratch);
        tern_rt_free(g->rt, &g->scratch_i);
        tern_rt_free(g->rt, &g->temp[0]);
        tern_rt_free(g->rt, &g->temp[1]);
        tern_rt_free(g->rt, &g->att_partial);
        tern_rt_free(g->rt, &g->att_count);
        tern_rt_free(g->rt, &g->argmax_v);
        tern_rt_free(g->rt, &g->argmax_i);
    }
    free(g->allocs);
    memset(g, 0, sizeof *g);
}

/* The message for a recorded fault. */
static tern_error *fault_error(const int32_t f[GK_FAULT_LEN]) {
    switch (f[0]) {
    case GK_FAULT_EMBED_TOKEN:
        return tern_errorf("embed: tokens[%d] = %d is out of range [0, %d)", f[1], f[2], f[3]);
    case GK_FAULT_EMBED_POS:
        return tern_errorf("embed: positions %d .. %d are out of range of wpe's %d rows", f[2], f[2] + f[1] - 1, f[3]);
    case GK_FAULT_EMBED_BACKWARD_TOKEN:
        return tern_errorf("embed_backward: tokens[%d] = %d is out of range [0, %d)", f[1], f[2], f[3]);
    case GK_FAULT_CE_TARGET:
        return tern_errorf("cross_entropy: targets[%d] = %d is out of range [0, %d)", f[1], f[2], f[3]);
    case GK_FAULT_CACHED_POS:
        return tern_errorf("attention_cached: positions %d .. %d are out of range of the cache's %d", f[2],
                           f[2] + f[1] - 1, f[3]);
    case GK_FAULT_SAMPLE_NAN:
        return tern_errorf("sample: logits row %d has NaN at column %d", f[1], f[2]);
    default: return tern_errorf("a GPU kernel recorded unknown fault %d", f[0]);
    }
}

tern_error *gpu_check_faults(gpu_core *g) {
    int32_t f[GK_FAULT_LEN];
    TERN_TRY(tern_rt_download(g->rt, f, g->fault));
    if (f[0] == 0) return NULL;
    int32_t zero[GK_FAULT_LEN] = {0};
    tern_error *reset = tern_rt_upload(g->rt, g->fault, zero);
    if (reset) return reset;
    return fault_error(f);
}

tern_error *gpu_sync(tern_dev *d) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(tern_error_wrap(tern_rt_sync(g->rt), "sync"));
    gpu_inflight_barrier(g);
    return gpu_check_faults(g);
}
