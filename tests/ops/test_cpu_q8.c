/* q8_0 weights (include/tern/effect.h): blocks of 32 int8 sharing an f16 scale.
 *
 * - Each kernel table this processor runs (portable always; AVX2 and AVX-512 where present):
 *   q8_quantize_a on random rows (d = max |x| / 127 exactly, |q| <= 127, every activation
 *   within d / 2 of d q, the same bytes as the portable table's); then small_t_q8 called
 *   directly for m = 1..8 on random blocks, B inside wider rows (ldb > k) at a row offset,
 *   against a double-precision reference of the QUANTIZED activations times the DEQUANTIZED
 *   weights (both decoded here from the bytes, independently of the handler). Each block's
 *   int8 sum is exact, so the only error is the f32 scaling and accumulation: the bound is
 *   test_cpu_kernels' classical one, (k + 1) u sum |a b| with u = 2^-24, times 1.01.
 *   Elements of t outside the rows and columns asked for must keep their guard value; a row
 *   holding inf or NaN gives non-finite products.
 * - Each table's q8_to_f32 (the rows the sgemm path reads): exactly d * q.
 * - Through the cpu handler with each table forced: copy f32 -> q8_0 quantizes as the
 *   contract says (d = f16(max |x| / 127), every weight within d / 2 of d q, |q| <= 127);
 *   copy q8_0 -> f32 is exactly d q; matmul with a q8_0 B ([n, k], trans_b), with a bias,
 *   against the double reference of the f32 activations and the dequantized weights: for
 *   m = 1, 3, 8 (the decoding kernels, int8 activations as llama.cpp's q8_0 x q8_0) every
 *   element within sum over blocks of (d_a / 2) sum |w| (the activations' quantization,
 *   d_a = max |x| / 127 of the block) plus 2 (k + 2) u sum |a w| (the f32 part); measured
 *   norm-wise relative errors 1.0e-3 to 2.4e-3 (uniform activations in [-1, 1]); for m = 13
 *   (sgemm on dequantized rows, f32 activations) norm-wise relative error <= 2e-5
 *   (docs/effects.md's matmul bound for f32 results).
 * - The refusals, one line each: B not [n, k], k not a multiple of 32, views and allocations
 *   that are not whole blocks, copies to integers, get and fill; and the GPU handlers built
 *   in (interp, opencl: the GPU core that cuda shares), which refuse to allocate q8_0 and
 *   refuse a view retyped to it. */
#include <math.h>

#include "check.h"
#include "handler_probe.h"
#include "handlers/cpu/kernels.h"
#include "tern/handlers.h"
#include "tern/half.h"

#define SPLITMIX_SEED 777
#include "splitmix.h"

#define GUARD 1234.5f
#define QB TERN_Q8_BLOCK
#define QBYTES TERN_Q8_BLOCK_BYTES

/* Weight i of q8_0 blocks as stored (the format, decoded independently of the handler). */
static double q8_value(const unsigned char *blocks, size_t i) {
    const unsigned char *blk = blocks + i / QB * QBYTES;
    uint16_t dh = (uint16_t)(blk[0] | blk[1] << 8);
    return (double)tern_f16_to_f32(dh) * (double)(int8_t)blk[2 + i % QB];
}

/* Random blocks: scales of either sign around GPT-2's (1e-4 .. 1e-2), q over [-127, 127]. */
static unsigned char *random_blocks(size_t count) {
    unsigned char *b = malloc(count / QB * QBYTES);
    for (size_t q = 0; q < count / QB; q++) {
        uint16_t dh = tern_f32_to_f16(uniform(1e-4f, 1e-2f) * (next_u64() & 1 ? 1.0f : -1.0f));
        b[q * QBYTES] = (unsigned char)dh, b[q * QBYTES + 1] = (unsigned char)(dh >> 8);
        for (int i = 0; i < QB; i++) b[q * QBYTES + 2 + i] = (unsigned char)(int8_t)((int)(next_u64() % 255) - 127);
    }
    return b;
}

/* Activation j of quantized rows aq (q8_quantize_a's layout, m rows of k), as d * q. */
static double q8a_value(const void *aq, int m, size_t k, size_t r, size_t j) {
    const int8_t *q = aq;
    const float *d = (const float *)((const unsigned char *)aq + (size_t)m * k);
    return (double)d[r * (k / QB) + j / QB] * (double)q[r * k + j];
}

