/* The cpu handler's own GEMM kernels (kernels.h): gemm_bf16 (AVX512_BF16's vdpbf16ps) and
 * gemm_f32 (AVX-512 and AVX2 FMA; B f32 or q8_0, and bf16 or f16 in the tables whose
 * gemm_f32_matmul names them), called directly from each kernel table that has them, against
 * a double-precision reference computed from the same inputs; a table this processor does
 * not run is skipped with a note.
 *
 * Shapes: m, n and k on both sides of the register tiles (AVX-512 8 rows x 48 columns, AVX2
 * 6 x 16; its [n, k] packing 8 k at a time) and of the k block (384 bf16, 256 f32), odd k (a
 * pair with no partner), 1s, and a GPT-2 prompt's shape; A and B each
 * stored plain or transposed, inside wider matrices (lda, ldb past the columns used), t with
 * ldt past n (the f32 kernel likewise, with its own k block). Tolerance, element by element:
 * every product of two bf16 is exact in f32, and an output's sum passes through at most k +
 * ceil(k / KC) rounded f32 additions (the pairs, then one per k block into t); an f32 FMA
 * rounds once per term. So the classical bound is (k + ceil(k / KC)) u sum |a b| with
 * u = 2^-24, for both; times 1.01. A lost, doubled or misplaced term is far outside it (the
 * inputs are in [-1, 1], never subnormal: vdpbf16ps counts bf16 subnormals as zero, which
 * the reference would not). Elements of t outside the m x n asked for must keep their guard
 * value; so must the operands. The scratch is allocated as the blocking constants' size
 * says (exactly for the bf16 kernel; for the f32 ones a bound over every table's MR), and
 * ASan builds watch its end. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "handlers/cpu/kernels.h"
#include "tern/half.h"

#define SPLITMIX_SEED 2026
#include "splitmix.h"

static size_t pick(const size_t *xs, size_t count) { return xs[next_u64() % count]; }

#define GUARD 1234.5f

/* count random values in [-1, 1] in dtype dt: f32, bf16 or f16 */
static void *random_values(size_t count, tern_dtype dt) {
    void *x = malloc((count ? count : 1) * (dt == TERN_F32 ? 4 : 2));
    for (size_t i = 0; i < count; i++) {
        float v = uniform(-1, 1);
        if (dt == TERN_BF16) ((uint16_t *)x)[i] = tern_f32_to_bf16(v);
        else if (dt == TERN_F16) ((uint16_t *)x)[i] = tern_f32_to_f16(v);
        else ((float *)x)[i] = v;
    }
    return x;
}

