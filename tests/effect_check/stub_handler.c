/* A handler named "broken" whose every operation is a stub, generated from the op list.
 * The effect-check test builds it whole (it must link), with one operation renamed away (the
 * link must fail naming it), and beside a definition with a wrong signature (the compile
 * must fail naming it). */
#include "handlers/handler.h"

#define TERN_STUB_OP_(name, params)                                                       \
    tern_error *TERN_OP(name) params { return tern_errorf("broken: " #name " is a stub"); }
TERN_OPS(TERN_STUB_OP_)

int main(void) {
    extern const tern_ops tern_broken_ops;
    tern_dev *dev = NULL;
    tern_error *err = tern_broken_ops.open(&dev);
    int ok = err != NULL; /* the stubs answer with errors */
    tern_error_free(err);
    return ok ? 0 : 1;
}
