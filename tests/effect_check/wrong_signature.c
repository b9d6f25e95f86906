/* The body of `fill` with a float where the op list says double: must not compile. */
#include "broken.h"

tern_error *broken_fill(tern_dev *d, tern_buf dst, float value) {
    (void)d, (void)dst, (void)value;
    return NULL;
}