static double value(const void *x, size_t i, tern_dtype dt) {
    if (dt == TERN_BF16) return tern_bf16_to_f32(((const uint16_t *)x)[i]);
    if (dt == TERN_F16) return tern_f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

static int cases_run;

/* One product: A [m, k] (stored [k, m] when ta) and B [k, n] (stored [n, k] when tb), each
 * in a matrix `pad` elements wider than its stored columns; t [m, n] in rows n + pad wide;
 * by gemm_bf16 (bf16 true: A and B bf16) or gemm_f32 (A f32, B in bdt). */
static void check_case(const cpu_kernels *kt, bool bf16, tern_dtype bdt, size_t m, size_t n, size_t k, bool ta,
                       bool tb, size_t pad) {
    tern_dtype adt = bf16 ? TERN_BF16 : TERN_F32;
    if (bf16) bdt = TERN_BF16;
    size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t lda = ac + pad, ldb = bc + pad, ldt = n + pad, aes = bf16 ? 2 : 4, bes = bdt == TERN_F32 ? 4 : 2;
    size_t na = ar * lda, nb = br * ldb, nt = (m ? m : 1) * ldt;
    void *a = random_values(na, adt), *b = random_values(nb, bdt);
    void *a0 = malloc((na ? na : 1) * aes), *b0 = malloc((nb ? nb : 1) * bes);
    memcpy(a0, a, na * aes);
    memcpy(b0, b, nb * bes);
    float *t = malloc(nt * sizeof *t);
    for (size_t i = 0; i < nt; i++) t[i] = GUARD;
    size_t bytes = bf16 ? CPU_GEMM_BF16_SCRATCH(m) : CPU_GEMM_F32_SCRATCH(m);
    size_t kc = bf16 ? CPU_GEMM_BF16_KC : CPU_GEMM_F32_KC;
    void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (bf16) kt->gemm_bf16(m, n, k, a, lda, ta, b, ldb, tb, t, ldt, scratch);
    else kt->gemm_f32(m, n, k, a, lda, ta, b, bdt, ldb, tb, t, ldt, scratch);

    const char *kind = bf16 ? "gemm_bf16" : bdt == TERN_BF16 ? "gemm_f32 (bf16 B)"
                                          : bdt == TERN_F16 ? "gemm_f32 (f16 B)" : "gemm_f32";
    size_t adds = k + (k + kc - 1) / kc;
    int bad = 0, guards = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < ldt; j++) {
            float got = t[i * ldt + j];
            if (j >= n) {
                guards += got != GUARD;
                continue;
            }
            double s = 0, s_abs = 0;
            for (size_t kk = 0; kk < k; kk++) {
                double av = value(a, ta ? kk * lda + i : i * lda + kk, adt);
                double bv = value(b, tb ? j * ldb + kk : kk * ldb + j, bdt);
                s += av * bv;
                s_abs += fabs(av * bv);
            }
            double bound = 1.01 * (double)adds * 0x1p-24 * s_abs, err = fabs((double)got - s);
            bad += !(err <= bound);
        }
    CHECKF(bad == 0, "%s %s m%zu n%zu k%zu ta%d tb%d pad%zu: %d of %zu outside the bound", kt->name, kind, m, n,
           k, ta, tb, pad, bad, m * n);
    CHECKF(guards == 0, "%s %s m%zu n%zu k%zu: %d elements of t past n written", kt->name, kind, m, n, k, guards);
    CHECKF(!memcmp(a, a0, na * aes) && !memcmp(b, b0, nb * bes), "%s %s m%zu n%zu k%zu: an operand changed",
           kt->name, kind, m, n, k);
    cases_run++;
    free(a), free(b), free(a0), free(b0), free(t), free(scratch);
}

/* gemm_f32 with a q8_0 B [n, k] (rows ldb = k + pad weights apart, k and pad multiples of
 * 32) and an f32 A [m, k]: against the reference on the dequantized weights d q (exact in
 * f32), the same bound. */
static void check_q8(const cpu_kernels *kt, size_t m, size_t n, size_t k, size_t pad) {
    size_t lda = k + 1, ldb = k + pad, blocks = n * ldb / TERN_Q8_BLOCK, ldt = n, nt = m * ldt;
    float *a = random_values(m * lda, TERN_F32), *t = malloc((nt ? nt : 1) * sizeof *t);
    unsigned char *b = malloc(blocks * TERN_Q8_BLOCK_BYTES + 1);
    float *w = malloc((blocks ? blocks : 1) * TERN_Q8_BLOCK * sizeof *w); /* the weights' values */
    for (size_t q = 0; q < blocks; q++) {
        uint16_t dh = tern_f32_to_f16(uniform(0.001f, 0.02f));
        memcpy(b + q * TERN_Q8_BLOCK_BYTES, &dh, 2);
        for (int i = 0; i < TERN_Q8_BLOCK; i++) {
            int8_t v = (int8_t)((int)(next_u64() % 255) - 127);
            b[q * TERN_Q8_BLOCK_BYTES + 2 + i] = (unsigned char)v;
            w[q * TERN_Q8_BLOCK + i] = tern_f16_to_f32(dh) * (float)v;
        }
    }
    size_t bytes = CPU_GEMM_F32_SCRATCH(m);
    void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
    kt->gemm_f32(m, n, k, a, lda, false, b, TERN_Q8, ldb, true, t, ldt, scratch);
    size_t adds = k + (k + CPU_GEMM_F32_KC - 1) / CPU_GEMM_F32_KC;
    int bad = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0, s_abs = 0;
            for (size_t kk = 0; kk < k; kk++) {
                double p = (double)a[i * lda + kk] * w[j * ldb + kk];
                s += p;
                s_abs += fabs(p);
            }
            bad += !(fabs((double)t[i * ldt + j] - s) <= 1.01 * (double)adds * 0x1p-24 * s_abs);
        }
    CHECKF(bad == 0, "%s gemm_f32 q8_0 m%zu n%zu k%zu pad%zu: %d of %zu outside the bound", kt->name, m, n, k, pad,
           bad, m * n);
    cases_run++;
    free(a), free(t), free(b), free(w), free(scratch);
}

