/* The cpu handler's own GEMM kernels (kernels.h): gemm_bf16 (AVX512_BF16's vdpbf16ps) and
 * gemm_f32 (AVX-512 FMA; B f32 or q8_0), called directly from each kernel table that has them, against a
 * double-precision reference computed from the same inputs; a table this processor does not
 * run is skipped with a note.
 *
 * Shapes: m, n and k on both sides of the register tile (8 rows, 48 columns) and of the k
 * block (384), odd k (a pair with no partner), 1s, and a GPT-2 prompt's shape; A and B each
 * stored plain or transposed, inside wider matrices (lda, ldb past the columns used), t with
 * ldt past n (the f32 kernel likewise, with its own k block). Tolerance, element by element:
 * every product of two bf16 is exact in f32, and an output's sum passes through at most k +
 * ceil(k / KC) rounded f32 additions (the pairs, then one per k block into t); an f32 FMA
 * rounds once per term. So the classical bound is (k + ceil(k / KC)) u sum |a b| with
 * u = 2^-24, for both; times 1.01. A lost, doubled or misplaced term is far outside it (the
 * inputs are in [-1, 1], never subnormal: vdpbf16ps counts bf16 subnormals as zero, which
 * the reference would not). Elements of t outside the m x n asked for must keep their guard
 * value; so must the operands. Then the blocking constants' scratch size is checked to be
 * what the kernel touches: the scratch is allocated exactly and ASan builds watch its end. */
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

/* count random values in [-1, 1]: bf16 (2 bytes each) or f32 */
static void *random_values(size_t count, bool bf16) {
    void *x = malloc((count ? count : 1) * (bf16 ? 2 : 4));
    for (size_t i = 0; i < count; i++) {
        float v = uniform(-1, 1);
        if (bf16) ((uint16_t *)x)[i] = tern_f32_to_bf16(v);
        else ((float *)x)[i] = v;
    }
    return x;
}

static double value(const void *x, size_t i, bool bf16) {
    return bf16 ? tern_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

static int cases_run;

/* One product: A [m, k] (stored [k, m] when ta) and B [k, n] (stored [n, k] when tb), each
 * in a matrix `pad` elements wider than its stored columns; t [m, n] in rows n + pad wide;
 * by gemm_bf16 or gemm_f32. */
static void check_case(const cpu_kernels *kt, bool bf16, size_t m, size_t n, size_t k, bool ta, bool tb,
                       size_t pad) {
    size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t lda = ac + pad, ldb = bc + pad, ldt = n + pad, es = bf16 ? 2 : 4;
    size_t na = ar * lda, nb = br * ldb, nt = (m ? m : 1) * ldt;
    void *a = random_values(na, bf16), *b = random_values(nb, bf16);
    void *a0 = malloc((na ? na : 1) * es), *b0 = malloc((nb ? nb : 1) * es);
    memcpy(a0, a, na * es);
    memcpy(b0, b, nb * es);
    float *t = malloc(nt * sizeof *t);
    for (size_t i = 0; i < nt; i++) t[i] = GUARD;
    size_t bytes = bf16 ? CPU_GEMM_BF16_SCRATCH(m) : CPU_GEMM_F32_SCRATCH(m);
    size_t kc = bf16 ? CPU_GEMM_BF16_KC : CPU_GEMM_F32_KC;
    void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (bf16) kt->gemm_bf16(m, n, k, a, lda, ta, b, ldb, tb, t, ldt, scratch);
    else kt->gemm_f32(m, n, k, a, lda, ta, b, TERN_F32, ldb, tb, t, ldt, scratch);

    const char *kind = bf16 ? "gemm_bf16" : "gemm_f32";
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
                double av = value(a, ta ? kk * lda + i : i * lda + kk, bf16);
                double bv = value(b, tb ? j * ldb + kk : kk * ldb + j, bf16);
                s += av * bv;
                s_abs += fabs(av * bv);
            }
            double bound = 1.01 * (double)adds * 0x1p-24 * s_abs, err = fabs((double)got - s);
            bad += !(err <= bound);
        }
    CHECKF(bad == 0, "%s %s m%zu n%zu k%zu ta%d tb%d pad%zu: %d of %zu outside the bound", kt->name, kind, m, n,
           k, ta, tb, pad, bad, m * n);
    CHECKF(guards == 0, "%s %s m%zu n%zu k%zu: %d elements of t past n written", kt->name, kind, m, n, k, guards);
    CHECKF(!memcmp(a, a0, na * es) && !memcmp(b, b0, nb * es), "%s %s m%zu n%zu k%zu: an operand changed",
           kt->name, kind, m, n, k);
    cases_run++;
    free(a), free(b), free(a0), free(b0), free(t), free(scratch);
}

