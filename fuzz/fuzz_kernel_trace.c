/* Fuzzes the DSL end to end: the input is read as a program of DSL calls (a byte picks
 * the call, following bytes its operands from a pool of values), traced into a kernel.
 * Whatever the calls, tracing must end in a kernel or an error, never a crash; a kernel
 * that builds must emit for every target and run on the host interpreter (loops are
 * bounded, so every run ends), its run-time faults coming back as errors. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/kernel.h"

#define POOL 48

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static unsigned take(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

typedef struct state {
    tern_kb *kb;
    tern_v pool[POOL];
    int count;
    tern_v bufs[4];
    tern_v tile; /* threadgroup bf16, for load_matrix */
    tern_v vars[4];
    int nvars;
    int depth, loops;
} state;

static void push(state *s, tern_v v) { s->pool[s->count++ % POOL] = v; }
static tern_v pick(state *s, reader *r) { return s->pool[take(r) % (s->count < POOL ? s->count : POOL)]; }

static const tern_type types[] = {TERN_T_BOOL, TERN_T_I32, TERN_T_U32, TERN_T_I64, TERN_T_U64, TERN_T_F32};

static void step(state *s, reader *r) {
    tern_kb *kb = s->kb;
    tern_loc at = {"fuzz", (int)r->n};
    unsigned op = take(r) % 27;
    switch (op) {
    case 0: {
        unsigned t = take(r) % 5;
        int32_t x = (int32_t)(take(r) | take(r) << 8) - 32768;
        push(s, t == 0 ? tern_int(x) : t == 1 ? tern_f32((float)x / 64) : t == 2 ? tern_u32((uint32_t)x)
                : t == 3 ? tern_bool(x & 1) : tern_i64(x));
        break;
    }
    case 1: push(s, tern_unary_at(at, (tern_op1)(take(r) % (TERN_ISINF + 1)), pick(s, r))); break;
    case 2: {
        tern_v a = pick(s, r), b = pick(s, r);
        push(s, tern_binary_at(at, (tern_op2)(take(r) % (TERN_LOR + 1)), a, b));
        break;
    }
    case 3: {
        tern_v c = pick(s, r), a = pick(s, r), b = pick(s, r);
        push(s, tern_select_at(at, c, a, b));
        break;
    }
    case 4: push(s, tern_cast_at(at, pick(s, r), types[take(r) % 6])); break;
    case 5: push(s, tern_bitcast_at(at, pick(s, r), types[take(r) % 6])); break;
    case 6: {
        tern_v b = s->bufs[take(r) % 4];
        /* indexes are masked into range most of the time, so runs get past the first load */
        tern_v i = tern_binary_at(at, TERN_AND, pick(s, r), tern_int(63));
        push(s, tern_load_at(at, b, take(r) & 1 ? i : pick(s, r)));
        break;
    }
    case 7: {
        tern_v b = s->bufs[take(r) % 4];
        tern_v i = tern_binary_at(at, TERN_AND, pick(s, r), tern_int(63));
        tern_store_at(at, b, i, pick(s, r));
        break;
    }
    case 8:
        if (s->depth < 6) {
            tern_if_at(at, kb, pick(s, r));
            s->depth++;
        }
        break;
    case 9:
        tern_else_at(at, kb);
        s->depth++;
        break;
    case 10:
        if (s->depth > 0) {
            tern_end_at(at, kb);
            s->depth--;
            if (s->loops > s->depth) s->loops = s->depth;
        }
        break;
    case 11:
        if (s->depth < 6) {
            unsigned trips = take(r) % 4;
            push(s, tern_for_at(at, kb, "i", tern_int(0), tern_int(trips), tern_int(1 + take(r) % 2)));
            s->depth++;
            s->loops = s->depth;
        }
        break;
    case 12:
        if (s->nvars < 4) {
            s->vars[s->nvars] = tern_var_at(at, kb, "v", pick(s, r));
            push(s, s->vars[s->nvars++]);
        }
        break;
    case 13:
        if (s->nvars) tern_assign_at(at, s->vars[take(r) % s->nvars], pick(s, r));
        break;
    case 14: tern_barrier_at(at, kb); break;
    case 15: {
        tern_v v = pick(s, r), lane = tern_binary_at(at, TERN_AND, pick(s, r), tern_int(31));
        push(s, tern_simd_at(at, (tern_simd_op)(take(r) % (TERN_SIMD_ALL + 1)), v, lane));
        break;
    }
    case 16: {
        tern_v b = s->bufs[take(r) % 4], i = tern_binary_at(at, TERN_AND, pick(s, r), tern_int(63));
        push(s, tern_atomic_at(at, (tern_atomic_op)(take(r) % (TERN_ATOMIC_XCHG + 1)), b, i, pick(s, r)));
        break;
    }
    case 17:
        if (s->loops) {
            if (take(r) & 1)
                tern_break_at(at, kb);
            else
                tern_continue_at(at, kb);
        }
        break;
    case 18: {
        tern_v out[8];
        tern_v b = s->bufs[take(r) % 4];
        int width = 2 << (take(r) % 3);
        tern_v i = tern_binary_at(at, TERN_MUL, tern_binary_at(at, TERN_AND, pick(s, r), tern_int(7)), tern_int(width));
        if (take(r) & 1) {
            tern_load_vec_at(at, b, i, width, out);
            for (int j = 0; j < width; j++) push(s, out[j]);
        } else {
            for (int j = 0; j < width; j++) out[j] = pick(s, r);
            tern_store_vec_at(at, b, i, width, out);
        }
        break;
    }
    case 19: push(s, tern_fma_at(at, pick(s, r), pick(s, r), pick(s, r))); break;
    case 20: { /* the warp-matrix product: operands of any type from the pool, so wrong ones
                * must come back as trace errors; a divergent one as a run-time fault */
        tern_v a[8], b[4], c[4], d[4];
        for (int j = 0; j < 8; j++) a[j] = pick(s, r);
        for (int j = 0; j < 4; j++) b[j] = pick(s, r);
        for (int j = 0; j < 4; j++) c[j] = pick(s, r);
        tern_mma_bf16_at(at, kb, a, b, c, d);
        for (int j = 0; j < 4; j++) push(s, d[j]);
        break;
    }
    case 21: { /* the shared buffer is refused, and an unmasked index may fault on the host */
        tern_v b = s->bufs[take(r) % 4], i = tern_binary_at(at, TERN_AND, pick(s, r), tern_int(63));
        tern_prefetch_at(at, b, take(r) & 1 ? i : pick(s, r));
        break;
    }
    case 22: tern_wait_previous_at(at, kb); break; /* in a block, or after a store: an error */
    case 23: { /* rows masked into the tile and aligned most of the time; else a run-time
                * fault (out of bounds, misaligned) or, on another buffer, a trace error */
        tern_v out[8], b = take(r) % 3 ? s->tile : s->bufs[take(r) % 4];
        tern_v row = tern_binary_at(at, TERN_MUL, tern_binary_at(at, TERN_AND, pick(s, r), tern_int(31)), tern_int(8));
        tern_load_matrix_at(at, b, take(r) & 1 ? row : pick(s, r), take(r) & 1, out);
        for (int j = 0; j < 8; j++) push(s, out[j]);
        break;
    }
    case 24: { /* an asynchronous copy: into the shared buffers from a parameter most of the
                * time, indices aligned and in bounds most of the time; other buffers, sizes
                * and types must come back as trace errors, bad indices as run-time faults */
        tern_v dst = take(r) & 1 ? s->tile : s->bufs[take(r) % 4], src = s->bufs[take(r) % 4];
        int n = 1 << (take(r) % 4);
        tern_v di = tern_binary_at(at, TERN_MUL, tern_binary_at(at, TERN_AND, pick(s, r), tern_int(15)), tern_int(n));
        tern_v si = tern_binary_at(at, TERN_MUL, tern_binary_at(at, TERN_AND, pick(s, r), tern_int(7)), tern_int(n));
        tern_copy_async_at(at, dst, take(r) & 1 ? di : pick(s, r), src, take(r) & 1 ? si : pick(s, r), n);
        break;
    }
    case 25: tern_copy_async_commit_at(at, kb); break;
    case 26: tern_copy_async_wait_at(at, kb, (int)(take(r) % 9)); break; /* 8: an error */
    }
}