/* Every edge class of one kernel: m, n, k on both sides of its tile and k block; the f32
 * kernel with B in bdt. */
static void check_kernel(const cpu_kernels *kt, bool bf16, tern_dtype bdt) {
    size_t kc = bf16 ? CPU_GEMM_BF16_KC : CPU_GEMM_F32_KC;
    size_t edge_m[] = {1, 5, 6, 7, 8, 9, 13, 17}, edge_n[] = {1, 15, 16, 47, 48, 49, 97},
           edge_k[] = {1, 2, 3, 9, kc - 1, kc, kc + 1, 2 * kc + 1};
    size_t nm = sizeof edge_m / sizeof edge_m[0], nn = sizeof edge_n / sizeof edge_n[0],
           nk = sizeof edge_k / sizeof edge_k[0];
    for (int layout = 0; layout < 4; layout++)
        for (size_t i = 0; i < nk; i++)
            check_case(kt, bf16, bdt, edge_m[i % nm], edge_n[i % nn], edge_k[i], layout & 1, layout & 2,
                       i % 2 ? 3 : 0);
    /* random combinations of the same sizes and paddings */
    for (int c = 0; c < 120; c++) {
        size_t m = pick(edge_m, nm), n = pick(edge_n, nn), k = pick(edge_k, nk);
        check_case(kt, bf16, bdt, m, n, k, next_u64() & 1, next_u64() & 1, next_u64() % 3 ? 0 : 1 + next_u64() % 5);
    }
    /* a 64-token prompt against GPT-2's projection */
    check_case(kt, bf16, bdt, 64, 96, 768, false, false, 0);
    check_case(kt, bf16, bdt, 64, 96, 768, false, true, 0);
    /* m = 0 and n = 0 must touch nothing; k = 0 gives zeros */
    check_case(kt, bf16, bdt, 0, 5, 7, false, false, 2);
    check_case(kt, bf16, bdt, 3, 0, 7, false, false, 2);
    check_case(kt, bf16, bdt, 9, 50, 0, true, true, 1);
}

int main(void) {
    static const char *const isa_names[CPU_ISA_COUNT] = {"portable", "avx2", "avx512", "avx512bf16"};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        const cpu_kernels *kt = cpu_kernels_for((cpu_isa)isa);
        if (!kt) {
            printf("note: the %s kernels are not available on this processor or build\n", isa_names[isa]);
            continue;
        }
        /* which tables have which kernel: the handler relies on NULL where there is none */
        CHECKF(!kt->gemm_bf16 == (isa != CPU_ISA_AVX512BF16), "%s: gemm_bf16 %s", kt->name,
               kt->gemm_bf16 ? "present" : "missing");
        CHECKF(!kt->gemm_f32 == (isa < CPU_ISA_AVX2), "%s: gemm_f32 %s", kt->name,
               kt->gemm_f32 ? "present" : "missing");
        CHECKF(!kt->gemm_f32 == !kt->gemm_f32_matmul, "%s: gemm_f32_matmul %#x without gemm_f32, or none with it",
               kt->name, kt->gemm_f32_matmul);
        int before = cases_run;
        if (kt->gemm_bf16) check_kernel(kt, true, TERN_BF16);
        if (kt->gemm_f32) {
            check_kernel(kt, false, TERN_F32);
            if (kt->gemm_f32_matmul >> TERN_BF16 & 1u) check_kernel(kt, false, TERN_BF16);
            if (kt->gemm_f32_matmul >> TERN_F16 & 1u) check_kernel(kt, false, TERN_F16);
            check_q8(kt, 9, 49, 32, 0);
            check_q8(kt, 17, 97, 544, 32); /* k past two blocks of 256 */
            check_q8(kt, 64, 50, 768, 0);
        }
        printf("%s: %d cases checked\n", kt->name, cases_run - before);
    }
    return check_summary("test_cpu_gemm");
}
