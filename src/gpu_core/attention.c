/* attention, attention_backward and attention_cached (see src/kernels/attention.c and
 * attention_cached.c). `saved` is this core's own record: f32 [B, NH, T], each query
 * row's logsumexp, whose length the bodies check (tern_check_saved); the entry has checked
 * the rest. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"

/* B, T, NH, KV, hs positive, KV dividing NH, and the element counts: btc = B T NH hs (out),
 * saved = B NH T. qkv holds B T (NH + 2 KV) hs. */
static tern_error *shape(const char *op, int B, int T, int NH, int KV, int hs, size_t *btc, size_t *saved) {
    TERN_TRY(tern_check_positive(op, "B", B));
    TERN_TRY(tern_check_positive(op, "T", T));
    TERN_TRY(tern_check_positive(op, "NH", NH));
    TERN_TRY(tern_check_positive(op, "KV", KV));
    TERN_TRY(tern_check_positive(op, "hs", hs));
    if (NH % KV != 0) return tern_errorf("%s: KV = %d key/value heads do not divide NH = %d", op, KV, NH);
    size_t bt, width = (size_t)(NH + 2 * (size_t)KV) * (size_t)hs, all;
    if (!tern_mul_size((size_t)B, (size_t)T, &bt) || !tern_mul_size(bt, (size_t)NH * (size_t)hs, btc) ||
        !tern_mul_size(bt, (size_t)NH, saved) || !tern_mul_size(bt, width, &all) || (size_t)NH * (size_t)hs > INT32_MAX)
        return tern_errorf("%s: B * T * (NH + 2 KV) hs overflows", op);
    TERN_TRY(gpu_check_index(op, "qkv", all));
    if (hs > GK_ATT_MAX_HS)
        return tern_errorf("%s: the head size %d exceeds the GPU kernels' limit of %d", op, hs, GK_ATT_MAX_HS);
    if ((size_t)B * (size_t)NH > 65535)
        return tern_errorf("%s: B * NH = %zu exceeds the GPU grid's limit of 65535", op, (size_t)B * (size_t)NH);
    return NULL;
}

tern_error *gpu_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *out) {
    const char *op = "attention_saved_len";
    size_t bt;
    if (!tern_mul_size((size_t)B, (size_t)T, &bt) || !tern_mul_size(bt, (size_t)NH, out))
        return tern_errorf("%s: B * NH * T overflows", op);
    return NULL;
}

static float head_scale(int hs) { return 1.0f / sqrtf((float)hs); }

tern_error *gpu_attention_dsl(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH,
                                  int KV, int hs) {
    gpu_core *g = gpu_core_of(d);
    const char *op = "attention";
    size_t n = 0, ns = 0;
    TERN_TRY(shape(op, B, T, NH, KV, hs, &n, &ns));
    TERN_TRY(tern_check_saved(op, saved, ns));
    int C = NH * hs;
    tern_buf all[2] = {out, qkv};
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(qkv);
    s.n[0] = hs;
    s.n[1] = gpu_width(all, 2, (size_t)hs);
    s.n[3] = KV == NH ? 0 : NH / KV; /* 0: GPT-2's kernels, as they always were */
    tern_arg args[] = {tern_arg_buf(out), tern_arg_buf(saved), tern_arg_buf(qkv), tern_arg_i32(T),
                       tern_arg_i32(C), tern_arg_i32(NH), tern_arg_f32(head_scale(hs))};
    return gpu_run(g, op, GK_ATTENTION, &s, tern_dims2(gpu_groups((size_t)T, GK_ATT_BR), (uint32_t)(B * NH)),
                   tern_dims1((uint32_t)(GK_ATT_BR * gk_att_split(hs, 0))), args, 7);
}

