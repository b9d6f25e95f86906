/* Argument validation shared by every handler: each operation's shape and dtype rules,
 * checked the same way whichever handler answers, so that the same bad call gives the same
 * one-line error on cpu, cuda and opencl.
 *
 * Every handler entry point (generated: seam.h) calls its tern_validate_<op> before the
 * handler's body, which does not check again. These functions look only at the arguments (views, shapes, host pointers), never at device
 * memory. The values inside index buffers (tokens, targets, pos) live on the device: a
 * handler that reads them on the host checks them with tern_validate_indices; a GPU handler
 * must make its kernels safe against them (clamp and report at the next sync, or check after
 * a download). docs/effects.md lists the rules each function enforces. */
#ifndef TERN_HANDLERS_VALIDATE_H
#define TERN_HANDLERS_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/effect.h"

/* Sets of dtypes, for "x must be f32 or bf16". */
#define TERN_DT(dtype) (1u << (dtype))
#define TERN_DT_F32 TERN_DT(TERN_F32)
#define TERN_DT_I32 TERN_DT(TERN_I32)
#define TERN_DT_FLOAT2 (TERN_DT(TERN_F32) | TERN_DT(TERN_BF16))                 /* f32, bf16 */
#define TERN_DT_FLOAT3 (TERN_DT(TERN_F32) | TERN_DT(TERN_BF16) | TERN_DT(TERN_F16)) /* + f16 */
#define TERN_DT_ANY ((1u << TERN_DTYPE_COUNT) - 1u)                 /* q8_0 included */
#define TERN_DT_ELEMENTS ((1u << TERN_DTYPE_ELEMENT_COUNT) - 1u)    /* all but q8_0 */
#define TERN_DT_Q8 TERN_DT(TERN_Q8)

/* ---- building blocks ---- */

/* a * b into *out; false when the product does not fit in size_t. */
static inline bool tern_mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

/* Whether `dtype` is one of the dtypes (the five element dtypes and q8_0). */
static inline bool tern_dtype_valid(tern_dtype dtype) {
    return (unsigned)dtype < TERN_DTYPE_COUNT;
}

/* Whether a view is present (len > 0). Invalid views are present. */
static inline bool tern_present(tern_buf b) { return b.len > 0; }

/* Whether two views share memory: same allocation and intersecting byte ranges. */
bool tern_views_overlap(tern_buf a, tern_buf b);

/* Whether two views are the same elements (same allocation, offset, length and dtype). */
bool tern_views_same(tern_buf a, tern_buf b);

/* `b` (called `what` in messages of operation `op`) is present, valid, of a dtype in
 * `dtypes`, and holds exactly `need` elements; `need_expr` says where `need` comes from
 * ("rows * C"). */
tern_error *tern_check_buf(const char *op, const char *what, tern_buf b, unsigned dtypes,
                           size_t need, const char *need_expr);

/* Like tern_check_buf, for a buffer that may be absent (len 0). */
tern_error *tern_check_optional(const char *op, const char *what, tern_buf b, unsigned dtypes,
                                size_t need, const char *need_expr);

/* `b` is present, valid and of a dtype in `dtypes`; its length is not checked. A q8_0 view
 * must cover whole blocks (offset and len multiples of TERN_Q8_BLOCK). */
tern_error *tern_check_view(const char *op, const char *what, tern_buf b, unsigned dtypes);

/* An error when `value` (called `what`) is not positive. */
tern_error *tern_check_positive(const char *op, const char *what, long value);

/* An error when the views may not share memory but do. */
tern_error *tern_check_disjoint(const char *op, const char *what_a, tern_buf a,
                                const char *what_b, tern_buf b);

/* Every ids[i] (i < n) lies in [0, limit); otherwise an error naming the first offender,
 * e.g. "embed: tokens[5] = 50300 is out of range [0, 50257)". For handlers that can read
 * index buffers on the host. */
tern_error *tern_validate_indices(const char *op, const char *what, const int32_t *ids,
                                  size_t n, int64_t limit);

/* ---- one function per operation, with the op's parameters (the device first, which they
 * do not look at): declared from the op list, so their signatures are the ops' ---- */

/* The error of a second download_async before download_wait, the same on every handler. */
#define TERN_DOWNLOAD_PENDING "download_async: a download is already pending (download_wait first)"

#define TERN_VALIDATE_DECLARE_(name, params, args) tern_error *tern_validate_##name params;
TERN_OPS_SEAM(TERN_VALIDATE_DECLARE_)
#undef TERN_VALIDATE_DECLARE_

