/* A tiled matrix product with the whole tern_matmul contract:
 *   C[e] = epilogue(alpha op(A[e]) op(B[e]) + beta C[e] + bias), aux[e] = the value before
 *   GELU, for batch entries e (grid.z), any of f32 / bf16 / f16 operands, f32 accumulation.
 *
 * Accumulation is blocked along k, as BLAS libraries do: each k-slice's products are summed
 * into a fresh value, slices into a running partial, and every GK_MM_BLOCK slices the
 * partial into the total. A product with k = 50304 (GPT-2's logits gradient) summed in one
 * sequential f32 chain loses about 100 times more to rounding.
 *
 * Each group of GK_MM_THREADS threads computes a GK_MM_TILE x GK_MM_TILE block of C; each
 * thread a 4 x 4 micro-tile with rows ty + 16 r and columns tx + 16 c (strided, so a
 * SIMD group's reads of the B slice hit consecutive words). Slices of GK_MM_KT along k of
 * A and B are staged in threadgroup memory as f32, loaded so that consecutive threads read
 * consecutive elements of the operand as stored (transposed or not).
 *
 * Spec: t[0] C, t[1] A, t[2] B, t[3] bias, t[4] aux (types of absent ones ignored);
 * n[0] trans_a, n[1] trans_b, n[2] 1 for the GELU epilogue, n[3] has bias, n[4] has aux.
 * Parameters: c, a, b, [bias], [aux], m, n, k, lda, ldb, ldc, stride_a, stride_b,
 * stride_c, alpha, beta. */
#include "kernels/kutil.h"

#define TILE GK_MM_TILE
#define KT GK_MM_KT
#define MR 4 /* micro-tile rows and columns per thread */

/* Stages the k-slice [k0, k0 + KT) of rows [r0, r0 + TILE) of op(X) into dst[p * TILE + r]
 * (zero outside the matrix). X is stored [rows, K] (trans = 0, element (r, p) at
 * r * ld + p) or [K, rows] (trans = 1, at p * ld + r). */
static void stage(tern_kb *kb, tern_v dst, tern_v x, tern_v xbase, tern_v ld, bool trans, tern_v r0,
                  tern_v rows, tern_v k0, tern_v K, tern_v tid) {
    for (int q = 0; q < TILE * KT / GK_MM_THREADS; q++) {
        tern_v e = tern_add(tid, tern_int(q * GK_MM_THREADS));
        tern_v r, p;
        if (trans) { /* consecutive threads: consecutive r */
            r = tern_rem(e, tern_int(TILE));
            p = tern_div(e, tern_int(TILE));
        } else { /* consecutive threads: consecutive p */
            p = tern_rem(e, tern_int(KT));
            r = tern_div(e, tern_int(KT));
        }
        tern_v gr = tern_add(r0, r), gp = tern_add(k0, p);
        tern_v in = tern_land(tern_lt(gr, rows), tern_lt(gp, K));
        tern_v at = trans ? tern_add(tern_mul(gp, ld), gr) : tern_add(tern_mul(gr, ld), gp);
        tern_v v = tern_var(kb, "v", tern_f32(0.0f));
        TERN_IF(kb, in) { tern_assign(v, tern_load(x, tern_add(xbase, at))); }
        tern_store(dst, tern_add(tern_mul(p, tern_int(TILE)), r), v);
    }
}

