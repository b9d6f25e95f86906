/* The GPU kernel library: GPT-2's kernels written once in the tracing DSL (tern/kernel.h),
 * shared by every GPU handler through src/gpu_core/.
 *
 * Each kernel family is one trace function specialised at trace time by a gk_spec: the
 * element type of each buffer (f32 or bf16 for activations) and a few shape constants
 * where they pay (the vector width; C for layernorm, so loops unroll; hs for attention).
 * A spec is plain data compared bytewise, so a cache keyed by (family, spec) builds each
 * variant once. The launch geometry each family expects is documented next to it below;
 * src/gpu_core/ launches accordingly.
 *
 * Index buffers (tokens, targets, positions) live on the device; kernels that read them
 * check their range and, on a bad value, skip the work and record the first fault in a
 * small i32 buffer (gk_fault_*), which the core reports at the next synchronisation. */
#ifndef TERN_KERNELS_H
#define TERN_KERNELS_H

#include <stdint.h>

#include "tern/kernel.h"

typedef enum gk_family {
    GK_FILL,               /* dst[i] = value */
    GK_COPY,               /* dst[i] = convert(src[i]) */
    GK_ADD,                /* out = a + b */
    GK_GELU,               /* out = gelu(x) */
    GK_GELU_BACKWARD,      /* dx = dout * gelu'(x) */
    GK_ADAMW,              /* one AdamW step */
    GK_SUM_ROWS_PARTIAL,   /* partial[chunk, c] = sum of x over a chunk of rows */
    GK_SUM_SQUARES,        /* partial[group] = sum of x^2 over the group's span */
    GK_LAYERNORM,
    GK_LAYERNORM_BACKWARD, /* dx, and per-SIMD-group partial dw, db */
    GK_PARTIAL_ADD,        /* acc = beta acc + sum over p of partial[p, :] (sum_rows, dw, db) */
    GK_EMBED,
    GK_EMBED_SORT,         /* ranks of rows in (token, row) order, counted in parts */
    GK_EMBED_SORT_SCATTER, /* perm: rows ordered by (token, row), from the parts' ranks */
    GK_EMBED_BACKWARD_WTE, /* dwte rows, one leader per distinct token */
    GK_EMBED_BACKWARD_WPE,
    GK_ATTENTION,          /* flash-style forward; saves logsumexp per (b, h, t) */
    GK_ATTENTION_DELTA,    /* delta[b, h, t] = dout . out (backward's row term) */
    GK_ATTENTION_DKDV,     /* dk, dv: one thread per key row */
    GK_ATTENTION_DQ,       /* dq: one thread per query row */
    GK_ATTENTION_CACHED,   /* KV-cache store + attention of the new rows (or of a split) */
    GK_CROSS_ENTROPY,
    GK_SAMPLE,
    GK_ARGMAX_PARTIAL,     /* greedy sampling over many groups a row: each part's argmax */
    GK_ARGMAX_MERGE,       /* ... and the row's, from its parts */
    GK_MATMUL,             /* tiled C = alpha op(A) op(B) + beta C + bias, GELU epilogue */
    GK_EPILOGUE,           /* bias, aux, GELU (and conversion) after a library GEMM */
    GK_GEMV,               /* small-m C = alpha A B + beta C + bias, B [k, n] */
    GK_GEMV_T,             /* the same with B [n, k] (trans_b) */
    /* the Llama family (not yet in the op list: see tests/llama) */
    GK_RMSNORM,            /* out = x rrms w; saves rrms per row */
    GK_RMSNORM_BACKWARD,   /* dx, and per-SIMD-group partial dw */
    GK_ROPE,               /* rotate-half rotary embedding (n[2]: backward, by -angle) */
    GK_SWIGLU,             /* out = silu(gate) up */
    GK_SWIGLU_BACKWARD,    /* dgate, dup */
    GK_FAMILY_COUNT
} gk_family;

