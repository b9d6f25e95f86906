/* SIMD-group operations (with the bf16 MMA), barriers and print in the interpreter.
 * Reductions and scans use the same combining order as the emitted code (butterfly for
 * reductions, Hillis-Steele for the scan), so float results match the GPU targets bit for
 * bit. */
#include <math.h>
#include <stdio.h>

#include "dsl/interp_ctx.h"
#include "tern/half.h"

#define W TERN_SIMD_WIDTH

/* Checks threadgroup-uniform control flow: every thread of the group is here. */
static bool all_here(ictx *c, int32_t ins, int n, const char *what) {
    if (n == c->T) return true;
    ictx_fail(c, ins, -1, "%s reached by %d of the %d threads; barriers and SIMD-group "
              "operations need threadgroup-uniform control flow", what, n, c->T);
    return false;
}

void interp_barrier(ictx *c, int32_t ins, int n) { all_here(c, ins, n, "barrier"); }

static ev combine(tern_simd_op op, int t, ev a, ev b) {
    bool fault = false;
    tern_op2 op2 = op == TERN_SIMD_MIN ? TERN_MIN : op == TERN_SIMD_MAX ? TERN_MAX : TERN_ADD;
    return ev_binary(op2, t, a, b, &fault);
}

void interp_simd(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    (void)lanes;
    const ir_ins *in = &c->k->ins[ins];
    char what[48];
    snprintf(what, sizeof what, "simd_%s", ir_simd_name((tern_simd_op)in->aux));
    if (!all_here(c, ins, n, what)) return;
    tern_simd_op op = (tern_simd_op)in->aux;
    int t = c->k->vals[in->a[0]].type;
    const ev *x = IREG(c, in->a[0]);
    const ev *arg = in->a[1] >= 0 ? IREG(c, in->a[1]) : NULL;
    ev *d = IREG(c, in->dst);
    for (int base = 0; base < c->T; base += W) {
        const ev *v = x + base;
        ev *r = d + base;
        switch (op) {
        case TERN_SIMD_SUM:
        case TERN_SIMD_MIN:
        case TERN_SIMD_MAX: {
            ev a[W];
            for (int j = 0; j < W; j++) a[j] = v[j];
            for (int m = W / 2; m > 0; m >>= 1)
                for (int j = 0; j < m; j++) a[j] = combine(op, t, a[j], a[j + m]);
            for (int j = 0; j < W; j++) r[j] = a[0];
            break;
        }
        case TERN_SIMD_PREFIX_SUM: {
            /* inclusive Hillis-Steele scan (x = x + up(x, o)), then shifted by one lane */
            ev a[W], b[W];
            for (int j = 0; j < W; j++) a[j] = v[j];
            for (int o = 1; o < W; o <<= 1) {
                for (int j = 0; j < W; j++) b[j] = j >= o ? combine(op, t, a[j], a[j - o]) : a[j];
                for (int j = 0; j < W; j++) a[j] = b[j];
            }
            r[0] = t == TERN_T_F32 ? ev_from_f(0.0f) : ev_from_u(0);
            for (int j = 1; j < W; j++) r[j] = a[j - 1];
            break;
        }
        case TERN_SIMD_SHUFFLE:
        case TERN_SIMD_SHUFFLE_XOR:
        case TERN_SIMD_SHUFFLE_DOWN:
        case TERN_SIMD_SHUFFLE_UP: {
            ev out[W];
            for (int j = 0; j < W; j++) {
                uint64_t s = arg[base + j].u;
                int src;
                if (op == TERN_SIMD_SHUFFLE)
                    src = (int)(s & (W - 1));
                else if (op == TERN_SIMD_SHUFFLE_XOR)
                    src = j ^ (int)(s & (W - 1));
                else if (op == TERN_SIMD_SHUFFLE_DOWN)
                    src = (uint32_t)s < (uint32_t)(W - j) ? j + (int)(uint32_t)s : j;
                else
                    src = (uint32_t)s <= (uint32_t)j ? j - (int)(uint32_t)s : j;
                out[j] = v[src];
            }
            for (int j = 0; j < W; j++) r[j] = out[j];
            break;
        }
        case TERN_SIMD_BALLOT: {
            uint32_t bits = 0;
            for (int j = 0; j < W; j++)
                if (v[j].u) bits |= 1u << j;
            for (int j = 0; j < W; j++) r[j] = ev_from_u(bits);
            break;
        }
        case TERN_SIMD_ANY:
        case TERN_SIMD_ALL: {
            bool any = false, all = true;
            for (int j = 0; j < W; j++) {
                any = any || v[j].u;
                all = all && v[j].u;
            }
            for (int j = 0; j < W; j++) r[j] = ev_from_u(op == TERN_SIMD_ANY ? any : all);
            break;
        }
        }
    }
}

