/* The cpu handler's kernel tables (src/handlers/cpu/kernels.h), each one this processor runs
 * (portable always; AVX2 and AVX-512 where the processor has them), called directly:
 *
 * - small_t and small_nt, for every row count 1..8 and B dtype f32/bf16/f16, on sizes that are
 *   not multiples of any vector width (and a GPT-2-sized one), with B inside a wider matrix
 *   (ldb > the columns used) at a column or row offset, against a double-precision reference
 *   computed from the same (already rounded) inputs. Tolerance: the classical worst-case bound
 *   of an f32 sum of k products in any order, (k + 1) u sum |a b| with u = 2^-24 (each product
 *   rounds once, each term passes through at most k additions), times 1.01; a lost or doubled
 *   term or a wrong element is far outside it. Elements of t outside the rows and columns
 *   asked for must keep their guard value, and small_nt must add to t, not overwrite it.
 * - the row conversions, bit for bit against the scalar conversions of tern/half.h: every one
 *   of the 65536 bf16 and f16 patterns to f32, and random f32 patterns plus specials (zeros,
 *   subnormals, ties, the largest values, infinities, NaNs) back, at odd lengths so the
 *   scalar tails run too. A NaN in f16 need only stay a NaN of the same sign either way
 *   (F16C quiets signalling NaNs and keeps other payload bits than the scalar code). */
#include <math.h>

#include "check.h"
#include "handlers/cpu/kernels.h"
#include "tern/half.h"

#define SPLITMIX_SEED 12345
#include "splitmix.h"

static const tern_dtype dtypes[] = {TERN_F32, TERN_BF16, TERN_F16};
static const char *const dtype_names[] = {"f32", "bf16", "f16"};
#define GUARD 1234.5f

/* B as stored (f32 or 16-bit bits) and the exact f32 value of each element. */
typedef struct mat {
    void *data;
    float *value;
} mat;

static mat random_mat(size_t count, tern_dtype dt) {
    mat b = {malloc(count * (dt == TERN_F32 ? 4 : 2)), malloc(count * sizeof(float))};
    for (size_t i = 0; i < count; i++) {
        float x = uniform(-1, 1);
        if (dt == TERN_F32) {
            ((float *)b.data)[i] = x;
            b.value[i] = x;
        } else {
            uint16_t h = dt == TERN_BF16 ? tern_f32_to_bf16(x) : tern_f32_to_f16(x);
            ((uint16_t *)b.data)[i] = h;
            b.value[i] = dt == TERN_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
        }
    }
    return b;
}

/* B [n, k] inside rows of ldb = k + 5, columns j0.. of t; t rows ldt = w + 3 apart. */
static void check_t(const cpu_kernels *kt, int m, tern_dtype dt, const char *dn, size_t n, size_t k) {
    size_t ldb = k + 5, j0 = n > 2 ? 2 : 0, w = n - j0, ldt = w + 3, rows = CPU_SMALL_M + 1;
    mat b = random_mat(n * ldb, dt);
    float *a = malloc((size_t)m * k * sizeof(float)), *t = malloc(rows * ldt * sizeof(float));
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = uniform(-1, 1);
    for (size_t i = 0; i < rows * ldt; i++) t[i] = GUARD;
    kt->small_t(m, dt, a, k, b.data, ldb, j0, w, t, ldt);
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
                double p = (double)a[r * k + kk] * b.value[(j0 + j) * ldb + kk];
                want += p, mag += fabs(p);
            }
            double bound = 1.01 * (double)(k + 1) * ldexp(1, -24) * mag;
            double err = fabs((double)got - want) / (bound > 0 ? bound : 1e-300);
            if (!(err <= worst)) worst = err; /* NaN counts as worst */
        }
    CHECKF(worst <= 1.0 && bad_guard == 0,
           "%s small_t m=%d %s n=%zu k=%zu: error %.3g of the bound, %d guard elements written",
           kt->name, m, dn, n, k, worst, bad_guard);
    free(b.data), free(b.value), free(a), free(t);
}

/* B [k, n] inside rows of ldb = n + 7, rows k0..k1 and columns j0.. of it; t starts at
 * known values and must have the sum added. */
static void check_nt(const cpu_kernels *kt, int m, tern_dtype dt, const char *dn, size_t n, size_t k) {
    size_t ldb = n + 7, j0 = n > 2 ? 1 : 0, w = n - j0, ldt = w + 3, rows = CPU_SMALL_M + 1;
    size_t k0 = k > 4 ? 3 : 0, k1 = k > 6 ? k - 1 : k;
    mat b = random_mat(k * ldb, dt);
    float *a = malloc((size_t)m * k * sizeof(float)), *t = malloc(rows * ldt * sizeof(float));
    float *t0 = malloc(rows * ldt * sizeof(float));
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = uniform(-1, 1);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ldt; j++)
            t0[r * ldt + j] = r < (size_t)m && j < w ? uniform(-1, 1) : GUARD;
    memcpy(t, t0, rows * ldt * sizeof(float));
    kt->small_nt(m, dt, a, k, b.data, ldb, k0, k1, j0, w, t, ldt);
    double worst = 0;
    int bad_guard = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < ldt; j++) {
            float got = t[r * ldt + j];
            if (r >= (size_t)m || j >= w) {
                bad_guard += got != GUARD;
                continue;
            }
            double want = t0[r * ldt + j], mag = fabs(want);
            for (size_t kk = k0; kk < k1; kk++) {
                double p = (double)a[r * k + kk] * b.value[kk * ldb + j0 + j];
                want += p, mag += fabs(p);
            }
            double bound = 1.01 * (double)(k1 - k0 + 2) * ldexp(1, -24) * mag;
            double err = fabs((double)got - want) / (bound > 0 ? bound : 1e-300);
            if (!(err <= worst)) worst = err;
        }
    CHECKF(worst <= 1.0 && bad_guard == 0,
           "%s small_nt m=%d %s n=%zu k=%zu (rows %zu..%zu): error %.3g of the bound, %d guard "
           "elements written",
           kt->name, m, dn, n, k, k0, k1, worst, bad_guard);
    free(b.data), free(b.value), free(a), free(t), free(t0);
}