/* Trace-time specialisation. t[i]: the tern_type of buffer i in the family's order;
 * n[i]: family-defined constants. Zero-initialise before filling (compared bytewise). */
typedef struct gk_spec {
    uint8_t t[8];
    int32_t n[16];
} gk_spec;

/* A family's name (a C identifier) and trace function (user = const gk_spec *). */
const char *gk_family_name(gk_family f);
tern_trace_fn gk_family_trace(gk_family f);

/* ---- faults recorded by kernels (the fault buffer: i32 [GK_FAULT_LEN]) ----
 * [0] code (0: none), [1] the position, [2] the bad value, [3] the limit. The first
 * faulting thread wins (compare-and-swap on [0]). */
#define GK_FAULT_LEN 4
enum {
    GK_FAULT_NONE = 0,
    GK_FAULT_EMBED_TOKEN,    /* tokens[pos] = value not in [0, limit) */
    GK_FAULT_EMBED_POS,      /* positions value .. value + pos - 1 exceed wpe's limit rows */
    GK_FAULT_EMBED_BACKWARD_TOKEN,
    GK_FAULT_CE_TARGET,      /* targets[pos] = value not in [0, limit) */
    GK_FAULT_CACHED_POS,     /* positions value .. value + pos - 1 exceed the cache's limit */
    GK_FAULT_SAMPLE_NAN,     /* logits row pos has NaN at column value */
};

/* ---- launch geometry, per family ----
 * Elementwise families (FILL, COPY, ADD, GELU, GELU_BACKWARD, ADAMW): one thread per W
 * elements (n[0] = W), groups of GK_EW_GROUP, grid ceil(ceil(n / W) / GK_EW_GROUP). */
#define GK_EW_GROUP 256

/* SUM_ROWS_PARTIAL: grid (ceil(cols / GK_SR_GROUP), chunks), chunks of at least
 * GK_SR_ROWS rows (at most GK_SR_MAX_CHUNKS chunks). PARTIAL_ADD: groups of GK_PA_GROUP
 * threads, one per 32 columns. */
#define GK_PA_GROUP 1024
#define GK_SR_GROUP 256
#define GK_SR_ROWS 64
#define GK_SR_MAX_CHUNKS 1024

/* SUM_SQUARES: groups of GK_SS_GROUP threads, each group a contiguous span. */
#define GK_SS_GROUP 256
#define GK_SS_MAX_GROUPS 1024

/* LAYERNORM: one SIMD group per row, GK_LN_ROWS rows per group of 32 * GK_LN_ROWS (fewer
 * rows: one group of 32 * rows).
 * LAYERNORM_BACKWARD: the same groups, a team of R SIMD groups per row (gk_lnb_team); team s
 * of the grid takes rows s, s + S, ... and writes its partial dw, db (and dsum) to
 * partial[s, P, C]; or, when gk_lnb_group_partials, the group's teams add theirs first
 * (through threadgroup memory, in a fixed tree) and group g writes partial[g, P, C]. */
#define GK_LN_ROWS 8
/* n[1] = C when the row fits in registers (C % 32 == 0, C / 32 <= GK_LN_MAX_PER_LANE):
 * the unrolled path; 0: C is a runtime scalar (generic path). */
#define GK_LN_MAX_PER_LANE 64
/* LAYERNORM_BACKWARD's register path holds seven or eight values a column a lane (w, [b],
 * the row's dout, xhat and dx, the dw, db, dsum sums): past GK_LNB_LANE_MAX columns a lane
 * the registers spill (ptxas, sm_90: 32 a lane spill with out; GPT-2 1.5B's 50 took 255
 * registers and spilled), so R SIMD groups share a row instead: the fewest of 1, 2, 4 that
 * bring a lane's share to at most GK_LNB_LANE_MAX (or, when C does not split so, the most
 * that divide it evenly). */
