/* The cpu handler's bf16 GEMM (kernels.h's gemm_bf16: AVX512_BF16's vdpbf16ps), called directly
 * from each kernel table that has one, against a double-precision reference computed from the
 * same bf16 inputs; skipped (with a note) where the processor has no AVX512_BF16.
 *
 * Shapes: m, n and k on both sides of the register tile (8 rows, 48 columns) and of the k
 * block (384), odd k (a pair with no partner), 1s, and a GPT-2 prompt's shape; A and B each
 * stored plain or transposed, inside wider matrices (lda, ldb past the columns used), t with
 * ldt past n. Tolerance, element by element: every product of two bf16 is exact in f32, and
 * an output's sum passes through at most k + ceil(k / 384) rounded f32 additions (the pairs,
 * then one per k block into t), so the classical bound is (k + ceil(k / 384)) u sum |a b| with
 * u = 2^-24; times 1.01. A lost, doubled or misplaced term is far outside it (the inputs are
 * in [-1, 1], never subnormal: the instruction counts bf16 subnormals as zero, which the
 * reference would not). Elements of t outside the m x n asked for must keep their guard
 * value; so must the operands. Then the blocking constants' scratch size is checked to be
 * what the kernel touches: the scratch is allocated exactly and ASan builds watch its end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "handlers/cpu/kernels.h"
#include "tern/half.h"

static uint64_t rng = 2026;

static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(next_u64() >> 11) * (1.0 / 9007199254740992.0));
}

static size_t pick(const size_t *xs, size_t count) { return xs[next_u64() % count]; }

#define GUARD 1234.5f

/* count random bf16 in [-1, 1] */
static uint16_t *random_bf16(size_t count) {
    uint16_t *x = malloc((count ? count : 1) * sizeof *x);
    for (size_t i = 0; i < count; i++) x[i] = tern_f32_to_bf16(uniform(-1, 1));
    return x;
}

static int cases_run;

/* One product: A [m, k] (stored [k, m] when ta) and B [k, n] (stored [n, k] when tb), each
 * in a matrix `pad` elements wider than its stored columns; t [m, n] in rows n + pad wide. */
static void check_case(const cpu_kernels *kt, size_t m, size_t n, size_t k, bool ta, bool tb, size_t pad) {
    size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t lda = ac + pad, ldb = bc + pad, ldt = n + pad;
    size_t na = ar * lda, nb = br * ldb, nt = (m ? m : 1) * ldt;
    uint16_t *a = random_bf16(na), *b = random_bf16(nb);
    uint16_t *a0 = malloc((na ? na : 1) * 2), *b0 = malloc((nb ? nb : 1) * 2);
    memcpy(a0, a, na * 2);
    memcpy(b0, b, nb * 2);
    float *t = malloc(nt * sizeof *t);
    for (size_t i = 0; i < nt; i++) t[i] = GUARD;
    size_t bytes = CPU_GEMM_BF16_SCRATCH(m);
    void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
    kt->gemm_bf16(m, n, k, a, lda, ta, b, ldb, tb, t, ldt, scratch);

    size_t adds = k + (k + CPU_GEMM_BF16_KC - 1) / CPU_GEMM_BF16_KC;
    double worst = 0; /* the largest error as a fraction of its bound */
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
                double av = tern_bf16_to_f32(ta ? a[kk * lda + i] : a[i * lda + kk]);
                double bv = tern_bf16_to_f32(tb ? b[j * ldb + kk] : b[kk * ldb + j]);
                s += av * bv;
                s_abs += fabs(av * bv);
            }
            double bound = 1.01 * (double)adds * 0x1p-24 * s_abs, err = fabs((double)got - s);
            if (!(err <= bound)) bad++;
            else if (bound > 0 && err / bound > worst) worst = err / bound;
        }
    CHECKF(bad == 0, "%s gemm_bf16 m%zu n%zu k%zu ta%d tb%d pad%zu: %d of %zu outside the bound", kt->name, m, n,
           k, ta, tb, pad, bad, m * n);
    CHECKF(guards == 0, "%s gemm_bf16 m%zu n%zu k%zu: %d elements of t past n written", kt->name, m, n, k, guards);
    CHECKF(!memcmp(a, a0, na * 2) && !memcmp(b, b0, nb * 2), "%s gemm_bf16 m%zu n%zu k%zu: an operand changed",
           kt->name, m, n, k);
    cases_run++;
    free(a), free(b), free(a0), free(b0), free(t), free(scratch);
}

int main(void) {
    const cpu_kernels *kt = cpu_kernels_for(CPU_ISA_AVX512BF16);
    if (!kt) {
        printf("note: no AVX512_BF16 on this processor or build: gemm_bf16 not checked\n");
        return check_summary("test_cpu_gemm_bf16");
    }
    CHECK(kt->gemm_bf16 != NULL);
    /* the other tables have none: the handler must not call it there */
    for (int isa = 0; isa < CPU_ISA_AVX512BF16; isa++) {
        const cpu_kernels *other = cpu_kernels_for((cpu_isa)isa);
        CHECKF(!other || !other->gemm_bf16, "the %s table has a gemm_bf16", other ? other->name : "?");
    }
    /* every edge class once, each layout, dense and padded */
    static const size_t edge_m[] = {1, 7, 8, 9, 17}, edge_n[] = {1, 15, 16, 47, 48, 49, 97},
                        edge_k[] = {1, 2, 3, 383, 384, 385, 769};
    for (int layout = 0; layout < 4; layout++)
        for (size_t i = 0; i < sizeof edge_k / sizeof edge_k[0]; i++)
            check_case(kt, edge_m[i % 5], edge_n[i], edge_k[i], layout & 1, layout & 2, i % 2 ? 3 : 0);
    /* random combinations of the same sizes and paddings */
    for (int c = 0; c < 120; c++) {
        size_t m = pick(edge_m, 5), n = pick(edge_n, 7), k = pick(edge_k, 7);
        check_case(kt, m, n, k, next_u64() & 1, next_u64() & 1, next_u64() % 3 ? 0 : 1 + next_u64() % 5);
    }
    /* a 64-token prompt against GPT-2's projection (k two blocks of 384 and an even part) */
    check_case(kt, 64, 96, 768, false, false, 0);
    check_case(kt, 64, 96, 768, false, true, 0);
    /* m = 0 and n = 0 must touch nothing; k = 0 gives zeros */
    check_case(kt, 0, 5, 7, false, false, 2);
    check_case(kt, 3, 0, 7, false, false, 2);
    check_case(kt, 9, 50, 0, true, true, 1);
    printf("gemm_bf16 (%s): %d cases checked\n", kt->name, cases_run);
    return check_summary("test_cpu_gemm_bf16");
}