/* q8_quantize_a on m rows of k: the contract (kernels.h) block by block, and the same bytes
 * as the portable table's. Returns the quantized rows (malloc'd). */
static void *check_quantize_a(const cpu_kernels *kt, int m, const float *a, size_t k) {
    size_t bytes = CPU_Q8A_BYTES(m, k);
    unsigned char *aq = malloc(bytes), *ref = malloc(bytes);
    kt->q8_quantize_a(m, a, k, aq);
    cpu_kernels_for(CPU_ISA_PORTABLE)->q8_quantize_a(m, a, k, ref);
    const int8_t *q = (const int8_t *)aq;
    const float *d = (const float *)(aq + (size_t)m * k);
    int bad_d = 0, bad_q = 0;
    for (size_t b = 0; b < (size_t)m * k / QB; b++) {
        float amax = 0;
        for (int i = 0; i < QB; i++) amax = fmaxf(amax, fabsf(a[b * QB + (size_t)i]));
        bad_d += d[b] != amax / 127.0f;
        for (int i = 0; i < QB; i++) {
            size_t e = b * QB + (size_t)i;
            /* x / d rounded: within d / 2, up to the rounding of x * (1 / d) */
            bad_q += q[e] < -127 || fabs((double)d[b] * q[e] - a[e]) > 0.5 * (double)d[b] * (1 + 1e-6);
        }
    }
    CHECKF(bad_d == 0 && bad_q == 0 && memcmp(aq, ref, bytes) == 0,
           "%s q8_quantize_a m=%d k=%zu: %d scales, %d values off; %s the portable table's bytes",
           kt->name, m, k, bad_d, bad_q, memcmp(aq, ref, bytes) ? "not" : "");
    free(ref);
    return aq;
}

/* B [n, k] inside rows of ldb = k + 64, columns j0.. of t; t rows ldt = w + 3 apart. */
static void check_kernel(const cpu_kernels *kt, int m, size_t n, size_t k) {
    size_t ldb = k + 2 * QB, j0 = n > 2 ? 2 : 0, w = n - j0, ldt = w + 3, rows = CPU_SMALL_M + 1;
    unsigned char *b = random_blocks(n * ldb);
    float *a = malloc((size_t)m * k * sizeof(float)), *t = malloc(rows * ldt * sizeof(float));
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = uniform(-1, 1);
    for (size_t i = 0; i < rows * ldt; i++) t[i] = GUARD;
    void *aq = check_quantize_a(kt, m, a, k);
    kt->small_t_q8(m, aq, k, b, ldb, j0, w, t, ldt);
    double worst = 0;
    int bad_guard = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ldt; j++) {
            float got = t[r * ldt + j];
            if (r >= (size_t)m || j >= w) {
                bad_guard += got != GUARD;
                continue;
            }
            double want = 0, mag = 0;
            for (size_t kk = 0; kk < k; kk++) {
                double p = q8a_value(aq, m, k, r, kk) * q8_value(b, (j0 + j) * ldb + kk);
                want += p, mag += fabs(p);
            }
            double bound = 1.01 * (double)(k + 1) * ldexp(1, -24) * mag;
            double err = fabs((double)got - want) / (bound > 0 ? bound : 1e-300);
            if (!(err <= worst)) worst = err; /* NaN counts as worst */
        }
    CHECKF(worst <= 1.0 && bad_guard == 0,
           "%s small_t_q8 m=%d n=%zu k=%zu: error %.3g of the bound, %d guard elements written",
           kt->name, m, n, k, worst, bad_guard);
    /* a non-finite activation makes its row's products non-finite, as in f32 */
    a[k / 2] = (m & 1) ? INFINITY : NAN;
    kt->q8_quantize_a(m, a, k, aq);
    kt->small_t_q8(m, aq, k, b, ldb, j0, w, t, ldt);
    int finite = 0;
    for (size_t j = 0; j < w; j++) finite += isfinite(t[j]);
    CHECKF(finite == 0, "%s small_t_q8 m=%d: %d finite products of a row holding %s", kt->name, m,
           finite, (m & 1) ? "inf" : "NaN");
    free(b), free(a), free(t), free(aq);
}