#define GK_LNB_LANE_MAX 24
/* LAYERNORM_BACKWARD's spec n[3]: what x holds and what else is written. FROM_OUTPUT: x is
 * the forward's output y = xhat w + b, and xhat = (y - b) / w, w's magnitude taken as at
 * least GK_LN_W_MIN (a weight that small has lost its xhat: the clamp only keeps the result
 * finite). */
enum { GK_LNB_FROM_INPUT = 0, GK_LNB_WRITE_OUT = 1, GK_LNB_FROM_OUTPUT = 2 };
#define GK_LN_W_MIN 1e-6f
static inline int gk_lnb_team(int C) {
    int R = 1;
    while (R < 4 && C / (32 * R) > GK_LNB_LANE_MAX && C % (64 * R) == 0) R *= 2;
    return R;
}
/* Whether LAYERNORM_BACKWARD's register path (C = Cc) with P partial rows and teams of R
 * SIMD groups adds its teams' partial sums within each group: when the tree's
 * GK_LN_ROWS / R / 2 slots of P Cc floats fit in 48 KB of threadgroup memory beside the Cc
 * floats of 1 / w (GK_LNB_FROM_OUTPUT's). */
static inline bool gk_lnb_group_partials(int Cc, int P, int R) {
    return Cc > 0 && ((long)(GK_LN_ROWS / R / 2) * P + 1) * Cc * 4 <= 48 * 1024;
}
/* The forward's register path also loads w and b with x, before the statistics, when a
 * lane's share of the row is at most this many values (C <= 1024): 3 x 32 registers; and
 * only for at most GK_LN_EARLY_ROWS rows (spec n[2] bit 2), about one wave of an H200's
 * SIMD groups, where each row's latency is the kernel's time. With more rows the registers
 * cost more than they save: on the H200 a training step's layer norm (16,384 rows of 768)
 * ran at 24 SIMD groups per SM, limited by registers, and 0.7 TB/s (bench/h200/NOTES.md,
 * run 21). */
#define GK_LN_EARLY_PER_LANE 32
#define GK_LN_EARLY_ROWS 1024

/* One row of a layer norm held in registers by a SIMD group (C % (32 W) == 0, C / 32 <=
 * GK_LN_MAX_PER_LANE): lane l holds columns (32 k + l) W .. + W - 1 of each chunk k. */
typedef struct gk_ln_row {
    int W, chunks;
    bool early; /* w and b loaded with x (GK_LN_EARLY_PER_LANE) */
    tern_v lane, x[GK_LN_MAX_PER_LANE], w[GK_LN_MAX_PER_LANE], b[GK_LN_MAX_PER_LANE];
    tern_v mu, rs;
} gk_ln_row;
/* Loads the row at `base` of x (and w, b when `early` and they fit) and computes mu and rs
 * = 1 / sqrt(var + eps): pairwise within the lane, then a SIMD sum, two passes. */
void gk_ln_row_stats(tern_kb *kb, gk_ln_row *r, tern_v x, tern_v base, tern_v w, tern_v b, int C, int W,
                     tern_v eps, bool early);
/* The first column of chunk k, and its W normalised values (x - mu) rs w + b, loading w and
 * b now if they were not loaded early. */
tern_v gk_ln_row_col(const gk_ln_row *r, int k);
void gk_ln_row_out(gk_ln_row *r, tern_v w, tern_v b, int k, tern_v out[8]);

/* EMBED, EMBED_BACKWARD_WPE: one thread per W channels of a row; groups of GK_EW_GROUP.
 * EMBED_SORT: one thread per row, groups of GK_SORT_GROUP (a tile of tokens in shared);
 * grid.y over parts of the rows compared against, a multiple of GK_SORT_GROUP each.
 * EMBED_SORT_SCATTER: one thread per row.
 * EMBED_BACKWARD_WTE: one SIMD group per sorted row, GK_LN_ROWS per group; grid.y over
 * channel chunks of 32 * W. */
#define GK_SORT_GROUP 256