/* attention and attention_backward check that saved is an f32 view; its length is the
 * handler's own (attention_saved_len), which the body checks with this. */
tern_error *tern_check_saved(const char *op, tern_buf saved, size_t need);

/* A matmul's shape with defaults resolved: dense strides filled in, batch >= 1. */
typedef struct tern_matmul_dims {
    int m, n, k, batch;
    bool trans_a, trans_b;
    size_t lda, ldb, ldc;                /* row strides of A, B, C as stored */
    size_t stride_a, stride_b, stride_c; /* between batch entries */
    size_t a_rows, a_cols, b_rows, b_cols; /* A, B as stored: [k, m] when trans_a, ... */
} tern_matmul_dims;

/* matmul's checks, and its shape with defaults resolved into *dims (when not NULL):
 * tern_validate_matmul's work, for bodies and compositions that need the shape. */
tern_error *tern_check_matmul(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                              tern_matmul_dims *dims);
/* The shape of a product that passed the checks, without checking again (for bodies). */
void tern_matmul_resolve(const tern_matmul *mm, tern_matmul_dims *dims);


/* ---- matmul by composition, for handlers (or paths) without a native form ----
 *
 * A separate addend and the GELU_BACKWARD epilogue are defined as compositions:
 * copy(C, addend) then the product with beta, and the product then gelu_backward(C, C, aux).
 * A handler whose GEMM cannot read C from another buffer, or has no GELU gradient epilogue,
 * runs those steps with its own operations through tern_matmul_compose. */

/* Whether mm's addend is present and not c's own view (what beta reads is not C). */
bool tern_matmul_separate_addend(tern_buf c, const tern_matmul *mm);
/* Whether mm's epilogue pairs two columns of the product (SWIGLU: gate and up; ROPE: the
 * halves of a head), which only the GPU core's GEMV kernels for B [n, k] answer natively. */
bool tern_matmul_paired(const tern_matmul *mm);
/* Whether mm asks for a separate addend, the GELU_BACKWARD epilogue, a bias gradient or C's
 * column sums (not the paired epilogues, which the GPU core's GEMV kernels answer: each
 * handler checks them). */
bool tern_matmul_composite(tern_buf c, const tern_matmul *mm);
/* mm less what composition does around it: no addend (beta reads C), no bias gradient, no
 * column sums, and GELU_BACKWARD replaced by no epilogue and no aux. */
tern_matmul tern_matmul_plain(const tern_matmul *mm);

/* The temporaries of a composed product, apart so that one composition may hold both: the
 * SWIGLU epilogue's product [m, n] and the prologue's normalised A [m, k]. */
enum tern_temp_slot { TERN_TEMP_PRODUCT, TERN_TEMP_OPERAND, TERN_TEMP_SLOTS };

/* A handler's operations for tern_matmul_compose; ctx is passed back to each (the device). */
typedef struct tern_matmul_steps {
    void *ctx;
    tern_error *(*copy)(void *ctx, tern_buf dst, tern_buf src);
    tern_error *(*matmul)(void *ctx, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm);
    tern_error *(*gelu_backward)(void *ctx, tern_buf dx, tern_buf dout, tern_buf x);
    tern_error *(*sum_rows)(void *ctx, tern_buf out, tern_buf x, int rows, int cols, float beta);
    tern_error *(*swiglu)(void *ctx, tern_buf out, tern_buf gate, tern_buf up, int rows, int inter, int ld);
    tern_error *(*rope)(void *ctx, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq, int rows, int heads,
                        int head_dim, int stride);
    tern_error *(*layernorm)(void *ctx, tern_buf out, tern_buf x, tern_buf w, tern_buf b, int rows, int C, float eps);
    tern_error *(*rmsnorm)(void *ctx, tern_buf out, tern_buf x, tern_buf w, int rows, int C, float eps);
    tern_error *(*attention_cached)(void *ctx, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv,
                                    tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T);
    /* a buffer of len elements of dtype that no other operation uses, valid until the next
     * temp of the same slot (tern_temp_slot) */
    tern_error *(*temp)(void *ctx, int slot, tern_dtype dtype, size_t len, tern_buf *out);
} tern_matmul_steps;