static bool same_f32_bits(float x, float y) {
    uint32_t bx, by;
    memcpy(&bx, &x, 4);
    memcpy(&by, &y, 4);
    return bx == by;
}

static void check_conversions(const cpu_kernels *kt) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc((N + 64) * sizeof *h2);
    float *f = malloc((N + 64) * sizeof *f);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    /* all 16-bit patterns, from an odd start and length so both the vectors and the tails run */
    int bad_bf16 = 0, bad_f16 = 0;
    kt->bf16_to_f32(f, h + 1, N - 1);
    for (int i = 1; i < N; i++) bad_bf16 += !same_f32_bits(f[i - 1], tern_bf16_to_f32(h[i]));
    kt->f16_to_f32(f, h + 1, N - 1);
    for (int i = 1; i < N; i++) {
        float want = tern_f16_to_f32(h[i]); /* NaN: F16C quiets a signalling one */
        bad_f16 += isnan(want) ? !isnan(f[i - 1]) || signbit(want) != signbit(f[i - 1])
                               : !same_f32_bits(f[i - 1], want);
    }
    CHECKF(bad_bf16 == 0, "%s bf16_to_f32: %d of 65535 patterns differ", kt->name, bad_bf16);
    CHECKF(bad_f16 == 0, "%s f16_to_f32: %d of 65535 patterns differ", kt->name, bad_f16);

    /* f32 back: specials first, then random bit patterns and random values in f16's range */
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
        0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
        0x477ff000u, 0x477fefffu, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x3f801000u};
    size_t ns = sizeof specials / sizeof specials[0], n = N + 37;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = i < ns ? specials[i] : (uint32_t)next_u64();
        if (i >= ns && i % 2) { /* half of them: values f16 represents (normal and subnormal) */
            float x = uniform(-70000, 70000) * (i % 4 == 1 ? 1.0f : 1e-5f);
            memcpy(&bits, &x, 4);
        }
        memcpy(&f[i], &bits, 4);
    }
    int bad_to_bf16 = 0, bad_to_f16 = 0;
    kt->f32_to_bf16(h2, f, n);
    for (size_t i = 0; i < n; i++) bad_to_bf16 += h2[i] != tern_f32_to_bf16(f[i]);
    kt->f32_to_f16(h2, f, n);
    for (size_t i = 0; i < n; i++) {
        uint16_t want = tern_f32_to_f16(f[i]);
        bool nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu);
        bool got_nan = (h2[i] & 0x7c00u) == 0x7c00u && (h2[i] & 0x3ffu);
        bad_to_f16 += nan ? !got_nan : h2[i] != want;
    }
    CHECKF(bad_to_bf16 == 0, "%s f32_to_bf16: %d of %zu values differ", kt->name, bad_to_bf16, n);
    CHECKF(bad_to_f16 == 0, "%s f32_to_f16: %d of %zu values differ", kt->name, bad_to_f16, n);
    free(h), free(h2), free(f);
}

int main(void) {
    static const char *const isa_names[CPU_ISA_COUNT] = {"portable", "avx2", "avx512", "avx512bf16"};
    /* (n, k): odd, below one vector, between widths, and GPT-2's attention projection */
    static const size_t sizes[][2] = {{1, 1}, {3, 7}, {2, 17}, {17, 33}, {33, 100},
                                      {40, 129}, {5, 260}, {70, 768}};
    int ran = 0;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        const cpu_kernels *kt = cpu_kernels_for((cpu_isa)isa);
        if (!kt) {
            printf("note: the %s kernels are not available on this processor or build\n", isa_names[isa]);
            continue;
        }
        printf("checking the %s kernels\n", kt->name);
        CHECK(!strcmp(kt->name, isa_names[isa]));
        ran++;
        for (int m = 1; m <= CPU_SMALL_M; m++)
            for (int di = 0; di < 3; di++)
                for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                    check_t(kt, m, dtypes[di], dtype_names[di], sizes[s][0], sizes[s][1]);
                    check_nt(kt, m, dtypes[di], dtype_names[di], sizes[s][0], sizes[s][1]);
                    check_nt(kt, m, dtypes[di], dtype_names[di], sizes[s][1], sizes[s][0]);
                }
        check_conversions(kt);
    }
    CHECKF(cpu_kernels_for(CPU_ISA_PORTABLE) != NULL, "the portable kernels are always available");
    CHECK(cpu_kernels_for(CPU_ISA_COUNT) == NULL);
    printf("ran %d kernel table%s\n", ran, ran == 1 ? "" : "s");
    return check_summary("test_cpu_kernels");
}