/* Quantizing through copy, and dequantizing back. */
static void check_copy(const tern_ops *o, tern_dev *d, size_t count) {
    float *x = malloc(count * sizeof(float)), *back = malloc(count * sizeof(float));
    unsigned char *raw = malloc(count / QB * QBYTES);
    for (size_t i = 0; i < count; i++) x[i] = uniform(-0.1f, 0.1f);
    for (int i = 0; i < QB; i++) x[QB + (size_t)i] = 0; /* a block of zeros: d = 0 */
    tern_buf f = {0}, q = {0}, g = {0};
    CHECK_OK(o->alloc(d, TERN_F32, count, &f));
    CHECK_OK(o->alloc(d, TERN_Q8, count, &q));
    CHECK_OK(o->alloc(d, TERN_F32, count, &g));
    CHECK_OK(o->upload(d, f, x));
    CHECK_OK(o->copy(d, q, f));
    CHECK_OK(o->download(d, raw, q));
    CHECK_OK(o->copy(d, g, q));
    CHECK_OK(o->download(d, back, g));
    int bad_d = 0, bad_q = 0, bad_back = 0;
    for (size_t b = 0; b < count / QB; b++) {
        float amax = 0;
        for (int i = 0; i < QB; i++) amax = fmaxf(amax, fabsf(x[b * QB + (size_t)i]));
        uint16_t dh = (uint16_t)(raw[b * QBYTES] | raw[b * QBYTES + 1] << 8);
        bad_d += dh != tern_f32_to_f16(amax / 127.0f);
        double dd = tern_f16_to_f32(dh);
        for (int i = 0; i < QB; i++) {
            size_t e = b * QB + (size_t)i;
            int qv = (int8_t)raw[b * QBYTES + 2 + (size_t)i];
            double v = q8_value(raw, e);
            bad_q += qv < -127 || qv > 127 || fabs(v - x[e]) > 0.5 * dd * (1 + 1e-6);
            bad_back += (double)back[e] != v;
        }
    }
    CHECKF(bad_d == 0 && bad_q == 0 && bad_back == 0,
           "copy f32 <-> q8_0 of %zu: %d scales, %d weights off, %d dequantized wrongly", count,
           bad_d, bad_q, bad_back);
    CHECK(raw[QBYTES] == 0 && raw[QBYTES + 1] == 0 && raw[QBYTES + 2] == 0);
    CHECK_OK(o->free(d, &f));
    CHECK_OK(o->free(d, &q));
    CHECK_OK(o->free(d, &g));
    free(x), free(back), free(raw);
}

