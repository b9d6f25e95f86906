/* Row operations over logits: cross_entropy and sample (see src/kernels/cross_entropy.c and
 * sample.c). Targets and the sampling counter are device data; a bad target (or a NaN
 * logit when sampling) is reported at the next sync. */
#include <math.h>
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"
#include "tern/rng.h"

tern_error *gpu_cross_entropy(tern_dev *d, tern_buf losses, tern_buf logits, tern_buf targets,
                              int rows, int V, int Vp, float grad_scale) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("cross_entropy", "logits", logits.len));
    gk_spec s = {0};
    s.t[0] = gpu_t(logits);
    s.n[0] = gpu_width(&logits, 1, (size_t)Vp);
    s.n[1] = g->ce_group; /* core.c: the runtime's, or the ce_group option */
    tern_arg args[] = {tern_arg_buf(losses), tern_arg_buf(logits), tern_arg_buf(targets), gpu_fault_arg(g),
                       tern_arg_i32(V), tern_arg_i32(Vp), tern_arg_f32(grad_scale)};
    return gpu_run(g, "cross_entropy", GK_CROSS_ENTROPY, &s, tern_dims1((uint32_t)rows), tern_dims1((uint32_t)s.n[1]),
                   args, 7);
}

/* Whether greedy sampling shares each row among GK_ARGMAX_PARTS groups (argmax.c): few rows
 * (decoding's one per sequence, which would leave all but `rows` multiprocessors idle) of
 * many logits. argmax_parts=0 keeps one group a row, for measurements. */
static bool argmax_parts(const gpu_core *g, int rows, int V) {
    if (!g->tune.argmax_parts) return false;
    return rows <= GK_ARGMAX_ROWS && V >= GK_ARGMAX_MIN_V;
}

/* The parts' maxima and indices, allocated once at GK_ARGMAX_ROWS rows and never moved (a
 * captured graph holds their addresses). */
static tern_error *argmax_buffers(gpu_core *g) {
    if (!g->argmax_v.mem)
        TERN_TRY(tern_rt_alloc(g->rt, TERN_T_F32, (size_t)GK_ARGMAX_ROWS * GK_ARGMAX_PARTS, &g->argmax_v));
    if (!g->argmax_i.mem)
        TERN_TRY(tern_rt_alloc(g->rt, TERN_T_I32, (size_t)GK_ARGMAX_ROWS * GK_ARGMAX_PARTS * 2, &g->argmax_i));
    return NULL;
}

static tern_error *greedy_parts(gpu_core *g, tern_buf out, tern_buf logits, int rows, int V, int Vp) {
    TERN_TRY(tern_error_wrap(argmax_buffers(g), "sample"));
    int chunk = (V + GK_ARGMAX_PARTS - 1) / GK_ARGMAX_PARTS;
    gk_spec s = {0};
    s.t[0] = gpu_t(logits);
    s.n[0] = GK_ARGMAX_GROUP;
    tern_arg pa[] = {tern_arg_dev(g->argmax_v), tern_arg_dev(g->argmax_i), tern_arg_buf(logits), tern_arg_i32(V),
                     tern_arg_i32(Vp), tern_arg_i32(chunk)};
    TERN_TRY(gpu_run(g, "sample", GK_ARGMAX_PARTIAL, &s, tern_dims2(GK_ARGMAX_PARTS, (uint32_t)rows),
                     tern_dims1(GK_ARGMAX_GROUP), pa, 6));
    gk_spec m = {0};
    tern_arg ma[] = {tern_arg_buf(out), tern_arg_dev(g->argmax_v), tern_arg_dev(g->argmax_i), gpu_fault_arg(g),
                     tern_arg_i32(V), tern_arg_i32(GK_ARGMAX_PARTS)};
    return gpu_run(g, "sample", GK_ARGMAX_MERGE, &m, tern_dims1((uint32_t)rows), tern_dims1(32), ma, 6);
}

tern_error *gpu_sample(tern_dev *d, tern_buf out, tern_buf logits, int rows, int V, int Vp,
                       float temperature, int top_k, uint64_t seed, tern_buf counter) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_check_index("sample", "logits", logits.len));
    int k = top_k <= 0 || top_k >= V ? V : top_k;
    /* candidates below max + tail weigh less than 2^-26 of the max all together */
    float tail = temperature > 0 ? (float)((double)temperature * (log(0x1p-26) - log((double)V))) : 0.0f;
    uint32_t seed_hash = tern_hash32(tern_hash32((uint32_t)seed) ^ (uint32_t)(seed >> 32));
    int ipasses = 1;
    while (ipasses < 8 && ((uint32_t)(V - 1) >> (4 * ipasses)) != 0) ipasses++;
    gk_spec s = {0};
    s.t[0] = gpu_t(logits);
    s.n[1] = g->sample_group;
    tern_arg args[13];
    size_t n = 0;
    args[n++] = tern_arg_buf(out);
    args[n++] = tern_arg_buf(logits);
    /* no counter: a zero one, the same draws (a runtime value, not a second kernel) */
    args[n++] = tern_present(counter) ? tern_arg_buf(counter) : tern_arg_dev(g->zero_counter);
    args[n++] = gpu_fault_arg(g);
    args[n++] = tern_arg_i32(V);
    args[n++] = tern_arg_i32(Vp);
    args[n++] = tern_arg_i32(rows);
    args[n++] = tern_arg_f32(temperature);
    args[n++] = tern_arg_i32(k);
    args[n++] = tern_arg_f32(tail);
    args[n++] = tern_arg_u32(seed_hash);
    args[n++] = tern_arg_i32(ipasses);
    size_t after = n; /* the exact kernel after top-k redoes only the rows it marked -1 */
    args[n++] = tern_arg_i32(0);
    tern_dims grid = tern_dims1((uint32_t)rows), group = tern_dims1((uint32_t)g->sample_group);
    if (temperature <= 0 && argmax_parts(g, rows, V)) return greedy_parts(g, out, logits, rows, V, Vp);
    if (temperature <= 0) return gpu_run(g, "sample", GK_SAMPLE, &s, grid, group, args, n); /* greedy */
    s.n[3] = 2; /* exact */
    if (k <= GK_SAMPLE_CAP) {
        gk_spec t = s;
        t.n[3] = 1; /* top-k by threshold; rows it cannot do get -1 ... */
        TERN_TRY(gpu_run(g, "sample", GK_SAMPLE, &t, grid, group, args, n));
        args[after] = tern_arg_i32(1); /* ... and only those are redone exactly */
    }
    return gpu_run(g, "sample", GK_SAMPLE, &s, grid, group, args, n);
}