/* ATTENTION and ATTENTION_DQ: gk_att_split(hs, 0) threads per query row, GK_ATT_BR rows per
 * group, key tiles in shared memory; grid (ceil(T / GK_ATT_BR), B * NH). n[0] = hs,
 * n[1] = W (an upper bound: the kernels use the widest width dividing their share of hs).
 * ATTENTION_DKDV: gk_att_split(hs, 1) threads per key row, GK_ATT_BR rows per group;
 * grid (ceil(T / GK_ATT_BR), B * KV) (KV = NH unless grouped). ATTENTION_DELTA: one thread
 * per (b, t, h), groups of GK_EW_GROUP. saved (and delta) are f32 [B, NH, T]. n[3] = NH / KV
 * for grouped key/value heads (0: KV = NH, GPT-2's kernels). */
#define GK_ATT_BR 64
/* The largest head size the register-resident kernels take. */
#define GK_ATT_MAX_HS 256
/* Threads sharing one row's head dimensions (their dot products meet in SIMD shuffles):
 * fewer registers per thread (q and o, or k, v, dk and dv, split in parts). */
#ifndef GK_ATT_FWD_PART
#define GK_ATT_FWD_PART 32 /* head dimensions per thread, at least (forward, dq) */
#endif
#ifndef GK_ATT_BWD_PART
#define GK_ATT_BWD_PART 16 /* the same for dk, dv */
#endif
static inline int gk_att_split(int hs, int backward) {
    int per = backward ? GK_ATT_BWD_PART : GK_ATT_FWD_PART, sp = 1; /* a power of two dividing hs, parts >= per */
    while (sp < 8 && hs % (2 * sp) == 0 && hs / (2 * sp) >= per) sp *= 2;
    return sp;
}

/* ATTENTION_CACHED: one group of GK_AC_GROUP threads per (b, h, t), or per (b, h, t, split)
 * when its positions are split S ways (few rows: decoding); then the split that finishes a
 * row last merges its S parts (attention_cached.c, step 5). The splits' partial results
 * take (hs + 2) floats each; the core keeps room for GK_AC_SPLIT_ROWS of them.
 *
 * A split's group (spec n[2] = S > 1; grid (T S, NH, B)) has n[3] threads (a multiple of 32,
 * at most GK_AC_SPLIT_GROUP: a thread keeps some 170 registers), n[4] = gk_ac_parts(hs, W)
 * of them per position: n[3] / n[4] positions per pass, which the host fits to a split's
 * share of max_T (ceil(max_T / S)), so that decoding takes one pass (up to max_T = 2048 at
 * hs 64). A row's values are dealt to gk_ac_lanes(hs, W) neighbouring threads (a power of two
 * dividing both 32 and hs / W), each holding hs / lanes of them. Each thread keeps hs / parts
 * of q, of a key and of values in registers: past GK_AC_PART_MAX (head sizes with few
 * factors of two) the host does not split. n[5] = 1 when T = 1 (decoding). n[6] = NH / KV
 * for grouped key/value heads (caches [B, KV, max_T, hs]; 0: KV = NH). n[7] = 1 (decoding
 * only): pos and the caches' positions below p0 are read before the kernel's wait (nothing
 * in flight writes them), its first pass of cached keys and values with them. n[8] = 1
 * (decoding only): no merge; the parts stay in partial for the GEMV after it (MERGE below).
 * n[9] = J > 0 (decoding one row, n[8] set, KV = NH): the q|k|v product joined
 * (qkv_join.h, attention_cached.c): the grid's x is S + J, J groups a head computing the new
 * position's part, whose J partial dots and hs values (f32) lie at GK_AC_NEW_AT(hs) + (b NH
 * + h) (J + hs) of partial; n[10], n[11] and t[4] .. t[7] are the product's (qkv_join.h). */