/* c[m, n] = a[m, k] @ B^T + bias with B [n, k] q8_0, against the double reference. */
static void check_matmul(const tern_ops *o, tern_dev *d, const char *isa, int m, int n, int k) {
    size_t an = (size_t)m * k, bn = (size_t)n * k, cn = (size_t)m * n;
    float *a = malloc(an * sizeof(float)), *w = malloc(bn * sizeof(float));
    float *bias = malloc((size_t)n * sizeof(float)), *c = malloc(cn * sizeof(float));
    unsigned char *raw = malloc(bn / QB * QBYTES);
    for (size_t i = 0; i < an; i++) a[i] = uniform(-1, 1);
    for (size_t i = 0; i < bn; i++) w[i] = uniform(-0.05f, 0.05f);
    for (int i = 0; i < n; i++) bias[i] = uniform(-1, 1);
    tern_buf ba = {0}, bw = {0}, bq = {0}, bb = {0}, bc = {0};
    CHECK_OK(o->alloc(d, TERN_F32, an, &ba));
    CHECK_OK(o->alloc(d, TERN_F32, bn, &bw));
    CHECK_OK(o->alloc(d, TERN_Q8, bn, &bq));
    CHECK_OK(o->alloc(d, TERN_F32, (size_t)n, &bb));
    CHECK_OK(o->alloc(d, TERN_F32, cn, &bc));
    CHECK_OK(o->upload(d, ba, a));
    CHECK_OK(o->upload(d, bw, w));
    CHECK_OK(o->upload(d, bb, bias));
    CHECK_OK(o->copy(d, bq, bw));
    CHECK_OK(o->download(d, raw, bq));
    tern_matmul mm = {.m = m, .n = n, .k = k, .trans_b = true, .alpha = 1, .bias = bb};
    CHECK_OK(o->matmul(d, bc, ba, bq, &mm));
    CHECK_OK(o->download(d, c, bc));
    double num = 0, den = 0, worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double want = bias[j], mag = fabs(bias[j]), quant = 0;
            for (int kk = 0; kk < k; kk++) {
                double x = a[(size_t)i * k + kk], wv = q8_value(raw, (size_t)j * k + kk);
                want += x * wv, mag += fabs(x * wv);
            }
            /* m <= 8 quantizes A per block (d_a = max |x| / 127): each activation within
             * d_a / 2, so a block adds at most d_a / 2 sum |w| (q8_quantize_a's contract) */
            for (int q = 0; m <= CPU_SMALL_M && q < k / QB; q++) {
                double amax = 0, wsum = 0;
                for (int i2 = 0; i2 < QB; i2++) {
                    amax = fmax(amax, fabs(a[(size_t)i * k + (size_t)(q * QB + i2)]));
                    wsum += fabs(q8_value(raw, (size_t)j * k + (size_t)(q * QB + i2)));
                }
                quant += 0.5 * (amax / 127) * (1 + 1e-6) * wsum;
            }
            double e = c[(size_t)i * n + j] - want, bound = quant + 2.0 * (k + 2) * ldexp(1, -24) * mag;
            if (!(fabs(e) <= worst * bound)) worst = fabs(e) / bound;
            num += e * e, den += want * want;
        }
    double rel = sqrt(num / den);
    if (m > CPU_SMALL_M)
        CHECKF(rel <= 2e-5, "%s matmul q8_0 m=%d n=%d k=%d: relative error %.3g > 2e-5", isa, m, n, k, rel);
    else
        CHECKF(worst <= 1, "%s matmul q8_0 m=%d n=%d k=%d: error %.3g of the bound (relative %.3g)", isa,
               m, n, k, worst, rel);
    printf("%s matmul q8_0 m=%d n=%d k=%d: norm-wise relative error %.3g\n", isa, m, n, k, rel);
    CHECK_OK(o->free(d, &ba));
    CHECK_OK(o->free(d, &bw));
    CHECK_OK(o->free(d, &bq));
    CHECK_OK(o->free(d, &bb));
    CHECK_OK(o->free(d, &bc));
    free(a), free(w), free(bias), free(c), free(raw);
}

static void check_refusals(const tern_ops *o, tern_dev *d) {
    tern_buf a = {0}, q = {0}, c = {0}, i32 = {0};
    CHECK_OK(o->alloc(d, TERN_F32, 48, &a));
    CHECK_OK(o->alloc(d, TERN_Q8, 1024, &q));
    CHECK_OK(o->alloc(d, TERN_F32, 32, &c));
    CHECK_OK(o->alloc(d, TERN_I32, 96, &i32));
    tern_buf none;
    CHECK_ERR(o->alloc(d, TERN_Q8, 33, &none), "alloc: q8_0 holds whole blocks of 32 weights, len 33");
    CHECK_ERR(o->copy(d, tern_view(a, 0, 16), tern_view(q, 16, 16)),
              "copy: src is a q8_0 view of elements [16, 32), not whole blocks of 32");
    CHECK_ERR(o->copy(d, i32, tern_view(q, 0, 96)),
              "copy: q8_0 converts only to and from f32, bf16 and f16, not q8_0 to i32");
    double v;
    CHECK_ERR(o->get(d, q, 0, &v), "get: a is q8_0, needs");
    CHECK_ERR(o->fill(d, q, 1.0), "fill: dst is q8_0, needs");
    double one = 1;
    CHECK_ERR(o->from_list(d, TERN_Q8, &one, 1, &none), "from_list: q8_0 is not an element dtype");
    /* B stored [k, n] = [32, 32]: not the q8_0 layout */
    tern_matmul kn = {.m = 1, .n = 32, .k = 32, .alpha = 1};
    CHECK_ERR(o->matmul(d, c, tern_view(a, 0, 32), q, &kn), "matmul: a q8_0 b must be stored [n, k] (trans_b)");
    /* k = 48: rows of B are not whole blocks */
    tern_matmul odd = {.m = 1, .n = 2, .k = 48, .trans_b = true, .alpha = 1};
    CHECK_ERR(o->matmul(d, tern_view(c, 0, 2), a, tern_view(q, 0, 96), &odd),
              "matmul: a q8_0 b needs k, ldb and stride_b multiples of 32, got 48");
    CHECK_OK(o->free(d, &a));
    CHECK_OK(o->free(d, &q));
    CHECK_OK(o->free(d, &c));
    CHECK_OK(o->free(d, &i32));
}