static void trace(tern_kb *kb, void *user) {
    reader *r = user;
    state s;
    memset(&s, 0, sizeof s);
    s.kb = kb;
    s.bufs[0] = tern_param_buf(kb, "fa", TERN_T_F32, TERN_READ_WRITE);
    s.bufs[1] = tern_param_buf(kb, "ib", TERN_T_I32, TERN_READ_WRITE);
    s.bufs[2] = tern_param_buf(kb, "hc", TERN_T_BF16, TERN_READ_WRITE);
    s.bufs[3] = tern_shared(kb, "sd", TERN_T_U32, 64);
    s.tile = tern_shared(kb, "tile", TERN_T_BF16, 256);
    push(&s, tern_param_scalar(kb, "n", TERN_T_I32));
    push(&s, tern_global_id(kb, 0));
    push(&s, tern_simd_lane(kb));
    push(&s, tern_f32(1.5f));
    for (int steps = 0; r->n && steps < 400; steps++) step(&s, r);
    while (s.depth-- > 0) tern_end(kb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tern_rt *rt;
    if (!rt) {
        tern_error *err = tern_rt_open("host", &rt);
        if (err) abort(); /* the host runtime always opens */
    }
    reader r = {data, size};
    tern_kernel *k = NULL;
    tern_error *err = tern_kernel_build("fuzzed", trace, &r, &k);
    if (err) {
        if (!tern_error_message(err)[0]) abort();
        tern_error_free(err);
        return 0;
    }
    for (int t = 0; t < 3; t++) {
        char *src = NULL;
        err = tern_kernel_emit(k, (tern_target)t, &src);
        if (err || !src || !strstr(src, "fuzzed")) abort(); /* a kernel that built always emits */
        free(src);
    }
    free(tern_kernel_dump(k));
    float fa[64] = {0};
    int32_t ib[64] = {0};
    uint16_t hc[64] = {0};
    for (int i = 0; i < 64; i++) fa[i] = (float)i - 20, ib[i] = i * 3 - 50, hc[i] = (uint16_t)(0x3f80 + i);
    tern_arg args[] = {tern_arg_host(TERN_T_F32, fa, 64), tern_arg_host(TERN_T_I32, ib, 64),
                       tern_arg_host(TERN_T_BF16, hc, 64), tern_arg_i32(64)};
    err = tern_launch(rt, k, tern_dims1(2), tern_dims1(32), args, 4);
    tern_error_free(err); /* faults (bounds, divergence, division by zero) are fine */
    tern_kernel_free(k);
    return 0;
}
