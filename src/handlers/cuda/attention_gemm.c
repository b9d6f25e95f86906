/* Causal attention on the tensor cores: the four products per head (Q K^T, P V forward;
 * dP, dV, dQ, dK backward, plus Q K^T again) as cuBLASLt batched products over B * NH
 * heads, and the softmax and layout changes as DSL kernels (src/kernels/attention_gemm.c).
 *
 *   forward   qkv -> Q, K, V [B, NH, T, hs];  S = Q K^T;  P = softmax(S / sqrt(hs)) (causal),
 *             saving each row's logsumexp;  Y = P V;  out = Y back to [B, T, C]
 *   backward  S = Q K^T again;  dP = dY V^T;  P from S and the logsumexp, and
 *             dS = P (dP - rowsum(P dP)) / sqrt(hs);  dV = P^T dY;  dQ = dS K;  dK = dS^T Q
 *
 * The score matrices ([B, NH, T, T]) are materialised in scratch memory: this trades memory
 * traffic for running every product on the tensor cores. Causality halves the work: the
 * rows are cut into blocks of ATT_BLOCK query positions, and each product covers only the
 * key blocks at or below the diagonal (block row i of S: keys [0, (i + 1) ATT_BLOCK)), which
 * with blocks of 128 at T = 1024 is 36 of the 64 blocks; the softmax kernels read and write
 * the same region. `saved` holds only the logsumexps (B * NH * T floats, as the GPU core's
 * own attention). The default path (attention.c picks it); a training step of GPT-2 124M at
 * B=16, T=1024 took 244 ms with the GPU core's flash-style f32 kernels and 62 ms with this
 * before the causal blocks (bench/h200/NOTES.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_gemm.h"
#include "cuda_handler.h"
#include "handlers/validate.h"

/* Query positions per causal block of the products: 256, measured best of 128, 256, 512 and
 * 1024 for GPT-2 124M at T = 1024 (bench/h200/NOTES.md). */
#define ATT_BLOCK 256

/* The kernel `which` for activations of `act`. `form`: for the permutes, whether they move
 * 16-byte runs; for the softmax kernels, whether rows are held in registers. Built on first
 * use, one slot per (which, to_heads, form). */
static tern_error *kernel(tern_dev *d, gk_att_gemm_kernel which, tern_dtype act, bool to_heads, bool form,
                          const tern_kernel **out) {
    int t = act == TERN_BF16;
    int slot = ((int)which * 2 + to_heads) * 2 + form;
    if (!d->att_kernels[t][slot]) {
        gk_att_gemm_spec spec = {.act = tern_type_of_dtype(act), .to_heads = to_heads,
                              .vec = which == GK_ATT_GEMM_PERMUTE && form,
                              .resident = which != GK_ATT_GEMM_PERMUTE && form ? GK_ATT_GEMM_MAX_RESIDENT : 0};
        TERN_TRY(gk_att_gemm_kernel_build(which, &spec, &d->att_kernels[t][slot]));
    }
    *out = d->att_kernels[t][slot];
    return NULL;
}

/* At least `len` elements of scratch of `dtype`. */
static tern_error *scratch(tern_dev *d, tern_dtype dtype, size_t len, tern_buf *out) {
    if (d->att_scratch.len < len || d->att_scratch.dtype != dtype) {
        TERN_TRY(gpu_free(d, &d->att_scratch));
        TERN_TRY(gpu_alloc(d, dtype, len, &d->att_scratch));
        d->core.scratch_epoch++; /* recorded graphs named the old scratch */
    }
    *out = d->att_scratch;
    return NULL;
}

static tern_error *permute(tern_dev *d, tern_buf src, tern_buf dst, bool to_heads, int B, int T,
                           int G, int NH, int hs) {
    const tern_kernel *k;
    bool vec = gk_att_gemm_permute_vec_fits(tern_type_of_dtype(src.dtype), hs, src.offset, dst.offset);
    TERN_TRY(kernel(d, GK_ATT_GEMM_PERMUTE, src.dtype, to_heads, vec, &k));
    size_t n = (size_t)B * T * G * NH * hs, per = vec ? (size_t)(src.dtype == TERN_BF16 ? 8 : 4) : 1;
    size_t threads = (n + per - 1) / per;
    tern_arg args[] = {tern_arg_buf(src), tern_arg_buf(dst), tern_arg_i32(B), tern_arg_i32(T),
                       tern_arg_i32(G), tern_arg_i32(NH), tern_arg_i32(hs)};
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    return tern_launch(d->rt, k, tern_dims1((uint32_t)((threads + 255) / 256)), tern_dims1(256), args, 7);
}

