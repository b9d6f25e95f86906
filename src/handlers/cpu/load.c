/* load: one tensor of a safetensors file into a new buffer of a float dtype. */
#include "cpu.h"
#include "tern/safetensors.h"

tern_error *cpu_load(tern_dev *d, const char *path, const char *name, tern_dtype dtype,
                          tern_buf *out) {
    tern_safetensors *f;
    TERN_TRY(tern_error_wrap(tern_safetensors_open(path, &f), "load"));
    tern_error *err = NULL;
    tern_buf b = tern_none();
    const tern_tensor_info *t = tern_safetensors_find(f, name);
    if (!t) {
        err = tern_errorf("load: %s has no tensor '%s'", path, name);
    } else if (!t->supported || !tern_dtype_is_float(t->dtype)) {
        err = tern_errorf("load: tensor '%s' of %s is %s, not F32, BF16 or F16", name, path, t->dtype_name);
    } else if (t->count == 0) {
        err = tern_errorf("load: tensor '%s' of %s is empty", name, path);
    } else if (!(err = cpu_alloc(d, dtype, t->count, &b))) {
        err = tern_tensor_convert(t, dtype, cpu_ptr(b));
        if (err) {
            err = tern_error_wrap(err, "load");
            tern_error_free(cpu_free(d, &b));
        }
    } else {
        err = tern_error_wrap(err, "load: tensor '%s'", name);
    }
    tern_safetensors_close(f);
    if (!err) *out = b;
    return err;
}
