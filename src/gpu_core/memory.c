/* Memory operations over the runtime: allocations (tracked, so free can tell a whole
 * allocation from a view or a foreign handle), transfers, copy with conversion, fill,
 * element reads, from_list and load. */
#include <math.h>
#include <stdlib.h>

#include "gpu_core/gpu_internal.h"
#include "handlers/validate.h"
#include "tern/half.h"
#include "tern/safetensors.h"

struct gpu_alloc_slot {
    void *mem; /* NULL: empty */
    size_t len;
    tern_dtype dtype;
};

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static gpu_alloc_slot *find_alloc(gpu_core *g, const void *mem) {
    if (!g->allocs_cap) return NULL;
    size_t mask = g->allocs_cap - 1;
    for (size_t at = ptr_hash(mem) & mask; g->allocs[at].mem; at = (at + 1) & mask)
        if (g->allocs[at].mem == mem) return &g->allocs[at];
    return NULL;
}

static void put_alloc(gpu_alloc_slot *slots, size_t cap, gpu_alloc_slot s) {
    size_t at = ptr_hash(s.mem) & (cap - 1);
    while (slots[at].mem) at = (at + 1) & (cap - 1);
    slots[at] = s;
}

static tern_error *add_alloc(gpu_core *g, tern_buf b) {
    if (2 * (g->allocs_len + 1) > g->allocs_cap) {
        size_t cap = g->allocs_cap ? g->allocs_cap * 2 : 256;
        gpu_alloc_slot *slots = calloc(cap, sizeof *slots);
        if (!slots) return tern_errorf("out of memory for the allocation table");
        for (size_t i = 0; i < g->allocs_cap; i++)
            if (g->allocs[i].mem) put_alloc(slots, cap, g->allocs[i]);
        free(g->allocs);
        g->allocs = slots;
        g->allocs_cap = cap;
    }
    put_alloc(g->allocs, g->allocs_cap, (gpu_alloc_slot){b.mem, b.len, b.dtype});
    g->allocs_len++;
    return NULL;
}

/* Removes a slot, re-placing the rest of its probe run (linear probing, no tombstones). */
static void remove_alloc(gpu_core *g, gpu_alloc_slot *slot) {
    size_t mask = g->allocs_cap - 1, at = (size_t)(slot - g->allocs);
    g->allocs[at].mem = NULL;
    g->allocs_len--;
    for (size_t next = (at + 1) & mask; g->allocs[next].mem; next = (next + 1) & mask) {
        gpu_alloc_slot s = g->allocs[next];
        g->allocs[next].mem = NULL;
        put_alloc(g->allocs, g->allocs_cap, s);
    }
}

static tern_dbuf dview(tern_buf b) {
    tern_dbuf d = {b.mem, b.offset, b.len, tern_type_of_dtype(b.dtype)};
    return d;
}

tern_error *gpu_alloc(tern_dev *d, tern_dtype dtype, size_t len, tern_buf *out) {
    gpu_core *g = gpu_core_of(d);
    if (dtype == TERN_Q8)
        return tern_errorf("alloc: q8_0 is not supported by the GPU handlers (cuda, opencl, interp) yet");
    tern_dbuf m = {0};
    TERN_TRY(tern_error_wrap(tern_rt_alloc(g->rt, tern_type_of_dtype(dtype), len, &m),
                             "alloc: %zu elements of %s", len, tern_dtype_name(dtype)));
    tern_buf b = {m.mem, 0, len, dtype};
    tern_error *err = add_alloc(g, b);
    if (err) {
        tern_rt_free(g->rt, &m);
        return tern_error_wrap(err, "alloc");
    }
    *out = b;
    return NULL;
}

tern_error *gpu_free(tern_dev *d, tern_buf *buf) {
    gpu_core *g = gpu_core_of(d);
    if (!buf->mem) return NULL;
    gpu_alloc_slot *s = find_alloc(g, buf->mem);
    if (!s) return tern_errorf("free: buf was not allocated by this handler");
    if (s->len != buf->len || s->dtype != buf->dtype || buf->offset != 0)
        return tern_errorf("free: buf is a view of %zu elements of an allocation of %zu; free the whole allocation",
                           buf->len, s->len);
    tern_dbuf m = {buf->mem, 0, s->len, tern_type_of_dtype(s->dtype)};
    remove_alloc(g, s);
    tern_rt_free(g->rt, &m);
    *buf = tern_none();
    return NULL;
}

