/* `fill` with a float where the op list says double: must not compile. */
#include "handlers/handler.h"

tern_error *tern_broken_fill(tern_dev *d, tern_buf dst, float value) {
    (void)d, (void)dst, (void)value;
    return NULL;
}