tern_error *gpu_attention_backward_dsl(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                           tern_buf saved, int B, int T, int NH, int KV, int hs) {
    gpu_core *g = gpu_core_of(d);
    const char *op = "attention_backward";
    size_t n = 0, ns = 0;
    TERN_TRY(shape(op, B, T, NH, KV, hs, &n, &ns));
    TERN_TRY(tern_check_saved(op, saved, ns));
    int C = NH * hs;
    size_t bt = (size_t)B * (size_t)T;
    tern_dbuf delta;
    TERN_TRY(tern_error_wrap(gpu_scratch(g, ns, &delta), "%s", op));
    tern_arg delta_arg = gpu_scratch_arg(delta, 0, ns);
    float scale = head_scale(hs);

    tern_buf all[3] = {dqkv, qkv, dout};
    gk_spec s = {0};
    s.t[0] = gpu_t(dqkv);
    s.t[1] = gpu_t(qkv);
    s.t[2] = gpu_t(dout);
    s.n[0] = hs;
    s.n[1] = gpu_width(all, 3, (size_t)hs);
    s.n[3] = KV == NH ? 0 : NH / KV;
    tern_arg args[] = {tern_arg_buf(dqkv), tern_arg_buf(qkv), tern_arg_buf(dout), tern_arg_buf(saved), delta_arg,
                       tern_arg_i32(T), tern_arg_i32(C), tern_arg_i32(NH), tern_arg_f32(scale)};
    tern_dims grid = tern_dims2(gpu_groups((size_t)T, GK_ATT_BR), (uint32_t)(B * NH));
    /* dk, dv: one key row per (b, key/value head), the group's query heads in its loop */
    tern_dims kv_grid = tern_dims2(gpu_groups((size_t)T, GK_ATT_BR), (uint32_t)(B * KV));
    /* delta_i = dO_i . O_i: from out when its rounding stays below the result's (out f32,
     * or a bf16 gradient); else recomputed exactly from q, k, v and dO (one more pass) */
    if (out.dtype == TERN_F32 || dqkv.dtype != TERN_F32) {
        tern_buf rows[2] = {dout, out};
        gk_spec sd = {0};
        sd.t[0] = gpu_t(dout);
        sd.t[1] = gpu_t(out);
        sd.n[0] = hs;
        sd.n[1] = gpu_width(rows, 2, (size_t)hs);
        tern_arg da[] = {delta_arg, tern_arg_buf(dout), tern_arg_buf(out), tern_arg_i32((int32_t)bt), tern_arg_i32(T),
                         tern_arg_i32(C), tern_arg_i32(NH)};
        TERN_TRY(gpu_run(g, op, GK_ATTENTION_DELTA, &sd, tern_dims1(gpu_groups(bt * (size_t)NH, GK_EW_GROUP)),
                         tern_dims1(GK_EW_GROUP), da, 7));
    } else {
        gk_spec sx = s;
        sx.n[2] = 1;
        TERN_TRY(gpu_run(g, op, GK_ATTENTION_DQ, &sx, grid, tern_dims1((uint32_t)(GK_ATT_BR * gk_att_split(hs, 0))),
                         args, 9));
    }
    TERN_TRY(gpu_run(g, op, GK_ATTENTION_DKDV, &s, kv_grid,
                     tern_dims1((uint32_t)(GK_ATT_BR * gk_att_split(hs, 1))), args, 9));
    return gpu_run(g, op, GK_ATTENTION_DQ, &s, grid, tern_dims1((uint32_t)(GK_ATT_BR * gk_att_split(hs, 0))), args,
                   9);
}

/* How many ways attention_cached splits each row's positions: one group per row fills a GPU
 * when there are many rows (prefill); decoding one token has B NH rows (12 for GPT-2 124M),
 * so there each row's positions are split into up to GK_AC_MAX_SPLITS parts, each a group:
 * while the split partials fit the core's GK_AC_SPLIT_ROWS, and no more parts than max_T has
 * runs of ac_split_min positions (GK_AC_SPLIT_MIN, 256: GPT-2 124M at max_T 1024 gets 4
 * parts, 48 groups; 32 positions, 16 parts, was slower: bench/h200/NOTES.md run 85). The
 * choice depends only on the shape, never on the position, so a captured graph replays it
 * at every position (the kernel shares the row's current length among the parts). Head
 * sizes whose split kernel would hold more than GK_AC_PART_MAX values of a row per thread
 * (hs / gk_ac_parts, for hs with few factors of two) are not split.
 * The ac_splits option lowers the most parts to n (1: no split), for measurements; tests
 * lower ac_split_min to split short caches too. */