tern_error *gpu_upload(tern_dev *d, tern_buf dst, const void *src) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_refuse_q8("upload", "dst", dst));
    if (!dst.len) return NULL;
    TERN_TRY(tern_error_wrap(tern_rt_upload(g->rt, dview(dst), src), "upload"));
    /* the copy runs after all work queued before it, and every later kernel after the copy
     * (a kernel overlaps only a kernel before it), so none of that work is in flight for
     * them, even where the runtime returned before the copy ran (cuda) */
    gpu_inflight_barrier(g);
    return NULL;
}

tern_error *gpu_download(tern_dev *d, void *dst, tern_buf src) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_refuse_q8("download", "src", src));
    if (src.len) {
        TERN_TRY(tern_error_wrap(tern_rt_download(g->rt, dst, dview(src)), "download"));
        gpu_inflight_barrier(g);
    }
    return gpu_check_faults(g);
}

/* The runtime's background copy (cuda; the others copy at once). The in-flight set is left
 * as it is: work queued after the copy may still run when download_wait returns. No fault
 * check here, which would wait for everything queued: faults surface at the next download,
 * get or sync. */
tern_error *gpu_download_async(tern_dev *d, void *dst, tern_buf src) {
    gpu_core *g = gpu_core_of(d);
    TERN_TRY(gpu_refuse_q8("download_async", "src", src));
    if (g->download_pending) return tern_errorf(TERN_DOWNLOAD_PENDING);
    if (src.len) TERN_TRY(tern_error_wrap(tern_rt_download_async(g->rt, dst, dview(src)), "download_async"));
    g->download_pending = true;
    return NULL;
}

tern_error *gpu_download_wait(tern_dev *d) {
    gpu_core *g = gpu_core_of(d);
    g->download_pending = false;
    return tern_error_wrap(tern_rt_download_wait(g->rt), "download_wait");
}

tern_error *gpu_copy(tern_dev *d, tern_buf dst, tern_buf src) {
    gpu_core *g = gpu_core_of(d);
    size_t n = dst.len;
    TERN_TRY(gpu_refuse_q8("copy", "dst", dst));
    TERN_TRY(gpu_refuse_q8("copy", "src", src));
    if (!n) return NULL;
    TERN_TRY(gpu_check_index("copy", "dst", n));
    tern_buf both[2] = {dst, src};
    gk_spec s = {0};
    s.t[0] = gpu_t(dst);
    s.t[1] = gpu_t(src);
    s.n[0] = gpu_width(both, 2, 0);
    tern_arg args[] = {tern_arg_buf(dst), tern_arg_buf(src), tern_arg_i32((int32_t)n)};
    return gpu_run(g, "copy", GK_COPY, &s, tern_dims1(gpu_groups((n + (size_t)s.n[0] - 1) / (size_t)s.n[0], GK_EW_GROUP)),
                   tern_dims1(GK_EW_GROUP), args, 3);
}

/* The fill value as the kernel's scalar: floats as f32 (the store rounds to bf16/f16);
 * integers truncated toward zero and saturated, NaN giving 0 (as the cpu handler). */
static tern_arg fill_value(tern_dtype dtype, double v) {
    switch (dtype) {
    case TERN_I32:
        return tern_arg_i32(v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v);
    case TERN_U16: return tern_arg_u32(v != v ? 0 : v <= 0 ? 0 : v >= 65535.0 ? 65535u : (uint32_t)v);
    default: return tern_arg_f32((float)v);
    }
}

tern_error *gpu_fill(tern_dev *d, tern_buf dst, double value) {
    gpu_core *g = gpu_core_of(d);
    size_t n = dst.len;
    if (!n) return NULL;
    TERN_TRY(gpu_check_index("fill", "dst", n));
    gk_spec s = {0};
    s.t[0] = gpu_t(dst);
    s.n[0] = gpu_width(&dst, 1, 0);
    tern_arg args[] = {tern_arg_buf(dst), fill_value(dst.dtype, value), tern_arg_i32((int32_t)n)};
    return gpu_run(g, "fill", GK_FILL, &s, tern_dims1(gpu_groups((n + (size_t)s.n[0] - 1) / (size_t)s.n[0], GK_EW_GROUP)),
                   tern_dims1(GK_EW_GROUP), args, 3);
}