#define GK_AC_GROUP 512
#define GK_AC_MAX_SPLITS 16
#define GK_AC_SPLIT_ROWS 256
#define GK_AC_SPLIT_MIN 256 /* positions per split at max_T, at least (the ac_split_min default) */
#define GK_AC_SPLIT_GROUP 256
#define GK_AC_PART 32      /* head dimensions per thread of a split's scores, when the lanes allow */
#define GK_AC_PART_MAX 64
#define GK_AC_NEW_AT(hs) (GK_AC_SPLIT_ROWS * ((hs) + 2)) /* joined: the new positions' parts in partial */
#define GK_JOIN_WORDS 8 /* joined: words of 8 columns of the product a group computes (qkv_join.h) */
#define GK_JOIN_SLICE 16 /* joined: head dimensions of a new-position group's slice (J = hs / 16) */
enum { GK_JOIN_BIAS = 1, GK_JOIN_EARLY = 2 }; /* joined: n[10]'s flags */
static inline int gk_ac_lanes(int hs, int w) {
    int lanes = 1;
    while (lanes < 32 && (hs / w) % (2 * lanes) == 0) lanes *= 2;
    return lanes;
}
static inline int gk_ac_parts(int hs, int w) {
    int lanes = gk_ac_lanes(hs, w), parts = 1;
    while (parts < lanes && hs / parts > GK_AC_PART) parts *= 2;
    return parts;
}

/* CROSS_ENTROPY: one group of GK_CE_GROUP per row. */
#define GK_CE_GROUP 512 /* the CUDA runtime's groups are 1,024 (core.c) */

/* SAMPLE: one group per row, n[1] threads (a multiple of 32, at most 1024). Top-k up to
 * GK_SAMPLE_CAP candidates are sorted in shared memory; larger k searches the whole row. */
#define GK_SAMPLE_CAP 1024
/* Greedy sampling (argmax.c) with GK_ARGMAX_PARTS groups of GK_ARGMAX_GROUP threads a row,
 * for rows of at least GK_ARGMAX_MIN_V logits and at most GK_ARGMAX_ROWS rows (the parts'
 * buffers are allocated once at that size: a captured graph holds them). */
#define GK_ARGMAX_PARTS 32
#define GK_ARGMAX_GROUP 256
#define GK_ARGMAX_MIN_V 8192
#define GK_ARGMAX_ROWS 64
#define GK_SAMPLE_BINS 256

/* MATMUL: tiles of GK_MM_TILE x GK_MM_TILE outputs per group of GK_MM_THREADS threads,
 * GK_MM_KT-deep slices in shared memory; grid (ceil(n / tile), ceil(m / tile), batch). */
#define GK_MM_TILE 64
#define GK_MM_KT 16
#define GK_MM_THREADS 256
#define GK_MM_BLOCK 16 /* k-slices per partial sum */

/* GEMV, GEMV_T (gemv.c): products with m <= GK_GEMV_MAX_M rows of A (decoding). GEMV: a
 * group of n[7] threads (GK_GEMV_GROUP, 512 or 1024) per TC * W columns of C, grid
 * ceil(n / (TC W)). GEMV_T: groups of GK_GEMV_GROUP, GK_GEMV_ROWS outputs per n[5] = KS
 * SIMD groups, grid ceil(n / (GK_GEMV_ROWS * GK_GEMV_GROUP / 32 / KS)). A's rows are staged in threadgroup
 * memory in k-chunks of at most GK_GEMV_X_BYTES. */
#define GK_GEMV_MAX_M 8
#define GK_GEMV_GROUP 256
#define GK_GEMV_ROWS 4
#define GK_GEMV_X_BYTES 32768
enum { GK_GEMV_SWIGLU = 1, GK_GEMV_ROPE = 2 }; /* GEMV_T's paired epilogues (n[9]) */
/* The GEMVs' prologues (n[12]): the kind, and flags: RESIDENT (k in one chunk, each
 * thread's elements of A's rows and of the weights in registers, at most
 * GK_GEMV_NORM_PER_THREAD a row), EARLY (its weights loaded before the wait). MERGE (no norm
 * kind): A's rows are a cached attention's output, staged from its split parts (partial
 * [m NH, S, hs + 2] as attention_cached's split kernel leaves them without merging, n[13] =
 * S, n[14] = hs) and written to A by the first group; n[15] = J > 0: the attention joined
 * the q|k|v product, the new position one more part (GK_AC_NEW_AT). */