/* ---- the bf16 MMA (tern_mma_bf16): m16n8k16, the fragment layout of PTX's mma .row.col ---- */

/* Where register r of lane l sits in A (16 x 16), B (16 x 8) and C or D (16 x 8). */
static void mma_a_at(int l, int r, int *row, int *col) {
    *row = l / 4 + (r & 2 ? 8 : 0);
    *col = 2 * (l % 4) + (r & 4 ? 8 : 0) + (r & 1);
}
static void mma_b_at(int l, int r, int *row, int *col) {
    *row = 2 * (l % 4) + (r & 2 ? 8 : 0) + (r & 1);
    *col = l / 4;
}
static void mma_c_at(int l, int r, int *row, int *col) {
    *row = l / 4 + (r & 2 ? 8 : 0);
    *col = 2 * (l % 4) + (r & 1);
}

static float round_bf16(float x) { return tern_bf16_to_f32(tern_f32_to_bf16(x)); }

/* One SIMD group's tile product; ops are the 16 operand ids, lanes base .. base+31. The
 * products of bf16 values are exact in f32; the sum runs over k = 0..15 in turn, which is
 * what the OpenCL and Metal emulations do too (tensor cores may add in another order). */
static void mma_group(ictx *c, const int32_t *ops, int32_t dst, int base) {
    float A[16][16], B[16][8], C[16][8];
    int row, col;
    for (int l = 0; l < W; l++) {
        for (int r = 0; r < 8; r++) {
            mma_a_at(l, r, &row, &col);
            A[row][col] = round_bf16(IREG(c, ops[r])[base + l].f);
        }
        for (int r = 0; r < 4; r++) {
            mma_b_at(l, r, &row, &col);
            B[row][col] = round_bf16(IREG(c, ops[8 + r])[base + l].f);
            mma_c_at(l, r, &row, &col);
            C[row][col] = IREG(c, ops[12 + r])[base + l].f;
        }
    }
    for (int l = 0; l < W; l++)
        for (int r = 0; r < 4; r++) {
            mma_c_at(l, r, &row, &col);
            float acc = C[row][col];
            for (int k = 0; k < 16; k++) acc = fmaf(A[row][k], B[k][col], acc);
            IREG(c, dst + r)[base + l] = ev_from_f(acc);
        }
}

void interp_mma(ictx *c, int32_t ins, int n) {
    const ir_ins *in = &c->k->ins[ins];
    if (!all_here(c, ins, n, "mma_bf16")) return;
    for (int base = 0; base < c->T; base += W) mma_group(c, &c->k->extra[in->a[0]], in->dst, base);
}

static void put_value(FILE *f, int t, ev x) {
    switch (t) {
    case TERN_T_F32: fprintf(f, "%g", (double)x.f); break;
    case TERN_T_I32:
    case TERN_T_I64: fprintf(f, "%lld", (long long)x.i); break;
    default: fprintf(f, "%llu", (unsigned long long)x.u); break;
    }
}

void interp_print(ictx *c, int32_t ins, const int32_t *lanes, int n) {
    const tern_kernel *k = c->k;
    const ir_ins *in = &k->ins[ins];
    const char *fmt = ir_string(k, (int32_t)in->imm);
    const int32_t *vals = &k->extra[in->a[0]];
    flockfile(stdout);
    FOR_LANES(c, lanes, n, {
        int next = 0;
        for (const char *p = fmt; *p; p++) {
            if (p[0] == '{' && p[1] == '}' && next < in->a[1]) {
                int32_t v = vals[next++];
                put_value(stdout, k->vals[v].type, IREG(c, v)[l]);
                p++;
            } else {
                putc_unlocked(*p, stdout);
            }
        }
    });
    funlockfile(stdout);
}
