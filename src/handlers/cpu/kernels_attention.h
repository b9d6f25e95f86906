/* Decoding attention's two passes over a KV cache (kernels.h: attn_scores, attn_values), part
 * of kernels_simd.h's body (its vector vocabulary, loadv and load1). The cache's rows are read
 * in their own dtype and converted in registers: a bf16 cache costs its own bytes, with no f32
 * copy of the keys and values written and read back (docs/PERFORMANCE.md). */

/* s[j] = scale * q . K[j] for j < n: four keys at a time, one vector sum each, so q's vectors
 * are loaded once per four keys and the four sums are independent chains. */
ALWAYS_INLINE void scores_dt(const tern_dtype dt, const float *q, const void *keys, size_t n, size_t hs,
                             float scale, float *s) {
    const size_t hv = hs / VN * VN;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        vf acc[4];
        for (int c = 0; c < 4; c++) acc[c] = VZERO();
        for (size_t i = 0; i < hv; i += VN) {
            vf qv = VLOAD(q + i);
            for (int c = 0; c < 4; c++) acc[c] = VFMA(qv, loadv(keys, (j + (size_t)c) * hs + i, dt), acc[c]);
        }
        for (int c = 0; c < 4; c++) {
            float x = VHSUM(acc[c]);
            for (size_t i = hv; i < hs; i++) x += q[i] * load1(keys, (j + (size_t)c) * hs + i, dt);
            s[j + (size_t)c] = x * scale;
        }
    }
    for (; j < n; j++) {
        vf acc = VZERO();
        for (size_t i = 0; i < hv; i += VN) acc = VFMA(VLOAD(q + i), loadv(keys, j * hs + i, dt), acc);
        float x = VHSUM(acc);
        for (size_t i = hv; i < hs; i++) x += q[i] * load1(keys, j * hs + i, dt);
        s[j] = x * scale;
    }
}

/* o[i0 .. i0 + U VN) = sum over j < n of p[j] V[j, i]: U vectors of o held in registers while
 * every row of V passes, with two sets of sums (even and odd rows) so the adds into one vector
 * of o are not one chain of latencies; added together at the end. */
ALWAYS_INLINE void values_cols(const int U, const tern_dtype dt, const float *p, const void *values, size_t n,
                               size_t hs, size_t i0, float *o) {
    vf a[4], b[4];
    for (int u = 0; u < U; u++) a[u] = VZERO(), b[u] = VZERO();
    size_t j = 0;
    for (; j + 2 <= n; j += 2) {
        vf p0 = VSET1(p[j]), p1 = VSET1(p[j + 1]);
        for (int u = 0; u < U; u++) {
            a[u] = VFMA(p0, loadv(values, j * hs + i0 + (size_t)(VN * u), dt), a[u]);
            b[u] = VFMA(p1, loadv(values, (j + 1) * hs + i0 + (size_t)(VN * u), dt), b[u]);
        }
    }
    if (j < n) {
        vf p0 = VSET1(p[j]);
        for (int u = 0; u < U; u++) a[u] = VFMA(p0, loadv(values, j * hs + i0 + (size_t)(VN * u), dt), a[u]);
    }
    for (int u = 0; u < U; u++) VSTORE(o + i0 + (size_t)(VN * u), VADD(a[u], b[u]));
}

/* o[i] = sum over j < n of p[j] V[j, i] for i < hs, four vectors of o at a time. */
ALWAYS_INLINE void values_dt(const tern_dtype dt, const float *p, const void *values, size_t n, size_t hs,
                             float *o) {
    const size_t hv = hs / VN * VN;
    size_t i0 = 0;
    for (; i0 + 4 * (size_t)VN <= hv; i0 += 4 * (size_t)VN) values_cols(4, dt, p, values, n, hs, i0, o);
    for (; i0 < hv; i0 += VN) values_cols(1, dt, p, values, n, hs, i0, o);
    for (size_t i = hv; i < hs; i++) {
        float x = 0;
        for (size_t j = 0; j < n; j++) x += p[j] * load1(values, j * hs + i, dt);
        o[i] = x;
    }
}

static void attn_scores(tern_dtype dt, const float *q, const void *keys, size_t n, size_t hs, float scale,
                        float *s) {
    if (dt == TERN_F32) scores_dt(TERN_F32, q, keys, n, hs, scale, s);
    else if (dt == TERN_BF16) scores_dt(TERN_BF16, q, keys, n, hs, scale, s);
    else scores_dt(TERN_F16, q, keys, n, hs, scale, s);
}

static void attn_values(tern_dtype dt, const float *p, const void *values, size_t n, size_t hs, float *o) {
    if (dt == TERN_F32) values_dt(TERN_F32, p, values, n, hs, o);
    else if (dt == TERN_BF16) values_dt(TERN_BF16, p, values, n, hs, o);
    else values_dt(TERN_F16, p, values, n, hs, o);
}
