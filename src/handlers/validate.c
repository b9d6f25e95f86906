/* Argument validation shared by every handler. The rules are listed per operation in
 * docs/effects.md; messages start with the operation's name and say what was expected. */
#include "validate.h"

#include "tern/dist.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* ---- building blocks ---- */

/* "f32 or bf16" for a dtype set, into buf. */
static const char *dtype_set_name(unsigned dtypes, char *buf, size_t size) {
    size_t used = 0;
    int count = 0, total = 0;
    for (int t = 0; t < TERN_DTYPE_COUNT; t++) total += (dtypes >> t) & 1u;
    buf[0] = '\0';
    for (int t = 0; t < TERN_DTYPE_COUNT && used < size; t++) {
        if (!(dtypes & TERN_DT(t))) continue;
        count++;
        const char *sep = count == 1 ? "" : (count == total ? " or " : ", ");
        int n = snprintf(buf + used, size - used, "%s%s", sep, tern_dtype_name((tern_dtype)t));
        if (n < 0) break;
        used += (size_t)n;
    }
    return buf;
}

bool tern_views_overlap(tern_buf a, tern_buf b) {
    if (!a.mem || !b.mem || a.mem != b.mem || !a.len || !b.len) return false;
    if (!tern_dtype_valid(a.dtype) || !tern_dtype_valid(b.dtype)) return false;
    /* Views were made in range of an allocation, so these byte offsets do not overflow
     * (a q8_0 view's offset is whole blocks, so its bytes are exact too). */
    size_t a0 = tern_dtype_bytes(a.dtype, a.offset), a1 = a0 + tern_dtype_bytes(a.dtype, a.len);
    size_t b0 = tern_dtype_bytes(b.dtype, b.offset), b1 = b0 + tern_dtype_bytes(b.dtype, b.len);
    return a0 < b1 && b0 < a1;
}

bool tern_views_same(tern_buf a, tern_buf b) {
    return a.mem == b.mem && a.offset == b.offset && a.len == b.len && a.dtype == b.dtype;
}

tern_error *tern_check_view(const char *op, const char *what, tern_buf b, unsigned dtypes) {
    if (!tern_dtype_valid(b.dtype)) return tern_errorf("%s: %s has an invalid dtype (%d)", op, what, (int)b.dtype);
    if (b.len > 0 && !b.mem)
        return tern_errorf("%s: %s is an invalid view (out of range of its buffer)", op, what);
    if (b.len == 0) return tern_errorf("%s: %s is absent (an empty buffer)", op, what);
    if (!(dtypes & TERN_DT(b.dtype))) {
        char names[64];
        return tern_errorf("%s: %s is %s, needs %s", op, what, tern_dtype_name(b.dtype),
                           dtype_set_name(dtypes, names, sizeof names));
    }
    size_t bytes;
    if (b.dtype == TERN_Q8) {
        if (b.offset % TERN_Q8_BLOCK || b.len % TERN_Q8_BLOCK)
            return tern_errorf("%s: %s is a q8_0 view of elements [%zu, %zu), not whole blocks of %d",
                               op, what, b.offset, b.offset + b.len, TERN_Q8_BLOCK);
        if (b.offset + b.len < b.len || b.offset + b.len > SIZE_MAX / TERN_Q8_BLOCK_BYTES)
            return tern_errorf("%s: %s is an invalid view (its extent overflows)", op, what);
        return NULL;
    }
    if (!tern_mul_size(b.offset + b.len, tern_dtype_size(b.dtype), &bytes) || b.offset + b.len < b.len)
        return tern_errorf("%s: %s is an invalid view (its extent overflows)", op, what);
    return NULL;
}

tern_error *tern_check_buf(const char *op, const char *what, tern_buf b, unsigned dtypes,
                           size_t need, const char *need_expr) {
    TERN_TRY(tern_check_view(op, what, b, dtypes));
    if (b.len != need)
        return tern_errorf("%s: %s has %zu elements, %s needs %zu", op, what, b.len, need_expr, need);
    return NULL;
}

tern_error *tern_check_optional(const char *op, const char *what, tern_buf b, unsigned dtypes,
                                size_t need, const char *need_expr) {
    if (b.len == 0) {
        if (!tern_dtype_valid(b.dtype))
            return tern_errorf("%s: %s has an invalid dtype (%d)", op, what, (int)b.dtype);
        return NULL;
    }
    return tern_check_buf(op, what, b, dtypes, need, need_expr);
}

tern_error *tern_check_positive(const char *op, const char *what, long value) {
    if (value <= 0) return tern_errorf("%s: %s must be positive, got %ld", op, what, value);
    return NULL;
}

tern_error *tern_check_disjoint(const char *op, const char *what_a, tern_buf a,
                                const char *what_b, tern_buf b) {
    if (tern_views_overlap(a, b)) return tern_errorf("%s: %s and %s overlap", op, what_a, what_b);
    return NULL;
}

tern_error *tern_validate_indices(const char *op, const char *what, const int32_t *ids,
                                  size_t n, int64_t limit) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (int64_t)ids[i] >= limit)
            return tern_errorf("%s: %s[%zu] = %d is out of range [0, %lld)", op, what, i,
                               (int)ids[i], (long long)limit);
    }
    return NULL;
}

/* The product of `count` size_t factors into *out, or an error naming `expr` on overflow. */
static tern_error *product(const char *op, const char *expr, size_t *out, int count, ...) {
    va_list ap;
    va_start(ap, count);
    size_t p = 1;
    bool ok = true;
    for (int i = 0; i < count; i++) {
        size_t f = va_arg(ap, size_t);
        if (!tern_mul_size(p, f, &p)) ok = false;
    }
    va_end(ap);
    if (!ok) return tern_errorf("%s: %s overflows", op, expr);
    *out = p;
    return NULL;
}

#define SZ(x) ((size_t)(x))

/* ---- the device ---- */

tern_error *tern_validate_device_name(tern_dev *d, const char **out) {
    if (!out) return tern_errorf("device_name: out is NULL");
    return NULL;
}

tern_error *tern_validate_sync(tern_dev *d) { return NULL; }

tern_error *tern_validate_capture_begin(tern_dev *d, uint64_t key, bool *replay) {
    if (!replay) return tern_errorf("capture_begin: replay is NULL");
    return NULL;
}

tern_error *tern_validate_capture_end(tern_dev *d, uint64_t key) { return NULL; }

tern_error *tern_validate_replay_steps(tern_dev *d, int *out) {
    if (!out) return tern_errorf("replay_steps: out is NULL");
    return NULL;
}

tern_error *tern_validate_fence(tern_dev *d) { return NULL; }

/* ---- memory ---- */

tern_error *tern_validate_alloc(tern_dev *d, tern_dtype dtype, size_t len, tern_buf *out) {
    if (!out) return tern_errorf("alloc: out is NULL");
    if (!tern_dtype_valid(dtype)) return tern_errorf("alloc: invalid dtype (%d)", (int)dtype);
    if (len == 0) return tern_errorf("alloc: len must be positive, got 0");
    if (dtype == TERN_Q8 && len % TERN_Q8_BLOCK)
        return tern_errorf("alloc: q8_0 holds whole blocks of %d weights, len %zu is not a multiple",
                           TERN_Q8_BLOCK, len);
    size_t bytes;
    if (dtype == TERN_Q8 ? len > SIZE_MAX / 2 / TERN_Q8_BLOCK_BYTES
                         : !tern_mul_size(len, tern_dtype_size(dtype), &bytes) || bytes > SIZE_MAX / 2)
        return tern_errorf("alloc: %zu elements of %s is too large", len, tern_dtype_name(dtype));
    return NULL;
}

tern_error *tern_validate_free(tern_dev *d, tern_buf *buf) {
    if (!buf) return tern_errorf("free: buf is NULL");
    if (buf->len == 0 && !buf->mem) return NULL; /* absent: no-op */
    if (!buf->mem) return tern_errorf("free: buf is an invalid view (out of range of its buffer)");
    if (!tern_dtype_valid(buf->dtype)) return tern_errorf("free: buf has an invalid dtype (%d)", (int)buf->dtype);
    if (buf->offset != 0)
        return tern_errorf("free: buf is a view starting at element %zu; free the whole allocation",
                           buf->offset);
    return NULL;
}

/* A transfer's device side may be absent (nothing to do), never invalid. */
static tern_error *check_transfer(const char *op, const char *what, tern_buf b, const void *host) {
    if (!tern_dtype_valid(b.dtype)) return tern_errorf("%s: %s has an invalid dtype (%d)", op, what, (int)b.dtype);
    if (b.len == 0) return NULL;
    TERN_TRY(tern_check_view(op, what, b, TERN_DT_ANY));
    if (!host) return tern_errorf("%s: the host pointer is NULL", op);
    return NULL;
}

tern_error *tern_validate_upload(tern_dev *d, tern_buf dst, const void *src) {
    return check_transfer("upload", "dst", dst, src);
}

