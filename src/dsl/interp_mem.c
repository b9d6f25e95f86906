/* The interpreter's memory statements: bounds-checked loads and stores with the storage
 * conversions (f16/bf16 round to nearest even), vector accesses with their alignment rule,
 * and atomics (real ones: threadgroups run in parallel). */
#include <stdlib.h>

#include "dsl/interp_ctx.h"
#include "tern/half.h"

/* Element `index` of a buffer as a value of its value type. */
static ev read_elem(const unsigned char *p, int elem) {
    switch (elem) {
    case TERN_T_F32: {
        float f;
        memcpy(&f, p, 4);
        return ev_from_f(f);
    }
    case TERN_T_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        return ev_from_u((uint64_t)(int64_t)x);
    }
    case TERN_T_U32: {
        uint32_t x;
        memcpy(&x, p, 4);
        return ev_from_u(x);
    }
    case TERN_T_I64:
    case TERN_T_U64: {
        uint64_t x;
        memcpy(&x, p, 8);
        return ev_from_u(x);
    }
    case TERN_T_F16:
    case TERN_T_BF16:
    case TERN_T_U16: {
        uint16_t h;
        memcpy(&h, p, 2);
        if (elem == TERN_T_U16) return ev_from_u(h);
        return ev_from_f(elem == TERN_T_F16 ? tern_f16_to_f32(h) : tern_bf16_to_f32(h));
    }
    default: return ev_from_u(0);
    }
}

static void write_elem(unsigned char *p, int elem, ev x) {
    switch (elem) {
    case TERN_T_F32: memcpy(p, &x.f, 4); break;
    case TERN_T_I32:
    case TERN_T_U32: {
        uint32_t v = (uint32_t)x.u;
        memcpy(p, &v, 4);
        break;
    }
    case TERN_T_I64:
    case TERN_T_U64: memcpy(p, &x.u, 8); break;
    case TERN_T_F16:
    case TERN_T_BF16:
    case TERN_T_U16: {
        uint16_t h = elem == TERN_T_U16   ? (uint16_t)x.u
                     : elem == TERN_T_F16 ? tern_f32_to_f16(x.f)
                                          : tern_f32_to_bf16(x.f);
        memcpy(p, &h, 2);
        break;
    }
    default: break;
    }
}

/* The name of b, one of c->bufs, for errors. */
static const char *ibuf_name(const ictx *c, const ibuf *b) {
    return ir_string(c->k, c->k->bufs[b - c->bufs].name);
}

/* The element index of lane l into b (one of c->bufs) as an unsigned offset, or fails when
 * it is outside [0, len - width] or not aligned to width. */
static bool index_of_lane(ictx *c, int32_t ins, int l, const char *what, int32_t idx_val,
                          const ibuf *b, int width, size_t *out) {
    const ev x = IREG(c, idx_val)[l];
    int t = c->k->vals[idx_val].type;
    bool neg = ir_type_is_signed(t) && x.i < 0;
    uint64_t i = x.u;
    if (neg || i >= b->len || b->len - i < (uint64_t)width) {
        const char *name = ibuf_name(c, b);
        if (neg)
            ictx_fail(c, ins, l, "%s '%s' at index %lld is out of bounds (%zu elements)", what,
                      name, (long long)x.i, b->len);
        else
            ictx_fail(c, ins, l, "%s '%s' at index %llu is out of bounds (%zu elements)", what,
                      name, (unsigned long long)i, b->len);
        return false;
    }
    if (width > 1 && (b->offset + i) % (uint64_t)width) {
        ictx_fail(c, ins, l, "%s '%s' of %d elements at index %llu (view offset %zu) is not "
                  "aligned to %d elements", what, ibuf_name(c, b), width, (unsigned long long)i,
                  b->offset, width);
        return false;
    }
    *out = (size_t)i;
    return true;
}

