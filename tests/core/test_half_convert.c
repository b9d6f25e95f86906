/* tern_tensor_convert against an independent reference: half-precision values decoded from
 * their definition (sign, exponent, mantissa, via ldexp) and rounding done by searching the
 * sorted table of every representable value for the nearest one (ties to the even
 * pattern). Exhaustive over all 16-bit patterns and every rounding midpoint; random f32
 * patterns besides. Comparisons are exact: conversions are correctly rounded. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/safetensors.h"

/* Value of a half-precision pattern with `mbits` mantissa bits and exponent bias `bias`. */
static double decode(uint16_t h, int mbits, int ebits, int bias) {
    int sign = h >> 15;
    int e = (h >> mbits) & ((1 << ebits) - 1);
    int m = h & ((1 << mbits) - 1);
    double v;
    if (e == 0)
        v = ldexp(m, 1 - bias - mbits);
    else if (e == (1 << ebits) - 1)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((1 << mbits) + m, e - bias - mbits);
    return sign ? -v : v;
}
static double f16_value(uint16_t h) { return decode(h, 10, 5, 15); }
static double bf16_value(uint16_t h) { return decode(h, 7, 8, 127); }

/* The positive finite values of a format, increasing with their patterns 0 .. max. */
typedef struct table {
    double *v;
    uint16_t max; /* largest finite pattern */
    uint16_t inf; /* the +infinity pattern */
    double (*value)(uint16_t);
} table;

static table make_table(double (*value)(uint16_t), uint16_t max, uint16_t inf) {
    table t = {malloc(((size_t)max + 1) * sizeof(double)), max, inf, value};
    for (uint32_t i = 0; i <= max; i++)
        t.v[i] = value((uint16_t)i);
    return t;
}

/* Round-to-nearest-even of x into the table's format, by search. */
static uint16_t round_ref(const table *t, double x) {
    if (isnan(x)) return 0xffff; /* marker: any NaN */
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double ax = fabs(x);
    /* Beyond the largest finite value by half its spacing or more: infinity (the largest
     * pattern is odd, so the tie goes up too). */
    double top = t->v[t->max], half_gap = (top - t->v[t->max - 1]) / 2;
    if (ax >= top + half_gap) return sign | t->inf;
    size_t lo = 0, hi = t->max; /* largest i with v[i] <= ax */
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (t->v[mid] <= ax)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == t->max) return sign | (uint16_t)lo;
    double below = ax - t->v[lo], above = t->v[lo + 1] - ax;
    size_t pick = below < above ? lo : above < below ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
    return sign | (uint16_t)pick;
}

static int is_nan16(uint16_t h, int mbits) {
    int ebits_mask = (h >> mbits) & (mbits == 10 ? 0x1f : 0xff);
    return ebits_mask == (mbits == 10 ? 0x1f : 0xff) && (h & ((1 << mbits) - 1)) != 0;
}

/* A tensor over caller memory, for tern_tensor_convert. */
static tern_tensor_info tensor(tern_dtype dtype, const void *data, size_t count) {
    tern_tensor_info t;
    memset(&t, 0, sizeof t);
    t.name = "t";
    t.dtype = dtype;
    t.supported = true;
    t.dtype_name = dtype == TERN_F32    ? "F32"
                   : dtype == TERN_BF16 ? "BF16"
                   : dtype == TERN_F16  ? "F16"
                   : dtype == TERN_I32  ? "I32"
                                        : "U16";
    t.elem_size = tern_dtype_size(dtype);
    t.ndim = 1;
    t.shape[0] = (int64_t)count;
    t.count = count;
    t.nbytes = count * t.elem_size;
    t.data = data;
    return t;
}

/* Every 16-bit pattern decodes exactly (NaN to NaN). */
static void test_decode_all(tern_dtype dtype, double (*value)(uint16_t)) {
    uint16_t *h = malloc(65536 * sizeof *h);
    float *out = malloc(65536 * sizeof *out);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    tern_tensor_info t = tensor(dtype, h, 65536);
    CHECK_OK(tern_tensor_convert(&t, TERN_F32, out));
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        double want = value((uint16_t)i);
        if (isnan(want) ? !isnan(out[i])
                        : ((double)out[i] != want || !signbit(out[i]) != !signbit(want)))
            bad++;
    }
    CHECKF(bad == 0, "%s: %d of 65536 patterns decode wrongly", tern_dtype_name(dtype), bad);
    free(h);
    free(out);
}