tern_error *tern_validate_download(tern_dev *d, void *dst, tern_buf src) {
    return check_transfer("download", "src", src, dst);
}

tern_error *tern_validate_download_async(tern_dev *d, void *dst, tern_buf src) {
    return check_transfer("download_async", "src", src, dst);
}

tern_error *tern_validate_download_wait(tern_dev *d) { return NULL; }

tern_error *tern_validate_copy(tern_dev *d, tern_buf dst, tern_buf src) {
    if (!tern_dtype_valid(dst.dtype)) return tern_errorf("copy: dst has an invalid dtype (%d)", (int)dst.dtype);
    if (!tern_dtype_valid(src.dtype)) return tern_errorf("copy: src has an invalid dtype (%d)", (int)src.dtype);
    if (dst.len != src.len)
        return tern_errorf("copy: dst has %zu elements, src has %zu", dst.len, src.len);
    if (dst.len == 0) return NULL;
    TERN_TRY(tern_check_view("copy", "dst", dst, TERN_DT_ANY));
    TERN_TRY(tern_check_view("copy", "src", src, TERN_DT_ANY));
    if ((dst.dtype == TERN_Q8 || src.dtype == TERN_Q8) &&
        !((dst.dtype == TERN_Q8 || tern_dtype_is_float(dst.dtype)) &&
          (src.dtype == TERN_Q8 || tern_dtype_is_float(src.dtype))))
        return tern_errorf("copy: q8_0 converts only to and from f32, bf16 and f16, not %s to %s",
                           tern_dtype_name(src.dtype), tern_dtype_name(dst.dtype));
    return tern_check_disjoint("copy", "dst", dst, "src", src);
}

/* A host value that must be representable in an integer dtype (after truncation). */
static tern_error *check_int_value(const char *op, const char *what, double value,
                                   tern_dtype dtype) {
    double lo = dtype == TERN_I32 ? -2147483648.0 : 0.0;
    double hi = dtype == TERN_I32 ? 2147483648.0 : 65536.0; /* exclusive */
    if (!(value > lo - 1.0 && value < hi)) /* also rejects NaN */
        return tern_errorf("%s: %s %g does not fit in %s", op, what, value, tern_dtype_name(dtype));
    return NULL;
}

tern_error *tern_validate_fill(tern_dev *d, tern_buf dst, double value) {
    if (!tern_dtype_valid(dst.dtype)) return tern_errorf("fill: dst has an invalid dtype (%d)", (int)dst.dtype);
    if (dst.len == 0) return NULL;
    TERN_TRY(tern_check_view("fill", "dst", dst, TERN_DT_ELEMENTS));
    if (!tern_dtype_is_float(dst.dtype)) return check_int_value("fill", "value", value, dst.dtype);
    return NULL;
}

/* ---- generic ---- */

tern_error *tern_validate_get(tern_dev *d, tern_buf a, size_t index, double *out) {
    if (!out) return tern_errorf("get: out is NULL");
    TERN_TRY(tern_check_view("get", "a", a, TERN_DT_ELEMENTS));
    if (index >= a.len) return tern_errorf("get: index %zu is out of range [0, %zu)", index, a.len);
    return NULL;
}

tern_error *tern_validate_length(tern_dev *d, tern_buf a, size_t *out) {
    if (!out) return tern_errorf("length: out is NULL");
    if (!tern_dtype_valid(a.dtype)) return tern_errorf("length: a has an invalid dtype (%d)", (int)a.dtype);
    if (a.len > 0 && !a.mem) return tern_errorf("length: a is an invalid view (out of range of its buffer)");
    return NULL;
}

tern_error *tern_validate_from_list(tern_dev *d, tern_dtype dtype, const double *values, size_t count, tern_buf *out) {
    if (!out) return tern_errorf("from_list: out is NULL");
    if (!tern_dtype_valid(dtype)) return tern_errorf("from_list: invalid dtype (%d)", (int)dtype);
    if (dtype == TERN_Q8)
        return tern_errorf("from_list: q8_0 is not an element dtype (from_list a float, then copy into q8_0)");
    if (count == 0) return tern_errorf("from_list: count must be positive, got 0");
    if (!values) return tern_errorf("from_list: values is NULL");
    size_t bytes;
    if (!tern_mul_size(count, tern_dtype_size(dtype), &bytes) || bytes > SIZE_MAX / 2)
        return tern_errorf("from_list: %zu elements is too large", count);
    if (!tern_dtype_is_float(dtype)) {
        for (size_t i = 0; i < count; i++) {
            char what[48];
            snprintf(what, sizeof what, "values[%zu] =", i);
            TERN_TRY(check_int_value("from_list", what, values[i], dtype));
        }
    }
    return NULL;
}

tern_error *tern_validate_load(tern_dev *d, const char *path, const char *name, tern_dtype dtype, tern_buf *out) {
    if (!out) return tern_errorf("load: out is NULL");
    if (!path) return tern_errorf("load: path is NULL");
    if (!name) return tern_errorf("load: name is NULL");
    if (!tern_dtype_valid(dtype) || !tern_dtype_is_float(dtype))
        return tern_errorf("load: dtype must be f32, bf16 or f16, got %s",
                           tern_dtype_valid(dtype) ? tern_dtype_name(dtype) : "an invalid dtype");
    return NULL;
}

/* The generic operations: the DSL runtime that runs them checks the kernel (purity, its
 * parameters) and the buffers against it, with messages naming the operation. The DSL has
 * no q8_0 type: refused here. */
static tern_error *generic_no_q8(const char *op, const char *what, tern_buf b) {
    if (b.dtype != TERN_Q8) return NULL;
    return tern_errorf("%s: %s is q8_0, which the generic operations do not take (copy it to a float dtype)", op, what);
}
tern_error *tern_validate_build(tern_dev *d, tern_buf out, const tern_kernel *k) {
    return generic_no_q8("build", "out", out);
}
tern_error *tern_validate_zip_with(tern_dev *d, tern_buf out, tern_buf a, tern_buf b, const tern_kernel *combine) {
    TERN_TRY(generic_no_q8("zip_with", "out", out));
    TERN_TRY(generic_no_q8("zip_with", "a", a));
    return generic_no_q8("zip_with", "b", b);
}
tern_error *tern_validate_reduce(tern_dev *d, tern_buf a, double init, const tern_kernel *combine, double *out) {
    return generic_no_q8("reduce", "a", a);
}
tern_error *tern_validate_index_of(tern_dev *d, tern_buf a, double value, int64_t *out) {
    return generic_no_q8("index_of", "a", a);
}

/* ---- linear algebra ---- */

/* Resolves one operand's row stride and batch stride, and checks its view covers every
 * element the batch touches: (batch - 1) * stride + (rows - 1) * ld + cols. A fully dense
 * operand (ld and stride both defaulted) must match that length exactly. */
static tern_error *matmul_operand(const char *what, tern_buf x, unsigned dtypes, size_t rows,
                                  size_t cols, int ld_in, long stride_in, int batch,
                                  size_t *ld_out, size_t *stride_out) {
    TERN_TRY(tern_check_view("matmul", what, x, dtypes));
    if (ld_in < 0) return tern_errorf("matmul: ld%s must not be negative, got %d", what, ld_in);
    if (stride_in < 0)
        return tern_errorf("matmul: stride_%s must not be negative, got %ld", what, stride_in);
    size_t ld = ld_in ? (size_t)ld_in : cols;
    if (ld < cols)
        return tern_errorf("matmul: ld%s = %zu is less than the %zu columns of %s as stored", what,
                           ld, cols, what);
    size_t span; /* elements of one matrix: (rows - 1) * ld + cols */
    if (!tern_mul_size(rows - 1, ld, &span) || span > SIZE_MAX - cols)
        return tern_errorf("matmul: the extent of %s overflows", what);
    span += cols;
    size_t dense;
    if (!tern_mul_size(rows, ld, &dense)) return tern_errorf("matmul: the extent of %s overflows", what);
    size_t stride = stride_in ? (size_t)stride_in : dense;
    size_t extent;
    if (!tern_mul_size((size_t)(batch - 1), stride, &extent) || extent > SIZE_MAX - span)
        return tern_errorf("matmul: the extent of %s overflows", what);
    extent += span;
    bool exact = ld_in == 0 && stride_in == 0;
    if (exact ? x.len != extent : x.len < extent)
        return tern_errorf("matmul: %s has %zu elements, its shape needs %s%zu", what, x.len,
                           exact ? "" : "at least ", extent);
    *ld_out = ld;
    *stride_out = stride;
    return NULL;
}

/* The addend: absent, c's own view (today's beta * C), or a buffer laid out exactly as c
 * that does not share memory with it: a handler may copy it into c before the product (so a
 * partial overlap would change it halfway), and cuBLASLt reads it as a C separate from D. */
