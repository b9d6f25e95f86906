/* TERN_KERNEL_DUMP_DIR: when set, every kernel built is also written there as CUDA, OpenCL
 * and Metal source (<name>-<hash>.cu/.cl/.metal), so tools and CI can compile or inspect
 * every kernel a program makes (tests/kernel/test_kernel_compile checks such folders). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl/files.h"
#include "dsl/ir.h"

tern_error *kernel_dump_sources(const tern_kernel *k);

tern_error *kernel_dump_sources(const tern_kernel *k) {
    const char *dir = getenv("TERN_KERNEL_DUMP_DIR");
    if (!dir || !*dir) return NULL;
    TERN_TRY(tern_error_wrap(kfile_mkdirs(dir), "TERN_KERNEL_DUMP_DIR"));
    static const char *const ext[] = {"cu", "cl", "metal"};
    for (int t = 0; t < 3; t++) {
        char *src = NULL;
        TERN_TRY(tern_kernel_emit(k, (tern_target)t, &src));
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%016llx.%s", dir, k->name, (unsigned long long)k->hash, ext[t]);
        tern_error *err = kfile_write_atomic(path, src, strlen(src));
        free(src);
        if (err) return tern_error_wrap(err, "TERN_KERNEL_DUMP_DIR");
    }
    return NULL;
}