/* f32 values x converted to `to` equal the reference rounding. */
static int count_rounding_errors(const float *x, size_t n, tern_dtype to, const table *ref) {
    uint16_t *out = malloc(n * sizeof *out);
    tern_tensor_info t = tensor(TERN_F32, x, n);
    CHECK_OK(tern_tensor_convert(&t, to, out));
    int mbits = to == TERN_F16 ? 10 : 7, bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = round_ref(ref, x[i]);
        if (want == 0xffff ? !is_nan16(out[i], mbits) : out[i] != want) {
            if (bad < 5)
                fprintf(stderr, "  %s(%.9g): got 0x%04x, want 0x%04x\n", tern_dtype_name(to),
                        (double)x[i], out[i], want);
            bad++;
        }
    }
    free(out);
    return bad;
}

/* Every midpoint between neighbours, the values a hair either side of it, and each value
 * itself (positive and negative). */
static void test_midpoints(tern_dtype to, const table *ref) {
    size_t n = 0, cap = (size_t)ref->max * 8 + 8;
    float *x = malloc(cap * sizeof *x);
    for (uint32_t i = 0; i < ref->max; i++) {
        float mid = (float)((ref->v[i] + ref->v[i + 1]) / 2); /* exact in f32 */
        float vals[4] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)ref->v[i]};
        for (int k = 0; k < 4; k++) {
            x[n++] = vals[k];
            x[n++] = -vals[k];
        }
    }
    int bad = count_rounding_errors(x, n, to, ref);
    CHECKF(bad == 0, "f32 -> %s: %d of %zu midpoint cases wrong", tern_dtype_name(to), bad, n);
    free(x);
}

static void test_random_and_special(tern_dtype to, const table *ref) {
    size_t n = 1u << 20;
    float *x = malloc((n + 16) * sizeof *x);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t bits = (uint32_t)(s >> 11);
        /* Half of them near the format's range, where rounding matters most. */
        if (i % 2) bits = (bits & 0x807fffffu) | ((uint32_t)(96 + (s >> 60) * 3) << 23);
        memcpy(&x[i], &bits, 4);
    }
    float special[] = {0.0f,  -0.0f,          INFINITY,       -INFINITY,
                       NAN,   65504.0f,       65519.99f,      65520.0f,
                       1e-8f, 3e38f,          3.4028235e38f,  1.0f / 3.0f,
                       0.1f,  5.96046448e-8f, 2.98023224e-8f, 2.98023254e-8f};
    memcpy(x + n, special, sizeof special);
    int bad = count_rounding_errors(x, n + 16, to, ref);
    CHECKF(bad == 0, "f32 -> %s: %d random or special values wrong", tern_dtype_name(to), bad);
    free(x);
}

/* Known patterns, written down from the formats' definitions. */
static void test_known_patterns(void) {
    float x[] = {1.0f, -2.0f, 0.1f, 65504.0f, 1.0f / 3.0f, 5.9604645e-8f /* 2^-24 */};
    uint16_t f16[6], bf16[6];
    tern_tensor_info t = tensor(TERN_F32, x, 6);
    CHECK_OK(tern_tensor_convert(&t, TERN_F16, f16));
    CHECK_OK(tern_tensor_convert(&t, TERN_BF16, bf16));
    uint16_t want16[] = {0x3c00, 0xc000, 0x2e66, 0x7bff, 0x3555, 0x0001};
    uint16_t want_b[] = {0x3f80, 0xc000, 0x3dcd, 0x4780, 0x3eab, 0x3380};
    CHECK(memcmp(f16, want16, sizeof want16) == 0);
    CHECK(memcmp(bf16, want_b, sizeof want_b) == 0);
}

