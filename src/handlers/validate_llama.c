/* Argument validation of the Llama family's operations (rmsnorm, rope, swiglu and their
 * backward passes), shared by every handler like validate.c's (declared there from the op
 * list; the device argument is not looked at). Attention with grouped key/value heads is
 * validate.c's attention. */
#include "handlers/validate.h"

#include <math.h>
#include <stdint.h>

static size_t sz(int v) { return (size_t)v; }

tern_error *tern_validate_rmsnorm(tern_dev *d, tern_buf out, tern_buf rrms, tern_buf x, tern_buf w, int rows,
                                  int C, float eps) {
    const char *op = "rmsnorm";
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "C", C));
    if (!(eps >= 0) || !isfinite(eps)) return tern_errorf("%s: eps must be finite and >= 0", op);
    size_t n;
    if (!tern_mul_size(sz(rows), sz(C), &n)) return tern_errorf("%s: rows * C overflows", op);
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_optional(op, "rrms", rrms, TERN_DT_F32, sz(rows), "rows"));
    TERN_TRY(tern_check_buf(op, "x", x, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "w", w, TERN_DT_FLOAT2, sz(C), "C"));
    TERN_TRY(tern_check_disjoint(op, "out", out, "x", x));
    TERN_TRY(tern_check_disjoint(op, "out", out, "w", w));
    TERN_TRY(tern_check_disjoint(op, "out", out, "rrms", rrms));
    TERN_TRY(tern_check_disjoint(op, "rrms", rrms, "x", x));
    return tern_check_disjoint(op, "rrms", rrms, "w", w);
}

tern_error *tern_validate_rmsnorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf dout, tern_buf x,
                                           tern_buf w, tern_buf rrms, int rows, int C,
                                           float grad_beta) {
    const char *op = "rmsnorm_backward";
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "C", C));
    if (!isfinite(grad_beta)) return tern_errorf("%s: grad_beta must be finite", op);
    size_t n;
    if (!tern_mul_size(sz(rows), sz(C), &n)) return tern_errorf("%s: rows * C overflows", op);
    TERN_TRY(tern_check_buf(op, "dx", dx, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "dw", dw, TERN_DT_FLOAT2, sz(C), "C"));
    TERN_TRY(tern_check_buf(op, "dout", dout, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "x", x, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "w", w, TERN_DT_FLOAT2, sz(C), "C"));
    TERN_TRY(tern_check_buf(op, "rrms", rrms, TERN_DT_F32, sz(rows), "rows"));
    const tern_buf ins[4] = {dout, x, w, rrms};
    const char *names[4] = {"dout", "x", "w", "rrms"};
    for (int i = 0; i < 4; i++) {
        TERN_TRY(tern_check_disjoint(op, "dx", dx, names[i], ins[i]));
        TERN_TRY(tern_check_disjoint(op, "dw", dw, names[i], ins[i]));
    }
    return tern_check_disjoint(op, "dx", dx, "dw", dw);
}

/* Elements (rows - 1) ld + width that a strided view must hold, within the kernels' i32
 * indexes. */
static tern_error *strided_need(const char *op, int rows, int ld, int width, size_t *need) {
    size_t a;
    if (!tern_mul_size(sz(rows - 1), sz(ld), &a) || a > (size_t)INT32_MAX - sz(width))
        return tern_errorf("%s: (rows - 1) * stride + width overflows 2^31 elements", op);
    *need = a + sz(width);
    return NULL;
}

static tern_error *check_strided(const char *op, const char *what, tern_buf b, unsigned dtypes,
                                 size_t need) {
    TERN_TRY(tern_check_view(op, what, b, dtypes));
    if (b.len < need)
        return tern_errorf("%s: %s has %zu elements, the rows need at least %zu", op, what, b.len,
                           need);
    return NULL;
}

/* rope and rope_backward: the same rules, the buffers named as each op names them. */
static tern_error *validate_rope(bool backward, tern_buf out, tern_buf x, tern_buf pos,
                                 tern_buf inv_freq, int rows, int heads, int head_dim,
                                 int stride) {
    const char *op = backward ? "rope_backward" : "rope";
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "heads", heads));
    TERN_TRY(tern_check_positive(op, "head_dim", head_dim));
    if (head_dim % 2 != 0) return tern_errorf("%s: head_dim must be even, got %d", op, head_dim);
    size_t width;
    if (!tern_mul_size(sz(heads), sz(head_dim), &width) || width > (size_t)INT32_MAX)
        return tern_errorf("%s: heads * head_dim overflows", op);
    if (sz(stride) < width || stride < 1)
        return tern_errorf("%s: stride %d is less than heads * head_dim (%zu)", op, stride, width);
    size_t need = 0;
    TERN_TRY(strided_need(op, rows, stride, (int)width, &need));
    const char *out_name = backward ? "dx" : "out", *x_name = backward ? "dout" : "x";
    TERN_TRY(check_strided(op, out_name, out, TERN_DT_FLOAT2, need));
    TERN_TRY(check_strided(op, x_name, x, TERN_DT_FLOAT2, need));
    TERN_TRY(tern_check_buf(op, "pos", pos, TERN_DT_I32, sz(rows), "rows"));
    TERN_TRY(tern_check_buf(op, "inv_freq", inv_freq, TERN_DT_F32, sz(head_dim / 2), "head_dim / 2"));
    if (!tern_views_same(out, x)) TERN_TRY(tern_check_disjoint(op, out_name, out, x_name, x));
    TERN_TRY(tern_check_disjoint(op, out_name, out, "pos", pos));
    return tern_check_disjoint(op, out_name, out, "inv_freq", inv_freq);
}