enum {
    GK_GEMV_LAYERNORM = 1,
    GK_GEMV_RMSNORM = 2,
    GK_GEMV_NORM_KIND = 3,
    GK_GEMV_NORM_RESIDENT = 4,
    GK_GEMV_NORM_EARLY = 8,
    GK_GEMV_MERGE = 16,
};
#define GK_GEMV_NORM_PER_THREAD 8
#define GK_RMS_FEW_ROWS 8

/* RMSNORM, RMSNORM_BACKWARD (rmsnorm.c): LAYERNORM's geometry and register path (n[1] = C
 * under the same rule, 0 otherwise); the forward of at most GK_RMS_FEW_ROWS rows (decoding)
 * loads w with x and may split a row over n[3] SIMD groups, a group a row; the backward's partial is f32 [S, C], S the SIMD groups
 * of the grid, added into dw by PARTIAL_ADD (count S, stride C, offset 0).
 * ROPE (rope.c), SWIGLU, SWIGLU_BACKWARD (swiglu.c): one thread per W elements (pairs for
 * ROPE), groups of GK_EW_GROUP. */

/* The trace functions. */
void gk_trace_fill(tern_kb *kb, void *spec);
void gk_trace_copy(tern_kb *kb, void *spec);
void gk_trace_add(tern_kb *kb, void *spec);
void gk_trace_gelu(tern_kb *kb, void *spec);
void gk_trace_gelu_backward(tern_kb *kb, void *spec);
void gk_trace_adamw(tern_kb *kb, void *spec);
void gk_trace_sum_rows_partial(tern_kb *kb, void *spec);
void gk_trace_sum_squares(tern_kb *kb, void *spec);
void gk_trace_layernorm(tern_kb *kb, void *spec);
void gk_trace_layernorm_backward(tern_kb *kb, void *spec);
void gk_trace_partial_add(tern_kb *kb, void *spec);
void gk_trace_embed(tern_kb *kb, void *spec);
void gk_trace_embed_sort(tern_kb *kb, void *spec);
void gk_trace_embed_sort_scatter(tern_kb *kb, void *spec);
void gk_trace_embed_backward_wte(tern_kb *kb, void *spec);
void gk_trace_embed_backward_wpe(tern_kb *kb, void *spec);
void gk_trace_attention(tern_kb *kb, void *spec);
void gk_trace_attention_delta(tern_kb *kb, void *spec);
void gk_trace_attention_dkdv(tern_kb *kb, void *spec);
void gk_trace_attention_dq(tern_kb *kb, void *spec);
void gk_trace_attention_cached(tern_kb *kb, void *spec);
void gk_trace_cross_entropy(tern_kb *kb, void *spec);
void gk_trace_argmax_partial(tern_kb *kb, void *spec);
void gk_trace_argmax_merge(tern_kb *kb, void *spec);
void gk_trace_sample(tern_kb *kb, void *spec);
void gk_trace_matmul(tern_kb *kb, void *spec);
void gk_trace_epilogue(tern_kb *kb, void *spec);
void gk_trace_gemv(tern_kb *kb, void *spec);
void gk_trace_gemv_t(tern_kb *kb, void *spec);
void gk_trace_rmsnorm(tern_kb *kb, void *spec);
void gk_trace_rmsnorm_backward(tern_kb *kb, void *spec);
void gk_trace_rope(tern_kb *kb, void *spec);
void gk_trace_swiglu(tern_kb *kb, void *spec);
void gk_trace_swiglu_backward(tern_kb *kb, void *spec);

#endif