/* Between the two half formats: through f32, which holds both exactly, so one rounding. */
static void test_half_to_half(const table *f16_ref, const table *bf16_ref) {
    uint16_t *h = malloc(65536 * 2), *out = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    int bad = 0;
    tern_tensor_info t = tensor(TERN_F16, h, 65536);
    CHECK_OK(tern_tensor_convert(&t, TERN_BF16, out));
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t want = round_ref(bf16_ref, f16_value((uint16_t)i));
        if (want == 0xffff ? !is_nan16(out[i], 7) : out[i] != want) bad++;
    }
    t = tensor(TERN_BF16, h, 65536);
    CHECK_OK(tern_tensor_convert(&t, TERN_F16, out));
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t want = round_ref(f16_ref, bf16_value((uint16_t)i));
        if (want == 0xffff ? !is_nan16(out[i], 10) : out[i] != want) bad++;
    }
    CHECKF(bad == 0, "half <-> half: %d patterns wrong", bad);
    free(h);
    free(out);
}

static void test_integers_and_errors(void) {
    int32_t i32[] = {0, -3, 1000, 16777217, INT32_MIN};
    float f[5];
    tern_tensor_info t = tensor(TERN_I32, i32, 5);
    CHECK_OK(tern_tensor_convert(&t, TERN_F32, f));
    CHECK(f[0] == 0.0f && f[1] == -3.0f && f[2] == 1000.0f && f[3] == 16777216.0f &&
          f[4] == -2147483648.0f);
    uint16_t b[5];
    CHECK_OK(tern_tensor_convert(&t, TERN_BF16, b));
    CHECK(b[2] == 0x447a); /* 1000 = 0x447a0000 */
    int32_t back[5];
    CHECK_OK(tern_tensor_convert(&t, TERN_I32, back));
    CHECK(memcmp(back, i32, sizeof back) == 0);
    CHECK_ERR(tern_tensor_convert(&t, TERN_U16, b), "cannot convert I32 to u16");

    uint16_t u16[] = {0, 50256, 65535};
    t = tensor(TERN_U16, u16, 3);
    CHECK_OK(tern_tensor_convert(&t, TERN_I32, back));
    CHECK(back[0] == 0 && back[1] == 50256 && back[2] == 65535);
    CHECK_OK(tern_tensor_convert(&t, TERN_F32, f));
    CHECK(f[1] == 50256.0f && f[2] == 65535.0f);

    float fl[] = {1.5f};
    t = tensor(TERN_F32, fl, 1);
    CHECK_ERR(tern_tensor_convert(&t, TERN_I32, back), "cannot convert F32 to i32");
    t.supported = false;
    t.dtype_name = "I64";
    CHECK_ERR(tern_tensor_convert(&t, TERN_F32, f), "has dtype I64");
    CHECK_ERR(tern_tensor_convert(NULL, TERN_F32, f), "no tensor");

    /* Data at an odd address converts (the file format does not align tensors). */
    unsigned char raw[1 + 3 * 4];
    float vals[3] = {1.25f, -7.0f, 3e-3f};
    memcpy(raw + 1, vals, sizeof vals);
    t = tensor(TERN_F32, raw + 1, 3);
    float got[3];
    CHECK_OK(tern_tensor_convert(&t, TERN_F32, got));
    CHECK(memcmp(got, vals, sizeof vals) == 0);
    uint16_t hb[3];
    CHECK_OK(tern_tensor_convert(&t, TERN_BF16, hb));
    CHECK(hb[0] == 0x3fa0 && hb[1] == 0xc0e0);
}

int main(void) {
    table f16 = make_table(f16_value, 0x7bff, 0x7c00);
    table bf16 = make_table(bf16_value, 0x7f7f, 0x7f80);
    test_decode_all(TERN_F16, f16_value);
    test_decode_all(TERN_BF16, bf16_value);
    test_known_patterns();
    test_midpoints(TERN_F16, &f16);
    test_midpoints(TERN_BF16, &bf16);
    test_random_and_special(TERN_F16, &f16);
    test_random_and_special(TERN_BF16, &bf16);
    test_half_to_half(&f16, &bf16);
    test_integers_and_errors();
    free(f16.v);
    free(bf16.v);
    return check_summary("test_half_convert");
}
