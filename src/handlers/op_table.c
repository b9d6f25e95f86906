/* The op table of one handler, compiled once per handler (-DTERN_HANDLER=<h>).
 * Referencing every tern_<h>_<op> here makes a missing entry a link error that names it;
 * assigning each to a field of the list's type makes a wrong signature an error. The entries
 * themselves are generated (seam.h), so what a handler can miss is a body. */
#include "handler.h"

#define TERN_OP_ENTRY_(name, params, args) .name = TERN_OP(name),
const tern_ops TERN_CAT3(tern_, TERN_HANDLER, _ops) = {
    .handler = TERN_HANDLER_NAME,
    TERN_OPS(TERN_OP_ENTRY_)
};