static tern_error *softmax(tern_dev *d, gk_att_gemm_kernel which, tern_buf S, tern_buf dP,
                           tern_buf lse, int rows, int T, float scale) {
    const tern_kernel *k;
    bool resident = gk_att_gemm_resident_fits(tern_type_of_dtype(S.dtype), T);
    TERN_TRY(kernel(d, which, S.dtype, false, resident, &k));
    tern_dims grid = tern_dims1((uint32_t)((rows + GK_ATT_GEMM_ROWS - 1) / GK_ATT_GEMM_ROWS));
    tern_dims group = tern_dims1(32 * GK_ATT_GEMM_ROWS);
    if (which == GK_ATT_GEMM_SOFTMAX_FORWARD) {
        tern_arg args[] = {tern_arg_buf(S), tern_arg_buf(lse), tern_arg_i32(T), tern_arg_i32(rows),
                           tern_arg_f32(scale), tern_arg_i32(ATT_BLOCK)};
        gpu_inflight_unknown(&d->core); /* work the core did not launch */
        return tern_launch(d->rt, k, grid, group, args, 6);
    }
    tern_arg args[] = {tern_arg_buf(S), tern_arg_buf(dP), tern_arg_buf(lse), tern_arg_i32(T),
                       tern_arg_i32(rows), tern_arg_f32(scale), tern_arg_i32(ATT_BLOCK)};
    gpu_inflight_unknown(&d->core); /* work the core did not launch */
    return tern_launch(d->rt, k, grid, group, args, 7);
}

/* One strided operand of a per-head product: a view from `offset` to the end of `buf`,
 * rows `ld` apart, heads `stride` apart. */
typedef struct head_mat {
    tern_buf buf;
    int ld;
    long stride;
} head_mat;

static head_mat at(tern_buf buf, size_t offset, int ld, long stride) {
    return (head_mat){tern_view(buf, offset, buf.len - offset), ld, stride};
}

/* C[h] = op(A[h]) op(B[h]) for each of `heads` heads. */
static tern_error *per_head(tern_dev *d, head_mat c, head_mat a, head_mat b, int heads, int m, int n, int k,
                            bool trans_a, bool trans_b) {
    tern_matmul mm = {.m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b, .batch = heads,
                      .lda = a.ld, .ldb = b.ld, .ldc = c.ld, .stride_a = a.stride, .stride_b = b.stride,
                      .stride_c = c.stride, .alpha = 1.0f, .beta = 0.0f};
    return cuda_matmul(d, c.buf, a.buf, b.buf, &mm);
}

/* The causal block products of one attention, heads of T x hs (Q, K, V, dY, dQ, dK, dV:
 * [heads, T, hs]) and T x T (S, dP: [heads, T, T]). Block row i covers query positions
 * [r0, r0 + rn) and keys [0, r0 + rn). */
typedef struct att_blocks {
    int heads, T, hs;
} att_blocks;

static long TT(const att_blocks *g) { return (long)g->T * g->T; }
static long Th(const att_blocks *g) { return (long)g->T * g->hs; }

/* S[rows r0.., keys ..r0+rn) = X[r0..] Y^T (S = Q K^T, or dP = dY V^T). */
static tern_error *scores(tern_dev *d, const att_blocks *g, tern_buf s, tern_buf x, tern_buf y, int r0, int rn) {
    return per_head(d, at(s, (size_t)r0 * g->T, g->T, TT(g)), at(x, (size_t)r0 * g->hs, g->hs, Th(g)),
                    at(y, 0, g->hs, Th(g)), g->heads, rn, r0 + rn, g->hs, false, true);
}

/* OUT[r0..r0+rn) = P[rows r0.., keys ..r0+rn) Z[..r0+rn) (Y = P V, or dQ = dS K). */
static tern_error *rows_times(tern_dev *d, const att_blocks *g, tern_buf out, tern_buf p, tern_buf z, int r0,
                              int rn) {
    return per_head(d, at(out, (size_t)r0 * g->hs, g->hs, Th(g)), at(p, (size_t)r0 * g->T, g->T, TT(g)),
                    at(z, 0, g->hs, Th(g)), g->heads, rn, g->hs, r0 + rn, false, false);
}

