/* Compiling a test's kernels for the H200 (sm_90) with NVRTC, which needs no GPU: a check
 * when tern was built with the CUDA toolkit, a printed skip when it was not. */
#ifndef TERN_TESTS_NVRTC_CHECK_H
#define TERN_TESTS_NVRTC_CHECK_H

#include "check.h"
#include "tern/kernel.h"

/* 1: k compiled (for sm_90, or `arch`); 0: it did not (a failed check); -1: NVRTC is not
 * built in (printed once, by the first call; the caller stops compiling). */
static inline int nvrtc_check_compile_for(const tern_kernel *k, const char *arch) {
    tern_error *err = tern_nvrtc_compile(k, arch, NULL, NULL);
    if (err && strstr(tern_error_message(err), "NVRTC is not built in")) {
        printf("  nvrtc: skipped (%s)\n", tern_error_message(err));
        tern_error_free(err);
        return -1;
    }
    bool ok = err == NULL;
    CHECK_OK(err);
    return ok ? 1 : 0;
}
static inline int nvrtc_check_compile(const tern_kernel *k) { return nvrtc_check_compile_for(k, "sm_90"); }

#endif
