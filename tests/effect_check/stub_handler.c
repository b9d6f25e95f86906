/* A handler named "broken" whose every body is a stub, generated from the op list. The
 * effect-check test builds it whole with the seam's entries (it must link and run), with one
 * body renamed away (the link must fail naming it), and beside a body with a wrong
 * signature (the compile must fail naming it). */
#include <stdlib.h>
#include <string.h>

#include "broken.h"
#include "tern/dist.h"

struct tern_dev {
    int unused;
};

#define TERN_STUB_BODY_(name, params, args) \
    tern_error *broken_##name params { return tern_errorf("broken: " #name " is a stub"); }
TERN_OPS_SEAM(TERN_STUB_BODY_)

tern_error *tern_broken_open(const char *options, tern_dev **out) {
    (void)options;
    *out = calloc(1, sizeof **out);
    return *out ? NULL : tern_errorf("broken: out of memory");
}

tern_error *tern_broken_close(tern_dev *d) {
    free(d);
    return NULL;
}

/* validate.c asks the communicator's size (allgather); this test has none. */
int tern_dist_world(const tern_dist *c) { return c ? 2 : 1; }

int main(void) {
    extern const tern_ops tern_broken_ops;
    tern_dev *dev = NULL;
    if (tern_broken_ops.open(NULL, &dev)) return 1;
    /* the entry validates first (a NULL device, a bad argument: the seam's errors), then
     * calls the stub body */
    tern_error *no_dev = tern_broken_ops.sync(NULL);
    tern_error *bad = tern_broken_ops.alloc(dev, TERN_F32, 0, &(tern_buf){0});
    tern_error *stub = tern_broken_ops.sync(dev);
    int ok = no_dev && bad && stub && !strcmp(tern_error_message(stub), "broken: sync is a stub");
    tern_error_free(no_dev), tern_error_free(bad), tern_error_free(stub);
    tern_broken_ops.close(dev);
    return ok ? 0 : 1;
}