static tern_error *matmul_addend(tern_buf c, const tern_matmul *mm) {
    tern_buf s = mm->addend;
    if (!tern_present(s)) {
        if (!tern_dtype_valid(s.dtype))
            return tern_errorf("matmul: addend has an invalid dtype (%d)", (int)s.dtype);
        return NULL;
    }
    if (tern_views_same(s, c)) return NULL;
    TERN_TRY(tern_check_view("matmul", "addend", s, TERN_DT_FLOAT2));
    if (s.dtype != c.dtype)
        return tern_errorf("matmul: addend is %s, needs c's dtype %s (it is laid out as c)",
                           tern_dtype_name(s.dtype), tern_dtype_name(c.dtype));
    if (s.len != c.len)
        return tern_errorf("matmul: addend has %zu elements, needs c's %zu (it is laid out as c)",
                           s.len, c.len);
    if (tern_views_overlap(s, c))
        return tern_errorf("matmul: addend partly overlaps c (it may only be the same view)");
    if (mm->epilogue == TERN_EPILOGUE_GELU) /* aux is written */
        TERN_TRY(tern_check_disjoint("matmul", "addend", s, "aux", mm->aux));
    return NULL;
}

/* GELU_BACKWARD multiplies the product by gelu'(aux) and nothing else: what cuBLASLt's DGELU
 * epilogue computes (no bias, no C term), on one [m, n] product whose pre-activation aux is
 * dense in C's dtype (the epilogue reads aux as D's type). */
static tern_error *matmul_gelu_backward(tern_buf c, const tern_matmul *mm, const tern_matmul_dims *d) {
    const char *e = "matmul: the GELU_BACKWARD epilogue";
    if (!tern_present(mm->aux)) return tern_errorf("%s needs aux (the pre-activation, [m, n])", e);
    if (tern_present(mm->bias)) return tern_errorf("%s takes no bias", e);
    if (mm->beta != 0) return tern_errorf("%s needs beta == 0, got %g", e, (double)mm->beta);
    if (tern_matmul_separate_addend(c, mm)) return tern_errorf("%s takes no addend", e);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    if (mm->aux.dtype != c.dtype)
        return tern_errorf("%s needs aux in c's dtype %s, got %s", e, tern_dtype_name(c.dtype),
                           tern_dtype_name(mm->aux.dtype));
    return NULL;
}

/* SWIGLU pairs column j of the product with column j + n/2 and writes C alone: nothing of
 * beta's term, one [m, n] product. (C's n/2 columns and aux's [m, n] are checked above.) */
static tern_error *matmul_swiglu(tern_buf c, const tern_matmul *mm, const tern_matmul_dims *d) {
    const char *e = "matmul: the SWIGLU epilogue";
    if (d->n % 2) return tern_errorf("%s needs an even n (gate and up halves), got %d", e, d->n);
    if (mm->beta != 0) return tern_errorf("%s needs beta == 0, got %g", e, (double)mm->beta);
    if (tern_matmul_separate_addend(c, mm)) return tern_errorf("%s takes no addend", e);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    return NULL;
}

/* ROPE rotates the first rope.heads heads of each row of C [m, n] in place (C is its own x,
 * stride ldc), so rope's own checks apply, and nothing of beta's term or aux. */
static tern_error *matmul_rope(tern_buf c, const tern_matmul *mm, const tern_matmul_dims *d) {
    const char *e = "matmul: the ROPE epilogue";
    const tern_matmul_rope *r = &mm->rope;
    TERN_TRY(tern_check_positive("matmul", "rope.heads", r->heads));
    if (r->head_dim < 2 || r->head_dim % 2 || d->n % r->head_dim)
        return tern_errorf("%s needs an even head_dim dividing n (%d), got %d", e, d->n, r->head_dim);
    if ((long long)r->heads * r->head_dim > d->n)
        return tern_errorf("%s needs heads * head_dim <= n (%d), got %lld", e, d->n, (long long)r->heads * r->head_dim);
    if (mm->beta != 0) return tern_errorf("%s needs beta == 0, got %g", e, (double)mm->beta);
    if (tern_matmul_separate_addend(c, mm)) return tern_errorf("%s takes no addend", e);
    if (tern_present(mm->aux)) return tern_errorf("%s takes no aux", e);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    TERN_TRY(tern_check_buf("matmul", "rope.pos", r->pos, TERN_DT_I32, SZ(d->m), "m"));
    TERN_TRY(tern_check_buf("matmul", "rope.inv_freq", r->inv_freq, TERN_DT_F32, SZ(r->head_dim / 2),
                            "head_dim / 2"));
    TERN_TRY(tern_check_disjoint("matmul", "c", c, "rope.pos", r->pos));
    return tern_check_disjoint("matmul", "c", c, "rope.inv_freq", r->inv_freq);
}

/* The LAYERNORM and RMSNORM prologues normalise A's rows with norm.w (and norm.b) before
 * the product: layernorm's and rmsnorm's own checks on them, A read only, the weights read
 * only, so C and aux (written) must not touch them. */
static tern_error *matmul_prologue(tern_buf c, const tern_matmul *mm, const tern_matmul_dims *d) {
    const char *e = mm->prologue == TERN_PROLOGUE_LAYERNORM ? "matmul: the LAYERNORM prologue"
                                                            : "matmul: the RMSNORM prologue";
    const tern_matmul_norm *nm = &mm->norm;
    if (d->trans_a) return tern_errorf("%s needs A not transposed", e);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    if (!(nm->eps >= 0) || !isfinite(nm->eps)) return tern_errorf("%s needs norm.eps finite and >= 0", e);
    TERN_TRY(tern_check_buf("matmul", "norm.w", nm->w, TERN_DT_FLOAT2, SZ(d->k), "k"));
    if (mm->prologue == TERN_PROLOGUE_LAYERNORM)
        TERN_TRY(tern_check_buf("matmul", "norm.b", nm->b, TERN_DT_FLOAT2, SZ(d->k), "k"));
    else if (tern_present(nm->b))
        return tern_errorf("%s takes no norm.b", e);
    const tern_buf outs[2] = {c, mm->aux};
    const char *out_names[2] = {"c", "aux"};
    for (int i = 0; i < 2; i++) {
        TERN_TRY(tern_check_disjoint("matmul", out_names[i], outs[i], "norm.w", nm->w));
        TERN_TRY(tern_check_disjoint("matmul", out_names[i], outs[i], "norm.b", nm->b));
    }
    return NULL;
}

/* bias_grad: the column sums of a plain, dense [k, n] B (what sum_rows adds up), with nothing
 * else around the product that would have to be ordered with them. */
static tern_error *matmul_bias_grad(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                                    const tern_matmul_dims *d) {
    const char *e = "matmul: bias_grad";
    if (!tern_present(mm->bias_grad)) {
        if (!tern_dtype_valid(mm->bias_grad.dtype))
            return tern_errorf("%s has an invalid dtype (%d)", e, (int)mm->bias_grad.dtype);
        return NULL;
    }
    TERN_TRY(tern_check_buf("matmul", "bias_grad", mm->bias_grad, TERN_DT_FLOAT2, SZ(d->n), "n"));
    if (d->trans_b) return tern_errorf("%s needs B not transposed", e);
    if (d->ldb != SZ(d->n)) return tern_errorf("%s needs B dense (ldb == n), got ldb %zu", e, d->ldb);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    if (mm->epilogue != TERN_EPILOGUE_NONE) return tern_errorf("%s takes no epilogue", e);
    if (tern_present(mm->bias)) return tern_errorf("%s takes no bias", e);
    if (tern_matmul_separate_addend(c, mm)) return tern_errorf("%s takes no addend", e);
    TERN_TRY(tern_check_disjoint("matmul", "bias_grad", mm->bias_grad, "a", a));
    TERN_TRY(tern_check_disjoint("matmul", "bias_grad", mm->bias_grad, "b", b));
    return tern_check_disjoint("matmul", "bias_grad", mm->bias_grad, "c", c);
}

/* col_sums: the column sums of a dense C of one batch, after any epilogue but the paired ones
 * (whose C is not the product's n columns). */
static tern_error *matmul_col_sums(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                                   const tern_matmul_dims *d) {
    const char *e = "matmul: col_sums";
    if (!tern_present(mm->col_sums)) {
        if (!tern_dtype_valid(mm->col_sums.dtype))
            return tern_errorf("%s has an invalid dtype (%d)", e, (int)mm->col_sums.dtype);
        return NULL;
    }
    TERN_TRY(tern_check_buf("matmul", "col_sums", mm->col_sums, TERN_DT_FLOAT2, SZ(d->n), "n"));
    if (d->ldc != SZ(d->n)) return tern_errorf("%s needs C dense (ldc == n), got ldc %zu", e, d->ldc);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    if (tern_matmul_paired(mm)) return tern_errorf("%s takes no SWIGLU or ROPE epilogue", e);
    const char *names[] = {"a", "b", "c", "bias", "aux", "addend"};
    const tern_buf bufs[] = {a, b, c, mm->bias, mm->aux, mm->addend};
    for (int i = 0; i < 6; i++) TERN_TRY(tern_check_disjoint("matmul", "col_sums", mm->col_sums, names[i], bufs[i]));
    return NULL;
}

