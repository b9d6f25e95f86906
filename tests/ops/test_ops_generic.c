/* The generic operations (build, zip_with, reduce, index_of) through the effect, on every
 * handler with a device, against plain C; and an impure kernel rejected by name. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/handlers.h"
#include "tern/kernel.h"

static void square(tern_kb *kb, void *user) { /* i -> i * i / 2, as f32 */
    (void)user;
    tern_v i = tern_param_scalar(kb, "i", TERN_T_I32);
    tern_v x = tern_cast(i, TERN_T_F32);
    tern_result(kb, tern_mul(tern_mul(x, x), tern_f32(0.5f)));
}

static void add(tern_kb *kb, void *user) {
    (void)user;
    tern_v a = tern_param_scalar(kb, "a", TERN_T_F32);
    tern_v b = tern_param_scalar(kb, "b", TERN_T_F32);
    tern_result(kb, tern_add(a, b));
}

static void noisy_add(tern_kb *kb, void *user) { /* prints: not pure */
    (void)user;
    tern_v a = tern_param_scalar(kb, "a", TERN_T_F32);
    tern_v b = tern_param_scalar(kb, "b", TERN_T_F32);
    tern_print(kb, "a={}", a);
    tern_result(kb, tern_add(a, b));
}

static void run(const tern_ops *ops, tern_kernel *sq, tern_kernel *plus, tern_kernel *noisy) {
    tern_dev *d = NULL;
    tern_error *err = ops->open(NULL, &d);
    if (err) {
        printf("%s: skipped, no device: %s\n", ops->handler, tern_error_message(err));
        tern_error_free(err);
        return;
    }
    enum { N = 1000 };
    float host[N];
    tern_buf a = tern_none(), b = tern_none(), c = tern_none();
    CHECK_OK(ops->alloc(d, TERN_F32, N, &a));
    CHECK_OK(ops->alloc(d, TERN_F32, N, &b));
    CHECK_OK(ops->alloc(d, TERN_F32, N, &c));
    CHECK_OK(ops->build(d, a, sq));
    CHECK_OK(ops->download(d, host, a));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += host[i] != 0.5f * (float)i * (float)i;
    CHECKF(bad == 0, "%s: build wrong in %d elements", ops->handler, bad);

    CHECK_OK(ops->fill(d, b, 2.0));
    CHECK_OK(ops->zip_with(d, c, a, b, plus));
    CHECK_OK(ops->download(d, host, c));
    bad = 0;
    for (int i = 0; i < N; i++) bad += host[i] != 0.5f * (float)i * (float)i + 2.0f;
    CHECKF(bad == 0, "%s: zip_with wrong in %d elements", ops->handler, bad);

    double sum = 0, want = 0;
    for (int i = 0; i < N; i++) want += 0.5 * i * i;
    CHECK_OK(ops->reduce(d, a, 10.0, plus, &sum));
    CHECKF(fabs(sum - (want + 10)) <= 1e-6 * want, "%s: reduce gave %g, expected %g", ops->handler, sum, want + 10);

    int64_t at = -2;
    CHECK_OK(ops->index_of(d, a, 0.5 * 37 * 37, &at));
    CHECKF(at == 37, "%s: index_of gave %lld", ops->handler, (long long)at);
    CHECK_OK(ops->index_of(d, a, -1.0, &at));
    CHECKF(at == -1, "%s: index_of of a missing value gave %lld", ops->handler, (long long)at);

    CHECK_ERR(ops->zip_with(d, c, a, b, noisy), "kernel 'noisy_add' is not pure");
    CHECK_ERR(ops->zip_with(d, tern_view(c, 0, 10), a, b, plus), "");
    tern_error_free(ops->free(d, &a));
    tern_error_free(ops->free(d, &b));
    tern_error_free(ops->free(d, &c));
    tern_error_free(ops->close(d));
    printf("%s: generic operations checked\n", ops->handler);
}

int main(void) {
    tern_kernel *sq = NULL, *plus = NULL, *noisy = NULL;
    CHECK_OK(tern_kernel_build("square", square, NULL, &sq));
    CHECK_OK(tern_kernel_build("add", add, NULL, &plus));
    CHECK_OK(tern_kernel_build("noisy_add", noisy_add, NULL, &noisy));
    size_t n;
    const char *const *names = tern_handler_names(&n);
    const char *only = getenv("TERN_TEST_HANDLER");
    for (size_t h = 0; sq && plus && noisy && h < n; h++)
        if (!only || !strcmp(only, names[h])) run(tern_handler_ops(names[h]), sq, plus, noisy);
    tern_kernel_free(sq), tern_kernel_free(plus), tern_kernel_free(noisy);
    return check_summary("generic operations");
}