/* The common load: a 32-bit element at an i32 index, checked inline. */
static bool load32_fast(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    if (c->k->vals[in->a[1]].type != TERN_T_I32) return false;
    const ev *idx = IREG(c, in->a[1]);
    ev *d = IREG(c, in->dst);
    const unsigned char *base = b->base;
    uint64_t len = b->len;
    switch (b->elem) {
    case TERN_T_F32:
        FOR_LANES(c, lanes, n, {
            if (idx[l].u >= len) return false; /* the slow path reports it */
            memcpy(&d[l].f, base + idx[l].u * 4, 4);
        });
        return true;
    case TERN_T_I32:
        FOR_LANES(c, lanes, n, {
            if (idx[l].u >= len) return false;
            int32_t x;
            memcpy(&x, base + idx[l].u * 4, 4);
            d[l].i = x;
        });
        return true;
    default: return false;
    }
}

void interp_load(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    if (load32_fast(c, ins, lanes, n)) return;
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    ev *d = IREG(c, in->dst);
    size_t size = tern_type_size((tern_type)b->elem);
    FOR_LANES(c, lanes, n, {
        size_t i;
        if (!index_of_lane(c, ins, l, "load from", in->a[1], b, 1, &i)) return;
        d[l] = read_elem(b->base + i * size, b->elem);
    });
}

void interp_store(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    const ev *x = IREG(c, in->a[2]);
    size_t size = tern_type_size((tern_type)b->elem);
    FOR_LANES(c, lanes, n, {
        size_t i;
        if (!index_of_lane(c, ins, l, "store to", in->a[1], b, 1, &i)) return;
        write_elem(b->base + i * size, b->elem, x[l]);
    });
}

void interp_vload(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    int w = in->aux;
    size_t size = tern_type_size((tern_type)b->elem);
    FOR_LANES(c, lanes, n, {
        size_t i;
        if (!index_of_lane(c, ins, l, "vector load from", in->a[1], b, w, &i)) return;
        for (int j = 0; j < w; j++) IREG(c, in->dst + j)[l] = read_elem(b->base + (i + (size_t)j) * size, b->elem);
    });
}

void interp_vstore(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    int w = in->aux;
    size_t size = tern_type_size((tern_type)b->elem);
    const int32_t *vals = &c->k->extra[in->a[2]];
    FOR_LANES(c, lanes, n, {
        size_t i;
        if (!index_of_lane(c, ins, l, "vector store to", in->a[1], b, w, &i)) return;
        for (int j = 0; j < w; j++) write_elem(b->base + (i + (size_t)j) * size, b->elem, IREG(c, vals[j])[l]);
    });
}