/* The ATTENTION prologue's q|k|v product (att.product): a product of its own (no ATTENTION
 * prologue in turn) writing qkv dense as attention_cached reads it, [B T, (NH + 2 KV) hs],
 * its A (x) apart from qkv, the caches, pos and the outer A. */
static tern_error *attention_product(tern_buf a, const tern_matmul_attention *at) {
    const char *e = "matmul: the ATTENTION prologue's product";
    const tern_matmul *pm = at->product;
    if (pm->prologue == TERN_PROLOGUE_ATTENTION) return tern_errorf("%s takes no ATTENTION prologue", e);
    tern_matmul_dims pd;
    TERN_TRY(tern_error_wrap(tern_check_matmul(at->qkv, at->x, at->w, pm, &pd), "%s", e));
    size_t width = (SZ(at->NH) + 2 * SZ(at->KV)) * SZ(at->hs);
    if (pd.batch > 1 || pd.trans_a || (size_t)pd.m != SZ(at->B) * SZ(at->T) || (size_t)pd.n != width || pd.ldc != width)
        return tern_errorf("%s must write qkv dense [B T, (NH + 2 KV) hs] = [%d, %zu] in one batch (m = %d, n = %d, "
                           "ldc = %zu)", e, at->B * at->T, width, pd.m, pd.n, pd.ldc);
    const tern_buf apart[5] = {at->qkv, at->k_cache, at->v_cache, at->pos, a};
    const char *names[5] = {"att.qkv", "att.k_cache", "att.v_cache", "att.pos", "a"};
    for (int i = 0; i < 5; i++) TERN_TRY(tern_check_disjoint("matmul", "att.x", at->x, names[i], apart[i]));
    return NULL;
}

/* The ATTENTION prologue writes A as attention_cached's out before the product reads it:
 * attention_cached's own checks (out = A: dense, m = B T rows of k = NH hs), one batch, and
 * what the product writes (C, aux) or reads after it (B, bias) apart from what the
 * attention reads and writes; then the q|k|v product's, where there is one. */
static tern_error *matmul_attention(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                                    const tern_matmul_dims *d) {
    const char *e = "matmul: the ATTENTION prologue";
    const tern_matmul_attention *at = &mm->att;
    if (d->trans_a) return tern_errorf("%s needs A not transposed", e);
    if (d->batch > 1) return tern_errorf("%s takes one batch, got %d", e, d->batch);
    if ((size_t)d->m != SZ(at->B) * SZ(at->T) || (size_t)d->k != SZ(at->NH) * SZ(at->hs) || d->lda != (size_t)d->k)
        return tern_errorf("%s needs A dense [B T, NH hs] = [%d, %d] (m = %d, k = %d, lda = %zu)", e, at->B * at->T,
                           at->NH * at->hs, d->m, d->k, d->lda);
    TERN_TRY(tern_error_wrap(tern_validate_attention_cached(NULL, a, at->k_cache, at->v_cache, at->qkv, at->pos, at->B,
                                                            at->T, at->NH, at->KV, at->hs, at->max_T),
                             "%s", e));
    const tern_buf others[5] = {b, mm->bias, mm->aux, c, mm->addend};
    const char *other_names[5] = {"b", "bias", "aux", "c", "addend"};
    const tern_buf att[4] = {at->k_cache, at->v_cache, at->qkv, at->pos};
    const char *att_names[4] = {"att.k_cache", "att.v_cache", "att.qkv", "att.pos"};
    for (int i = 0; i < 5; i++) {
        if (i != 3) TERN_TRY(tern_check_disjoint("matmul", other_names[i], others[i], "a", a)); /* c: above */
        for (int j = 0; j < 4; j++)
            TERN_TRY(tern_check_disjoint("matmul", other_names[i], others[i], att_names[j], att[j]));
    }
    return at->product ? attention_product(a, at) : NULL;
}

/* The columns of C: n, or n/2 for the SWIGLU epilogue (the activation of n/2 gate|up pairs). */
static size_t c_cols(const tern_matmul *mm) {
    return mm->epilogue == TERN_EPILOGUE_SWIGLU ? SZ(mm->n) / 2 : SZ(mm->n);
}

tern_error *tern_check_matmul(tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm, tern_matmul_dims *dims) {
    if (!mm) return tern_errorf("matmul: mm is NULL");
    TERN_TRY(tern_check_positive("matmul", "m", mm->m));
    TERN_TRY(tern_check_positive("matmul", "n", mm->n));
    TERN_TRY(tern_check_positive("matmul", "k", mm->k));
    if (mm->batch < 0) return tern_errorf("matmul: batch must not be negative, got %d", mm->batch);
    if (mm->epilogue != TERN_EPILOGUE_NONE && mm->epilogue != TERN_EPILOGUE_GELU &&
        mm->epilogue != TERN_EPILOGUE_GELU_BACKWARD && mm->epilogue != TERN_EPILOGUE_SWIGLU &&
        mm->epilogue != TERN_EPILOGUE_ROPE)
        return tern_errorf("matmul: unknown epilogue %d", (int)mm->epilogue);
    if (!isfinite(mm->alpha) || !isfinite(mm->beta))
        return tern_errorf("matmul: alpha and beta must be finite");
    if (mm->prologue != TERN_PROLOGUE_NONE && mm->prologue != TERN_PROLOGUE_LAYERNORM &&
        mm->prologue != TERN_PROLOGUE_RMSNORM && mm->prologue != TERN_PROLOGUE_ATTENTION)
        return tern_errorf("matmul: unknown prologue %d", (int)mm->prologue);
    tern_matmul_dims d;
    d.m = mm->m;
    d.n = mm->n;
    d.k = mm->k;
    d.batch = mm->batch > 1 ? mm->batch : 1; /* 0 means 1, so a zeroed struct works */
    d.trans_a = mm->trans_a;
    d.trans_b = mm->trans_b;
    d.a_rows = d.trans_a ? SZ(d.k) : SZ(d.m);
    d.a_cols = d.trans_a ? SZ(d.m) : SZ(d.k);
    d.b_rows = d.trans_b ? SZ(d.n) : SZ(d.k);
    d.b_cols = d.trans_b ? SZ(d.k) : SZ(d.n);
    TERN_TRY(matmul_operand("a", a, TERN_DT_FLOAT2, d.a_rows, d.a_cols, mm->lda, mm->stride_a,
                            d.batch, &d.lda, &d.stride_a));
    TERN_TRY(matmul_operand("b", b, TERN_DT_FLOAT3 | TERN_DT_Q8, d.b_rows, d.b_cols, mm->ldb,
                            mm->stride_b, d.batch, &d.ldb, &d.stride_b));
    if (b.dtype == TERN_Q8) { /* the blocks run along k: each row of B is whole blocks */
        if (!d.trans_b) return tern_errorf("matmul: a q8_0 b must be stored [n, k] (trans_b)");
        if (d.k % TERN_Q8_BLOCK || d.ldb % TERN_Q8_BLOCK || d.stride_b % TERN_Q8_BLOCK)
            return tern_errorf("matmul: a q8_0 b needs k, ldb and stride_b multiples of %d, got %d, %zu, %zu",
                               TERN_Q8_BLOCK, d.k, d.ldb, d.stride_b);
    }
    TERN_TRY(matmul_operand("c", c, TERN_DT_FLOAT2, SZ(d.m), c_cols(mm), mm->ldc, mm->stride_c,
                            d.batch, &d.ldc, &d.stride_c));
    if (d.batch > 1 && d.stride_c < (SZ(d.m) - 1) * d.ldc + c_cols(mm))
        return tern_errorf("matmul: stride_c = %zu makes the batch entries of c overlap",
                           d.stride_c);
    TERN_TRY(tern_check_optional("matmul", "bias", mm->bias, TERN_DT_FLOAT2, SZ(d.n), "n"));
    size_t mn;
    TERN_TRY(product("matmul", "batch * m * n", &mn, 3, SZ(d.batch), SZ(d.m), SZ(d.n)));
    TERN_TRY(tern_check_optional("matmul", "aux", mm->aux, TERN_DT_FLOAT2, mn, "batch * m * n"));
    if (tern_present(mm->aux) && mm->epilogue == TERN_EPILOGUE_NONE)
        return tern_errorf("matmul: aux is given but the epilogue is none");
    TERN_TRY(tern_check_disjoint("matmul", "c", c, "a", a));
    TERN_TRY(tern_check_disjoint("matmul", "c", c, "b", b));
    TERN_TRY(tern_check_disjoint("matmul", "c", c, "bias", mm->bias));
    TERN_TRY(tern_check_disjoint("matmul", "c", c, "aux", mm->aux));
    if (mm->epilogue == TERN_EPILOGUE_GELU || mm->epilogue == TERN_EPILOGUE_SWIGLU) {
        /* aux is written; GELU_BACKWARD only reads it */
        TERN_TRY(tern_check_disjoint("matmul", "aux", mm->aux, "a", a));
        TERN_TRY(tern_check_disjoint("matmul", "aux", mm->aux, "b", b));
        TERN_TRY(tern_check_disjoint("matmul", "aux", mm->aux, "bias", mm->bias));
    }
    TERN_TRY(matmul_addend(c, mm));
    if (mm->epilogue == TERN_EPILOGUE_GELU_BACKWARD) TERN_TRY(matmul_gelu_backward(c, mm, &d));
    if (mm->epilogue == TERN_EPILOGUE_SWIGLU) TERN_TRY(matmul_swiglu(c, mm, &d));
    if (mm->epilogue == TERN_EPILOGUE_ROPE) TERN_TRY(matmul_rope(c, mm, &d));
    if (mm->prologue == TERN_PROLOGUE_ATTENTION) TERN_TRY(matmul_attention(c, a, b, mm, &d));
    else if (mm->prologue != TERN_PROLOGUE_NONE) TERN_TRY(matmul_prologue(c, mm, &d));
    TERN_TRY(matmul_bias_grad(c, a, b, mm, &d));
    TERN_TRY(matmul_col_sums(c, a, b, mm, &d));
    if (dims) *dims = d;
    return NULL;
}

