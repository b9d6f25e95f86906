/* Buffers: 64-byte aligned host memory behind a small header that records the allocation,
 * so free can tell a whole allocation from a view or a foreign pointer. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

#define CPU_BUF_MAGIC 0x7465726e62756621ull /* "ternbuf!" */
#define CPU_HEADER 64                       /* keeps the data 64-byte aligned */

typedef struct cpu_header {
    uint64_t magic;
    size_t len;
    tern_dtype dtype;
} cpu_header;

static cpu_header *header_of(void *mem) { return (cpu_header *)((unsigned char *)mem - CPU_HEADER); }

/* Elements per parallel chunk of a copy (big enough to amortise the fork). */
#define COPY_CHUNK ((size_t)1 << 16)

tern_error *cpu_alloc(tern_dev *d, tern_dtype dtype, size_t len, tern_buf *out) {
    size_t bytes = cpu_round64(tern_dtype_bytes(dtype, len));
    unsigned char *base = aligned_alloc(64, CPU_HEADER + bytes);
    if (!base)
        return tern_errorf("alloc: out of memory for %zu elements of %s", len, tern_dtype_name(dtype));
    cpu_header *h = (cpu_header *)base;
    h->magic = CPU_BUF_MAGIC;
    h->len = len;
    h->dtype = dtype;
    out->mem = base + CPU_HEADER;
    out->offset = 0;
    out->len = len;
    out->dtype = dtype;
    return NULL;
}

tern_error *cpu_free(tern_dev *d, tern_buf *buf) {
    if (!buf->mem) return NULL;
    cpu_header *h = header_of(buf->mem);
    if (h->magic != CPU_BUF_MAGIC) return tern_errorf("free: buf was not allocated by this handler");
    if (h->len != buf->len || h->dtype != buf->dtype)
        return tern_errorf("free: buf is a view of %zu elements of an allocation of %zu; free the whole allocation",
                           buf->len, h->len);
    h->magic = 0;
    free(h);
    *buf = tern_none();
    return NULL;
}

tern_error *cpu_upload(tern_dev *d, tern_buf dst, const void *src) {
    if (dst.len) memcpy(cpu_ptr(dst), src, tern_dtype_bytes(dst.dtype, dst.len));
    return NULL;
}

tern_error *cpu_download(tern_dev *d, void *dst, tern_buf src) {
    if (src.len) memcpy(dst, cpu_ptr(src), tern_dtype_bytes(src.dtype, src.len));
    return NULL;
}

/* One element as a double. */
static double load_double(const void *p, tern_dtype dtype) {
    switch (dtype) {
    case TERN_F32: return *(const float *)p;
    case TERN_BF16: return tern_bf16_to_f32(*(const uint16_t *)p);
    case TERN_F16: return tern_f16_to_f32(*(const uint16_t *)p);
    case TERN_I32: return *(const int32_t *)p;
    case TERN_U16: return *(const uint16_t *)p;
    case TERN_Q8: break; /* get and fill take no q8_0 (validated) */
    }
    return 0;
}

/* One element from a double: floats round to nearest even (through f32), integers
 * truncate toward zero and saturate at their range, NaN becomes 0. */
static void store_double(void *p, tern_dtype dtype, double v) {
    switch (dtype) {
    case TERN_F32: *(float *)p = (float)v; return;
    case TERN_BF16: *(uint16_t *)p = tern_f32_to_bf16((float)v); return;
    case TERN_F16: *(uint16_t *)p = tern_f32_to_f16((float)v); return;
    case TERN_I32:
        *(int32_t *)p = v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
        return;
    case TERN_U16:
        *(uint16_t *)p = v != v ? 0 : v <= 0 ? 0 : v >= 65535.0 ? 65535 : (uint16_t)v;
        return;
    case TERN_Q8: return;
    }
}

/* Converts n elements (src and dst do not overlap; q8_0: whole blocks, to or from a float
 * dtype, validated). */