static int cached_splits(const gpu_core *g, size_t rows, int max_T, int hs, int W) {
    size_t s = GK_AC_MAX_SPLITS;
    int want = g->tune.ac_splits;
    if (want >= 1 && (size_t)want < s) s = (size_t)want;
    if (s > GK_AC_SPLIT_ROWS / rows) s = GK_AC_SPLIT_ROWS / rows;
    size_t min = (size_t)g->tune.ac_split_min;
    size_t by_len = ((size_t)max_T + min - 1) / min;
    if (s > by_len) s = by_len;
    if (hs / gk_ac_parts(hs, W) > GK_AC_PART_MAX) s = 1;
    return s > 1 ? (int)s : 1;
}

/* The split partials' buffer (GK_AC_SPLIT_ROWS rows of hs + 2 floats) and the rows' split
 * counters (zeroed here; each launch's last split of a row sets its counter back to zero),
 * allocated once at their full sizes and never moved: a captured graph keeps their addresses. */
static tern_error *split_buffers(gpu_core *g) {
    if (g->att_partial.mem && g->att_count.mem) return NULL;
    if (!g->att_partial.mem)
        TERN_TRY(tern_rt_alloc(g->rt, TERN_T_F32, (size_t)GK_AC_SPLIT_ROWS * (GK_ATT_MAX_HS + 2), &g->att_partial));
    static const int32_t zeros[GK_AC_SPLIT_ROWS];
    TERN_TRY(tern_rt_alloc(g->rt, TERN_T_I32, GK_AC_SPLIT_ROWS, &g->att_count));
    tern_error *err = tern_rt_upload(g->rt, g->att_count, zeros);
    if (err) tern_rt_free(g->rt, &g->att_count);
    return err;
}

/* The most S NH hs (f32 reads of the parts for each row of A, in every group of the GEMV
 * that merges them) for which a decoding step's attention leaves its parts to the GEMV. */
#define GPU_AC_DEFER_READS 4096

tern_error *gpu_attention_cached(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                     tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T) {
    return gpu_attention_cached_run(gpu_core_of(d), out, k_cache, v_cache, qkv, pos, B, T, NH, KV, hs, max_T, NULL);
}

tern_error *gpu_attention_cached_run(gpu_core *g, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                     tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T, int *left) {
    const char *op = "attention_cached";
    if (left) *left = 0;
    TERN_TRY(gpu_check_index(op, "k_cache", k_cache.len));
    TERN_TRY(gpu_check_index(op, "qkv", qkv.len));
    TERN_TRY(tern_check_positive(op, "KV", KV));
    TERN_TRY(tern_check_positive(op, "hs", hs));
    if (NH % KV != 0) return tern_errorf("%s: KV = %d key/value heads do not divide NH = %d", op, KV, NH);
    if ((size_t)NH * (size_t)hs > INT32_MAX) return tern_errorf("%s: NH * hs overflows", op);
    int C = NH * hs;
    if (hs > GK_ATT_MAX_HS)
        return tern_errorf("%s: the head size %d exceeds the GPU kernels' limit of %d", op, hs, GK_ATT_MAX_HS);
    tern_buf all[3] = {k_cache, v_cache, qkv}; /* out is written one value at a time */
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(k_cache);
    s.t[2] = gpu_t(v_cache);
    s.t[3] = gpu_t(qkv);
    s.n[0] = hs;
    s.n[1] = gpu_width(all, 3, (size_t)hs);
    s.n[6] = KV == NH ? 0 : NH / KV; /* 0: GPT-2's kernels, as they always were */
    size_t rows = (size_t)B * (size_t)NH * (size_t)T;
    int splits = cached_splits(g, rows, max_T, hs, s.n[1]);
    tern_arg dst = tern_arg_buf(out);
    uint32_t threads = GK_AC_GROUP;
    if (splits > 1) {
        TERN_TRY(tern_error_wrap(split_buffers(g), "%s", op));
        dst = tern_arg_dev(g->att_partial);
        /* a group fitted to a split's positions, at most ceil(max_T / S) (from the shape
         * only: a graph replays it at every position), parts threads each, in whole SIMD
         * groups; fewer SIMD groups, less to merge. GPT-2 124M decoding: 256 positions, 2
         * parts (hs 64), 256 threads (the most), 128 positions a pass. */
        int parts = gk_ac_parts(hs, s.n[1]);
        size_t share = ((size_t)max_T + (size_t)splits - 1) / (size_t)splits;
        size_t group = (share * (size_t)parts + 31) / 32 * 32;
        threads = group < GK_AC_SPLIT_GROUP ? (uint32_t)group : GK_AC_SPLIT_GROUP;
        s.n[2] = splits;
        s.n[3] = (int32_t)threads;
        s.n[4] = parts;
        s.n[5] = T == 1; /* decoding: the one new position is each group's own row */
        /* decoding's first pass of cached keys and values (positions < p0, which this
         * launch does not write) loaded before the kernel's wait, where no kernel in flight
         * writes pos or this view of the caches (a model's caches are views of one pool, one
         * a layer, written only by their own layer's attention) */
        s.n[7] = T == 1 && g->tune.ac_early && gpu_inflight_clear(g, pos) && gpu_inflight_clear(g, k_cache) &&
                 gpu_inflight_clear(g, v_cache);
        /* decoding for a caller that merges the parts itself (matmul's ATTENTION prologue on
         * the GEMV kernels): the kernel leaves them in the partial buffer, where every group of
         * the GEMV then reads S values for each of A's NH hs: only while S NH hs is at most
         * GPU_AC_DEFER_READS (bench/h200/NOTES.md run 97: GPT-2 124M, S NH hs = 3,072, 3.7%
         * faster a token; Llama-3.2-1B, 16,384, 2.4% slower) */
        s.n[8] = T == 1 && left && g->tune.ac_defer && (size_t)splits * (size_t)C <= GPU_AC_DEFER_READS;
        if (s.n[8]) *left = splits;
    }
    /* split: the partials, then out and the counters (the row's last split merges) */
    tern_arg args[] = {dst, tern_arg_buf(k_cache), tern_arg_buf(v_cache), tern_arg_buf(qkv), tern_arg_buf(pos),
                       gpu_fault_arg(g), tern_arg_i32(T), tern_arg_i32(C), tern_arg_i32(NH), tern_arg_i32(max_T),
                       tern_arg_f32(head_scale(hs)), tern_arg_buf(out), tern_arg_dev(g->att_count)};
    /* split: grid (T S, NH, B) (rows <= GK_AC_SPLIT_ROWS / 2, so NH and B are small) */
    tern_dims grid = splits > 1 ? tern_dims3((uint32_t)(T * splits), (uint32_t)NH, (uint32_t)B)
                                : tern_dims1((uint32_t)rows);
    return gpu_run(g, op, GK_ATTENTION_CACHED, &s, grid, tern_dims1(threads), args, splits > 1 ? 13 : 11);
}