tern_error *tern_validate_matmul(tern_dev *d, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm) {
    return tern_check_matmul(c, a, b, mm, NULL);
}

/* ld defaults to the stored columns, the batch stride to a dense matrix of ld. */
static void resolve_operand(size_t rows, size_t cols, int ld_in, long stride_in, size_t *ld, size_t *stride) {
    *ld = ld_in ? (size_t)ld_in : cols;
    *stride = stride_in ? (size_t)stride_in : rows * *ld;
}

void tern_matmul_resolve(const tern_matmul *mm, tern_matmul_dims *d) {
    d->m = mm->m;
    d->n = mm->n;
    d->k = mm->k;
    d->batch = mm->batch > 1 ? mm->batch : 1;
    d->trans_a = mm->trans_a;
    d->trans_b = mm->trans_b;
    d->a_rows = d->trans_a ? SZ(d->k) : SZ(d->m);
    d->a_cols = d->trans_a ? SZ(d->m) : SZ(d->k);
    d->b_rows = d->trans_b ? SZ(d->n) : SZ(d->k);
    d->b_cols = d->trans_b ? SZ(d->k) : SZ(d->n);
    resolve_operand(d->a_rows, d->a_cols, mm->lda, mm->stride_a, &d->lda, &d->stride_a);
    resolve_operand(d->b_rows, d->b_cols, mm->ldb, mm->stride_b, &d->ldb, &d->stride_b);
    resolve_operand(SZ(d->m), c_cols(mm), mm->ldc, mm->stride_c, &d->ldc, &d->stride_c);
}

bool tern_matmul_separate_addend(tern_buf c, const tern_matmul *mm) {
    return tern_present(mm->addend) && !tern_views_same(mm->addend, c);
}

bool tern_matmul_paired(const tern_matmul *mm) {
    return mm->epilogue == TERN_EPILOGUE_SWIGLU || mm->epilogue == TERN_EPILOGUE_ROPE;
}

bool tern_matmul_composite(tern_buf c, const tern_matmul *mm) {
    return tern_matmul_separate_addend(c, mm) || mm->epilogue == TERN_EPILOGUE_GELU_BACKWARD ||
           tern_present(mm->bias_grad) || tern_present(mm->col_sums);
}

tern_matmul tern_matmul_plain(const tern_matmul *mm) {
    tern_matmul plain = *mm;
    plain.addend = tern_none();
    plain.bias_grad = tern_none();
    plain.col_sums = tern_none();
    if (plain.epilogue == TERN_EPILOGUE_GELU_BACKWARD) {
        plain.epilogue = TERN_EPILOGUE_NONE;
        plain.aux = tern_none();
    }
    return plain;
}

/* The matrix elements of C (all batch entries) as runs of contiguous elements: `count` runs
 * of `len`, run r starting at element (r / per_entry) * stride_c + (r % per_entry) * ldc of
 * C's view, and at r * len in a dense [batch, m, n] tensor (aux). Rows with a gap after them
 * (ldc > n) are runs of their own; a dense entry is one run, a dense batch one in all. */
typedef struct c_runs {
    size_t count, len, per_entry;
} c_runs;

static c_runs matmul_c_runs(const tern_matmul_dims *d) {
    size_t m = SZ(d->m), n = SZ(d->n), batch = SZ(d->batch);
    c_runs r = {batch * m, n, m};
    if (d->ldc != n) return r;
    r = (c_runs){batch, m * n, 1};
    if (batch == 1 || d->stride_c == m * n) r = (c_runs){1, batch * m * n, 1};
    return r;
}

static size_t c_run_at(const tern_matmul_dims *d, const c_runs *r, size_t i) {
    return (i / r->per_entry) * d->stride_c + (i % r->per_entry) * d->ldc;
}

/* The SWIGLU epilogue as its own steps: P [m, n] (aux, or the handler's temporary in C's
 * dtype) = the product with the bias, then swiglu of P's halves into C, row by row where C's
 * rows have gaps (swiglu writes a dense out). The other compositions exclude it (validated). */
static tern_error *compose_swiglu(const tern_matmul_steps *s, tern_buf c, tern_buf a, tern_buf b,
                                  const tern_matmul *mm, const tern_matmul_dims *dims) {
    size_t m = SZ(dims->m), n = SZ(dims->n), h = n / 2;
    tern_buf p = mm->aux;
    if (!tern_present(p))
        TERN_TRY(tern_error_wrap(s->temp(s->ctx, TERN_TEMP_PRODUCT, c.dtype, m * n, &p), "matmul's SWIGLU epilogue"));
    tern_matmul product = *mm;
    product.epilogue = TERN_EPILOGUE_NONE;
    product.aux = tern_none();
    product.ldc = 0;
    TERN_TRY(s->matmul(s->ctx, p, a, b, &product));
    bool dense = dims->ldc == h;
    for (size_t i = 0; i < (dense ? 1 : m); i++) {
        size_t rows = dense ? m : 1, span = (rows - 1) * n + h;
        TERN_TRY(tern_error_wrap(s->swiglu(s->ctx, tern_view(c, i * dims->ldc, rows * h), tern_view(p, i * n, span),
                                           tern_view(p, i * n + h, span), (int)rows, (int)h, (int)n),
                                 "matmul's SWIGLU epilogue"));
    }
    return NULL;
}

/* The ROPE epilogue as its own steps: the product with the bias into C, then rope over C's
 * first heads of each row, in place (stride ldc). */
static tern_error *compose_rope(const tern_matmul_steps *s, tern_buf c, tern_buf a, tern_buf b, const tern_matmul *mm,
                                const tern_matmul_dims *dims) {
    const tern_matmul_rope *r = &mm->rope;
    tern_matmul product = *mm;
    product.epilogue = TERN_EPILOGUE_NONE;
    TERN_TRY(s->matmul(s->ctx, c, a, b, &product));
    tern_buf rows = tern_view(c, 0, (SZ(dims->m) - 1) * dims->ldc + SZ(dims->n));
    return tern_error_wrap(s->rope(s->ctx, rows, rows, r->pos, r->inv_freq, dims->m, r->heads, r->head_dim,
                                   (int)dims->ldc),
                           "matmul's ROPE epilogue");
}

/* The LAYERNORM or RMSNORM prologue as its own step: x [m, k] (dense, A's dtype, the
 * handler's operand temporary) = layernorm or rmsnorm of A's rows (one call, or one a row
 * where A's rows have gaps), then the handler's matmul of x with everything else. */
static tern_error *compose_prologue(const tern_matmul_steps *s, tern_buf c, tern_buf a, tern_buf b,
                                    const tern_matmul *mm, const tern_matmul_dims *dims) {
    const char *what = mm->prologue == TERN_PROLOGUE_LAYERNORM ? "matmul's LAYERNORM prologue"
                                                               : "matmul's RMSNORM prologue";
    size_t m = SZ(dims->m), k = SZ(dims->k);
    const tern_matmul_norm *nm = &mm->norm;
    tern_buf x;
    TERN_TRY(tern_error_wrap(s->temp(s->ctx, TERN_TEMP_OPERAND, a.dtype, m * k, &x), "%s", what));
    bool dense = dims->lda == k;
    for (size_t i = 0; i < (dense ? 1 : m); i++) {
        size_t rows = dense ? m : 1;
        tern_buf in = tern_view(a, i * dims->lda, rows * k), out = tern_view(x, i * k, rows * k);
        tern_error *err = mm->prologue == TERN_PROLOGUE_LAYERNORM
                              ? s->layernorm(s->ctx, out, in, nm->w, nm->b, (int)rows, dims->k, nm->eps)
                              : s->rmsnorm(s->ctx, out, in, nm->w, (int)rows, dims->k, nm->eps);
        TERN_TRY(tern_error_wrap(err, "%s", what));
    }
    tern_matmul rest = *mm;
    rest.prologue = TERN_PROLOGUE_NONE;
    rest.norm = (tern_matmul_norm){0};
    rest.lda = 0;
    return s->matmul(s->ctx, c, x, b, &rest);
}