/* OUT[c0..c0+cn) = P[rows c0.., keys c0..c0+cn)^T Z[c0..] (dV = P^T dY, or dK = dS^T Q):
 * only query rows from c0 on see these keys. */
static tern_error *cols_times(tern_dev *d, const att_blocks *g, tern_buf out, tern_buf p, tern_buf z, int c0,
                              int cn) {
    return per_head(d, at(out, (size_t)c0 * g->hs, g->hs, Th(g)), at(p, (size_t)c0 * g->T + c0, g->T, TT(g)),
                    at(z, (size_t)c0 * g->hs, g->hs, Th(g)), g->heads, cn, g->hs, g->T - c0, true, false);
}

static int block_len(int T, int r0) { return T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK; }

/* The scratch views of one attention: Q, K, V (head-major, back to back), Y or dY, the
 * score matrices S and dP, and dQ, dK, dV (back to back). */
typedef struct att_views {
    tern_buf qkv_h, q, k, v, y, s, dp, dqkv_h, dq, dk, dv;
} att_views;

static tern_error *views(tern_dev *d, tern_dtype dtype, int B, int T, int C, int NH, bool backward,
                         att_views *w) {
    size_t N = (size_t)B * T * C, TT = (size_t)B * NH * T * T;
    tern_buf all;
    TERN_TRY(scratch(d, dtype, backward ? 7 * N + 2 * TT : 4 * N + TT, &all));
    w->qkv_h = tern_view(all, 0, 3 * N);
    w->q = tern_view(all, 0, N), w->k = tern_view(all, N, N), w->v = tern_view(all, 2 * N, N);
    w->y = tern_view(all, 3 * N, N);
    w->s = tern_view(all, 4 * N, TT);
    if (backward) {
        w->dp = tern_view(all, 4 * N + TT, TT);
        w->dqkv_h = tern_view(all, 4 * N + 2 * TT, 3 * N);
        w->dq = tern_view(w->dqkv_h, 0, N), w->dk = tern_view(w->dqkv_h, N, N);
        w->dv = tern_view(w->dqkv_h, 2 * N, N);
    }
    return NULL;
}

tern_error *cuda_attention_gemm(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int C,
                                int NH) {
    int hs = C / NH, heads = B * NH;
    att_views w;
    TERN_TRY(views(d, qkv.dtype, B, T, C, NH, false, &w));
    att_blocks g = {heads, T, hs};
    TERN_TRY(permute(d, qkv, w.qkv_h, true, B, T, 3, NH, hs));
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) TERN_TRY(scores(d, &g, w.s, w.q, w.k, r0, block_len(T, r0)));
    TERN_TRY(softmax(d, GK_ATT_GEMM_SOFTMAX_FORWARD, w.s, tern_none(), saved, heads * T, T,
                     1.0f / sqrtf((float)hs)));
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) TERN_TRY(rows_times(d, &g, w.y, w.s, w.v, r0, block_len(T, r0)));
    return permute(d, w.y, out, false, B, T, 1, NH, hs);
}

tern_error *cuda_attention_backward_gemm(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out,
                                         tern_buf saved, int B, int T, int C, int NH) {
    (void)out; /* the probabilities are recomputed from the scores and the logsumexp */
    int hs = C / NH, heads = B * NH;
    att_views w;
    TERN_TRY(views(d, qkv.dtype, B, T, C, NH, true, &w));
    TERN_TRY(permute(d, qkv, w.qkv_h, true, B, T, 3, NH, hs));
    TERN_TRY(permute(d, dout, w.y, true, B, T, 1, NH, hs)); /* y holds dY */
    att_blocks g = {heads, T, hs};
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        TERN_TRY(scores(d, &g, w.s, w.q, w.k, r0, block_len(T, r0)));
        TERN_TRY(scores(d, &g, w.dp, w.y, w.v, r0, block_len(T, r0)));
    }
    TERN_TRY(softmax(d, GK_ATT_GEMM_SOFTMAX_BACKWARD, w.s, w.dp, saved, heads * T, T,
                     1.0f / sqrtf((float)hs)));
    /* s holds P, dp holds dS */
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int n = block_len(T, r0);
        TERN_TRY(cols_times(d, &g, w.dv, w.s, w.y, r0, n));
        TERN_TRY(rows_times(d, &g, w.dq, w.dp, w.k, r0, n));
        TERN_TRY(cols_times(d, &g, w.dk, w.dp, w.q, r0, n));
    }
    return permute(d, w.dqkv_h, dqkv, false, B, T, 3, NH, hs);
}
