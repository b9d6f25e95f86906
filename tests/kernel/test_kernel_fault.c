/* A DSL kernel that writes far out of bounds must come back as an error naming the kernel,
 * and the program must then be able to close everything and exit normally: no abort, no
 * hang. On the host interpreter the bounds check catches the store before it happens; under
 * CUDA (TERN_GPU=cuda, on the H200 machine: scripts/h200/) the hardware raises an illegal
 * address, which surfaces at the launch or at the next synchronisation, and the context is
 * lost for good, so every later call must fail cleanly too.
 * OpenCL is not run: an implementation on the CPU (PoCL) has no guard against a store 8 GB
 * past a buffer and the process would simply crash, which is the OpenCL contract. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tern/kernel.h"

/* x[at] = 1, for a scalar `at` chosen by the caller. */
static void write_past_end(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_WRITE);
    tern_v at = tern_param_scalar(kb, "at", TERN_T_I32);
    tern_store(x, at, tern_f32(1.0f));
}

static int failures;

static void expect(bool ok, const char *what) {
    if (!ok) {
        printf("FAIL: %s\n", what);
        failures++;
    }
}

int main(void) {
    tern_rt *rt = NULL;
    tern_error *err = tern_rt_open(NULL, &rt);
    if (err) {
        printf("fault test: no runtime: %s\n", tern_error_message(err));
        tern_error_free(err);
        return 1;
    }
    if (!strcmp(tern_rt_name(rt), "opencl")) {
        printf("fault test: not run on opencl (see the file's comment)\n");
        tern_rt_close(rt);
        return 0;
    }
    tern_kernel *k = NULL;
    tern_dbuf x = {0};
    err = tern_kernel_build("write_past_end", write_past_end, NULL, &k);
    if (!err) err = tern_rt_alloc(rt, TERN_T_F32, 16, &x);
    if (err) {
        printf("fault test: setup failed: %s\n", tern_error_message(err));
        tern_error_free(err);
        tern_kernel_free(k);
        tern_rt_close(rt);
        return 1;
    }
    /* index 2^31 - 1: 8 GB past a 64-byte buffer, far outside any allocation */
    tern_arg args[] = {tern_arg_dev(x), tern_arg_i32(INT32_MAX)};
    err = tern_launch(rt, k, tern_dims1(1), tern_dims1(1), args, 2);
    if (!err) err = tern_rt_sync(rt);
    expect(err != NULL, "the out-of-bounds store returned no error");
    if (err) {
        const char *msg = tern_error_message(err);
        printf("%s: error as expected: %s\n", tern_rt_name(rt), msg);
        expect(strstr(msg, "write_past_end") != NULL, "the error names the kernel");
        expect(strchr(msg, '\n') == NULL, "the error is one line");
        tern_error_free(err);
    }
    /* Later calls: the host runtime carries on; a CUDA context is lost after an illegal
     * address, and every call must then say so rather than crash. */
    float back[16];
    err = tern_rt_download(rt, back, x);
    if (!strcmp(tern_rt_name(rt), "host")) expect(err == NULL, "the host runtime works after a caught fault");
    if (err) {
        printf("%s: a later download: %s\n", tern_rt_name(rt), tern_error_message(err));
        tern_error_free(err);
    }
    tern_rt_free(rt, &x);
    tern_kernel_free(k);
    tern_rt_close(rt);
    printf("%s\n", failures ? "fault test FAILED" : "fault test passed: error returned, closed cleanly");
    return failures ? 1 : 0;
}