/* The ATTENTION prologue as its own step: attention_cached into A, then the handler's matmul
 * of A with everything else. */
static tern_error *compose_attention(const tern_matmul_steps *s, tern_buf c, tern_buf a, tern_buf b,
                                     const tern_matmul *mm) {
    const tern_matmul_attention *at = &mm->att;
    if (at->product)
        TERN_TRY(tern_error_wrap(s->matmul(s->ctx, at->qkv, at->x, at->w, at->product),
                                 "matmul's ATTENTION prologue's product"));
    TERN_TRY(tern_error_wrap(s->attention_cached(s->ctx, a, at->k_cache, at->v_cache, at->qkv, at->pos, at->B, at->T,
                                                 at->NH, at->KV, at->hs, at->max_T),
                             "matmul's ATTENTION prologue"));
    tern_matmul rest = *mm;
    rest.prologue = TERN_PROLOGUE_NONE;
    rest.att = (tern_matmul_attention){0};
    return s->matmul(s->ctx, c, a, b, &rest);
}

tern_error *tern_matmul_compose(const tern_matmul_steps *s, tern_buf c, tern_buf a, tern_buf b,
                                const tern_matmul *mm, const tern_matmul_dims *dims) {
    if (mm->prologue == TERN_PROLOGUE_ATTENTION) return compose_attention(s, c, a, b, mm);
    if (mm->prologue != TERN_PROLOGUE_NONE) return compose_prologue(s, c, a, b, mm, dims);
    if (mm->epilogue == TERN_EPILOGUE_SWIGLU) return compose_swiglu(s, c, a, b, mm, dims);
    if (mm->epilogue == TERN_EPILOGUE_ROPE) return compose_rope(s, c, a, b, mm, dims);
    c_runs r = matmul_c_runs(dims);
    /* only C's matrix elements take the addend: the gaps between rows (ldc > n) and between
     * entries belong to whoever owns them, and the product writes none of them either */
    if (tern_matmul_separate_addend(c, mm) && mm->beta != 0) {
        for (size_t i = 0; i < r.count; i++) {
            size_t at = c_run_at(dims, &r, i);
            TERN_TRY(tern_error_wrap(s->copy(s->ctx, tern_view(c, at, r.len), tern_view(mm->addend, at, r.len)),
                                     "matmul"));
        }
    }
    tern_matmul plain = tern_matmul_plain(mm);
    TERN_TRY(s->matmul(s->ctx, c, a, b, &plain));
    if (tern_present(mm->bias_grad)) /* B is a dense [k, n] (validated) */
        TERN_TRY(tern_error_wrap(s->sum_rows(s->ctx, mm->bias_grad, tern_view(b, 0, SZ(dims->k) * SZ(dims->n)),
                                             dims->k, dims->n, mm->beta),
                                 "matmul"));
    for (size_t i = 0; i < r.count && mm->epilogue == TERN_EPILOGUE_GELU_BACKWARD; i++) {
        tern_buf ci = tern_view(c, c_run_at(dims, &r, i), r.len);
        TERN_TRY(tern_error_wrap(s->gelu_backward(s->ctx, ci, ci, tern_view(mm->aux, i * r.len, r.len)),
                                 "matmul"));
    }
    if (tern_present(mm->col_sums)) /* C is a dense [m, n] (validated) */
        TERN_TRY(tern_error_wrap(s->sum_rows(s->ctx, mm->col_sums, tern_view(c, 0, SZ(dims->m) * SZ(dims->n)),
                                             dims->m, dims->n, mm->col_sums_beta),
                                 "matmul"));
    return NULL;
}

tern_error *tern_validate_sum_rows(tern_dev *d, tern_buf out, tern_buf x, int rows, int cols, float beta) {
    TERN_TRY(tern_check_positive("sum_rows", "rows", rows));
    TERN_TRY(tern_check_positive("sum_rows", "cols", cols));
    if (!isfinite(beta)) return tern_errorf("sum_rows: beta must be finite");
    size_t n;
    TERN_TRY(product("sum_rows", "rows * cols", &n, 2, SZ(rows), SZ(cols)));
    TERN_TRY(tern_check_buf("sum_rows", "out", out, TERN_DT_FLOAT2, SZ(cols), "cols"));
    TERN_TRY(tern_check_buf("sum_rows", "x", x, TERN_DT_FLOAT2, n, "rows * cols"));
    return tern_check_disjoint("sum_rows", "out", out, "x", x);
}

/* out may be exactly `in` (in place), never partly overlap it. */
static tern_error *in_place_or_disjoint(const char *op, const char *what_out, tern_buf out,
                                        const char *what_in, tern_buf in) {
    if (tern_views_same(out, in)) return NULL;
    if (tern_views_overlap(out, in))
        return tern_errorf("%s: %s partly overlaps %s (it may only be the same view)", op,
                           what_out, what_in);
    return NULL;
}

tern_error *tern_validate_add(tern_dev *d, tern_buf out, tern_buf a, tern_buf b) {
    TERN_TRY(tern_check_view("add", "out", out, TERN_DT_FLOAT2));
    TERN_TRY(tern_check_buf("add", "a", a, TERN_DT_FLOAT2, out.len, "out's length"));
    TERN_TRY(tern_check_buf("add", "b", b, TERN_DT_FLOAT2, out.len, "out's length"));
    TERN_TRY(in_place_or_disjoint("add", "out", out, "a", a));
    return in_place_or_disjoint("add", "out", out, "b", b);
}

tern_error *tern_validate_norm2(tern_dev *d, tern_buf x, double *out) {
    if (!out) return tern_errorf("norm2: out is NULL");
    return tern_check_view("norm2", "x", x, TERN_DT_FLOAT2);
}

/* ---- GPT-2 ---- */

/* B, T, C positive and B * T, B * T * C without overflow. */
static tern_error *btc(const char *op, int B, int T, int C, size_t *bt, size_t *btc_out) {
    TERN_TRY(tern_check_positive(op, "B", B));
    TERN_TRY(tern_check_positive(op, "T", T));
    TERN_TRY(tern_check_positive(op, "C", C));
    TERN_TRY(product(op, "B * T", bt, 2, SZ(B), SZ(T)));
    return product(op, "B * T * C", btc_out, 3, SZ(B), SZ(T), SZ(C));
}

/* A table of rows of C elements ([rows, C]) holding at least min_rows rows. */
static tern_error *check_table(const char *op, const char *what, tern_buf t, int C,
                               size_t min_rows) {
    TERN_TRY(tern_check_view(op, what, t, TERN_DT_FLOAT2));
    if (t.len % SZ(C) != 0)
        return tern_errorf("%s: %s has %zu elements, not a whole number of rows of C = %d", op,
                           what, t.len, C);
    if (t.len / SZ(C) < min_rows)
        return tern_errorf("%s: %s has %zu rows, needs at least %zu", op, what, t.len / SZ(C),
                           min_rows);
    return NULL;
}

tern_error *tern_validate_embed(tern_dev *d, tern_buf out, tern_buf tokens, tern_buf wte, tern_buf wpe, tern_buf pos, int B, int T, int C) {
    const char *op = "embed";
    size_t bt, n;
    TERN_TRY(btc(op, B, T, C, &bt, &n));
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "B * T * C"));
    TERN_TRY(tern_check_buf(op, "tokens", tokens, TERN_DT_I32, bt, "B * T"));
    TERN_TRY(check_table(op, "wte", wte, C, 1));
    if (tern_present(wpe)) TERN_TRY(check_table(op, "wpe", wpe, C, SZ(T))); /* absent: no position table */
    if (tern_present(pos)) TERN_TRY(tern_check_view(op, "pos", pos, TERN_DT_I32));
    TERN_TRY(tern_check_disjoint(op, "out", out, "wte", wte));
    TERN_TRY(tern_check_disjoint(op, "out", out, "wpe", wpe));
    TERN_TRY(tern_check_disjoint(op, "out", out, "tokens", tokens));
    return tern_check_disjoint(op, "out", out, "pos", pos);
}