/* The joined kernel's group: 8 SIMD groups, one a word of the product (qkv_join.h). */
#define GPU_JOIN_GROUP 256

/* Whether at's product is one the joined kernel computes: GPT-2's q|k|v product of one row
 * (layernorm of x, 16-bit weights B [C, 3C] dense in 16-byte words, alpha 1, no epilogue),
 * KV = NH heads of hs <= 64 in slices of GK_JOIN_SLICE (J = hs / 16 groups a head), C a
 * multiple of the 32 k-lanes and few enough elements a thread for a resident layer norm. */
static int join_slices(const gpu_core *g, const tern_matmul_attention *at) {
    const tern_matmul *pm = at->product;
    int hs = at->hs, C = at->NH * hs;
    /* CUDA, where it saves a launch's latency, and the host interpreter, which checks it;
     * not OpenCL: under PoCL 5 the joined kernel's split groups wrote wrong maxima and sums
     * (their q, k and v right), and OpenCL launches nothing early for the join to save */
    if (!(g->cuda || g->host)) return 0;
    if (!g->tune.ac_join || !g->tune.ac_defer || at->B != 1 || at->T != 1 || at->KV != at->NH) return 0;
    if (hs > 64 || hs % GK_JOIN_SLICE != 0 || C % (GPU_JOIN_GROUP / GK_JOIN_WORDS) != 0 ||
        C > GPU_JOIN_GROUP * GK_GEMV_NORM_PER_THREAD)
        return 0;
    if (pm->prologue != TERN_PROLOGUE_LAYERNORM || pm->epilogue != TERN_EPILOGUE_NONE || pm->trans_b ||
        pm->alpha != 1.0f || pm->beta != 0.0f || pm->batch > 1 || (pm->ldb && pm->ldb != 3 * C) ||
        (pm->lda && pm->lda != C) || !tern_present(pm->norm.b) || pm->norm.b.dtype != pm->norm.w.dtype ||
        tern_matmul_composite(at->qkv, pm) || tern_present(pm->bias_grad))
        return 0;
    if (tern_dtype_size(at->w.dtype) != 2 || gpu_width(&at->w, 1, (size_t)3 * C) != 8) return 0;
    return hs / GK_JOIN_SLICE;
}