static void convert_span(void *dst, tern_dtype dt, const void *src, tern_dtype st, size_t n) {
    size_t ds = tern_dtype_size(dt), ss = tern_dtype_size(st);
    if (dt == st) {
        memcpy(dst, src, tern_dtype_bytes(dt, n));
    } else if (dt == TERN_Q8 || st == TERN_Q8) { /* through f32, a block row at a time */
        float tmp[512];
        for (size_t i = 0; i < n; i += 512) {
            size_t c = n - i < 512 ? n - i : 512;
            cpu_to_f32(tmp, (const unsigned char *)src + tern_dtype_bytes(st, i), st, c);
            cpu_from_f32((unsigned char *)dst + tern_dtype_bytes(dt, i), dt, tmp, c);
        }
    } else if (st == TERN_F32 && tern_dtype_is_float(dt)) {
        cpu_from_f32(dst, dt, src, n);
    } else if (dt == TERN_F32 && tern_dtype_is_float(st)) {
        cpu_to_f32(dst, src, st, n);
    } else if (tern_dtype_is_float(st) && tern_dtype_is_float(dt)) { /* bf16 <-> f16 via f32 */
        float tmp[512];
        for (size_t i = 0; i < n; i += 512) {
            size_t c = n - i < 512 ? n - i : 512;
            cpu_to_f32(tmp, (const unsigned char *)src + i * ss, st, c);
            cpu_from_f32((unsigned char *)dst + i * ds, dt, tmp, c);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            store_double((unsigned char *)dst + i * ds, dt, load_double((const unsigned char *)src + i * ss, st));
    }
}

tern_error *cpu_copy(tern_dev *d, tern_buf dst, tern_buf src) {
    size_t n = dst.len, chunks = (n + COPY_CHUNK - 1) / COPY_CHUNK;
    unsigned char *dp = cpu_ptr(dst);
    const unsigned char *sp = cpu_ptr(src);
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 1)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * COPY_CHUNK, len = n - i < COPY_CHUNK ? n - i : COPY_CHUNK;
        /* COPY_CHUNK is whole q8_0 blocks, so these byte offsets are exact for q8_0 too */
        convert_span(dp + tern_dtype_bytes(dst.dtype, i), dst.dtype, sp + tern_dtype_bytes(src.dtype, i),
                     src.dtype, len);
    }
    return NULL;
}

tern_error *cpu_fill(tern_dev *d, tern_buf dst, double value) {
    size_t n = dst.len, size = tern_dtype_size(dst.dtype);
    if (n == 0) return NULL;
    unsigned char one[4];
    store_double(one, dst.dtype, value);
    unsigned char *p = cpu_ptr(dst);
    size_t chunks = (n + COPY_CHUNK - 1) / COPY_CHUNK;
    bool zero = true;
    for (size_t b = 0; b < size; b++) zero = zero && one[b] == 0;
#pragma omp parallel for num_threads(d->threads) schedule(static) if (chunks > 1)
    for (size_t c = 0; c < chunks; c++) {
        size_t i = c * COPY_CHUNK, len = n - i < COPY_CHUNK ? n - i : COPY_CHUNK;
        unsigned char *q = p + i * size;
        if (zero) {
            memset(q, 0, len * size);
        } else if (size == 4) {
            uint32_t v;
            memcpy(&v, one, 4);
            for (size_t j = 0; j < len; j++) memcpy(q + 4 * j, &v, 4);
        } else {
            uint16_t v;
            memcpy(&v, one, 2);
            for (size_t j = 0; j < len; j++) memcpy(q + 2 * j, &v, 2);
        }
    }
    return NULL;
}

/* For generic.c: one element as a double, and one element from a double. */
double cpu_get_element(tern_buf a, size_t i) { return load_double(cpu_at(a, i), a.dtype); }

void cpu_set_element(tern_buf a, size_t i, double v) { store_double(cpu_at(a, i), a.dtype, v); }