/* A validated product (dims as tern_validate_matmul filled it) by composition: a LAYERNORM or
 * RMSNORM prologue first, as layernorm or rmsnorm into the handler's operand temporary and
 * the handler's matmul of that with the prologue NONE (ATTENTION: attention_cached into A,
 * then the matmul of A); the SWIGLU
 * epilogue as the product into aux (or the handler's temp) then swiglu into C, the ROPE
 * epilogue as the product into C then rope over it in place; the addend
 * copied into C's matrix elements when separate and beta != 0 (never the gaps of a strided
 * C), s->matmul with tern_matmul_plain(mm), then sum_rows(bias_grad, B, k, n, beta) for a
 * bias gradient, for GELU_BACKWARD gelu_backward(C, C, aux) over C's rows, and
 * sum_rows(col_sums, C, m, n, col_sums_beta) for C's column sums. s->matmul must not compose
 * again (it gets a plain product). */
tern_error *tern_matmul_compose(const tern_matmul_steps *s, tern_buf c, tern_buf a, tern_buf b,
                                const tern_matmul *mm, const tern_matmul_dims *dims);

/* A handler's steps for tern_matmul_compose in one line: given its own copy, matmul,
 * gelu_backward, sum_rows, swiglu, rope, layernorm, rmsnorm, attention_cached and temp (each
 * taking a CTX * first; the norms and the attention with the op list's signatures), defines
 * the static adaptors and `static tern_matmul_steps matmul_steps(CTX *ctx)`, which bundles
 * them with ctx. */
#define TERN_MATMUL_STEPS(CTX, COPY, MATMUL, GELU_BACKWARD, SUM_ROWS, SWIGLU, ROPE, LAYERNORM, RMSNORM, ATTENTION_CACHED, \
                          TEMP)                                                                               \
    static tern_error *step_copy(void *ctx, tern_buf dst, tern_buf src) { return COPY((CTX *)ctx, dst, src); } \
    static tern_error *step_matmul(void *ctx, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {     \
        return MATMUL((CTX *)ctx, c, a, b, mm);                                                                \
    }                                                                                                         \
    static tern_error *step_gelu_backward(void *ctx, tern_buf dx, tern_buf dout, tern_buf x) {                \
        return GELU_BACKWARD((CTX *)ctx, dx, dout, x);                                                         \
    }                                                                                                         \
    static tern_error *step_sum_rows(void *ctx, tern_buf out, tern_buf x, int rows, int cols, float beta) {   \
        return SUM_ROWS((CTX *)ctx, out, x, rows, cols, beta);                                                 \
    }                                                                                                         \
    static tern_error *step_swiglu(void *ctx, tern_buf out, tern_buf gate, tern_buf up, int rows, int inter,  \
                                   int ld) {                                                                  \
        return SWIGLU((CTX *)ctx, out, gate, up, rows, inter, ld);                                             \
    }                                                                                                         \
    static tern_error *step_rope(void *ctx, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq, int rows, \
                                 int heads, int head_dim, int stride) {                                       \
        return ROPE((CTX *)ctx, out, x, pos, inv_freq, rows, heads, head_dim, stride);                         \
    }                                                                                                         \
    static tern_error *step_layernorm(void *ctx, tern_buf out, tern_buf x, tern_buf w, tern_buf b, int rows,  \
                                      int C, float eps) {                                                     \
        return LAYERNORM((CTX *)ctx, out, tern_none(), tern_none(), x, w, b, rows, C, eps);                    \
    }                                                                                                         \
    static tern_error *step_rmsnorm(void *ctx, tern_buf out, tern_buf x, tern_buf w, int rows, int C,         \
                                    float eps) {                                                              \
        return RMSNORM((CTX *)ctx, out, tern_none(), x, w, rows, C, eps);                                      \
    }                                                                                                         \
    static tern_error *step_attention_cached(void *ctx, tern_buf out, tern_buf k_cache, tern_buf v_cache,     \
                                             tern_buf qkv, tern_buf pos, int B, int T, int NH, int KV, int hs, \
                                             int max_T) {                                                     \
        return ATTENTION_CACHED((CTX *)ctx, out, k_cache, v_cache, qkv, pos, B, T, NH, KV, hs, max_T);         \
    }                                                                                                         \
    static tern_error *step_temp(void *ctx, int slot, tern_dtype dtype, size_t len, tern_buf *out) {          \
        return TEMP((CTX *)ctx, slot, dtype, len, out);                                                        \
    }                                                                                                         \
    static tern_matmul_steps matmul_steps(CTX *ctx) {                                                         \
        tern_matmul_steps s = {ctx,         step_copy,      step_matmul,  step_gelu_backward,    step_sum_rows, \
                               step_swiglu, step_rope, step_layernorm, step_rmsnorm, step_attention_cached,    \
                               step_temp};                                                                    \
        return s;                                                                                             \
    }
#endif
