/* The interp handler: the GPU core on the DSL's host interpreter. Every operation runs the GPU
 * handlers' code path (the same bodies, the same kernels) on the CPU, with the
 * interpreter's checks on every access: the reference and the debugger for the GPU
 * handlers, not a fast path (the cpu handler is that). */
#include <stddef.h>
#include <stdlib.h>

#include "gpu_core/gpu_core.h"
#include "handlers/handler.h"

struct tern_dev {
    gpu_core core; /* first: the core reaches the device through it (gpu_core_of) */
    tern_rt *rt;   /* the host interpreter */
};

_Static_assert(offsetof(struct tern_dev, core) == 0, "the GPU core comes first in the device");

tern_error *TERN_OP(close)(tern_dev *d) {
    if (!d) return NULL;
    gpu_core_free(&d->core);
    if (d->rt) tern_rt_close(d->rt);
    free(d);
    return NULL;
}

tern_error *TERN_OP(open)(const char *options, tern_dev **out) {
    if (!out) return tern_errorf("open: out is NULL");
    *out = NULL;
    gpu_tune tune = gpu_tune_defaults(); /* the core's keys only; no environment variable */
    const tern_option_set sets[] = {{gpu_tune_keys, gpu_tune_key_count, &tune}};
    TERN_TRY(tern_options_apply("interp", NULL, options, sets, 1));
    tern_dev *d = calloc(1, sizeof *d);
    if (!d) return tern_errorf("open: out of memory");
    tern_error *err = tern_rt_open("host", &d->rt);
    if (!err) err = gpu_core_init(&d->core, d->rt, NULL, NULL, &tune); /* no hooks: the core's own */
    if (err) {
        tern_error_free(TERN_OP(close)(d));
        return tern_error_wrap(err, "interp");
    }
    *out = d;
    return NULL;
}
