/* Fuzzes the reading of target compilers' logs (clang's "file:12:5: error: ...",
 * NVRTC's "file(12): error: ..."), which turns a compiler's complaint into an error naming
 * the kernel and the DSL statement: any log, with any line numbers, must give a one-line
 * message and never read outside the emitter's line map. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/compile_error.h"
#include "tern/kernel.h"

static void small(tern_kb *kb, void *user) {
    (void)user;
    tern_v x = tern_param_buf(kb, "x", TERN_T_F32, TERN_READ_WRITE);
    tern_v i = tern_global_id(kb, 0);
    tern_store(x, i, tern_exp(tern_load(x, i)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tern_kernel *k;
    if (!k && tern_kernel_build("small", small, NULL, &k)) abort();
    char *log = malloc(size + 1);
    if (!log) return 0;
    memcpy(log, data, size);
    log[size] = '\0';
    char msg[64];
    int line = compile_log_first_error(log, msg, sizeof msg);
    if (line < 0 || strlen(msg) >= sizeof msg) abort();
    /* a line map as the emitter makes one: some lines, each an instruction or -1 */
    int32_t lines[12];
    for (int j = 0; j < 12; j++) lines[j] = j % 3 == 0 ? -1 : j % 4;
    tern_error *err = compile_error(k, "fuzz", log, lines, 11);
    /* one line, naming the kernel */
    if (!err || !strstr(tern_error_message(err), "kernel 'small'") || strchr(tern_error_message(err), '\n'))
        abort();
    tern_error_free(err);
    free(log);
    return 0;
}