tern_error *tern_validate_embed_backward(tern_dev *d, tern_buf dwte, tern_buf dwpe, tern_buf dout, tern_buf tokens, int B, int T, int C) {
    const char *op = "embed_backward";
    size_t bt, n;
    TERN_TRY(btc(op, B, T, C, &bt, &n));
    if (!tern_present(dwte) && !tern_present(dwpe))
        return tern_errorf("%s: dwte and dwpe are both absent", op);
    if (tern_present(dwte)) TERN_TRY(check_table(op, "dwte", dwte, C, 1));
    if (tern_present(dwpe)) TERN_TRY(check_table(op, "dwpe", dwpe, C, SZ(T)));
    TERN_TRY(tern_check_buf(op, "dout", dout, TERN_DT_FLOAT2, n, "B * T * C"));
    TERN_TRY(tern_check_buf(op, "tokens", tokens, TERN_DT_I32, bt, "B * T"));
    TERN_TRY(tern_check_disjoint(op, "dwte", dwte, "dwpe", dwpe));
    TERN_TRY(tern_check_disjoint(op, "dwte", dwte, "dout", dout));
    TERN_TRY(tern_check_disjoint(op, "dwpe", dwpe, "dout", dout));
    TERN_TRY(tern_check_disjoint(op, "dwte", dwte, "tokens", tokens));
    return tern_check_disjoint(op, "dwpe", dwpe, "tokens", tokens);
}

tern_error *tern_validate_layernorm(tern_dev *d, tern_buf out, tern_buf mean, tern_buf rstd, tern_buf x, tern_buf w, tern_buf b, int rows, int C, float eps) {
    const char *op = "layernorm";
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "C", C));
    if (!(eps >= 0) || !isfinite(eps)) return tern_errorf("%s: eps must be finite and >= 0", op);
    size_t n;
    TERN_TRY(product(op, "rows * C", &n, 2, SZ(rows), SZ(C)));
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_optional(op, "mean", mean, TERN_DT_F32, SZ(rows), "rows"));
    TERN_TRY(tern_check_optional(op, "rstd", rstd, TERN_DT_F32, SZ(rows), "rows"));
    TERN_TRY(tern_check_buf(op, "x", x, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "w", w, TERN_DT_FLOAT2, SZ(C), "C"));
    TERN_TRY(tern_check_buf(op, "b", b, TERN_DT_FLOAT2, SZ(C), "C"));
    const tern_buf outs[3] = {out, mean, rstd};
    const char *out_names[3] = {"out", "mean", "rstd"};
    const tern_buf ins[3] = {x, w, b};
    const char *in_names[3] = {"x", "w", "b"};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            TERN_TRY(tern_check_disjoint(op, out_names[i], outs[i], in_names[j], ins[j]));
        for (int j = i + 1; j < 3; j++)
            TERN_TRY(tern_check_disjoint(op, out_names[i], outs[i], out_names[j], outs[j]));
    }
    return NULL;
}

tern_error *tern_validate_layernorm_backward(tern_dev *d, tern_buf dx, tern_buf dw, tern_buf db, tern_buf dsum,
                                             tern_buf out, tern_buf dout, tern_buf x, tern_buf w, tern_buf b,
                                             tern_buf mean, tern_buf rstd, int rows, int C, float grad_beta) {
    const char *op = "layernorm_backward";
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "C", C));
    if (!isfinite(grad_beta)) return tern_errorf("%s: grad_beta must be finite", op);
    size_t n;
    TERN_TRY(product(op, "rows * C", &n, 2, SZ(rows), SZ(C)));
    TERN_TRY(tern_check_buf(op, "dx", dx, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "dw", dw, TERN_DT_FLOAT2, SZ(C), "C"));
    TERN_TRY(tern_check_buf(op, "db", db, TERN_DT_FLOAT2, SZ(C), "C"));
    TERN_TRY(tern_check_optional(op, "dsum", dsum, TERN_DT_FLOAT2, SZ(C), "C"));
    TERN_TRY(tern_check_optional(op, "out", out, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "dout", dout, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "x", x, TERN_DT_FLOAT2, n, "rows * C"));
    TERN_TRY(tern_check_buf(op, "w", w, TERN_DT_FLOAT2, SZ(C), "C"));
    /* mean absent: x is the forward's output, xhat = (x - b) / w */
    bool from_out = !tern_present(mean);
    if (from_out && tern_present(out))
        return tern_errorf("%s: out is written only from the layer norm's input (mean given)", op);
    if (tern_present(out)) TERN_TRY(tern_check_buf(op, "b (out is written)", b, TERN_DT_FLOAT2, SZ(C), "C"));
    else if (from_out) TERN_TRY(tern_check_buf(op, "b (x is the output: mean absent)", b, TERN_DT_FLOAT2, SZ(C), "C"));
    else TERN_TRY(tern_check_optional(op, "b", b, TERN_DT_FLOAT2, SZ(C), "C"));
    TERN_TRY(tern_check_optional(op, "mean", mean, TERN_DT_F32, SZ(rows), "rows"));
    TERN_TRY(tern_check_buf(op, "rstd", rstd, TERN_DT_F32, SZ(rows), "rows"));
    /* dsum, out and b absent have len 0, which overlaps nothing */
    const tern_buf outs[5] = {dx, dw, db, dsum, out};
    const char *out_names[5] = {"dx", "dw", "db", "dsum", "out"};
    const tern_buf ins[6] = {dout, x, w, b, mean, rstd};
    const char *in_names[6] = {"dout", "x", "w", "b", "mean", "rstd"};
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 6; j++)
            TERN_TRY(tern_check_disjoint(op, out_names[i], outs[i], in_names[j], ins[j]));
        for (int j = i + 1; j < 5; j++)
            TERN_TRY(tern_check_disjoint(op, out_names[i], outs[i], out_names[j], outs[j]));
    }
    return NULL;
}

tern_error *tern_validate_gelu(tern_dev *d, tern_buf out, tern_buf x) {
    TERN_TRY(tern_check_view("gelu", "out", out, TERN_DT_FLOAT2));
    TERN_TRY(tern_check_buf("gelu", "x", x, TERN_DT_FLOAT2, out.len, "out's length"));
    return in_place_or_disjoint("gelu", "out", out, "x", x);
}

tern_error *tern_validate_gelu_backward(tern_dev *d, tern_buf dx, tern_buf dout, tern_buf x) {
    const char *op = "gelu_backward";
    TERN_TRY(tern_check_view(op, "dx", dx, TERN_DT_FLOAT2));
    TERN_TRY(tern_check_buf(op, "dout", dout, TERN_DT_FLOAT2, dx.len, "dx's length"));
    TERN_TRY(tern_check_buf(op, "x", x, TERN_DT_FLOAT2, dx.len, "dx's length"));
    TERN_TRY(in_place_or_disjoint(op, "dx", dx, "dout", dout));
    return tern_check_disjoint(op, "dx", dx, "x", x);
}

/* B, T, NH, KV, hs positive, KV dividing NH; *n = B T NH hs (out's elements) and
 * *n_qkv = B T (NH + 2 KV) hs (qkv's), without overflow. */
static tern_error *attention_shape(const char *op, int B, int T, int NH, int KV, int hs, size_t *n,
                                   size_t *n_qkv) {
    TERN_TRY(tern_check_positive(op, "B", B));
    TERN_TRY(tern_check_positive(op, "T", T));
    TERN_TRY(tern_check_positive(op, "NH", NH));
    TERN_TRY(tern_check_positive(op, "KV", KV));
    TERN_TRY(tern_check_positive(op, "hs", hs));
    if (NH % KV != 0) return tern_errorf("%s: KV = %d key/value heads do not divide NH = %d", op, KV, NH);
    size_t bt, w;
    if (!tern_mul_size(SZ(B), SZ(T), &bt) || !tern_mul_size(SZ(NH) + 2 * SZ(KV), SZ(hs), &w) ||
        !tern_mul_size(bt, w, n_qkv) || !tern_mul_size(bt, SZ(NH) * SZ(hs), n))
        return tern_errorf("%s: B * T * (NH + 2 KV) * hs overflows", op);
    return NULL;
}

tern_error *tern_check_saved(const char *op, tern_buf saved, size_t need) {
    return tern_check_buf(op, "saved", saved, TERN_DT_F32, need, "attention_saved_len");
}

tern_error *tern_validate_attention_saved_len(tern_dev *d, int B, int T, int NH, size_t *out) {
    const char *op = "attention_saved_len";
    if (!out) return tern_errorf("%s: out is NULL", op);
    TERN_TRY(tern_check_positive(op, "B", B));
    TERN_TRY(tern_check_positive(op, "T", T));
    return tern_check_positive(op, "NH", NH);
}

tern_error *tern_validate_attention(tern_dev *d, tern_buf out, tern_buf saved, tern_buf qkv, int B, int T, int NH, int KV, int hs) {
    const char *op = "attention";
    size_t n = 0, n3 = 0;
    TERN_TRY(attention_shape(op, B, T, NH, KV, hs, &n, &n3));
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "B * T * NH * hs"));
    TERN_TRY(tern_check_view(op, "saved", saved, TERN_DT_F32)); /* its length: the handler's (tern_check_saved) */
    TERN_TRY(tern_check_buf(op, "qkv", qkv, TERN_DT_FLOAT2, n3, "B * T * (NH + 2 KV) * hs"));
    TERN_TRY(tern_check_disjoint(op, "out", out, "saved", saved));
    TERN_TRY(tern_check_disjoint(op, "out", out, "qkv", qkv));
    return tern_check_disjoint(op, "saved", saved, "qkv", qkv);
}

