/* The q|k|v product inside the cached attention's split kernel (attention_cached.c, spec
 * n[9] = J > 0): each group of the decoding step computes the columns of qkv = layernorm(x)
 * @ w + bias that it needs itself, where a kernel before the attention used to write them
 * all (one kernel boundary a layer fewer on a token's critical path). Private to
 * src/kernels/.
 *
 * A group of G threads computes GK_JOIN_WORDS words of W columns (16-bit weights: W = 8),
 * thread tid taking word tid % 8 of rows tid / 8, tid / 8 + G / 8, ... of w [C, 3C] (B [k,
 * n], Hugging Face's Conv1D layout): up to GK_JOIN_U rows (all of GPT-2 124M's 24) loaded
 * before the wait where nothing in flight writes the weights, any others prefetched into
 * L2 there (bench/h200/NOTES.md run 107: 8 rows early, the other 16 read from L2 after the
 * wait, made the join no faster than the two kernels it replaced; all 24 early, 4.4%). They
 * stay in registers: in threadgroup memory by asynchronous copies, as the GEMV's are
 * (gemv.c, n[11] = 2), the join was faster but the GEMVs after it slower, the token 3.9%
 * slower (run 136). After the wait the group normalises x as the GEMV's prologue does
 * (gemv_norm.c: the same statistics and staging, so the same bits of layernorm(x)), adds its
 * rows' products, the k-lanes of a SIMD group by shuffles, then the SIMD groups' sums in
 * group order (deterministic). Which columns a word is is the caller's (the attention's q
 * of a head; the new position's slices of q, k and v). */
#ifndef TERN_KERNELS_QKV_JOIN_H
#define TERN_KERNELS_QKV_JOIN_H

#include "kernels/gemv.h"

#define GK_JOIN_U 24 /* the most rows of w a thread loads before the wait */

typedef struct qkv_join {
    gemv_params ln;     /* the layer norm of x's one row (gemv_norm.c; resident) */
    tern_v w, bias, C3; /* w [C, 3C], bias [3C] (absent: has_bias false), 3C */
    bool has_bias, early;
    int W, G, C, rows, U; /* columns a word, threads, C, rows of w a thread, rows loaded early */
    tern_v xs, red;       /* threadgroup: layernorm(x) [C] in x's dtype; the SIMD groups' sums [G / 32, 8 W] */
    tern_v kl, col;       /* this thread's first row of w, and its word's first column */
    tern_v out_col, bias_v; /* the column this thread finishes, and its bias (0 without) */
    tern_v pre[GK_JOIN_U][8]; /* its first U rows' W values */
} qkv_join;

/* Spec (after the attention's): t[4] x, t[5] w, t[6] bias, t[7] the norm's weight and bias;
 * n[10] flags (GK_JOIN_BIAS, GK_JOIN_EARLY: kernels.h), n[11] = C. Parameters, after the
 * attention's: x, w, [bias], norm_w, norm_b, eps. Declares the threadgroup arrays too. */
void qkv_join_params(tern_kb *kb, const gk_spec *s, int G, qkv_join *j);

/* Before the wait: this thread's word starts at column `col` of w's rows; it finishes
 * column out_col (in range even where the caller drops it), whose bias loads here too. */
void qkv_join_early(tern_kb *kb, qkv_join *j, tern_v tid, tern_v col, tern_v out_col);

/* After the wait (every thread of the group: barriers): the rows' sums into j->red. */
void qkv_join_sums(tern_kb *kb, qkv_join *j, tern_v tid);

/* Column c (0 .. 8 W - 1: word c / W, its element c % W) of the group's product, this
 * thread's bias added (c is the thread's out_col): after qkv_join_sums. */
tern_v qkv_join_value(const qkv_join *j, tern_v c);

#endif