tern_error *tern_validate_rope(tern_dev *d, tern_buf out, tern_buf x, tern_buf pos, tern_buf inv_freq,
                               int rows, int heads, int head_dim, int stride) {
    return validate_rope(false, out, x, pos, inv_freq, rows, heads, head_dim, stride);
}

tern_error *tern_validate_rope_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf pos,
                                        tern_buf inv_freq, int rows, int heads, int head_dim,
                                        int stride) {
    return validate_rope(true, dx, dout, pos, inv_freq, rows, heads, head_dim, stride);
}

/* Whether two views laid out as rows of I elements every ld share no element: disjoint
 * ranges, or rows of one allocation interleaved (the halves of a fused [rows, 2 I]). */
static bool rows_disjoint(tern_buf a, tern_buf b, int I, int ld) {
    if (!tern_views_overlap(a, b)) return true;
    if (a.mem != b.mem || a.dtype != b.dtype) return false;
    long long delta = (long long)b.offset - (long long)a.offset;
    long long m = ((delta % ld) + ld) % ld;
    return m >= I && m <= ld - I;
}

static tern_error *swiglu_shapes(const char *op, int rows, int I, int ld, size_t *need,
                                 size_t *dense) {
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "I", I));
    if (ld < I) return tern_errorf("%s: ld %d is less than I (%d)", op, ld, I);
    TERN_TRY(strided_need(op, rows, ld, I, need));
    if (!tern_mul_size(sz(rows), sz(I), dense) || *dense > (size_t)INT32_MAX)
        return tern_errorf("%s: rows * I overflows 2^31 elements", op);
    return NULL;
}

tern_error *tern_validate_swiglu(tern_dev *d, tern_buf out, tern_buf gate, tern_buf up, int rows, int I,
                                 int ld) {
    const char *op = "swiglu";
    size_t need = 0, n = 0;
    TERN_TRY(swiglu_shapes(op, rows, I, ld, &need, &n));
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "rows * I"));
    TERN_TRY(check_strided(op, "gate", gate, TERN_DT_FLOAT2, need));
    TERN_TRY(check_strided(op, "up", up, TERN_DT_FLOAT2, need));
    TERN_TRY(tern_check_disjoint(op, "out", out, "gate", gate));
    return tern_check_disjoint(op, "out", out, "up", up);
}

tern_error *tern_validate_swiglu_backward(tern_dev *d, tern_buf dgate, tern_buf dup, tern_buf dout,
                                          tern_buf gate, tern_buf up, int rows, int I, int ld) {
    const char *op = "swiglu_backward";
    size_t need = 0, n = 0;
    TERN_TRY(swiglu_shapes(op, rows, I, ld, &need, &n));
    TERN_TRY(check_strided(op, "dgate", dgate, TERN_DT_FLOAT2, need));
    TERN_TRY(check_strided(op, "dup", dup, TERN_DT_FLOAT2, need));
    TERN_TRY(tern_check_buf(op, "dout", dout, TERN_DT_FLOAT2, n, "rows * I"));
    TERN_TRY(check_strided(op, "gate", gate, TERN_DT_FLOAT2, need));
    TERN_TRY(check_strided(op, "up", up, TERN_DT_FLOAT2, need));
    if (!rows_disjoint(dgate, dup, I, ld))
        return tern_errorf("%s: dgate and dup share elements", op);
    if (!tern_views_same(dgate, gate) && !rows_disjoint(dgate, gate, I, ld))
        return tern_errorf("%s: dgate must be gate's view or share none of its elements", op);
    if (!tern_views_same(dup, up) && !rows_disjoint(dup, up, I, ld))
        return tern_errorf("%s: dup must be up's view or share none of its elements", op);
    if (!rows_disjoint(dgate, up, I, ld))
        return tern_errorf("%s: dgate shares elements with up", op);
    if (!rows_disjoint(dup, gate, I, ld))
        return tern_errorf("%s: dup shares elements with gate", op);
    TERN_TRY(tern_check_disjoint(op, "dgate", dgate, "dout", dout));
    return tern_check_disjoint(op, "dup", dup, "dout", dout);
}