tern_error *tern_validate_attention_backward(tern_dev *d, tern_buf dqkv, tern_buf dout, tern_buf qkv, tern_buf out, tern_buf saved, int B, int T, int NH, int KV, int hs) {
    const char *op = "attention_backward";
    size_t n = 0, n3 = 0;
    TERN_TRY(attention_shape(op, B, T, NH, KV, hs, &n, &n3));
    TERN_TRY(tern_check_buf(op, "dqkv", dqkv, TERN_DT_FLOAT2, n3, "B * T * (NH + 2 KV) * hs"));
    TERN_TRY(tern_check_buf(op, "dout", dout, TERN_DT_FLOAT2, n, "B * T * NH * hs"));
    TERN_TRY(tern_check_buf(op, "qkv", qkv, TERN_DT_FLOAT2, n3, "B * T * (NH + 2 KV) * hs"));
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "B * T * NH * hs"));
    TERN_TRY(tern_check_view(op, "saved", saved, TERN_DT_F32)); /* its length: the handler's (tern_check_saved) */
    TERN_TRY(tern_check_disjoint(op, "dqkv", dqkv, "dout", dout));
    TERN_TRY(tern_check_disjoint(op, "dqkv", dqkv, "qkv", qkv));
    TERN_TRY(tern_check_disjoint(op, "dqkv", dqkv, "out", out));
    return tern_check_disjoint(op, "dqkv", dqkv, "saved", saved);
}

tern_error *tern_validate_attention_cached(tern_dev *d, tern_buf out, tern_buf k_cache, tern_buf v_cache, tern_buf qkv, tern_buf pos, int B, int T, int NH, int KV, int hs, int max_T) {
    const char *op = "attention_cached";
    size_t n = 0, n3 = 0, nc = 0;
    TERN_TRY(attention_shape(op, B, T, NH, KV, hs, &n, &n3));
    TERN_TRY(tern_check_positive(op, "max_T", max_T));
    if (T > max_T) return tern_errorf("%s: T = %d exceeds max_T = %d", op, T, max_T);
    TERN_TRY(product(op, "B * KV * max_T * hs", &nc, 4, SZ(B), SZ(KV), SZ(max_T), SZ(hs)));
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_FLOAT2, n, "B * T * NH * hs"));
    TERN_TRY(tern_check_buf(op, "k_cache", k_cache, TERN_DT_FLOAT2, nc, "B * KV * max_T * hs"));
    TERN_TRY(tern_check_buf(op, "v_cache", v_cache, TERN_DT_FLOAT2, nc, "B * KV * max_T * hs"));
    TERN_TRY(tern_check_buf(op, "qkv", qkv, TERN_DT_FLOAT2, n3, "B * T * (NH + 2 KV) * hs"));
    TERN_TRY(tern_check_view(op, "pos", pos, TERN_DT_I32));
    const tern_buf bufs[5] = {out, k_cache, v_cache, qkv, pos};
    const char *names[5] = {"out", "k_cache", "v_cache", "qkv", "pos"};
    for (int i = 0; i < 3; i++) /* the written ones against everything */
        for (int j = i + 1; j < 5; j++)
            TERN_TRY(tern_check_disjoint(op, names[i], bufs[i], names[j], bufs[j]));
    return NULL;
}

/* rows, V positive, V <= Vp, rows * Vp without overflow. */
static tern_error *logits_shape(const char *op, int rows, int V, int Vp, size_t *n) {
    TERN_TRY(tern_check_positive(op, "rows", rows));
    TERN_TRY(tern_check_positive(op, "V", V));
    if (Vp < V) return tern_errorf("%s: Vp = %d is less than V = %d", op, Vp, V);
    return product(op, "rows * Vp", n, 2, SZ(rows), SZ(Vp));
}

tern_error *tern_validate_cross_entropy(tern_dev *d, tern_buf losses, tern_buf logits, tern_buf targets, int rows, int V, int Vp, float grad_scale) {
    const char *op = "cross_entropy";
    size_t n;
    TERN_TRY(logits_shape(op, rows, V, Vp, &n));
    if (!isfinite(grad_scale)) return tern_errorf("%s: grad_scale must be finite", op);
    TERN_TRY(tern_check_buf(op, "losses", losses, TERN_DT_F32, SZ(rows), "rows"));
    TERN_TRY(tern_check_buf(op, "logits", logits, TERN_DT_FLOAT2, n, "rows * Vp"));
    TERN_TRY(tern_check_buf(op, "targets", targets, TERN_DT_I32, SZ(rows), "rows"));
    TERN_TRY(tern_check_disjoint(op, "losses", losses, "logits", logits));
    TERN_TRY(tern_check_disjoint(op, "losses", losses, "targets", targets));
    return tern_check_disjoint(op, "logits", logits, "targets", targets);
}

tern_error *tern_validate_sample(tern_dev *d, tern_buf out, tern_buf logits, int rows, int V, int Vp, float temperature, int top_k, uint64_t seed, tern_buf counter) {
    const char *op = "sample";
    size_t n;
    TERN_TRY(logits_shape(op, rows, V, Vp, &n));
    if (isnan(temperature)) return tern_errorf("%s: temperature is NaN", op);
    TERN_TRY(tern_check_buf(op, "out", out, TERN_DT_I32, SZ(rows), "rows"));
    TERN_TRY(tern_check_buf(op, "logits", logits, TERN_DT_FLOAT2, n, "rows * Vp"));
    if (tern_present(counter)) TERN_TRY(tern_check_view(op, "counter", counter, TERN_DT_I32));
    TERN_TRY(tern_check_disjoint(op, "out", out, "logits", logits));
    return tern_check_disjoint(op, "out", out, "counter", counter);
}

tern_error *tern_validate_adamw(tern_dev *d, tern_buf param, tern_buf shadow, tern_buf grad, tern_buf m, tern_buf v, const tern_adamw *h) {
    const char *op = "adamw";
    if (!h) return tern_errorf("%s: h is NULL", op);
    if (h->step < 1) return tern_errorf("%s: step must be >= 1, got %d", op, h->step);
    if (!(h->beta1 >= 0 && h->beta1 < 1) || !(h->beta2 >= 0 && h->beta2 < 1))
        return tern_errorf("%s: beta1 and beta2 must lie in [0, 1), got %g and %g", op,
                           (double)h->beta1, (double)h->beta2);
    if (!(h->eps >= 0) || !isfinite(h->eps) || !(h->lr >= 0) || !isfinite(h->lr) ||
        !(h->weight_decay >= 0) || !isfinite(h->weight_decay))
        return tern_errorf("%s: lr, eps and weight_decay must be finite and >= 0", op);
    if (!isfinite(h->grad_scale)) return tern_errorf("%s: grad_scale must be finite", op);
    TERN_TRY(tern_check_view(op, "param", param, TERN_DT_F32 | TERN_DT(TERN_U16)));
    size_t n = param.len;
    TERN_TRY(tern_check_optional(op, "shadow", shadow, TERN_DT_FLOAT2, n, "param's length"));
    if (param.dtype == TERN_U16 && !(tern_present(shadow) && shadow.dtype == TERN_BF16))
        return tern_errorf("%s: a u16 param (the low halves of a split f32) needs a bf16 shadow (the high "
                           "halves), not %s", op, tern_present(shadow) ? tern_dtype_name(shadow.dtype) : "none");
    TERN_TRY(tern_check_buf(op, "grad", grad, TERN_DT_FLOAT2, n, "param's length"));
    TERN_TRY(tern_check_buf(op, "m", m, TERN_DT_F32, n, "param's length"));
    TERN_TRY(tern_check_buf(op, "v", v, TERN_DT_F32, n, "param's length"));
    const tern_buf bufs[5] = {param, shadow, m, v, grad};
    const char *names[5] = {"param", "shadow", "m", "v", "grad"};
    for (int i = 0; i < 4; i++) /* the written ones against everything */
        for (int j = i + 1; j < 5; j++)
            TERN_TRY(tern_check_disjoint(op, names[i], bufs[i], names[j], bufs[j]));
    return NULL;
}

tern_error *tern_validate_allreduce(tern_dev *d, tern_buf buf, tern_dist *comm) {
    (void)comm; /* NULL is a single rank: allowed */
    return tern_check_view("allreduce", "buf", buf, TERN_DT_FLOAT2);
}

tern_error *tern_validate_allgather(tern_dev *d, tern_buf buf, tern_dist *comm) {
    TERN_TRY(tern_check_view("allgather", "buf", buf, TERN_DT_FLOAT2));
    int world = tern_dist_world(comm); /* NULL: 1 */
    if (world > 1 && buf.len % (size_t)world)
        return tern_errorf("allgather: buf has %zu elements, not a multiple of the %d ranks", buf.len, world);
    return NULL;
}