/* gemm_f32 with a q8_0 B [n, k] (rows ldb = k + pad weights apart, k and pad multiples of
 * 32) and an f32 A [m, k]: against the reference on the dequantized weights d q (exact in
 * f32), the same bound. */
static void check_q8(const cpu_kernels *kt, size_t m, size_t n, size_t k, size_t pad) {
    size_t lda = k + 1, ldb = k + pad, blocks = n * ldb / TERN_Q8_BLOCK, ldt = n, nt = m * ldt;
    float *a = random_values(m * lda, false), *t = malloc((nt ? nt : 1) * sizeof *t);
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

/* Every edge class of one kernel: m, n, k on both sides of its tile and k block. */
static void check_kernel(const cpu_kernels *kt, bool bf16) {
    size_t kc = bf16 ? CPU_GEMM_BF16_KC : CPU_GEMM_F32_KC;
    size_t edge_m[] = {1, 7, 8, 9, 17}, edge_n[] = {1, 15, 16, 47, 48, 49, 97},
           edge_k[] = {1, 2, 3, kc - 1, kc, kc + 1, 2 * kc + 1};
    for (int layout = 0; layout < 4; layout++)
        for (size_t i = 0; i < sizeof edge_k / sizeof edge_k[0]; i++)
            check_case(kt, bf16, edge_m[i % 5], edge_n[i], edge_k[i], layout & 1, layout & 2, i % 2 ? 3 : 0);
    /* random combinations of the same sizes and paddings */
    for (int c = 0; c < 120; c++) {
        size_t m = pick(edge_m, 5), n = pick(edge_n, 7), k = pick(edge_k, 7);
        check_case(kt, bf16, m, n, k, next_u64() & 1, next_u64() & 1, next_u64() % 3 ? 0 : 1 + next_u64() % 5);
    }
    /* a 64-token prompt against GPT-2's projection */
    check_case(kt, bf16, 64, 96, 768, false, false, 0);
    check_case(kt, bf16, 64, 96, 768, false, true, 0);
    /* m = 0 and n = 0 must touch nothing; k = 0 gives zeros */
    check_case(kt, bf16, 0, 5, 7, false, false, 2);
    check_case(kt, bf16, 3, 0, 7, false, false, 2);
    check_case(kt, bf16, 9, 50, 0, true, true, 1);
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
        CHECKF(!kt->gemm_f32 == (isa < CPU_ISA_AVX512), "%s: gemm_f32 %s", kt->name,
               kt->gemm_f32 ? "present" : "missing");
        int before = cases_run;
        if (kt->gemm_bf16) check_kernel(kt, true);
        if (kt->gemm_f32) {
            check_kernel(kt, false);
            check_q8(kt, 9, 49, 32, 0);
            check_q8(kt, 17, 97, 544, 32); /* k past two blocks of 256 */
            check_q8(kt, 64, 50, 768, 0);
        }
        printf("%s: %d cases checked\n", kt->name, cases_run - before);
    }
    return check_summary("test_cpu_gemm");
}