/* One element of any dtype at p as a double. */
static double element_double(const void *p, tern_dtype dtype) {
    uint16_t h;
    switch (dtype) {
    case TERN_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case TERN_BF16: memcpy(&h, p, 2); return tern_bf16_to_f32(h);
    case TERN_F16: memcpy(&h, p, 2); return tern_f16_to_f32(h);
    case TERN_I32: {
        int32_t i;
        memcpy(&i, p, 4);
        return i;
    }
    case TERN_U16: memcpy(&h, p, 2); return h;
    case TERN_Q8: break; /* get takes no q8_0 (validated) */
    }
    return 0;
}

/* One element of dtype at p from a double (floats round to nearest even through f32,
 * integers truncate and saturate, NaN gives 0). */
static void element_store(void *p, tern_dtype dtype, double v) {
    uint16_t h;
    switch (dtype) {
    case TERN_F32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        return;
    }
    case TERN_BF16: h = tern_f32_to_bf16((float)v); memcpy(p, &h, 2); return;
    case TERN_F16: h = tern_f32_to_f16((float)v); memcpy(p, &h, 2); return;
    case TERN_I32: {
        int32_t i = v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v;
        memcpy(p, &i, 4);
        return;
    }
    case TERN_U16:
        h = v != v ? 0 : v <= 0 ? 0 : v >= 65535.0 ? 65535 : (uint16_t)v;
        memcpy(p, &h, 2);
        return;
    case TERN_Q8: return; /* fill takes no q8_0 (validated) */
    }
}

tern_error *gpu_get(tern_dev *d, tern_buf a, size_t index, double *out) {
    gpu_core *g = gpu_core_of(d);
    unsigned char one[8];
    TERN_TRY(tern_error_wrap(tern_rt_download(g->rt, one, dview(tern_view(a, index, 1))), "get"));
    TERN_TRY(gpu_check_faults(g));
    *out = element_double(one, a.dtype);
    return NULL;
}

tern_error *gpu_length(tern_dev *d, tern_buf a, size_t *out) {
    gpu_core *g = gpu_core_of(d);
    (void)g;
    *out = a.len;
    return NULL;
}

/* Uploads count elements converted from host data into a new buffer. */
static tern_error *new_from_host(gpu_core *g, tern_dtype dtype, size_t count, const void *host,
                                 tern_buf *out) {
    tern_buf b = tern_none();
    TERN_TRY(gpu_alloc(gpu_dev(g), dtype, count, &b));
    tern_error *err = tern_rt_upload(g->rt, dview(b), host);
    if (err) {
        tern_error_free(gpu_free(gpu_dev(g), &b));
        return err;
    }
    *out = b;
    return NULL;
}

tern_error *gpu_from_list(tern_dev *d, tern_dtype dtype, const double *values, size_t count,
                          tern_buf *out) {
    gpu_core *g = gpu_core_of(d);
    size_t size = tern_dtype_size(dtype);
    unsigned char *host = malloc(count * size);
    if (!host) return tern_errorf("from_list: out of memory for %zu elements", count);
    for (size_t i = 0; i < count; i++) element_store(host + i * size, dtype, values[i]);
    tern_error *err = new_from_host(g, dtype, count, host, out);
    free(host);
    return tern_error_wrap(err, "from_list");
}

tern_error *gpu_load(tern_dev *d, const char *path, const char *name, tern_dtype dtype,
                     tern_buf *out) {
    gpu_core *g = gpu_core_of(d);
    tern_safetensors *f;
    TERN_TRY(tern_error_wrap(tern_safetensors_open(path, &f), "load"));
    tern_error *err = NULL;
    void *host = NULL;
    const tern_tensor_info *t = tern_safetensors_find(f, name);
    if (!t) {
        err = tern_errorf("load: %s has no tensor '%s'", path, name);
    } else if (!t->supported || !tern_dtype_is_float(t->dtype)) {
        err = tern_errorf("load: tensor '%s' of %s is %s, not F32, BF16 or F16", name, path, t->dtype_name);
    } else if (t->count == 0) {
        err = tern_errorf("load: tensor '%s' of %s is empty", name, path);
    } else if (!(host = malloc(t->count * tern_dtype_size(dtype)))) {
        err = tern_errorf("load: out of memory for tensor '%s' (%zu elements)", name, t->count);
    } else if ((err = tern_tensor_convert(t, dtype, host))) {
        err = tern_error_wrap(err, "load");
    } else {
        err = tern_error_wrap(new_from_host(g, dtype, t->count, host, out), "load: tensor '%s'", name);
    }
    free(host);
    tern_safetensors_close(f);
    return err;
}