void gk_trace_matmul(tern_kb *kb, void *spec) {
    const gk_spec *s = spec;
    bool ta = s->n[0], tb = s->n[1], gelu = s->n[2], has_bias = s->n[3], has_aux = s->n[4];
    tern_v c = ku_buf(kb, "c", s->t[0], TERN_READ_WRITE);
    tern_v a = ku_buf(kb, "a", s->t[1], TERN_READ);
    tern_v b = ku_buf(kb, "b", s->t[2], TERN_READ);
    tern_v bias = has_bias ? ku_buf(kb, "bias", s->t[3], TERN_READ) : tern_int(0);
    tern_v aux = has_aux ? ku_buf(kb, "aux", s->t[4], TERN_WRITE) : tern_int(0);
    tern_v M = tern_param_scalar(kb, "m", TERN_T_I32);
    tern_v N = tern_param_scalar(kb, "n", TERN_T_I32);
    tern_v K = tern_param_scalar(kb, "k", TERN_T_I32);
    tern_v lda = tern_param_scalar(kb, "lda", TERN_T_I32);
    tern_v ldb = tern_param_scalar(kb, "ldb", TERN_T_I32);
    tern_v ldc = tern_param_scalar(kb, "ldc", TERN_T_I32);
    tern_v sa = tern_param_scalar(kb, "stride_a", TERN_T_I32);
    tern_v sb = tern_param_scalar(kb, "stride_b", TERN_T_I32);
    tern_v scs = tern_param_scalar(kb, "stride_c", TERN_T_I32);
    tern_v alpha = tern_param_scalar(kb, "alpha", TERN_T_F32);
    tern_v beta = tern_param_scalar(kb, "beta", TERN_T_F32);
    tern_v as = tern_shared(kb, "as", TERN_T_F32, TILE * KT);
    tern_v bs = tern_shared(kb, "bs", TERN_T_F32, TILE * KT);

    tern_v tid = tern_local_id(kb, 0);
    tern_v tx = tern_rem(tid, tern_int(16)), ty = tern_div(tid, tern_int(16));
    tern_v j0 = tern_mul(tern_group_id(kb, 0), tern_int(TILE));
    tern_v i0 = tern_mul(tern_group_id(kb, 1), tern_int(TILE));
    tern_v e = tern_group_id(kb, 2);
    tern_v abase = tern_mul(e, sa), bbase = tern_mul(e, sb), cbase = tern_mul(e, scs);

    tern_v acc[MR][MR], mid[MR][MR];
    for (int r = 0; r < MR; r++)
        for (int q = 0; q < MR; q++) {
            acc[r][q] = tern_var(kb, "acc", tern_f32(0.0f));
            mid[r][q] = tern_var(kb, "mid", tern_f32(0.0f));
        }
    TERN_FOR(kb, k0, tern_int(0), K, tern_int(KT)) {
        /* A as stored: [m, k] (row r = i) or [k, m]; B: [k, n] (B's "rows" of op(B)^T are
         * the columns j: stored [n, k] when trans_b) */
        stage(kb, as, a, abase, lda, ta, i0, M, k0, K, tid);
        stage(kb, bs, b, bbase, ldb, !tb, j0, N, k0, K, tid);
        tern_barrier(kb);
        tern_v part[MR][MR];
        for (int p = 0; p < KT; p++) {
            tern_v av[MR], bv[MR];
            for (int r = 0; r < MR; r++) av[r] = tern_load(as, tern_add(ty, tern_int(p * TILE + 16 * r)));
            for (int q = 0; q < MR; q++) bv[q] = tern_load(bs, tern_add(tx, tern_int(p * TILE + 16 * q)));
            for (int r = 0; r < MR; r++)
                for (int q = 0; q < MR; q++) part[r][q] = p ? tern_fma(av[r], bv[q], part[r][q]) : tern_mul(av[r], bv[q]);
        }
        for (int r = 0; r < MR; r++)
            for (int q = 0; q < MR; q++) tern_assign(mid[r][q], tern_add(mid[r][q], part[r][q]));
        TERN_IF(kb, tern_eq(tern_rem(tern_div(k0, tern_int(KT)), tern_int(GK_MM_BLOCK)), tern_int(GK_MM_BLOCK - 1))) {
            for (int r = 0; r < MR; r++)
                for (int q = 0; q < MR; q++) {
                    tern_assign(acc[r][q], tern_add(acc[r][q], mid[r][q]));
                    tern_assign(mid[r][q], tern_f32(0.0f));
                }
        }
        tern_barrier(kb);
    }
    for (int r = 0; r < MR; r++)
        for (int q = 0; q < MR; q++) tern_assign(acc[r][q], tern_add(acc[r][q], mid[r][q]));
    for (int r = 0; r < MR; r++) {
        tern_v i = tern_add(tern_add(i0, ty), tern_int(16 * r));
        for (int q = 0; q < MR; q++) {
            tern_v j = tern_add(tern_add(j0, tx), tern_int(16 * q));
            TERN_IF(kb, tern_land(tern_lt(i, M), tern_lt(j, N))) {
                tern_v at = tern_add(cbase, tern_add(tern_mul(i, ldc), j));
                tern_v v = tern_var(kb, "out", tern_mul(alpha, acc[r][q]));
                TERN_IF(kb, tern_ne(beta, tern_f32(0.0f))) { /* beta == 0: C is not read */
                    tern_assign(v, tern_fma(alpha, acc[r][q], tern_mul(beta, tern_load(c, at))));
                }
                tern_v x = v;
                if (has_bias) x = tern_add(x, tern_load(bias, j));
                if (has_aux) tern_store(aux, tern_add(tern_mul(tern_add(tern_mul(e, M), i), N), j), x);
                if (gelu) x = ku_gelu(x);
                tern_store(c, at, x);
            }
        }
    }
}