/* A GPU handler: no q8_0 buffer can be made, and a view retyped to q8_0 is refused. */
static void check_gpu_refusal(const char *name) {
    const tern_ops *o = tern_handler_ops(name);
    if (!o) {
        printf("%s: not built in\n", name);
        return;
    }
    if (!handler_has_device(o)) return;
    tern_dev *d = NULL;
    CHECK_OK(o->open(NULL, &d));
    if (!d) return;
    tern_buf q, a = {0}, c = {0}, f = {0};
    CHECK_ERR(o->alloc(d, TERN_Q8, 64, &q), "alloc: q8_0 is not supported by the GPU handlers");
    CHECK_OK(o->alloc(d, TERN_F32, 64, &a));
    CHECK_OK(o->alloc(d, TERN_F32, 64, &f));
    CHECK_OK(o->alloc(d, TERN_F32, 2, &c));
    tern_buf retyped = a;
    retyped.dtype = TERN_Q8;
    float host[64] = {0};
    tern_matmul mm = {.m = 1, .n = 2, .k = 32, .trans_b = true, .alpha = 1};
    CHECK_ERR(o->matmul(d, c, tern_view(f, 0, 32), retyped, &mm), "matmul: b is q8_0, which the GPU handlers");
    CHECK_ERR(o->upload(d, retyped, host), "upload: dst is q8_0, which the GPU handlers");
    CHECK_ERR(o->download(d, host, retyped), "download: src is q8_0, which the GPU handlers");
    CHECK_ERR(o->copy(d, f, retyped), "copy: src is q8_0, which the GPU handlers");
    CHECK_OK(o->free(d, &a));
    CHECK_OK(o->free(d, &f));
    CHECK_OK(o->free(d, &c));
    CHECK_OK(o->close(d));
    printf("%s: refuses q8_0\n", name);
}

int main(void) {
    static const cpu_isa isas[] = {CPU_ISA_PORTABLE, CPU_ISA_AVX2, CPU_ISA_AVX512};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const cpu_kernels *kt = cpu_kernels_for(isas[i]);
        if (!kt) {
            printf("kernel table %zu: not run by this processor, skipped\n", i);
            continue;
        }
        for (int m = 1; m <= CPU_SMALL_M; m++) check_kernel(kt, m, 37, 96);
        check_kernel(kt, 1, 5, 768);
        check_kernel(kt, 4, 3, 32);
        /* the rows sgemm reads (m > 8): exactly d q */
        unsigned char *blocks = random_blocks(96);
        float rows[96];
        kt->q8_to_f32(rows, blocks, 96);
        int wrong = 0;
        for (size_t w = 0; w < 96; w++) wrong += (double)rows[w] != q8_value(blocks, w);
        CHECKF(wrong == 0, "%s q8_to_f32: %d of 96 weights wrong", kt->name, wrong);
        free(blocks);
        printf("%s: small_t_q8 checked\n", kt->name);
    }
    const tern_ops *o = tern_handler_ops("cpu");
    tern_dev *d = NULL;
    CHECK_OK(o->open(NULL, &d));
    if (!d) return check_summary("test_cpu_q8");
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!cpu_kernels_for(isas[i])) continue;
        CHECK_OK(cpu_device_force_isa(d, isas[i]));
        const char *isa = cpu_kernels_for(isas[i])->name;
        check_copy(o, d, 32 * 4200); /* over two copy chunks (65536): threads split it */
        check_matmul(o, d, isa, 1, 67, 160);
        check_matmul(o, d, isa, 3, 50, 96);
        check_matmul(o, d, isa, 8, 33, 768);
        check_matmul(o, d, isa, 13, 40, 128);
        printf("%s: copy and matmul checked\n", isa);
    }
    check_refusals(o, d);
    CHECK_OK(o->close(d));
    check_gpu_refusal("interp");
    check_gpu_refusal("opencl");
    return check_summary("test_cpu_q8");
}