/* One atomic read-modify-write on a 32-bit element; returns the old value. */
static ev atomic_rmw(int elem, int op, uint32_t *p, ev v, ev desired, bool cas) {
    uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    for (;;) {
        uint32_t next;
        if (cas) {
            if (old != (uint32_t)v.u) return ev_norm(elem, old);
            next = (uint32_t)desired.u;
        } else if (elem == TERN_T_F32) {
            next = op == TERN_ATOMIC_ADD ? ev_f_bits(ev_bits_f(old) + v.f) : ev_f_bits(v.f);
        } else {
            uint32_t x = (uint32_t)v.u;
            bool s = elem == TERN_T_I32;
            switch (op) {
            case TERN_ATOMIC_ADD: next = old + x; break;
            case TERN_ATOMIC_MIN: next = (s ? (int32_t)x < (int32_t)old : x < old) ? x : old; break;
            case TERN_ATOMIC_MAX: next = (s ? (int32_t)x > (int32_t)old : x > old) ? x : old; break;
            case TERN_ATOMIC_AND: next = old & x; break;
            case TERN_ATOMIC_OR: next = old | x; break;
            case TERN_ATOMIC_XOR: next = old ^ x; break;
            default: next = x; break; /* xchg */
            }
        }
        if (__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            break;
    }
    return elem == TERN_T_F32 ? ev_from_f(ev_bits_f(old)) : ev_norm(elem, old);
}

void interp_atomic(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    ev *d = IREG(c, in->dst);
    const ev *x = IREG(c, in->a[2]);
    bool cas = in->op == IR_ATOMIC_CAS;
    const ev *y = cas ? IREG(c, in->a[3]) : x;
    FOR_LANES(c, lanes, n, {
        size_t i;
        if (!index_of_lane(c, ins, l, "atomic on", in->a[1], b, 1, &i)) return;
        d[l] = atomic_rmw(b->elem, in->aux, (uint32_t *)(void *)(b->base + i * 4), x[l], y[l], cas);
    });
}

void interp_prefetch(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *b = &c->bufs[in->a[0]];
    FOR_LANES(c, lanes, n, {
        size_t i;
        if (!index_of_lane(c, ins, l, "prefetch of", in->a[1], b, 1, &i)) return;
    });
}

/* tern_load_matrix: each lane's row start is checked (eight elements in bounds, aligned as
 * a 16-byte row); then lane l of each SIMD group takes its elements from the rows the
 * group's lanes gave (the layout in tern/kernel.h). */
void interp_load_matrix(ictx *c, int32_t ins, int n) {
    const ir_ins *in = &c->k->ins[ins];
    if (n != c->T) {
        ictx_fail(c, ins, -1, "load_matrix reached by %d of the %d threads; SIMD-group operations "
                  "need threadgroup-uniform control flow", n, c->T);
        return;
    }
    const ibuf *b = &c->bufs[in->a[0]];
    size_t size = tern_type_size((tern_type)b->elem);
    size_t *row = malloc((size_t)c->T * sizeof *row);
    if (!row) {
        ictx_fail(c, ins, -1, "out of memory");
        return;
    }
    for (int l = 0; l < c->T; l++)
        if (!index_of_lane(c, ins, l, "matrix load from", in->a[1], b, 8, &row[l])) goto done;
    for (int l = 0; l < c->T; l++) {
        int base = l - l % TERN_SIMD_WIDTH, lane = l % TERN_SIMD_WIDTH;
        for (int m = 0; m < 4; m++)
            for (int j = 0; j < 2; j++) {
                /* non-transposed: row lane / 4, columns 2 (lane % 4) + j; transposed: rows
                 * 2 (lane % 4) + j, column lane / 4 */
                int r = in->aux ? 2 * (lane % 4) + j : lane / 4;
                int col = in->aux ? lane / 4 : 2 * (lane % 4) + j;
                size_t at = row[base + 8 * m + r] + (size_t)col;
                IREG(c, in->dst + 2 * m + j)[l] = read_elem(b->base + at * size, b->elem);
            }
    }
done:
    free(row);
}

/* tern_copy_async, made at once: both ends checked like a vector access (in bounds, aligned to
 * the copy's elements), then the bytes copied as they are. A kernel that reads the tile before
 * its wait is wrong on CUDA, yet reads the right data here: nothing can tell it. */
void interp_copy_async(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *d = &c->bufs[in->a[0]], *s = &c->bufs[in->a[2]];
    int w = in->aux;
    size_t size = tern_type_size((tern_type)d->elem);
    FOR_LANES(c, lanes, n, {
        size_t di;
        size_t si;
        if (!index_of_lane(c, ins, l, "copy_async to", in->a[1], d, w, &di) ||
            !index_of_lane(c, ins, l, "copy_async from", in->a[3], s, w, &si))
            return;
        memcpy(d->base + di * size, s->base + si * size, (size_t)w * size);
    });
}

/* tern_store_bulk, made at once: the count a whole number of 16-byte pieces, both starts on 16
 * bytes (the view's offset counted) and both runs in bounds, then the bytes copied as they are. */
void interp_store_bulk(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    const ibuf *d = &c->bufs[in->a[0]], *s = &c->bufs[in->a[2]];
    size_t size = tern_type_size((tern_type)d->elem);
    int w = (int)(16 / size); /* elements in 16 bytes */
    int32_t count_val = (int32_t)in->imm;
    bool count_signed = ir_type_is_signed(c->k->vals[count_val].type);
    FOR_LANES(c, lanes, n, {
        const ev cnt = IREG(c, count_val)[l];
        if ((count_signed && cnt.i < 0) || cnt.u % (uint64_t)w) {
            ictx_fail(c, ins, l, "store_bulk of %lld elements of %zu bytes: the count is a multiple of %d (16 bytes)",
                      (long long)cnt.i, size, w);
            return;
        }
        if (cnt.u == 0) continue;
        size_t di;
        size_t si;
        if (!index_of_lane(c, ins, l, "store_bulk to", in->a[1], d, w, &di) ||
            !index_of_lane(c, ins, l, "store_bulk from", in->a[3], s, w, &si))
            return;
        if (d->len - di < cnt.u || s->len - si < cnt.u) {
            ictx_fail(c, ins, l, "store_bulk of %llu elements from '%s' at %zu to '%s' at %zu runs past an end "
                      "(%zu and %zu elements)", (unsigned long long)cnt.u, ibuf_name(c, s), si, ibuf_name(c, d), di,
                      s->len, d->len);
            return;
        }
        memcpy(d->base + di * size, s->base + si * size, (size_t)cnt.u * size);
    });
}

/* tern_copy_tile, made at once by the producer's threads together: each must reach it (a
 * collective of the producer) with the same operands, the matrix's view aligned to 16 bytes
 * (as a tensor map's start must be) and the box inside it; then the box is copied into the
 * tile's panels in tern_wg_tile's layout. */
void interp_copy_tile(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const ir_ins *in = &c->k->ins[ins];
    ir_tile_box box = ir_tile_unpack(in->imm);
    const ibuf *d = &c->bufs[in->a[0]], *s = &c->bufs[box.buf];
    int producers = c->T - 128 * in->aux;
    if (n != producers) {
        ictx_fail(c, ins, -1, "copy_tile reached by %d of the producer's %d threads; all of them reach it", n,
                  producers);
        return;
    }
    const int l0 = n == c->T ? 0 : lanes[0];
    const ev at = IREG(c, in->a[1])[l0], row = IREG(c, in->a[2])[l0], col = IREG(c, in->a[3])[l0];
    FOR_LANES(c, lanes, n, {
        if (IREG(c, in->a[1])[l].i != at.i || IREG(c, in->a[2])[l].i != row.i || IREG(c, in->a[3])[l].i != col.i) {
            ictx_fail(c, ins, l, "copy_tile's operands differ between the producer's threads (tile %lld, row %lld, "
                      "column %lld in the first)", (long long)at.i, (long long)row.i, (long long)col.i);
            return;
        }
    });
    const int64_t width = 64 * box.panels, rows = (int64_t)(s->len / (size_t)box.cols);
    if (row.i < 0 || col.i < 0 || col.i % 8 || row.i + box.rows > rows || col.i + width > box.cols) {
        ictx_fail(c, ins, l0, "copy_tile of rows %lld .. %lld, columns %lld .. %lld from '%s' (%lld x %lld): the box "
                  "is not inside the matrix (or its column is not a multiple of 8)", (long long)row.i,
                  (long long)(row.i + box.rows - 1), (long long)col.i, (long long)(col.i + width - 1), ibuf_name(c, s),
                  (long long)rows, (long long)box.cols);
        return;
    }
    if (s->offset % 8) {
        ictx_fail(c, ins, l0, "copy_tile from '%s', a view starting at element %zu: the matrix starts on 16 bytes",
                  ibuf_name(c, s), s->offset);
        return;
    }
    const size_t tile = (size_t)box.rows * (size_t)width;
    if (at.i < 0 || at.i % 512 || (uint64_t)at.i > d->len || d->len - (size_t)at.i < tile) {
        ictx_fail(c, ins, l0, "copy_tile to '%s' at %lld: a tile of %zu elements is not inside its %zu, or its index "
                  "is not a multiple of 512", ibuf_name(c, d), (long long)at.i, tile, d->len);
        return;
    }
    for (int64_t r = 0; r < box.rows; r++)
        for (int64_t c8 = 0; c8 < width; c8 += 8) {
            size_t to = (size_t)at.i + tern_wg_tile_offset((size_t)box.rows, (size_t)r, (size_t)c8);
            size_t from = (size_t)(row.i + r) * (size_t)box.cols + (size_t)(col.i + c8);
            memcpy(d->base + to * 2, s->base + from * 2, 16);
        }
}