tern_error *gpu_attention_joined_run(gpu_core *g, tern_buf out, const tern_matmul_attention *at, int *left,
                                     int *joined) {
    const char *op = "attention_cached";
    *left = 0, *joined = 0;
    int J = join_slices(g, at);
    if (!J) return NULL;
    int NH = at->NH, hs = at->hs, C = NH * hs;
    tern_buf all[3] = {at->k_cache, at->v_cache, at->qkv};
    int width = gpu_width(all, 3, (size_t)hs);
    int splits = cached_splits(g, (size_t)NH, at->max_T, hs, width);
    /* every group of the GEMV reads the S parts and the new part of each of A's NH hs */
    size_t reads = (size_t)splits * (size_t)C + (size_t)NH * (size_t)(J + hs);
    size_t room = (size_t)GK_AC_SPLIT_ROWS * (GK_ATT_MAX_HS + 2);
    if (splits < 2 || reads > GPU_AC_DEFER_READS || GK_AC_NEW_AT(hs) + (size_t)NH * (J + hs) > room) return NULL;
    TERN_TRY(gpu_check_index(op, "k_cache", at->k_cache.len));
    TERN_TRY(gpu_check_index(op, "qkv", at->qkv.len));
    TERN_TRY(gpu_check_index(op, "w", at->w.len));
    TERN_TRY(tern_error_wrap(split_buffers(g), "%s", op));
    const tern_matmul *pm = at->product;
    bool has_bias = tern_present(pm->bias);
    gk_spec s = {0};
    s.t[0] = gpu_t(out);
    s.t[1] = gpu_t(at->k_cache);
    s.t[2] = gpu_t(at->v_cache);
    s.t[3] = gpu_t(at->qkv);
    s.t[4] = gpu_t(at->x);
    s.t[5] = gpu_t(at->w);
    s.t[6] = has_bias ? gpu_t(pm->bias) : 0;
    s.t[7] = gpu_t(pm->norm.w);
    s.n[0] = hs;
    s.n[1] = width;
    s.n[2] = splits;
    s.n[3] = GPU_JOIN_GROUP;
    s.n[4] = gk_ac_parts(hs, width);
    s.n[5] = 1;
    s.n[7] = g->tune.ac_early && gpu_inflight_clear(g, at->pos) && gpu_inflight_clear(g, at->k_cache) &&
             gpu_inflight_clear(g, at->v_cache);
    s.n[8] = 1;
    s.n[9] = J;
    /* the weights before the wait where nothing in flight writes them (decoding's) */
    bool early = g->tune.gemv_early && gpu_inflight_clear(g, at->w) && gpu_inflight_clear(g, pm->norm.w) &&
                 gpu_inflight_clear(g, pm->norm.b) && (!has_bias || gpu_inflight_clear(g, pm->bias));
    s.n[10] = (has_bias ? GK_JOIN_BIAS : 0) | (early ? GK_JOIN_EARLY : 0);
    s.n[11] = C;
    tern_arg args[19] = {tern_arg_dev(g->att_partial), tern_arg_buf(at->k_cache), tern_arg_buf(at->v_cache),
                         tern_arg_buf(at->qkv), tern_arg_buf(at->pos), gpu_fault_arg(g), tern_arg_i32(1),
                         tern_arg_i32(C), tern_arg_i32(NH), tern_arg_i32(at->max_T), tern_arg_f32(head_scale(hs)),
                         tern_arg_buf(out), tern_arg_dev(g->att_count), tern_arg_buf(at->x), tern_arg_buf(at->w)};
    size_t n = 15;
    if (has_bias) args[n++] = tern_arg_buf(pm->bias);
    args[n++] = tern_arg_buf(pm->norm.w);
    args[n++] = tern_arg_buf(pm->norm.b);
    args[n++] = tern_arg_f32(pm->norm.eps);
    TERN_TRY(gpu_run(g, op, GK_ATTENTION_CACHED, &s, tern_dims3((uint32_t)(splits + J), (uint32_t)NH, 1),
                     tern_dims1(GPU_JOIN_GROUP), args, n));
    *left = splits, *joined = J;
    return NULL;
}
