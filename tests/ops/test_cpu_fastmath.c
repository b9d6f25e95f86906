/* The cpu handler's vectorised exp and GELU (src/handlers/cpu/fastmath.h), checked directly
 * over their whole range against libm in double: exp within 2 ulp (the polynomial's error is
 * below 5e-9 relative, the rest is f32 rounding of a few operations), GELU within 1e-6
 * relative (a few ulp); and their special values. */
#include <float.h>

#include "check.h"
#include "handlers/cpu/fastmath.h"

static double ulp_of(double x) {
    int e;
    frexp(x, &e);
    return ldexp(1.0, e - 24);
}

int main(void) {
    double worst = 0;
    float at = 0;
    for (float x = -86.5f; x <= 88.7f; x += 0.000731f) {
        double want = exp((double)x), err = fabs((double)cpu_expf(x) - want) / ulp_of(want);
        if (err > worst) worst = err, at = x;
    }
    CHECKF(worst <= 2.0, "cpu_expf: %.2f ulp at %.7g", worst, (double)at);
    CHECK(cpu_expf(0.0f) == 1.0f);
    CHECK(cpu_expf(-INFINITY) == 0.0f);
    CHECK(cpu_expf(INFINITY) == INFINITY);
    CHECK(cpu_expf(89.0f) == INFINITY);
    CHECK(cpu_expf(-1000.0f) == 0.0f);
    CHECK(isnan(cpu_expf(NAN)));

    /* references in double, in the sigmoid form 0.5 x (1 + tanh u) = x / (1 + exp(-2u)):
     * the same function, but 1 + tanh(u) loses all precision in double once tanh(u) rounds
     * to -1 (x < -6), while exp(-2u) does not */
    /* For x << 0, gelu(x) ~ x exp(-2u) is ill-conditioned: d ln gelu / d ln x ~ 2 x u' (about
     * 230 at x = -10), so f32 rounding inside u alone costs ~1e-5 relative there. The bounds
     * are 1e-6 for |x| <= 3 and 5e-5 beyond. */
    double worst_g = 0, worst_d = 0, worst_g_tail = 0, worst_d_tail = 0;
    for (float x = -30.0f; x <= 30.0f; x += 0.00037f) {
        double u = 0.7978845608028654 * (x + 0.044715 * (double)x * x * x);
        double e = exp(-2 * u), sg = 1 / (1 + e);
        double want = x * sg;
        double want_d = sg + 2 * x * sg * (e * sg) * 0.7978845608028654 * (1 + 3 * 0.044715 * (double)x * x);
        double eg = fabs(want) > 1e-37 ? fabs(cpu_gelu_f32(x) - want) / fabs(want) : 0;
        double ed = fabs(cpu_gelu_grad_f32(x) - want_d) / fmax(fabs(want_d), 0.1);
        if (fabs(x) <= 3) {
            worst_g = fmax(worst_g, eg);
            worst_d = fmax(worst_d, ed);
        } else {
            worst_g_tail = fmax(worst_g_tail, eg);
            worst_d_tail = fmax(worst_d_tail, ed);
        }
    }
    /* where both forms are accurate, they agree */
    for (double x = -5; x <= 5; x += 0.01) {
        double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
        CHECKF(fabs(0.5 * x * (1 + tanh(u)) - x / (1 + exp(-2 * u))) <= 1e-12, "gelu forms at %g", x);
    }
    CHECKF(worst_g <= 1e-6, "cpu_gelu_f32: relative error %.3g for |x| <= 3", worst_g);
    CHECKF(worst_g_tail <= 5e-5, "cpu_gelu_f32: relative error %.3g for |x| > 3", worst_g_tail);
    /* gelu' is a difference of terms of size ~0.3 around its zero at x = -0.75: it is
     * compared absolutely below 0.1 */
    CHECKF(worst_d <= 1e-6, "cpu_gelu_grad: error %.3g for |x| <= 3", worst_d);
    CHECKF(worst_d_tail <= 5e-5, "cpu_gelu_grad: error %.3g for |x| > 3", worst_d_tail);
    CHECK(cpu_gelu_f32(-200.0f) == 0.0f && cpu_gelu_f32(200.0f) == 200.0f);
    CHECK(cpu_gelu_grad_f32(-200.0f) == 0.0f && cpu_gelu_grad_f32(200.0f) == 1.0f);
    CHECK(isnan(cpu_gelu_f32(NAN)));
    return check_summary("test_cpu_fastmath");
}
