/* The cpu kernel tables' decoding attention passes (kernels.h: attn_scores, attn_values), each
 * table this processor runs, called directly on a cache of f32, bf16 or f16 rows, against a
 * double-precision reference computed from the same (already rounded) inputs:
 *
 * - attn_scores: s[j] = scale * q . K[j]. Bound: (hs + 2) u |scale| sum |q k| times 1.01
 *   (u = 2^-24: each product rounds once, each term passes through at most hs additions, and
 *   the scaling rounds once more).
 * - attn_values: o[i] = sum_j p[j] V[j, i]. Bound: (n + 1) u sum |p v| times 1.01.
 *
 * Sizes: key counts around the kernels' groups of four and pairs (1 .. 9, 33, 130) and head
 * sizes below a vector, between widths, GPT-2's and Llama's (1, 4, 17, 64, 80, 128); the
 * element after the last of s and o must keep its guard value. A lost, doubled or misplaced
 * term is far outside the bounds. */
#include <math.h>

#include "check.h"
#include "handlers/cpu/kernels.h"
#include "tern/half.h"

#define SPLITMIX_SEED 4242
#include "splitmix.h"

static const tern_dtype dtypes[] = {TERN_F32, TERN_BF16, TERN_F16};
static const char *const dtype_names[] = {"f32", "bf16", "f16"};
#define GUARD 1234.5f

/* count random elements as stored in dt (data) and their exact values (value). */
static void random_rows(size_t count, tern_dtype dt, void **data, float **value) {
    *data = malloc(count * (dt == TERN_F32 ? 4 : 2));
    *value = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        float x = uniform(-2, 2);
        if (dt == TERN_F32) {
            ((float *)*data)[i] = x;
            (*value)[i] = x;
        } else {
            uint16_t h = dt == TERN_BF16 ? tern_f32_to_bf16(x) : tern_f32_to_f16(x);
            ((uint16_t *)*data)[i] = h;
            (*value)[i] = dt == TERN_BF16 ? tern_bf16_to_f32(h) : tern_f16_to_f32(h);
        }
    }
}

static void check(const cpu_kernels *kt, tern_dtype dt, const char *dn, size_t n, size_t hs) {
    void *kd, *vd;
    float *kv, *vv;
    random_rows(n * hs, dt, &kd, &kv);
    random_rows(n * hs, dt, &vd, &vv);
    float *q = malloc(hs * sizeof(float)), *p = malloc(n * sizeof(float));
    float *s = malloc((n + 1) * sizeof(float)), *o = malloc((hs + 1) * sizeof(float));
    for (size_t i = 0; i < hs; i++) q[i] = uniform(-1, 1);
    for (size_t j = 0; j < n; j++) p[j] = uniform(0, 1);
    const float scale = 0.125f;
    s[n] = GUARD, o[hs] = GUARD;
    kt->attn_scores(dt, q, kd, n, hs, scale, s);
    kt->attn_values(dt, p, vd, n, hs, o);
    double worst_s = 0, worst_o = 0;
    for (size_t j = 0; j < n; j++) {
        double want = 0, mag = 0;
        for (size_t i = 0; i < hs; i++) {
            double t = (double)q[i] * kv[j * hs + i];
            want += t, mag += fabs(t);
        }
        double bound = 1.01 * (double)(hs + 2) * ldexp(1, -24) * scale * mag;
        double err = fabs((double)s[j] - scale * want) / (bound > 0 ? bound : 1e-300);
        if (!(err <= worst_s)) worst_s = err; /* NaN counts as worst */
    }
    for (size_t i = 0; i < hs; i++) {
        double want = 0, mag = 0;
        for (size_t j = 0; j < n; j++) {
            double t = (double)p[j] * vv[j * hs + i];
            want += t, mag += fabs(t);
        }
        double bound = 1.01 * (double)(n + 1) * ldexp(1, -24) * mag;
        double err = fabs((double)o[i] - want) / (bound > 0 ? bound : 1e-300);
        if (!(err <= worst_o)) worst_o = err;
    }
    CHECKF(worst_s <= 1.0 && s[n] == GUARD, "%s attn_scores %s n=%zu hs=%zu: error %.3g of the bound, guard %s",
           kt->name, dn, n, hs, worst_s, s[n] == GUARD ? "kept" : "written");
    CHECKF(worst_o <= 1.0 && o[hs] == GUARD, "%s attn_values %s n=%zu hs=%zu: error %.3g of the bound, guard %s",
           kt->name, dn, n, hs, worst_o, o[hs] == GUARD ? "kept" : "written");
    free(kd), free(kv), free(vd), free(vv), free(q), free(p), free(s), free(o);
}

int main(void) {
    static const size_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 33, 130};
    static const size_t hss[] = {1, 4, 17, 64, 80, 128};
    int ran = 0;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        const cpu_kernels *kt = cpu_kernels_for((cpu_isa)isa);
        if (!kt) continue;
        ran++;
        for (int di = 0; di < 3; di++)
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (size_t b = 0; b < sizeof hss / sizeof hss[0]; b++) check(kt, dtypes[di], dtype_names[di], ns[a], hss[b]);
    }
    printf("ran %d kernel table%s\n", ran, ran == 1 ? "" : "s");
    return check_summary("test_cpu_attn_kernels");
}
